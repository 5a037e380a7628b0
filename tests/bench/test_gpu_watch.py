"""bench watches the GPU under load (issue 11): throttling disturbs the run, a PCIe link below max under load and
power capping are findings. Recorded data: the nvidia-smi corpus (tests/data/corpus/SOURCES.md) read through the
same GpuFacts path, then judged as samples; the throttled and narrowed series are marked as built in each test."""

from __future__ import annotations

import time
from dataclasses import replace

from tests.conftest import corpus
from tunehost.bench.gpu_watch import GpuSampler, judge_gpu, read_amdgpu, sample_from_gpu, sample_from_row
from tunehost.bench.watch import HostReading, HostWatcher, WatchReport
from tunehost.facts.gpu import GpuFacts
from tunehost.host import open_host


def corpus_gpu(make_snapshot, name: str):
    line = "nvidia-smi -q -x" if name.endswith("-q-x.txt") else "nvidia-smi -q"
    return GpuFacts.gather(open_host(make_snapshot(cmd={line: corpus(f"nvidia-smi/{name}")}))).gpus[0]


def test_rtx3080_loaded_at_gen4_x16_is_quiet(make_snapshot):
    # telegraf's RTX 3080 dump: P2, 65 % busy, Gen4 of 4, x16 of x16, no throttle reason
    sample = sample_from_gpu(corpus_gpu(make_snapshot, "rtx3080-x16-gen4-loaded-p2-q-x.txt"))
    assert sample.loaded and (sample.pcie_gen, sample.pcie_gen_max, sample.pcie_width) == (4, 4, 16)
    watch = judge_gpu([replace(sample, at_s=t) for t in range(10)])
    assert watch.loaded_samples == 10 and not watch.reasons and not watch.findings


def test_desktop_at_p8_with_34_percent_is_not_load_so_its_gen1_link_is_no_finding(make_snapshot):
    # the RTX 4090 text dump: P8, "Gpu : 34 %", Gen1 of a host-limited Gen3
    sample = sample_from_gpu(corpus_gpu(make_snapshot, "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt"))
    assert sample.utilization_pct == 34 and sample.pcie_gen == 1
    watch = judge_gpu([sample] * 5)
    assert not watch.findings and not watch.reasons and "never busy" in watch.unknown[0]


def test_idle_a10g_run_says_the_gpu_was_never_busy(make_snapshot):
    watch = judge_gpu([sample_from_gpu(corpus_gpu(make_snapshot, "a10g-x8-of-x16-gen1-idle-p8-q-x.txt"))])
    assert watch.loaded_samples == 0 and watch.unknown


def test_thermal_slowdown_under_load_disturbs_the_run(make_snapshot):
    # built on the RTX 3080 sample: the same card reporting HW thermal slowdown at 92 °C for 3 of 10 seconds
    base = sample_from_gpu(corpus_gpu(make_snapshot, "rtx3080-x16-gen4-loaded-p2-q-x.txt"))
    hot = replace(base, clock_reasons=("hw_thermal_slowdown",), temperature_c=92.0)
    watch = judge_gpu([base] * 7 + [hot] * 3)
    assert len(watch.reasons) == 1 and "HW thermal slowdown in 3 of 10 busy samples" in watch.reasons[0]
    assert "92 °C" in watch.reasons[0]


def test_gen1_under_load_and_power_cap_are_findings_not_disturbances(make_snapshot):
    # built on the RTX 3080 sample: a riser that keeps the link at Gen1, and the card at its power limit
    base = sample_from_gpu(corpus_gpu(make_snapshot, "rtx3080-x16-gen4-loaded-p2-q-x.txt"))
    slow = replace(base, pcie_gen=1, clock_reasons=("sw_power_cap",), power_w=318.0, power_limit_w=320.0)
    watch = judge_gpu([slow] * 5)
    assert not watch.reasons
    assert any("Gen1 of Gen4 under load" in f for f in watch.findings)
    assert any("power limit in 5 of 5 busy samples (318 W of 320 W)" in f for f in watch.findings)


