"""The comparison engine with a fake llama-bench: warm-up, interleaving order, auto-extension, budget, disturbance."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.conftest import write_tiny_gguf
from tunehost.bench import runner, stats
from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.runner import BenchConfig, BenchSettings, Provenance, RoundsHooks, run_rounds
from tunehost.bench.watch import CpuTimes, HostReading, Temperature, judge
from tunehost.errors import TunehostError
from tunehost.facts import HostFacts
from tunehost.launch import LaunchConfig, flags_from

SUPPORTED = frozenset({"-m", "-p", "-n", "-r", "-t", "-fa", "-ngl", "-ctk", "-ctv", "-C", "--cpu-strict", "-ot",
                       "-lm", "-ncmoe", "--no-warmup", "-o", "--progress", "-b", "-ub", "--prio"})


class FakeBench:
    """Stands in for llama-bench: tokens/s per config (by its -t value), with optional per-call noise."""

    def __init__(self, speeds: dict[str, float], noise: Sequence[float] = (0.0,), seconds: float = 1.0):
        self.speeds = speeds
        self.noise = itertools.cycle(noise)
        self.seconds = seconds
        self.calls: list[list[str]] = []
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, args: Sequence[str], on_line) -> list[BenchResult]:
        self.calls.append(list(args))
        self.now += self.seconds
        threads = args[args.index("-t") + 1] if "-t" in args else "default"
        reps = int(args[args.index("-r") + 1])
        if on_line:
            on_line("llama-bench: benchmark 1/2: prompt run 1/1")
        base = self.speeds[threads]
        out = []
        for test, n_prompt, n_gen, scale in (("pp16", 16, 0, 3.0), ("tg8", 0, 8, 1.0)):
            samples = tuple(base * scale * (1 + next(self.noise)) for _ in range(reps))
            out.append(BenchResult(test=test, n_prompt=n_prompt, n_gen=n_gen, n_depth=0,
                                   avg_ts=sum(samples) / reps, stddev_ts=0.0, samples_ts=samples,
                                   model_type="llama ?B Q8_0", build_commit="0c1e570", build_number=11312,
                                   backend="CPU"))
        return out


def settings(**kw) -> BenchSettings:
    return BenchSettings(model="m.gguf", n_prompt=16, n_gen=8, **kw)


def configs_ab() -> list[BenchConfig]:
    return [BenchConfig("baseline", ("-t", "2")), BenchConfig("candidate", ("-t", "1"))]


def sequence(calls: list[list[str]]) -> list[tuple[str, str]]:
    """(threads, reps) of each call, in order."""
    return [(c[c.index("-t") + 1], c[c.index("-r") + 1]) for c in calls]


def test_warmup_runs_once_per_config_with_one_repetition_and_is_not_counted():
    fake = FakeBench({"2": 100.0, "1": 50.0})
    out = run_rounds(configs_ab(), settings(reps=3), RoundsHooks(fake, clock=fake.clock))
    assert sequence(fake.calls)[:2] == [("2", "1"), ("1", "1")]
    warm = [i for i in out.invocations if not i.counted]
    assert [(i.config, i.round) for i in warm] == [("baseline", 0), ("candidate", 0)]
    counted = [i for i in out.invocations if i.counted]
    assert all(len(i.samples["pp16"]) == 3 for i in counted)


def test_rounds_alternate_ab_then_ba():
    fake = FakeBench({"2": 100.0, "1": 100.0}, noise=(0.0, 0.3, -0.3, 0.1))  # undecidable: runs to max_rounds
    out = run_rounds(configs_ab(), settings(min_rounds=3, max_rounds=4), RoundsHooks(fake, clock=fake.clock))
    counted = [(i.config, i.round) for i in out.invocations if i.counted]
    assert counted == [("baseline", 1), ("candidate", 1), ("candidate", 2), ("baseline", 2),
                       ("baseline", 3), ("candidate", 3), ("candidate", 4), ("baseline", 4)]


def test_a_clear_difference_stops_after_min_rounds():
    fake = FakeBench({"2": 100.0, "1": 50.0}, noise=(0.0, 0.01, -0.01))
    out = run_rounds(configs_ab(), settings(min_rounds=5, max_rounds=10), RoundsHooks(fake, clock=fake.clock))
    assert out.rounds == 5 and out.stop_reason == "decided"


def test_no_verdict_and_no_stop_before_the_statistics_minimum_even_when_asked_for_fewer_rounds():
    fake = FakeBench({"2": 100.0, "1": 50.0}, noise=(0.0, 0.01, -0.01))
    out = run_rounds(configs_ab(), settings(min_rounds=2, max_rounds=10), RoundsHooks(fake, clock=fake.clock))
    assert out.rounds == stats.MIN_ROUNDS == runner.MIN_ROUNDS and out.stop_reason == "decided"


def test_the_engine_stops_on_the_same_comparison_the_result_reports():
    fake = FakeBench({"2": 100.0, "1": 50.0}, noise=(0.0, 0.01, -0.01))
    out = run_rounds(configs_ab(), settings(), RoundsHooks(fake, clock=fake.clock))
    result = runner.build_result(out, settings(), Provenance("/bin/llama-bench", {"name": "m.gguf"}))
    assert result.comparison is not None
    for row in result.comparison.rows:
        assert row.statistical_verdict == "slower" and row.rounds == out.rounds == 5
        assert row.method == stats.PAIRED and row.n_baseline == 15
        assert row.effective_samples is not None and 5 <= row.effective_samples <= 15


def test_a_wide_interval_adds_rounds_until_max_rounds():
    fake = FakeBench({"2": 100.0, "1": 101.0}, noise=(0.0, 0.2, -0.2, 0.1, -0.1))
    out = run_rounds(configs_ab(), settings(min_rounds=3, max_rounds=6, budget_s=1e6),
                     RoundsHooks(fake, clock=fake.clock))
    assert out.rounds == 6 and out.stop_reason.startswith("max rounds")


def test_the_budget_stops_extra_rounds_but_never_the_first_ones():
    fake = FakeBench({"2": 100.0, "1": 101.0}, noise=(0.0, 0.2, -0.2), seconds=10.0)
    out = run_rounds(configs_ab(), settings(min_rounds=3, max_rounds=50, budget_s=5.0),
                     RoundsHooks(fake, clock=fake.clock))
    assert out.rounds == 3 and out.stop_reason.startswith("budget")
    fake = FakeBench({"2": 100.0, "1": 101.0}, noise=(0.0, 0.2, -0.2), seconds=10.0)
    out = run_rounds(configs_ab(), settings(min_rounds=3, max_rounds=50, budget_s=95.0),
                     RoundsHooks(fake, clock=fake.clock))
    # 2 warm-ups + 3 rounds = 80 s; a 4th round (20 s) would end at 100 s > 95 s
    assert out.rounds == 3
    fake = FakeBench({"2": 100.0, "1": 101.0}, noise=(0.0, 0.2, -0.2), seconds=10.0)
    out = run_rounds(configs_ab(), settings(min_rounds=3, max_rounds=50, budget_s=100.0),
                     RoundsHooks(fake, clock=fake.clock))
    assert out.rounds == 4


def test_a_single_config_extends_while_its_own_noise_is_wider_than_the_threshold():
    quiet = FakeBench({"2": 100.0}, noise=(0.0, 0.001, -0.001))
    out = run_rounds([BenchConfig("baseline", ("-t", "2"))], settings(), RoundsHooks(quiet, clock=quiet.clock))
    assert out.rounds == 5 and out.stop_reason == "decided"
    noisy = FakeBench({"2": 100.0}, noise=(0.0, 0.3, -0.3, 0.15, -0.2))  # 5 draws, 6 per run: rounds differ
    out = run_rounds([BenchConfig("baseline", ("-t", "2"))], settings(max_rounds=7),
                     RoundsHooks(noisy, clock=noisy.clock))
    assert out.rounds == 7


def test_progress_events_carry_round_config_eta_and_llama_bench_lines():
    fake = FakeBench({"2": 100.0, "1": 50.0})
    events = []
    run_rounds(configs_ab(), settings(), RoundsHooks(fake, on_progress=events.append, clock=fake.clock))
    phases = [e.phase for e in events]
    assert phases[0] == "warm-up" and phases[-1] == "done"
    assert any(e.line and "prompt run" in e.line for e in events)
    last_round = [e for e in events if e.phase == "round"][-1]
    assert last_round.eta_s is not None and last_round.planned == 2 + 5 * 2
    assert events[-1].done == events[-1].planned


def test_several_values_for_one_option_are_refused_after_the_run():
    def doubled(args, on_line):
        one = FakeBench({"2": 1.0})(args, None)
        return one + one

    with pytest.raises(TunehostError, match="more than once"):
        run_rounds([BenchConfig("baseline", ("-t", "2"))], settings(), RoundsHooks(doubled))


class FakeWatcher:
    def __init__(self, before: HostReading, after: HostReading):
        self.readings = [before, after]
        self.ticks = 0
        self.started = False

    def start(self):
        self.started = True

    def tick(self):
        self.ticks += 1

    def stop(self):
        return judge(self.readings[0], self.readings[1], cpu_count=2)


def reading(at: float, busy: float, own: float, *, swap: int = 0, throttle: int | None = 0,
            temp: float | None = 50.0, procs=None) -> HostReading:
    return HostReading(at_s=at, cpu=CpuTimes(busy, 0.0, at * 2), own_cpu_s=own, swap_in=swap, swap_out=0,
                       throttle_count=throttle, temperature=Temperature(temp, 95.0, "hwmon") if temp else None,
                       processes=procs or {})


def test_the_watcher_brackets_only_the_counted_rounds_and_ticks_after_each():
    fake = FakeBench({"2": 100.0, "1": 50.0})
    watcher = FakeWatcher(reading(0, 0, 0), reading(10, 20, 19.5))
    out = run_rounds(configs_ab(), settings(), RoundsHooks(fake, watcher=watcher, clock=fake.clock))
    assert watcher.started and watcher.ticks == 10
    assert out.watch is not None and not out.watch.disturbed


def test_a_busy_host_marks_every_verdict_disturbed_but_keeps_the_statistics():
    fake = FakeBench({"2": 100.0, "1": 50.0}, noise=(0.0, 0.01, -0.01))
    watcher = FakeWatcher(reading(0, 0, 0, procs={7: ("stress", 1.0)}),
                          reading(10, 20, 12, procs={7: ("stress", 9.0)}))
    out = run_rounds(configs_ab(), settings(), RoundsHooks(fake, watcher=watcher, clock=fake.clock))
    result = runner.build_result(out, settings(), Provenance("/bin/llama-bench", {"name": "m.gguf"}))
    assert result.comparison is not None
    assert [r.verdict for r in result.comparison.rows] == ["disturbed", "disturbed"]
    assert [r.statistical_verdict for r in result.comparison.rows] == ["slower", "slower"]
    assert "stress (pid 7, 8.0 s)" in result.watch.reasons[0]
    assert any("host disturbed" in n for n in result.comparison.notes)


@pytest.mark.parametrize("after, words", [
    (reading(10, 2, 2, swap=5000), "swapping"),
    (reading(10, 2, 2, throttle=3), "throttled"),
    (reading(10, 2, 2, temp=96.0), "96 °C"),
])
def test_swapping_throttling_and_heat_are_disturbances(after, words):
    report = judge(reading(0, 0, 0), after, cpu_count=2)
    assert report.disturbed and words in " ".join(report.reasons)


def test_unknown_watch_parts_are_listed_not_guessed():
    report = judge(reading(0, 0, 0, throttle=None, temp=None), reading(10, 1, 1, throttle=None, temp=None), cpu_count=2)
    assert not report.disturbed
    assert any("throttling" in u for u in report.unknown) and any("temperature" in u for u in report.unknown)


def test_steal_time_is_a_disturbance():
    before = HostReading(0, CpuTimes(0, 0, 0), 0, 0, 0, 0, None)
    after = HostReading(10, CpuTimes(5, 4, 20), 5, 0, 0, 0, None)
    assert "hypervisor stole 20%" in judge(before, after, cpu_count=2).reasons[0]


def test_parse_proc_stat():
    from tunehost.bench.watch import parse_proc_stat

    cpu = parse_proc_stat("cpu  100 10 50 800 20 5 5 10 0 0\ncpu0 1 2 3 4\n", 100.0)
    assert cpu == CpuTimes(busy_s=1.6, steal_s=0.1, total_s=10.0)
    assert parse_proc_stat("garbage", 100.0) is None


# ---------------------------------------------------------------- flags


@pytest.mark.parametrize("flags, message", [
    ("-r 5", "-r is set by tunehost; use tunehost's --reps"),
    ("-o json", "tunehost reads llama-bench's JSONL itself"),
    ("-m other.gguf", "with tunehost's --model"),
    ("-p 128", "use tunehost's -p"),
    ("--bogus 1", "this llama-bench has no option --bogus"),
    ("-t 1,2", "asks for several values"),
    ("-t 1-4", "asks for several values"),
    ("-t 1 -t 2", "given twice"),
    ("-t", "-t needs a value"),
    ("4", "is not an option"),
])
def test_bad_flags_get_one_clear_error(flags, message):
    with pytest.raises(TunehostError) as raised:
        runner.check_flags(runner.parse_flags(flags), SUPPORTED, what="--candidate")
    assert message in str(raised.value) and str(raised.value).startswith("--candidate:")


def test_good_flags_pass_including_several_overrides_and_negative_values():
    # llama-bench joins the overrides of one run with ';' (a ',' would start a second configuration)
    runner.check_flags(runner.parse_flags('-t 2 -fa on -ngl -1 -ot "blk\\.0\\.ffn=CPU;blk\\.1\\.ffn=CPU" --no-warmup'),
                       SUPPORTED, what="--baseline")


@pytest.mark.parametrize("flags, hint", [
    ('-ot "blk\\.0\\.ffn=CPU,blk\\.1\\.ffn=CPU"', "separates the parts of one -ot value with ';')"),
    ("-ts 3,1", "separates the parts of one -ts value with '/')"),
    ("-t 2,4", "put the other in --candidate)"),
])
def test_commas_are_several_llama_bench_runs_and_are_refused(flags, hint):
    with pytest.raises(TunehostError, match="asks for several values") as raised:
        runner.check_flags(runner.parse_flags(flags), SUPPORTED | {"-ts"}, what="--candidate")
    assert str(raised.value).endswith(hint)


def test_plan_overrides_and_tensor_split_use_llama_bench_separators():
    plan = _launch([("-ngl", "99"), ("-ts", "3,1"), ("-ot", r"blk\.0\.ffn_up_exps=CPU,blk\.1\.ffn_up_exps=CPU")])
    flags = runner.bench_flags(plan, SUPPORTED | {"-ts"}).flags
    assert flags == ("-ngl", "99", "-ts", "3/1", "-ot", r"blk\.0\.ffn_up_exps=CPU;blk\.1\.ffn_up_exps=CPU")
    runner.check_flags(flags, SUPPORTED | {"-ts"}, what="--advised")


def test_unbalanced_quotes_are_an_error():
    with pytest.raises(TunehostError, match="cannot be split"):
        runner.parse_flags('-t "2', what="--baseline")


def test_bench_args_and_command_line():
    s = BenchSettings(model="/m/x.gguf", n_prompt=512, n_gen=128, depth=4096, reps=3)
    args = runner.bench_args(s, ("-t", "8"))
    assert args == ["-m", "/m/x.gguf", "-p", "512", "-n", "128", "-d", "4096", "-r", "3", "-t", "8", "--progress"]
    assert runner.command_line("/bin/llama-bench", args).endswith("-t 8 --progress -o jsonl")


# ---------------------------------------------------------------- --advised mapping


def _launch(flags, pin=None) -> LaunchConfig:
    """advise's launch configuration with these llama-server flags (Plan.launch() gives bench the same type)."""
    return LaunchConfig(model="x.gguf", flags=flags_from(flags), pin_cpus=pin)


