"""Energy per generated token (issue 34): a fake RAPL powercap tree with known counters (wrap-around included, an
energy_uj that is there but unreadable, garbage), a fake NVML energy counter, power samples integrated, and the
bench engine's joules per token over exactly the counted runs."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from tunehost.bench.energy import (
    Energy, EnergyMeter, EnergyReading, add_up, counter_delta, energy_between, integrate_power,
    per_token, read_rapl, unavailable,
)
from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.results import SavedResult, energy_per_config
from tunehost.bench.runner import BenchConfig, BenchSettings, Provenance, RoundsHooks, build_result, run_rounds
from tunehost.bench.watch import CpuTimes, HostReading, HostWatcher, WatchReport, combine
from tunehost.host import open_host

RAPL = "/sys/class/powercap"
RANGE_UJ = 262143328850  # a real max_energy_range_uj (Intel client parts)


def rapl_tree(energy_uj: int | str | None = 1_000_000, *, package1: int | None = None,
              range_uj: int | None = RANGE_UJ) -> dict[str, str]:
    """A powercap tree: package-0 (with a core sub-zone and a psys zone that must not be added), optionally a
    second package."""
    fs = {f"{RAPL}/intel-rapl:0/name": "package-0\n",
          f"{RAPL}/intel-rapl:0:0/name": "core\n", f"{RAPL}/intel-rapl:0:0/energy_uj": "5\n",
          f"{RAPL}/intel-rapl:1/name": "psys\n", f"{RAPL}/intel-rapl:1/energy_uj": "999999999\n"}
    if energy_uj is not None:
        fs[f"{RAPL}/intel-rapl:0/energy_uj"] = f"{energy_uj}\n"
    if range_uj is not None:
        fs[f"{RAPL}/intel-rapl:0/max_energy_range_uj"] = f"{range_uj}\n"
    if package1 is not None:
        fs[f"{RAPL}/intel-rapl:2/name"] = "package-1\n"
        fs[f"{RAPL}/intel-rapl:2/energy_uj"] = f"{package1}\n"
        fs[f"{RAPL}/intel-rapl:2/max_energy_range_uj"] = f"{RANGE_UJ}\n"
    return fs


def set_counter(snapshot: Path, zone: str, value: int) -> None:
    (snapshot / "fs" / RAPL.lstrip("/") / zone / "energy_uj").write_text(f"{value}\n")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_counter_delta_plain_wrapped_and_reset():
    assert counter_delta(10.0, 25.0, 100.0) == 15.0
    assert counter_delta(90.0, 5.0, 100.0) == 15.0            # wrapped once at 100
    assert counter_delta(90.0, 5.0, None) is None             # went back and cannot wrap: a reset
    assert counter_delta(90.0, 5.0, 50.0) is None             # a range below the first value is garbage
    assert counter_delta(float("nan"), 5.0, 100.0) is None


def test_rapl_package_only_is_read_and_sub_zones_and_psys_are_not_added(make_snapshot):
    host = open_host(make_snapshot(fs=rapl_tree(1_500_000, package1=2_000_000)))
    counters, why = read_rapl(host)
    assert why is None
    assert [(c.name, c.joules, c.wraps_at_j) for c in counters] == [
        ("intel-rapl:0 package-0", 1.5, RANGE_UJ / 1e6), ("intel-rapl:2 package-1", 2.0, RANGE_UJ / 1e6)]


def test_fake_rapl_counters_give_the_known_joules_including_a_wrap(make_snapshot):
    snap = make_snapshot(fs=rapl_tree(RANGE_UJ - 3_000_000, package1=10_000_000))
    clock = Clock()
    meter = EnergyMeter(open_host(snap), clock=clock)
    before = meter.read()
    set_counter(snap, "intel-rapl:0", 7_000_000)      # wrapped: 3 J to the range, then 7 J: 10 J
    set_counter(snap, "intel-rapl:2", 15_000_000)     # 5 J
    clock.now += 4.0
    energy = energy_between(before, meter.read())
    assert energy.cpu_j == pytest.approx(15.0) and energy.gpu_j is None
    assert energy.joules == pytest.approx(15.0) and energy.wall_s == 4.0
    assert energy.measured == "CPU package only"
    assert energy.parts == ("CPU package (RAPL: intel-rapl:0 package-0, intel-rapl:2 package-1)",)
    assert energy.missing == ("GPU: no GPU watched (no NVML, amdgpu or Intel GPU)",)
    assert per_token(energy, 60) == pytest.approx(0.25)


def test_a_counter_that_goes_back_without_a_range_is_no_figure(make_snapshot):
    snap = make_snapshot(fs=rapl_tree(9_000_000, range_uj=None))
    meter = EnergyMeter(open_host(snap))
    before = meter.read()
    set_counter(snap, "intel-rapl:0", 1_000_000)
    energy = energy_between(before, meter.read())
    assert energy.joules is None and energy.measured == "none"
    assert "went back" in energy.missing[0] and "reset" in energy.missing[0]


def test_unreadable_energy_uj_is_root_only_and_gives_no_cpu_figure(make_snapshot):
    # energy_uj is there but cannot be read (mode 0400 since Linux 5.10; a directory stands in for it: root reads
    # any file, so a file that is there and unreadable is built this way)
    snap = make_snapshot(fs=rapl_tree(None))
    (snap / "fs" / RAPL.lstrip("/") / "intel-rapl:0" / "energy_uj").mkdir()
    host = open_host(snap)
    counters, why = read_rapl(host)
    assert counters == [] and "root only since Linux 5.10" in why and "intel-rapl:0/energy_uj" in why
    reading = EnergyMeter(host).read()
    energy = energy_between(reading, reading)
    assert energy.joules is None and energy.measured == "none"
    assert any(m.startswith("CPU package:") and "root only" in m for m in energy.missing)
    assert "CPU package:" in unavailable(reading) and "GPU:" in unavailable(reading)


def test_one_unreadable_package_of_two_voids_the_cpu_part(make_snapshot):
    snap = make_snapshot(fs=rapl_tree(5, package1=7))
    (snap / "fs" / RAPL.lstrip("/") / "intel-rapl:2" / "energy_uj").write_text("not a number\n")
    counters, why = read_rapl(open_host(snap))
    assert counters == [] and "not a count of microjoules" in why


def test_no_powercap_tree_says_so(make_snapshot):
    counters, why = read_rapl(open_host(make_snapshot(fs={"/proc/stat": "cpu 1 2 3 4\n"})))
    assert counters == [] and "no RAPL zone" in why


def test_power_samples_are_integrated_for_a_gpu_without_a_counter():
    samples = [(1.0, 100.0), (2.0, 200.0), (3.0, 200.0)]
    # [0.5, 1]: 100 W held; [1, 2]: 150 W mean; [2, 3]: 200 W; [3, 3.5]: 200 W held = 50 + 150 + 200 + 100
    assert integrate_power(samples, 0.5, 3.5) == pytest.approx(500.0)
    assert integrate_power(samples[:1], 0.5, 3.5) is None
    before = EnergyReading(0.5, (), {}, ("AMD GPU 0000:03:00.0",))
    after = EnergyReading(3.5, (), {}, ("AMD GPU 0000:03:00.0",))
    energy = energy_between(before, after, {"AMD GPU 0000:03:00.0": samples})
    assert energy.gpu_j == pytest.approx(500.0) and energy.measured == "GPU only"
    assert "an estimate" in energy.parts[0]
    short = energy_between(before, after, {"AMD GPU 0000:03:00.0": samples[:1]})
    assert short.gpu_j is None and "fewer than 2 power samples" in short.missing[0]


class FakeNvml(types.ModuleType):
    """pynvml with two GPUs: GPU 0 has the total energy counter (mJ), GPU 1 (pre-Volta) does not."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.energy_mj = 1_000_000

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if handle == 1:
            raise self.NVMLError("Not Supported")
        return self.energy_mj


