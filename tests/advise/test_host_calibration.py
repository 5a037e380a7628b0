"""advise's constants fitted to this host's own runs (tunehost.advise.host_calibration), read from the results store,
and used for the speed band of a model of the same class."""

from __future__ import annotations

import json
import math

import pytest

from tunehost.advise.ceiling import BAND_MODELS
from tunehost.advise.host_calibration import (MIN_SPREAD, FitKey, HostPoint, RunRef, fit_host, host_band,
                                              undetermined)

GB = 1e9


def point(i: int, *, model: str = "m", ram_bytes: float = 1 * GB, layers: int = 32, eff: float = 0.6,
          layer_us: float = 50.0, gbps: float = 20.0, path: str = "cpu", moe: bool = False, noise: float = 1.0,
          basis: str = "measured", threads: int | None = None, hybrid: bool = False) -> HostPoint:
    """A run of a host whose true constants are ``eff`` and ``layer_us`` (times ``noise``)."""
    seconds = ram_bytes / (eff * gbps * GB) + layers * layer_us * 1e-6
    return HostPoint(i, f"2026-11-{10 + i:02d}T10:00:00Z", "bench", model, "hash-" + model, path, moe, layers,
                     int(ram_bytes), 0, gbps, None, basis, noise / seconds, hybrid, threads)


def test_two_model_shapes_determine_both_constants():
    points = [point(1, model="small", ram_bytes=0.5 * GB, layers=24), point(2, model="big", ram_bytes=4 * GB),
              point(3, model="big", ram_bytes=4 * GB)]
    fit = fit_host(points).get("cpu")
    assert fit is not None and fit.layer_us_determined
    assert fit.eff == pytest.approx(0.6, rel=1e-6) and fit.layer_us == pytest.approx(50.0, rel=1e-6)
    assert fit.runs == 3 and fit.models == 2 and fit.last.startswith("2026-11-13")
    # a third model of the same class: the band brackets what this host would reach, +-MIN_SPREAD (exact data: no
    # scatter of its own to widen it)
    read_s = 8 * GB / (20.0 * GB)
    truth = 1.0 / (read_s / 0.6 + 40 * 50e-6)
    band = host_band(fit, read_s, 40, "memory bandwidth")
    assert band is not None and band.low < truth < band.high
    assert band.high / band.low == pytest.approx((1 + MIN_SPREAD) / (1 - MIN_SPREAD), rel=1e-6)
    assert band.low / truth == pytest.approx(1 - MIN_SPREAD, rel=1e-6)
    assert band.source == "from 3 runs of 2 models on this host, last 2026-11-13"
    assert "from 3 runs of 2 models on this host" in band.text() and "published" not in band.text()
    assert undetermined(fit_host(points))[0].startswith("GPU dense: no run on this host")


def test_one_model_shape_leaves_the_per_layer_cost_undetermined():
    points = [point(1, noise=0.97), point(2, noise=1.03), point(3)]
    calibration = fit_host(points)
    fit = calibration.get("cpu")
    assert fit is not None and not fit.layer_us_determined and fit.layer_us is None
    low, high = fit.eff_range
    assert low < high <= 1.0  # eff fitted at each end of the published per-layer range
    # the same model: the band holds every run of it
    read_s = 1 * GB / (20.0 * GB)
    band = host_band(fit, read_s, 32, "memory bandwidth")
    assert all(band.low <= p.tg_ts <= band.high for p in points)
    assert "per-layer cost not yet determined" in band.text()
    # a model 8x the bytes: the band is wider (the undetermined constant matters more), and holds the truth
    truth = 1.0 / (8 * read_s / 0.6 + 32 * 50e-6)
    far = host_band(fit, 8 * read_s, 32, "memory bandwidth")
    assert far.low <= truth <= far.high
    assert any("per-layer cost not determined" in line for line in undetermined(calibration))


def test_a_cache_resident_model_is_left_out_with_the_reason():
    tiny = HostPoint(9, "2026-11-20T00:00:00Z", "bench", "tiny", "h", "cpu", False, 8, 4_000_000, 0, 10.0, None,
                     "measured", 5000.0)  # 4 MB at 10 GB/s allows 2500 t/s: 5000 came from the cache
    calibration = fit_host([tiny, point(1)])
    assert [p.run_id for p, _ in calibration.left_out] == [9]
    assert "sits in the CPU's cache" in calibration.left_out[0][1]
    assert calibration.get("cpu").runs == 1