def test_plan_flags_map_to_llama_bench_spellings():
    plan = _launch([("-m", "x.gguf"), ("-c", "32768"), ("-np", "1"), ("-ngl", "99"), ("--n-cpu-moe", "12"),
                  ("-fa", "on"), ("-ctk", "q8_0"), ("-ctv", "q8_0"), ("-b", "2048"), ("-ub", "512"), ("-t", "8"),
                  ("-tb", "8"), ("--prio", "2"), ("--no-mmap", None), ("--mlock", None), ("--host", "127.0.0.1")],
                 pin=(0, 2, 4, 6))
    mapped = runner.bench_flags(plan, SUPPORTED)
    flags = mapped.flags
    assert mapped.cpus == (0, 2, 4, 6)
    assert flags == ("-ngl", "99", "-ncmoe", "12", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0", "-b", "2048",
                     "-ub", "512", "-t", "8", "--prio", "2", "-C", "0x55", "--cpu-strict", "1", "-lm", "mlock")
    runner.check_flags(flags, SUPPORTED, what="--advised")


def test_no_mmap_alone_is_load_mode_none_or_mmp_0_on_older_builds():
    plan = _launch([("--no-mmap", None)])
    assert runner.bench_flags(plan, SUPPORTED).flags == ("-lm", "none")
    assert runner.bench_flags(plan, frozenset({"-mmp", "-t"})).flags == ("-mmp", "0")
    assert runner.bench_flags(_launch([("--mlock", None)]), SUPPORTED).flags == ("-lm", "mmap+mlock")