def test_fake_nvml_energy_counter_and_rapl_together(make_snapshot, monkeypatch):
    from tunehost.host.nvml import NvmlSession

    nvml = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    session = NvmlSession.open()
    assert session is not None
    snap = make_snapshot(fs=rapl_tree(2_000_000))
    clock = Clock()
    meter = EnergyMeter(open_host(snap), gpu_counters=session.energy_j, clock=clock)
    before = meter.read()
    assert before.gpus == ("NVIDIA GPU 0", "NVIDIA GPU 1")
    nvml.energy_mj += 250_000           # 250 J on GPU 0
    set_counter(snap, "intel-rapl:0", 32_000_000)  # 30 J on the package
    clock.now += 5.0
    power = {"NVIDIA GPU 1": [(100.5, 40.0), (102.5, 40.0), (104.5, 40.0)]}  # 5 s at 40 W: 200 J, integrated
    energy = energy_between(before, meter.read(), power)
    assert energy.cpu_j == pytest.approx(30.0) and energy.gpu_j == pytest.approx(450.0)
    assert energy.measured == "CPU package + GPU" and energy.missing == ()
    assert any(p.startswith("GPU energy counter (NVIDIA GPU 0)") for p in energy.parts)
    # without GPU 1's power samples the GPU part is none at all, never GPU 0 alone passed off as "the GPU"
    partial = energy_between(before, meter.read(), {})
    assert partial.gpu_j is None and partial.cpu_j == pytest.approx(30.0) and "NVIDIA GPU 1" in partial.missing[0]
    session.close()


