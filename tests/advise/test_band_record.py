"""Each published band states how its class fared out of sample (ceiling.BAND_RECORD, pinned to
leave_one_source_out's figures in test_calibration.py): where its runs often fell outside, the band says it is a rough
guide and bench does not read a run below it as the host's fault."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tunehost.advise.ceiling import (BAND_RECORD, RECORD_MIN_RUNS, BandContext, Bandwidths, BandRecord, Ceiling,
                                     TgBand, ceiling_from_json, describe, record_class, tg_band_for)

from .conftest import shape_fixture


def _on_gpu(**bw) -> Ceiling:
    return Ceiling(100.0, (("VRAM", 4_600_000_000, 360.0),), "", None, Bandwidths(gpu_gbps=360.0, **bw), "gpu")


def _on_cpu() -> Ceiling:
    return Ceiling(10.0, (("RAM", 4_600_000_000, 76.8),), "", None, Bandwidths(ram_gbps=76.8, dimm_gbps=76.8), "cpu")


def test_a_band_class_that_held_its_runs_is_reliable_one_that_missed_deep_or_often_is_a_rough_guide():
    held = BandRecord(26, 27, 1.67, 0.99)
    assert held.reliable and held.text() == "it held 26 of 27 published runs of this kind out of sample"
    deep = BandRecord(26, 29, 1.65, 0.41)  # 90 % inside, but one run at 0.41 of the low edge
    assert not deep.reliable
    assert deep.text() == ("a rough guide here: it held 26 of 29 published runs of this kind out of sample, one at "
                           "0.41 of its low edge; measure this host with `tunehost bench`")
    often = BandRecord(8, 19, 1.59, 0.95)
    assert not often.reliable and "one at" not in often.text() and "8 of 19" in often.text()
    few = BandRecord(RECORD_MIN_RUNS - 1, RECORD_MIN_RUNS - 1, 1.2, 1.0)  # every run inside, but too few to tell
    assert not few.reliable
    assert BandRecord(17, 20, 3.0, 0.8).reliable  # 85 % and 0.8 exactly: the targets are met; width shows itself


def test_the_gddr_gpu_band_is_reliable_the_cpu_arm_hbm_amd_ollama_and_capped_ones_rough_guides():
    reliable = {k for k, r in BAND_RECORD.items() if r.reliable}
    assert reliable == {"gpu", "gpu-hbm", "gpu-hybrid", "gpu-moe", "split", "unified", "unified-rdna"}
    assert all(0 <= r.inside <= r.runs and r.median_width >= 1 and 0 < r.worst_low <= 1 for r in BAND_RECORD.values())


def test_the_record_a_band_states_is_its_class_under_llama_cpp_else_ollama_or_the_power_cap():
    assert record_class("gpu") == "gpu" and record_class("cpu-moe") == "cpu-moe"
    assert record_class("gpu", "ollama") == "ollama" and record_class("cpu", "ollama", 0.5) == "ollama"
    assert record_class("gpu-hybrid", power_ratio=0.57) == "power-capped"
    assert record_class("gpu", power_ratio=0.95) == "gpu"  # above POWER_CAP_NOTICE: no cap advise names
    assert record_class("cpu", power_ratio=0.5) == "cpu"  # a GPU's cap does not slow the CPU backend
    llama = shape_fixture("llama-3.1-8b")
    assert tg_band_for(llama, _on_gpu()).record == BAND_RECORD["gpu"]
    assert tg_band_for(llama, _on_gpu(power_ratio=0.57)).record == BAND_RECORD["power-capped"]
    assert tg_band_for(llama, _on_gpu(), BandContext(runtime="ollama")).record == BAND_RECORD["ollama"]
    assert tg_band_for(llama, _on_cpu()).record == BAND_RECORD["cpu"]
    assert "a rough guide here" in tg_band_for(llama, _on_cpu()).text()


def test_a_band_with_no_published_run_of_its_kind_says_so_and_a_hosts_own_band_states_no_record():
    band = TgBand(10.0, 20.0, "unified-vega", "memory bandwidth")
    assert "no published run of this kind judged it: measure this host with `tunehost bench`" in band.text()
    own = TgBand(10.0, 20.0, "cpu", "memory bandwidth", source="from 3 runs of 2 models on this host")
    assert "published" not in own.text() and "from 3 runs" in own.text()


def test_a_run_below_a_rough_guide_is_not_read_as_the_hosts_fault_below_a_reliable_band_it_is():
    llama = shape_fixture("llama-3.1-8b")
    cpu = replace(_on_cpu(), band=tg_band_for(llama, _on_cpu()))
    text = describe(cpu, cpu.band.low * 0.5)
    assert "below the" in text and "fell outside it too: it held 26 of 29 out of sample" in text
    assert "this need not be the host" in text
    gpu = replace(_on_gpu(), band=tg_band_for(llama, _on_gpu()))
    text = describe(gpu, gpu.band.low * 0.5)
    assert "below the" in text and "fell outside" not in text
    assert "fell outside" not in describe(cpu, cpu.band.low * 1.01)  # inside: nothing to excuse


def test_the_record_round_trips_through_a_saved_result_and_a_hostile_one_reads_as_none():
    llama = shape_fixture("llama-3.1-8b")
    c = replace(_on_cpu(), band=tg_band_for(llama, _on_cpu()))
    data = c.to_json()
    assert data["band"]["record"] == {"inside": 26, "runs": 29, "median_width": 1.65, "worst_low": 0.41,
                                      "reliable": False}
    back = ceiling_from_json(data)
    assert back is not None and back.band is not None and back.band.record == BAND_RECORD["cpu"]
    assert ceiling_from_json({**data, "band": {**data["band"], "record": None}}).band.record is None


@pytest.mark.parametrize("record", [
    "26 of 29", [26, 29], {"inside": 30, "runs": 29, "median_width": 1.6, "worst_low": 0.4},
    {"inside": True, "runs": 29, "median_width": 1.6, "worst_low": 0.4},
    {"inside": 26, "runs": 0, "median_width": 1.6, "worst_low": 0.4},
    {"inside": 26, "runs": 29, "median_width": float("nan"), "worst_low": 0.4},
    {"inside": 26, "runs": 29, "median_width": 0.5, "worst_low": 0.4},
    {"inside": 26, "runs": 29, "median_width": 1.6, "worst_low": 7},
    {"inside": 26, "runs": 29, "median_width": "1.6", "worst_low": 0.4},
    {"inside": 26, "runs": 10 ** 40, "median_width": 1.6, "worst_low": 0.4},
    {"inside": -1, "runs": 29, "median_width": 1.6, "worst_low": 0.4},
])
def test_a_hostile_record_reads_as_none(record):
    assert BandRecord.from_json(record) is None
    band = TgBand.from_json({"low_tokens_per_s": 1.0, "high_tokens_per_s": 2.0, "record": record})
    assert band is not None and band.record is None