def test_cpus_to_mask():
    from tunehost.cpulist import parse_cpu_list

    assert runner.cpus_to_mask(parse_cpu_list("0-3,8")) == "0x10f"
    with pytest.raises(TunehostError, match="an empty CPU set"):
        runner.cpus_to_mask(())


# ---------------------------------------------------------------- measure() around the engine


def test_measure_checks_model_and_flags_before_running(tmp_path: Path):
    calls = []
    hooks = runner.MeasureHooks(invoke=lambda a, cb: calls.append(a) or [])

    def measure(model: Path) -> None:
        runner.measure(_settings(model), [BenchConfig("baseline")], HostFacts(None), hooks)

    with pytest.raises(TunehostError, match="absent.gguf: no such file"):
        measure(tmp_path / "absent.gguf")
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"nope")
    with pytest.raises(TunehostError, match="not a GGUF"):
        measure(not_gguf)
    cut_short = tmp_path / "cut.gguf"
    cut_short.write_bytes(write_tiny_gguf(tmp_path / "whole.gguf").read_bytes()[:-100])  # an interrupted download
    with pytest.raises(TunehostError, match="truncated"):
        measure(cut_short)
    assert calls == []


def _settings(model: Path, **fields) -> BenchSettings:
    """/bin/sh as llama-bench (the invoke is a fake), nothing read of a host: no summary, ceiling or watch."""
    return BenchSettings(model=str(model), llama_bench="/bin/sh", describe=False, ceiling=False, watch=False,
                         **fields)


