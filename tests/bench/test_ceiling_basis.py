"""Which RAM bandwidth bench's TG ceiling rests on (issue 29): on a busy host the probe read 5.5-11.4 GB/s and bench
judged "below the band published runs reach". A busy host's bandwidth is never used silently: a quiet measurement
from the results store, else the DIMMs' peak, else a busy probe with a warning and no band verdict."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.bench.test_bench_cli import Boundary
from tests.conftest import SNAPSHOTS, write_tiny_gguf
from tunehost.advise.host_calibration import (BUSY_SOURCE, DIMM_SOURCE, MEASURED_SOURCE, STORE_SOURCE, HostPoint,
                                              RunRef, StoredBandwidth, quiet_bandwidth)
from tunehost.bench import runner
from tunehost.facts import HostFacts
from tunehost.host import open_host
from tunehost.probes import bandwidth

BUSY = "not measured: the host is busy (other processes used 126 % of a core, 63 % of 2 CPUs; most: cc1plus pid 9)"
REAL_TG_CEILING = runner.tg_ceiling


@pytest.fixture
def model(tmp_path):
    return write_tiny_gguf(tmp_path / "tiny.gguf")


@pytest.fixture
def probes(monkeypatch):
    """The RAM probe, replaced: it reads 5.5 GB/s (what the busy box read) and counts its calls."""
    calls = []
    monkeypatch.setattr(bandwidth, "measure_read_bandwidth",
                        lambda *a, **k: calls.append(1) or bandwidth.ReadBandwidth(5.5, (5.5, 5.4), 2, 1 << 20))
    return calls


def _ceiling(monkeypatch, model, *, busy, stored=None, dimms=True):
    monkeypatch.setattr(runner, "busy_now", lambda host: busy)
    facts = HostFacts(open_host(SNAPSHOTS / "desktop-12700f-rtx3060")) if dimms else None
    asked = []

    def from_store():
        asked.append(1)
        return stored

    doc = REAL_TG_CEILING(model, ["-ngl", "0"], facts, stored_bandwidth=from_store)
    return doc, asked


def test_a_quiet_host_is_measured_now(monkeypatch, model, probes):
    doc, asked = _ceiling(monkeypatch, model, busy=None, stored=StoredBandwidth(31.0, 3, "2026-11-20T10:00:00Z"))
    assert doc["ram_source"] == MEASURED_SOURCE and doc["ram_busy"] is None and doc["ram_basis"] is None
    assert doc["ram_measured_gbps"] == 5.5 and probes and not asked  # the store is not even read


def test_a_busy_host_uses_a_quiet_measurement_from_the_store(monkeypatch, model, probes):
    doc, asked = _ceiling(monkeypatch, model, busy=BUSY, stored=StoredBandwidth(31.0, 3, "2026-11-20T10:00:00Z"))
    assert doc["ram_source"] == STORE_SOURCE and doc["ram_busy"] == BUSY and asked and not probes
    assert doc["ram_measured_gbps"] == 31.0 and "quiet" in doc["ram_basis"] and "2026-11-20" in doc["ram_basis"]


def test_a_busy_host_without_a_stored_figure_uses_the_dimms_peak(monkeypatch, model, probes):
    doc, _ = _ceiling(monkeypatch, model, busy=BUSY, stored=None)
    assert doc["ram_source"] == DIMM_SOURCE and not probes
    assert doc["ram_measured_gbps"] == pytest.approx(doc["ram_dimm_gbps"], abs=0.05)
    assert "DIMMs' peak" in doc["ram_basis"]


def test_a_busy_host_with_nothing_else_is_probed_and_marked_unreliable(monkeypatch, model, probes):
    doc, _ = _ceiling(monkeypatch, model, busy=BUSY, stored=None, dimms=False)
    assert doc["ram_source"] == BUSY_SOURCE and probes and doc["ram_measured_gbps"] == 5.5
    assert "busy" in doc["ram_basis"]


# ---- what bench prints for each basis ----

def _bench(cli, monkeypatch, model, doc, *, disturbed=False):
    Boundary(monkeypatch, speeds={"default": 30.0}, disturbed=disturbed)
    monkeypatch.setattr(runner, "tg_ceiling", lambda *a, **k: doc)
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8")
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def _band_verdict(text):
    return any(f"{where} the " in text and "band published runs of this kind reach" in text
               for where in ("inside", "below", "above"))


def test_bench_on_a_busy_host_warns_and_gives_no_band_verdict(cli, monkeypatch, model, probes):
    doc, _ = _ceiling(monkeypatch, model, busy=BUSY, stored=None, dimms=False)
    text = _bench(cli, monkeypatch, model, doc)
    assert "warning: RAM bandwidth measured on a busy host" in text and "unreliable" in text
    assert "cc1plus pid 9" in text and "gate --wait-quiet" in text
    assert not _band_verdict(text) and "TG = " in text


@pytest.mark.parametrize("stored, said", [(StoredBandwidth(31.0, 1, "2026-11-20T10:00:00Z"), "results store"),
                                          (None, "the DIMMs' peak")])
def test_bench_on_a_busy_host_says_which_basis_it_used(cli, monkeypatch, model, probes, stored, said):
    doc, _ = _ceiling(monkeypatch, model, busy=BUSY, stored=stored)
    text = _bench(cli, monkeypatch, model, doc)
    assert f"ceiling basis: {'a quiet measurement from the ' if stored else ''}{said}" in text
    assert "not measured now" in text and "warning: RAM bandwidth" not in text
    assert "measured RAM ceiling" not in text  # not a measurement of now
    assert _band_verdict(text)  # a trustworthy basis, quiet rounds: the band verdict stands


def test_a_quiet_host_keeps_its_band_verdict_unless_the_rounds_were_disturbed(cli, monkeypatch, model, probes):
    doc, _ = _ceiling(monkeypatch, model, busy=None)
    quiet = _bench(cli, monkeypatch, model, doc)
    assert _band_verdict(quiet) and "measured RAM ceiling" in quiet and "ceiling basis" not in quiet
    disturbed = _bench(cli, monkeypatch, model, doc, disturbed=True)
    assert not _band_verdict(disturbed) and "no band verdict: the rounds were disturbed" in disturbed


# ---- the store: quiet figures in, busy ones out ----

def _run(created, ceiling, disturbed=False):
    return SimpleNamespace(created=created, summary={"ceiling": ceiling, "disturbed": disturbed})


def test_quiet_bandwidth_takes_the_newest_quiet_measurements():
    runs = [_run("2026-11-26", {"ram_measured_gbps": 5.5, "ram_source": BUSY_SOURCE}),
            _run("2026-11-25", {"ram_measured_gbps": 51.0, "ram_source": DIMM_SOURCE}),
            _run("2026-11-24", {"ram_measured_gbps": 9.6}, disturbed=True),  # before ram_source: disturbed
            _run("2026-11-23", {"ram_measured_gbps": 33.0, "ram_source": MEASURED_SOURCE}),
            _run("2026-11-22", {"ram_measured_gbps": 31.0}),  # before ram_source, quiet rounds
            _run("2026-11-21", {"ram_measured_gbps": float("nan"), "ram_source": MEASURED_SOURCE}),
            _run("2026-11-20", {"ram_measured_gbps": "fast", "ram_source": MEASURED_SOURCE}),
            _run("2026-11-19", {"ram_measured_gbps": 1e12, "ram_source": MEASURED_SOURCE}),
            _run("2026-11-18", {"ram_measured_gbps": 35.0, "ram_source": MEASURED_SOURCE}),
            _run("2026-11-17", "garbage"), SimpleNamespace(summary=None)]
    got = quiet_bandwidth(runs)
    assert got == StoredBandwidth(33.0, 3, "2026-11-23") and "median of 3 runs" in got.basis()
    assert quiet_bandwidth(runs[:3]) is None and quiet_bandwidth([]) is None


def test_a_busy_measurement_is_no_calibration_point():
    ceiling = {"path": "cpu", "layers": 32, "moe": False, "ram_dimm_gbps": None, "ram_source": BUSY_SOURCE,
               "parts": [{"memory": "RAM", "bytes_per_token": 800_000_000, "gbps": 5.5}]}
    run = RunRef(1, "2026-11-26", "bench", "m", "h")
    assert HostPoint.from_run(run, 4.0, ceiling) is None
    assert HostPoint.from_run(run, 4.0, dict(ceiling, ram_source=MEASURED_SOURCE)) is not None
    assert HostPoint.from_run(run, 4.0, dict(ceiling, ram_dimm_gbps=51.2)) is not None  # basis: the DIMMs


def test_a_quiet_run_recorded_by_bench_is_what_a_busy_one_uses_later(cli, monkeypatch, model, probes):
    from tunehost.ops.bench import stored_quiet_bandwidth

    here = HostFacts(open_host())
    assert stored_quiet_bandwidth(here) is None  # an empty store
    doc, _ = _ceiling(monkeypatch, model, busy=None)
    doc = dict(doc, ram_measured_gbps=31.0)
    _bench(cli, monkeypatch, model, doc)
    got = stored_quiet_bandwidth(here)
    assert got is not None and got.gbps == 31.0 and got.runs == 1
    # later, on a busy host: the real ceiling, the real store; the probe is not run, the stored figure is used
    Boundary(monkeypatch, speeds={"default": 30.0})
    monkeypatch.setattr(runner, "tg_ceiling", REAL_TG_CEILING)
    monkeypatch.setattr(runner, "busy_now", lambda host: BUSY)
    probes.clear()
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--json")
    assert result.exit_code == 0, result.output
    ceiling = json.loads(result.stdout)["ceiling"]
    assert ceiling["ram_source"] == STORE_SOURCE and ceiling["ram_measured_gbps"] == 31.0 and not probes


def test_the_ceiling_says_whether_the_model_has_recurrent_layers(monkeypatch, model, probes):
    """advise's host fit puts a hybrid's GPU runs in their own class (HostPoint.cls): the saved ceiling says which."""
    from tunehost.model import ModelFacts

    doc, _ = _ceiling(monkeypatch, model, busy=None)
    assert doc["recurrent"] is False and doc["moe"] is False  # the tiny test model is a transformer
    monkeypatch.setattr(ModelFacts, "has_recurrent", property(lambda self: True))
    doc, _ = _ceiling(monkeypatch, model, busy=None)
    assert doc["recurrent"] is True


def test_the_ceiling_says_how_many_cpu_threads_read_the_weights(monkeypatch, model, probes):
    """advise fits a host's runs at each CPU thread count apart (host_calibration.FitKey): the saved ceiling records
    the one count -t/--threads gives; none when absent (llama-bench's default) or a sweep."""
    monkeypatch.setattr(runner, "busy_now", lambda host: None)
    facts = HostFacts(open_host(SNAPSHOTS / "desktop-12700f-rtx3060"))
    doc = REAL_TG_CEILING(model, ["-ngl", "0", "-t", "6"], facts)
    assert doc["threads"] == 6
    point = HostPoint.from_run(RunRef(1, "2026-11-27", "bench", "m", "h"), 5.0, doc)
    assert point is not None and point.key.threads == 6
    assert REAL_TG_CEILING(model, ["-ngl", "0"], facts)["threads"] is None


@pytest.mark.parametrize("flags, threads", [
    (["-t", "8"], 8), (["--threads=12"], 12), (["-t", "4", "-t", "16"], 16), (["-t", "4,8"], None), ([], None),
    (["-t", "0"], None), (["-t", "-2"], None), (["-t", "\u00b2"], None), (["-t", "8" * 50], None), (["-t"], None),
    (["-tb", "8"], None)])
def test_flag_threads(flags, threads):
    assert runner.flag_threads(flags) == threads