def test_hostile_rows_are_dropped_or_cleaned():
    assert sample_from_row({"gpu": 3}) is None and sample_from_row("x") is None
    s = sample_from_row({"gpu": "g", "utilization_pct": float("nan"), "temperature_c": 0, "pcie_gen": -1,
                         "clock_reasons": "hw_slowdown", "power_w": True})
    assert s is not None and s.utilization_pct is None and s.temperature_c is None and s.pcie_gen is None
    assert s.clock_reasons is None and s.power_w is None


def test_amdgpu_reader_on_the_rx6700xt_power_values(make_snapshot):
    # RX 6700 XT capture (tests/data/gpu/drm/README.md): PPT 28000000 µW of a 211000000 µW cap
    dev = "/sys/class/drm/card1/device"
    snap = make_snapshot(fs={f"{dev}/hwmon/hwmon2/power1_average": "28000000\n",
                             f"{dev}/hwmon/hwmon2/power1_cap": "211000000\n"})
    row = read_amdgpu(open_host(snap), dev)
    assert row["power_w"] == 28.0 and row["power_limit_w"] == 211.0 and row["gpu"] == "AMD GPU card1"
    assert sample_from_row(row) is not None


def test_sampler_thread_and_host_watcher_carry_the_gpu_verdict(make_snapshot):
    rows = [{"gpu": "NVIDIA GPU 0", "utilization_pct": 97, "clock_reasons": ["hw_slowdown"], "pcie_gen": 4,
             "pcie_gen_max": 4, "pcie_width": 16, "pcie_width_max": 16, "temperature_c": 83}]
    sampler = GpuSampler(open_host(make_snapshot()), read=lambda: rows, interval_s=0.01)
    reading = HostReading(at_s=time.monotonic(), cpu=None, own_cpu_s=0.0, swap_in=None, swap_out=None,
                          throttle_count=None, temperature=None)
    watcher = HostWatcher(open_host(make_snapshot()), cpu_count=2, read=lambda host: reading, gpu=sampler)
    watcher.start()
    deadline = time.monotonic() + 5
    while not sampler._samples and time.monotonic() < deadline:
        time.sleep(0.01)
    report = watcher.stop()
    assert report.disturbed and any("HW slowdown" in r for r in report.reasons)
    assert report.gpu is not None and report.gpu["loaded_samples"] >= 1
    again = WatchReport.from_json(report.to_json())
    assert again.gpu == report.gpu


def test_no_gpu_source_starts_no_thread(make_snapshot):
    sampler = GpuSampler(open_host(make_snapshot()))   # a snapshot: NVML and sysfs are never read
    sampler.start()
    assert sampler._thread is None
    watch = sampler.stop()
    assert watch.samples == 0 and watch.unknown


# ---------------------------------------------------------------- rendering the ceiling and the GPU watch


def _render(result) -> str:
    import io

    from rich.console import Console

    from tunehost.cli.bench import render_ceiling, render_how

    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    render_ceiling(result, console)
    render_how(result, console)
    return out.getvalue()


def test_fully_offloaded_result_renders_the_vram_ceiling_and_the_gpu_watch(make_snapshot):
    from tests.advise.test_plan import MODELS
    from tests.bench.test_results import QUIET, saved
    from tunehost.advise.ceiling import Bandwidths, placement_from_flags, tg_ceiling_for

    model = MODELS["llama8b"]()
    c = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "99"], gpu=True),
                       Bandwidths(gpu_gbps=360.0, gpu_basis="(NVIDIA GeForce RTX 3060 spec sheet)"))
    base = sample_from_gpu(corpus_gpu(make_snapshot, "rtx3080-x16-gen4-loaded-p2-q-x.txt"))
    gpu = judge_gpu([replace(base, pcie_gen=1)] * 3)
    watch = replace(QUIET, gpu=gpu.to_json())
    text = _render(saved([100.0] * 3, [0.8 * c.tokens_per_s] * 3, ceiling=c.to_json(), watch=watch,
                         llama_bench={"backend": "CUDA"}))
    assert "TG = 80% of the" in text and "VRAM ceiling" in text and "CPU caches" not in text
    assert "busy in 3 of 3 samples" in text and "PCIe Gen1 x16" in text
    assert "GPU: NVIDIA GeForce RTX 3080" in text and "Gen1 of Gen4 under load" in text
    cpu_build = _render(saved([100.0] * 3, [10.0] * 3, ceiling=c.to_json(), llama_bench={"backend": "CPU"}))
    assert "ran on the CPU backend" in cpu_build