def test_energy_json_round_trip_reads_hostile_values_as_missing():
    energy = Energy(2.0, 10.0, 5.0, ("CPU package (RAPL: x)", "GPU energy counter (g)"), ())
    assert Energy.from_json(energy.to_json()) == energy
    hostile = Energy.from_json({"wall_s": "x", "cpu_j": float("nan"), "gpu_j": -3, "parts": [1, "ok"]})
    assert hostile is not None and hostile.joules is None and hostile.parts == ("ok",)
    assert Energy.from_json("garbage") is None


def test_add_up_needs_every_window():
    a = Energy(1.0, 2.0, 3.0, ("CPU package (RAPL: p)", "GPU energy counter (g)"))
    b = Energy(1.0, 4.0, None, ("CPU package (RAPL: p)",), ("GPU: g: reset",))
    total = add_up([a, b])
    assert total is not None and total.cpu_j == 6.0 and total.gpu_j is None and total.wall_s == 2.0
    assert any("not measured in every window (1 of 2" in m for m in total.missing)
    assert total.parts == ("CPU package (RAPL: p)",)


# ---------------------------------------------------------------- the bench engine, end to end


def quiet_reading(host) -> HostReading:
    return HostReading(at_s=0.0, cpu=CpuTimes(0.0, 0.0, 100.0), own_cpu_s=0.0, swap_in=0, swap_out=0,
                       throttle_count=0, temperature=None)


def test_bench_reports_joules_per_token_over_exactly_the_counted_runs(make_snapshot):
    """Every llama-bench run (the fake) moves the package counter by a known amount: the warm-up by 1000 J (never
    counted), each counted baseline run by 6.4 J and each candidate run by 3.2 J (one of them across the wrap).
    -n 16 with 2 repetitions generates 32 tokens a run: 0.2 J and 0.1 J per token."""
    snap = make_snapshot(fs=rapl_tree(RANGE_UJ - 20_000_000))
    host = open_host(snap)
    clock = Clock()
    counter = {"uj": RANGE_UJ - 20_000_000}

    def invoke_for(config: BenchConfig):
        def invoke(args, on_line):
            counted = args[args.index("-r") + 1] != "1"
            step = (6_400_000 if config.name == "baseline" else 3_200_000) if counted else 1_000_000_000
            counter["uj"] = (counter["uj"] + step) % RANGE_UJ
            set_counter(snap, "intel-rapl:0", counter["uj"])
            clock.now += 2.0
            ts = 50.0 if config.name == "baseline" else 60.0
            return [BenchResult(test="tg16", n_prompt=0, n_gen=16, n_depth=0, avg_ts=ts, stddev_ts=0.0,
                                samples_ts=(ts, ts))]
        return invoke

    configs = (BenchConfig("baseline", ("-t", "1")), BenchConfig("candidate", ("-t", "2")))
    settings = BenchSettings(model="m.gguf", n_prompt=0, n_gen=16, reps=2, min_rounds=3, max_rounds=3)
    watcher = HostWatcher(host, cpu_count=2, read=quiet_reading, gpu=False,
                          energy=EnergyMeter(host, clock=clock))
    outcome = run_rounds(configs, settings, RoundsHooks(invoke=None, invoke_for=invoke_for, watcher=watcher,
                                                        clock=clock))
    counted = [i for i in outcome.invocations if i.counted]
    assert len(counted) == 6 and all(i.tokens == 32 for i in counted)
    result = build_result(outcome, settings, Provenance("llama-bench", {"path": "m.gguf"}))
    energy = result.energy
    assert energy["baseline"]["joules"] == pytest.approx(3 * 6.4)
    assert energy["baseline"]["joules_per_token"] == pytest.approx(0.2)
    assert energy["candidate"]["joules_per_token"] == pytest.approx(0.1)
    assert energy["candidate"]["tokens_per_joule"] == pytest.approx(10.0)
    assert energy["candidate"]["measured"] == "CPU package only" and energy["baseline"]["tokens"] == 96
    assert energy["baseline"]["watts"] == pytest.approx(3.2)   # 6.4 J in each 2 s run
    # every counted round carries its own energy (both configurations), the warm-up none
    assert [w.energy["joules"] for w in outcome.round_watch] == pytest.approx([9.6] * 3)
    # the saved document keeps it and reads back
    again = SavedResult.from_json(result.to_json())
    assert again.energy == result.to_json()["energy"]
    assert again.invocations[-1].energy == counted[-1].energy