def test_measure_with_a_fake_invoke_builds_a_complete_result(tmp_path: Path):
    model = write_tiny_gguf(tmp_path / "m.gguf")
    fake = FakeBench({"default": 100.0, "1": 50.0}, noise=(0.0, 0.01, -0.01))
    result = runner.measure(_settings(model, n_prompt=16, n_gen=8, label="before"),
                            [BenchConfig("baseline"), BenchConfig("candidate", ("-t", "1"))], HostFacts(None),
                            runner.MeasureHooks(invoke=fake))
    assert [c.name for c in result.configs] == ["baseline", "candidate"]
    assert result.configs[0].command.startswith("/bin/sh -m ")
    assert result.model["sha256_head"] and result.model["size_bytes"] == model.stat().st_size
    assert result.llama_bench["build_number"] == 11312
    assert result.comparison is not None and result.comparison.interleaved
    assert {r.kind: r.verdict for r in result.comparison.rows} == {"pp": "slower", "tg": "slower"}
    assert str(result).startswith("pp16 150.0 t/s")


# ---------------------------------------------------------------- the per-placement ceiling (issue 11)


def test_ceiling_follows_ngl_on_the_rtx3060_snapshot(tmp_path, monkeypatch):
    from tests.conftest import SNAPSHOTS, write_tiny_gguf
    from tunehost.probes import bandwidth
    from tunehost.bench.runner import tg_ceiling
    from tunehost.host import open_host

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    host = open_host(SNAPSHOTS / "desktop-12700f-rtx3060")
    probes = []
    monkeypatch.setattr(bandwidth, "measure_read_bandwidth",
                        lambda *a, **k: probes.append(1) or bandwidth.ReadBandwidth(31.0, (31.0,), 2, 1 << 20))
    on_gpu = tg_ceiling(model, ["-ngl", "99"], HostFacts(host))
    assert on_gpu["path"] == "gpu" and on_gpu["gpu_gbps"] == 360.0 and not probes   # no RAM probe needed
    on_cpu = tg_ceiling(model, ["-ngl", "0"], HostFacts(host))
    assert on_cpu["path"] == "cpu" and on_cpu["ram_measured_gbps"] == 31.0 and probes
    assert on_cpu["ram_dimm_gbps"] is not None   # the snapshot's dmidecode: the DIMMs' peak rides along
