"""bench's GPU watch records the NVIDIA performance state and the clock-event reasons while the GPU is in use, and
says when the card never left P3 or a lower-power state (issue 34). Real data: the RTX 3060 row of
ggml-org/llama.cpp#17880 (`nvidia-smi -l 1` during partial offload: "P3  33W / 170W | 11888MiB / 12288MiB | 39%"),
and the loaded RTX 3080 of the nvidia-smi corpus (P2, 65 %)."""

from __future__ import annotations

from dataclasses import replace

from tunehost.bench.gpu_watch import judge_gpu, sample_from_gpu, sample_from_row

from tests.bench.test_gpu_watch import corpus_gpu

# llama.cpp#17880: "|   0  NVIDIA GeForce RTX 3060      WDDM  |   00000000:01:00.0  On |                  N/A |"
#                  "|  0%   60C    P3             33W /  170W |   11888MiB /  12288MiB |     39%      Default |"
RTX3060_P3 = {"gpu": "NVIDIA GPU 0", "utilization_pct": 39, "pstate": "P3", "power_w": 33.0, "power_limit_w": 170.0,
              "temperature_c": 60, "clock_reasons": []}


def test_rtx3060_held_in_p3_during_partial_offload_is_a_finding():
    samples = [sample_from_row(RTX3060_P3, t) for t in range(8)]
    assert samples[0].pstate == 3 and not samples[0].loaded     # 39 % is below bench's "under load" mark
    watch = judge_gpu(samples)
    [finding] = [f for f in watch.findings if "never left P3" in f]
    assert "8 samples at 39-39 % utilisation" in finding and "partial offload" in finding
    assert watch.summary["NVIDIA GPU 0"]["pstate_in_use"] == ["P3", "P3"]
    assert not watch.reasons                                        # a host finding, not a disturbed run


def test_a_card_that_reaches_p2_is_no_finding(make_snapshot):
    # the RTX 3080 corpus dump at P2 and 65 %, then the RTX 3060 row moving to P2 for one second
    sample = sample_from_gpu(corpus_gpu(make_snapshot, "rtx3080-x16-gen4-loaded-p2-q-x.txt"))
    assert sample.pstate == 2
    watch = judge_gpu([replace(sample, at_s=t) for t in range(5)])
    assert not watch.findings and watch.summary[sample.gpu]["pstate_in_use"] == ["P2", "P2"]
    mixed = [sample_from_row(RTX3060_P3, t) for t in range(7)] + [sample_from_row({**RTX3060_P3, "pstate": "P2"}, 8)]
    watch = judge_gpu(mixed)
    assert not any("never left" in f for f in watch.findings)
    assert watch.summary["NVIDIA GPU 0"]["pstate_in_use"] == ["P2", "P3"]


def test_clock_event_reasons_in_use_are_recorded():
    row = {**RTX3060_P3, "clock_reasons": ["sw_power_cap"]}
    watch = judge_gpu([sample_from_row(row, t) for t in range(3)])
    assert watch.summary["NVIDIA GPU 0"]["clock_reasons_in_use"] == ["sw_power_cap"]
    assert any("clock-event reasons sw_power_cap" in f for f in watch.findings)


def test_idle_p8_and_missing_or_garbage_pstates_say_nothing():
    idle = {**RTX3060_P3, "utilization_pct": 0, "pstate": "P8"}
    assert not judge_gpu([sample_from_row(idle, t) for t in range(3)]).findings
    for garbage in ("P99", "3", True, -1, "P3; rm -rf /", None, 32):
        sample = sample_from_row({**RTX3060_P3, "pstate": garbage}, 0)
        assert sample.pstate is None, garbage
        watch = judge_gpu([sample])
        assert not watch.findings and "pstate_in_use" not in watch.summary["NVIDIA GPU 0"]
    assert sample_from_row({**RTX3060_P3, "pstate": 3}, 0).pstate == 3   # NVML's integer form


def test_a_display_gpu_in_the_p8_idle_state_is_not_judged(make_snapshot):
    # the RTX 4090 corpus dump: P8 at 34 % (a desktop's compositor), not llama-bench's load
    sample = sample_from_gpu(corpus_gpu(make_snapshot, "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt"))
    assert sample.pstate == 8 and sample.utilization_pct == 34
    watch = judge_gpu([sample] * 5)
    assert not watch.findings and "pstate_in_use" not in watch.summary[sample.gpu]