def test_disturbed_rounds_are_left_out_of_joules_per_token():
    from tunehost.bench.results import Invocation

    def run(round_no: int, joules: float) -> Invocation:
        return Invocation("baseline", round_no, True, 0.0, 1.0, (), {"tg16": (10.0,)},
                          energy=Energy(1.0, joules, None, ("CPU package (RAPL: p)",)).to_json(), tokens=16)

    runs = [run(1, 1.6), run(2, 16.0), run(3, 1.6)]
    energy = energy_per_config(runs, ["baseline"], left_out={2})
    assert energy["baseline"]["joules_per_token"] == pytest.approx(0.1) and energy["baseline"]["rounds_left_out"] == 1
    none = energy_per_config([Invocation("baseline", 1, True, 0.0, 1.0, (), {})], ["baseline"])
    assert none is None  # energy was not read: no figure and no claim
    all_disturbed = energy_per_config(runs, ["baseline"], left_out={1, 2, 3})
    assert all_disturbed["baseline"]["joules_per_token"] is None
    assert "every counted round was disturbed" in all_disturbed["baseline"]["why_none"]
    unreadable = Invocation("baseline", 1, True, 0.0, 1.0, (), {}, tokens=16,
                            energy=Energy(1.0, missing=("CPU package: no RAPL zone",)).to_json())
    why = energy_per_config([unreadable], ["baseline"], left_out={1})["baseline"]["why_none"]
    assert why == "CPU package: no RAPL zone"  # the deeper reason first, even when the round was disturbed


def test_a_result_without_energy_reads_as_before():
    doc = {"schema": "tunehost-bench/1", "configs": [{"name": "baseline", "tests": []}],
           "invocations": [{"config": "baseline", "round": 1, "counted": True, "argv": []}],
           "round_watch": [{"wall_s": 1.0}]}
    result = SavedResult.from_json(doc)
    assert result.energy is None and result.invocations[0].energy is None
    assert "energy" not in result.to_json() and "energy" not in result.invocations[0].to_json()
    assert WatchReport.from_json({"wall_s": 1.0}).energy is None


def test_combined_watch_adds_the_calls_energy():
    one = WatchReport(1.0, 2, 0.0, 0.0, 0, 0, 0, None, None, None,
                      energy=Energy(1.0, 2.0, None, ("CPU package (RAPL: p)",)).to_json())
    total = combine([one, one])
    assert total is not None and total.energy["joules"] == 4.0 and total.energy["measured"] == "CPU package only"
    assert combine([one, WatchReport(1.0, 2, 0.0, 0.0, 0, 0, 0, None, None, None)]).energy is None



def test_the_energy_lines_fit_80_columns_and_say_what_was_measured():
    from rich.console import Console

    from tunehost.cli.bench import render_energy

    measured = {"joules_per_token": 0.41234, "watts": 96.31, "measured": "CPU package + GPU", "missing": []}
    partial = {"joules_per_token": 0.2, "watts": 3.2, "measured": "CPU package only",
               "missing": ["GPU: no GPU watched (no NVML, amdgpu or Intel GPU)"]}
    none = {"joules_per_token": None, "measured": "none", "why_none": "CPU package: /sys/class/powercap/intel-rapl:0/"
            "energy_uj readable by root only since Linux 5.10 (CVE-2020-8694): run as root; GPU: no GPU watched"}
    doc = {"schema": "tunehost-bench/1", "configs": [{"name": "baseline", "tests": []}],
           "energy": {"baseline": measured, "candidate": partial, "other": none}}
    console = Console(width=80, record=True, color_system=None)
    render_energy(SavedResult.from_json(doc), console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "0.412 J per generated token (2.43 tokens/J, 96.3 W average) · CPU package + GPU" in " ".join(text.split())
    assert "CPU package only (not measured: GPU: no GPU watched" in " ".join(text.split())
    assert "energy, other: no energy figure: CPU package:" in text and "root only" in " ".join(text.split())


def test_amdgpu_hwmon_energy_counter_is_read_in_joules(make_snapshot):
    from tunehost.bench.energy import read_amdgpu_energy

    dev = "/sys/class/drm/card1/device"
    host = open_host(make_snapshot(fs={f"{dev}/hwmon/hwmon4/name": "amdgpu\n",
                                       f"{dev}/hwmon/hwmon4/energy1_input": "123456789\n",
                                       "/sys/class/drm/card2/device/hwmon/hwmon5/power1_average": "50000000\n"}))
    assert read_amdgpu_energy(host, dev) == pytest.approx(123.456789)
    assert read_amdgpu_energy(host, "/sys/class/drm/card2/device") is None  # power only: integrated instead


def test_tune_asks_for_a_readable_counter_through_the_host(make_snapshot):
    from tunehost.ops.tune import energy_unavailable

    assert energy_unavailable(open_host(make_snapshot(fs=rapl_tree(42)))) is None
    why = energy_unavailable(open_host(make_snapshot(fs={"/proc/stat": "cpu 1 2 3 4\n"})))
    assert why is not None and "no RAPL zone" in why and "GPU:" in why