def test_classes_are_fitted_apart_and_a_mixed_basis_is_not_merged():
    points = [point(1, path="moe", moe=True), point(2), point(3, basis="dimm"), point(4, basis="dimm")]
    calibration = fit_host(points)
    assert calibration.get("split").runs == 1  # its own class: never mixed with the dense CPU runs
    cpu = calibration.get("cpu")
    assert cpu.basis == "dimm" and cpu.runs == 2 and "bandwidth basis measured" in cpu.left_out[0][1]
    assert calibration.get("gpu") is None
    assert json.loads(json.dumps(calibration.to_json()))["classes"]["cpu"]["runs"] == 2


@pytest.mark.parametrize("ceiling", [
    {}, {"path": "cpu"}, {"path": "rm -rf /", "layers": 32, "moe": False, "parts": []},
    {"path": "cpu", "layers": True, "moe": False, "parts": [{"memory": "RAM", "bytes_per_token": 10, "gbps": 1}]},
    {"path": "cpu", "layers": 32, "moe": "no", "parts": [{"memory": "RAM", "bytes_per_token": 10, "gbps": 1}]},
    {"path": "cpu", "layers": 32, "moe": False, "parts": "x" * 1000},
    {"path": "cpu", "layers": 32, "moe": False, "parts": [{"memory": "RAM", "bytes_per_token": -5, "gbps": 1}]},
    {"path": "cpu", "layers": 32, "moe": False, "parts": [{"memory": "RAM", "bytes_per_token": 10, "gbps": "nan"}]},
    {"path": "cpu", "layers": 32, "moe": False, "parts": [{"memory": "RAM", "bytes_per_token": 10,
                                                         "gbps": float("inf")}]},
])
def test_malformed_ceiling_documents_give_no_point(ceiling):
    assert HostPoint.from_run(RunRef(1, "x", "bench", "m", "h"), 10.0, ceiling) is None


def test_a_point_from_a_recorded_ceiling():
    ceiling = {"path": "moe", "layers": 48, "moe": True, "ram_dimm_gbps": None,
               "parts": [{"memory": "VRAM", "bytes_per_token": 2_000_000_000, "gbps": 360.0},
                         {"memory": "RAM", "bytes_per_token": 1_000_000_000, "gbps": 31.0}]}
    p = HostPoint.from_run(RunRef(4, "2026-11-20", "tune", "q", "h"), 20.0, ceiling)
    assert p is not None and p.cls == "split" and p.basis == "measured"
    assert p.read_s() == pytest.approx(2 / 360 + 1 / 31)
    with_dimms = HostPoint.from_run(RunRef(4, "x", "tune", "q", "h"), 20.0, {**ceiling, "ram_dimm_gbps": 51.2})
    assert with_dimms.basis == "dimm" and with_dimms.ram_gbps == 51.2


def test_a_hybrid_on_the_gpu_is_fitted_apart_from_the_hosts_transformers():
    """A run records whether its model has recurrent layers (the ceiling's "recurrent"): on the GPU such runs fit
    gpu-hybrid, which advise then uses for a hybrid model only; runs stored before the key count as transformers."""
    ceiling = {"path": "gpu", "layers": 64, "moe": False, "ram_dimm_gbps": None,
               "parts": [{"memory": "VRAM", "bytes_per_token": 16_000_000_000, "gbps": 936.0}]}
    ref = RunRef(5, "2026-11-27", "bench", "q", "h")
    assert HostPoint.from_run(ref, 32.0, {**ceiling, "recurrent": True}).cls == "gpu-hybrid"
    assert HostPoint.from_run(ref, 32.0, ceiling).cls == "gpu"  # stored before the key
    assert HostPoint.from_run(ref, 32.0, {**ceiling, "recurrent": "yes"}).cls == "gpu"  # hostile: only True counts
    cpu = {**ceiling, "path": "cpu", "recurrent": True,
           "parts": [{"memory": "RAM", "bytes_per_token": 16_000_000_000, "gbps": 60.0}]}
    assert HostPoint.from_run(ref, 2.0, cpu).cls == "cpu"  # off the GPU a hybrid keeps its placement's class
    hybrid = HostPoint.from_run(ref, 32.0, {**ceiling, "recurrent": True})
    fits = fit_host([hybrid])
    assert fits.get("gpu-hybrid") is not None and fits.get("gpu") is None