# --- Intel xe / i915: the GT's actual frequency and its throttle reason files ------------------------------------
# Not a capture (none was found): the file layout of the kernel's xe_gt_throttle.c / xe_gt_freq.c
# (device/tileN/gtN/freq0/{act_freq,throttle/status,throttle/reason_*}) and i915's intel_gt_sysfs_pm.c
# (cardN/gt/gtN/{rps_act_freq_mhz,throttle_reason_status,throttle_reason_*}), values in their units (MHz, 0/1).

def xe_files(act: str, status: str, **reasons: str) -> dict[str, str]:
    base = "/sys/class/drm/card1/device/tile0/gt0/freq0"
    files = {"/sys/class/drm/card1/device/vendor": "0x8086\n", f"{base}/act_freq": act, f"{base}/throttle/status": status}
    files.update({f"{base}/throttle/reason_{k}": v for k, v in reasons.items()})
    return files


def i915_files(act: str, status: str, **reasons: str) -> dict[str, str]:
    base = "/sys/class/drm/card0/gt/gt0"
    files = {"/sys/class/drm/card0/device/vendor": "0x8086\n", f"{base}/rps_act_freq_mhz": act,
             f"{base}/throttle_reason_status": status}
    files.update({f"{base}/throttle_reason_{k}": v for k, v in reasons.items()})
    return files


def intel_rows(make_snapshot, files):
    from tunehost.bench.gpu_watch import intel_gts, read_intel

    host = open_host(make_snapshot(fs=files))
    return [read_intel(host, *gt) for gt in intel_gts(host)]


def test_xe_thermal_throttle_under_load_disturbs_the_run(make_snapshot):
    [row] = intel_rows(make_snapshot, xe_files("2100\n", "1\n", thermal="1\n", pl1="0\n", prochot="0\n"))
    assert row == {"gpu": "Intel GPU card1 tile0/gt0", "sm_clock_mhz": 2100, "clock_reasons": ["intel_thermal"],
                   "awake": True}
    watch = judge_gpu([sample_from_row(row, t) for t in range(5)])
    assert watch.loaded_samples == 5 and watch.reasons and "thermal limit in 5 of 5" in watch.reasons[0]


def test_i915_power_limit_under_load_is_a_finding_not_a_disturbance(make_snapshot):
    [row] = intel_rows(make_snapshot, i915_files("1550\n", "1\n", pl1="1\n", thermal="0\n"))
    watch = judge_gpu([sample_from_row(row, t) for t in range(3)])
    assert not watch.reasons and watch.findings and "power limit in 3 of 3" in watch.findings[0]


def test_intel_gt_in_rc6_is_idle_and_garbage_is_unknown(make_snapshot):
    [idle] = intel_rows(make_snapshot, xe_files("0\n", "0\n"))
    assert idle["awake"] is False and idle["clock_reasons"] == []
    assert "never busy" in judge_gpu([sample_from_row(idle)]).unknown[0]
    [junk] = intel_rows(make_snapshot, xe_files("fast\n", "maybe\n", thermal="\x1b[31m\n"))
    assert junk["awake"] is None and junk["clock_reasons"] is None and junk["sm_clock_mhz"] is None
    assert not sample_from_row(junk).loaded