def test_no_fit_when_the_runs_are_faster_than_the_overhead_alone():
    # 25 us per token measured, 32 layers x 30 us of published per-layer cost: nothing can be fitted, said so
    p = HostPoint(1, "2026-11-20", "bench", "m", "h", "cpu", False, 32, 1000, 0, 20.0, None, "measured", 40000.0)
    fit = fit_host([p]).get("cpu")
    assert fit is not None and fit.eff is None and host_band(fit, 1e-6, 32, "x") is None
    assert any(line.startswith("CPU dense: nothing fitted") for line in undetermined(fit_host([p])))


def test_published_constants_are_untouched_by_a_host_fit():
    before = dict(BAND_MODELS)
    fit_host([point(1), point(2, model="b", ram_bytes=3 * GB)])
    assert BAND_MODELS == before
    assert all(math.isfinite(m.eff_low) for m in BAND_MODELS.values())


def test_runs_at_another_thread_count_or_of_a_hybrid_are_fitted_apart():
    """Where the CPU reads weights, a run at 2 threads is no equation of a plan at 8 (an M2 Max's CPU at 2 threads
    was judged by its runs at 4 and 8 at 0.52 of the band's low edge), nor a hybrid MoE of a transformer MoE's (0.76
    of its speed at the same threads on H25's Xeon): each FitKey has its own fit; a run that recorded no thread count
    serves any plan of its kind, as every run did before."""
    two = [point(1, model="a", eff=0.3, threads=2), point(2, model="b", ram_bytes=3 * GB, eff=0.3, threads=2)]
    eight = [point(3, model="a", threads=8), point(4, model="b", ram_bytes=3 * GB, threads=8)]
    calibration = fit_host(two + eight)
    assert calibration.get("cpu", threads=8).eff == pytest.approx(0.6)
    assert calibration.get("cpu", threads=2).eff == pytest.approx(0.3)
    assert calibration.get("cpu", threads=16) is None and calibration.get("cpu") is None
    assert calibration.other_threads("cpu") == [2, 8] and calibration.other_threads("cpu", recurrent=True) == []
    unknown = fit_host(two + [point(5, model="c")])  # a run without a thread count: the fallback, never a 2-thread one
    assert unknown.get("cpu", threads=16).runs == 1 and unknown.get("cpu", threads=2).runs == 2
    hybrid = fit_host(eight + [point(6, model="h", eff=0.45, threads=8, hybrid=True)])
    assert hybrid.get("cpu", threads=8).runs == 2 and hybrid.get("cpu", recurrent=True, threads=8).runs == 1
    data = json.loads(json.dumps(calibration.to_json()))["classes"]
    assert sorted(data) == ["cpu@2t", "cpu@8t"] and data["cpu@8t"]["threads"] == 8
    assert data["cpu@8t"]["name"] == "CPU dense, 8 threads" and data["cpu@2t"]["recurrent"] is False
    assert any(line.startswith("CPU dense, 2 threads:") for line in undetermined(fit_host(two[:1])))


def test_the_gpu_alone_fits_its_runs_whatever_their_threads():
    """On the GPU alone (and on unified memory) the CPU's threads read no weights: one fit for every count."""
    gpu = [point(1, model="a", path="gpu", threads=4), point(2, model="b", ram_bytes=3 * GB, path="gpu", threads=16)]
    calibration = fit_host(gpu)
    assert [k.threads for k in calibration.fits] == [None]
    assert calibration.get("gpu", threads=8).runs == 2 and calibration.get("gpu").runs == 2
    assert FitKey.of("gpu-hybrid", "gpu", recurrent=True, threads=8) == FitKey("gpu-hybrid")
    assert FitKey.of("split", "moe", recurrent=True, threads=8).text() == "split+recurrent@8t"


@pytest.mark.parametrize("threads, expected", [(8, 8), (1, 1), (None, None), (0, None), (-4, None), (True, None),
                                               ("8", None), (8.0, None), (10 ** 9, None), (float("nan"), None)])
def test_a_recorded_thread_count_is_read_as_hostile(threads, expected):
    ceiling = {"path": "cpu", "layers": 32, "moe": False, "ram_dimm_gbps": None, "threads": threads,
               "parts": [{"memory": "RAM", "bytes_per_token": 1_000_000_000, "gbps": 30.0}]}
    p = HostPoint.from_run(RunRef(1, "2026-11-27", "bench", "m", "h"), 10.0, ceiling)
    assert p is not None and p.threads == expected and p.key.threads == expected
