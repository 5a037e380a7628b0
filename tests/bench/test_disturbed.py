"""The one notion of "this round was disturbed" (tunehost.bench.watch.reasons_for): judged for the CPUs the
configuration uses, per round in bench's engine, a round's calls combined, and waiting for quiet."""

from __future__ import annotations

import pytest

from tests.bench.test_runner import FakeBench, configs_ab, settings
from tests.tune.busy import LoadedBench, bursty, one_core, quiet
from tunehost.bench.runner import RoundsHooks, run_rounds
from tunehost.bench.watch import (
    CpuTimes, HostReading, HostWatcher, QuietRule, WatchReport, combine, cpus_used_by, judge, other_cpu_limit,
    reasons_for, rejudge, wait_for_quiet,
)


def report(other: float, *, cpus: int = 2, used: int | None = None, wall: float = 4.0, **kw) -> WatchReport:
    return rejudge(WatchReport(wall_s=wall, cpu_count=cpus, other_cpu_cores=other, steal_share=0.0, swap_in_pages=0,
                               swap_out_pages=0, throttle_delta=0, temp_before_c=None, temp_max_c=None,
                               temp_after_c=None, cpus_used=used, **kw))


def test_the_threshold_is_relative_to_the_cpus_the_configuration_uses():
    assert other_cpu_limit(2, 2) == pytest.approx(0.10) and other_cpu_limit(2, None) == pytest.approx(0.10)
    assert other_cpu_limit(16, 8) == pytest.approx(4.10)
    assert report(0.5, cpus=2, used=2).disturbed  # every CPU in use: half a core of other work disturbs
    assert not report(0.5, cpus=16, used=8).disturbed  # 8 idle CPUs take it
    assert report(5.0, cpus=16, used=8).disturbed
    assert "(the configuration uses 8)" in report(5.0, cpus=16, used=8).reasons[0]


def test_throttling_swapping_steal_and_gpu_reasons_are_the_same_judgement():
    base = report(0.0)
    assert not reasons_for(base)
    assert "throttled for heat 3 times" in reasons_for(rejudge(WatchReport(**{**base.__dict__, "throttle_delta": 3})))[0]
    assert "swapping" in reasons_for(WatchReport(**{**base.__dict__, "swap_in_pages": 300}))[0]
    assert "stole 10%" in reasons_for(WatchReport(**{**base.__dict__, "steal_share": 0.10}))[0]
    gpu = WatchReport(**{**base.__dict__, "gpu": {"reasons": ["GPU 0 throttled under load: HW slowdown"]}})
    assert reasons_for(gpu) == ("GPU 0 throttled under load: HW slowdown",)


@pytest.mark.parametrize("args, used", [
    (["-m", "m", "-t", "2"], 2), (["-t", "1,2"], 2), (["-t", "8"], 4), (["-t", "4", "-C", "0x3"], 2),
    (["-m", "m"], None), (["-t", "x"], None),
])
def test_cpus_used_by_a_llama_bench_call(args, used):
    assert cpus_used_by(args, 4) == used


def test_a_rounds_calls_are_combined_before_they_are_judged():
    # a short burst in one call of three is 0.6 cores there, but 0.15 of the round: still above 0.10
    calls = [report(0.0, used=2), report(0.6, used=2, wall=1.0), report(0.0, used=2)]
    combined = combine(calls)
    assert combined is not None and combined.wall_s == pytest.approx(9.0)
    assert combined.other_cpu_cores == pytest.approx(0.6 / 9.0) and not combined.disturbed
    assert combine([report(0.0, used=2), report(0.9, used=2)]).disturbed
    assert combine([]) is None


def test_bench_rounds_each_get_their_own_report(monkeypatch):
    from tunehost.bench import watch

    # a busy stretch in the middle of a bench run marks those rounds, not the others
    monkeypatch.setattr(watch, "read_cpu_temperature", lambda host: None)
    bench = FakeBench({"2": 100.0, "1": 50.0})

    def busy_cpu(t: float) -> float:  # one core busy between 4 s and 8 s (each call takes 1 s)
        return max(0.0, min(t, 8.0) - 4.0)

    def read(host=None) -> HostReading:
        t = bench.clock()
        return HostReading(at_s=t, cpu=CpuTimes(busy_cpu(t), 0.0, t * 2), own_cpu_s=0.0, swap_in=0, swap_out=0,
                           throttle_count=0, temperature=None)

    watcher = HostWatcher(None, cpu_count=2, read=read, gpu=False)  # type: ignore[arg-type]
    out = run_rounds(configs_ab(), settings(), RoundsHooks(bench, watcher=watcher, clock=bench.clock))
    assert len(out.round_watch) == out.rounds
    marks = [w.disturbed for w in out.round_watch]
    assert any(marks) and not all(marks)
    assert all(w.cpus_used == 2 for w in out.round_watch)  # -t 2 vs -t 1: judged for the busier one
    assert out.watch is not None and out.watch.disturbed  # the whole run was disturbed too


@pytest.mark.parametrize("load, quiet_after", [(quiet, True), (one_core, False), (bursty, False)])
def test_waiting_for_quiet_needs_two_quiet_windows_in_a_row(load, quiet_after):
    sim = LoadedBench(load)
    waited = wait_for_quiet(sim.reading, QuietRule(cpu_count=2), 60.0, clock=sim.clock, sleep=sim.advance)
    assert waited.quiet is quiet_after
    if quiet_after:
        assert waited.waited_s == pytest.approx(4.0)
    else:
        assert 56.0 <= waited.waited_s <= 60.0 and "other processes used" in (waited.reason or "")


def test_judge_keeps_the_raw_facts_a_newer_judgement_needs():
    before = HostReading(0.0, CpuTimes(0.0, 0.0, 0.0), 0.0, 0, 0, 0, None)
    after = HostReading(10.0, CpuTimes(5.0, 0.0, 20.0), 0.0, 0, 0, 0, None)
    wide = judge(before, after, cpu_count=16, cpus_used=4)
    assert wide.other_cpu_cores == pytest.approx(0.5) and wide.other_cpu_s == pytest.approx(5.0)
    assert not wide.disturbed and rejudge(wide, 16).disturbed
    assert WatchReport.from_json(wide.to_json()) == wide


def test_the_server_bench_keeps_a_watch_report_per_round_in_the_store(cli):
    from tests.bench.fake_server import FakeLlamaServer
    from tests.bench.test_server_bench import QUICK, run_cli
    from tunehost.store import open_store

    with FakeLlamaServer() as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--json")
    assert result.exit_code == 0, result.output
    with open_store() as store:
        (run,) = store.runs(command="server-bench")
        rounds = store.rounds(run.id)
    assert len(rounds) == run.summary["rounds"] and all(r.counted for r in rounds)
    assert all(r.watch.get("cpu_count") and "other_cpu_cores" in r.watch for r in rounds)
    assert isinstance(run.summary["disturbed"], bool)


def _bursty_run(monkeypatch, busy_cpu):
    from tunehost.bench import watch

    monkeypatch.setattr(watch, "read_cpu_temperature", lambda host: None)
    bench = FakeBench({"2": 100.0, "1": 50.0})

    def read(host=None) -> HostReading:
        t = bench.clock()
        return HostReading(at_s=t, cpu=CpuTimes(busy_cpu(t), 0.0, t * 2), own_cpu_s=0.0, swap_in=0, swap_out=0,
                           throttle_count=0, temperature=None)

    watcher = HostWatcher(None, cpu_count=2, read=read, gpu=False)  # type: ignore[arg-type]
    return run_rounds(configs_ab(), settings(), RoundsHooks(bench, watcher=watcher, clock=bench.clock))


def test_benchs_verdict_leaves_out_the_rounds_the_store_marks_disturbed(monkeypatch):
    from tunehost.bench.runner import Provenance, build_result

    # a burst in a few rounds: the whole run's average may pass, the rounds it hit are marked and left out
    out = _bursty_run(monkeypatch, lambda t: max(0.0, min(t, 8.0) - 4.0))
    marked = sum(w.disturbed for w in out.round_watch)
    assert 0 < marked < out.rounds
    result = build_result(out, settings(), Provenance("llama-bench", {}))
    comparison = result.comparison
    assert comparison is not None
    assert any(f"{marked} of {out.rounds} rounds disturbed" in n and "left out of the paired estimate" in n
               for n in comparison.notes)
    assert all(row.rounds == out.rounds - marked for row in comparison.rows)
    quiet_left = out.rounds - marked
    assert all((row.verdict == "disturbed") == (quiet_left < 5) for row in comparison.rows)
    assert all(row.verdict != "disturbed" or row.statistical_verdict for row in comparison.rows)


def test_benchs_verdict_is_disturbed_when_too_few_quiet_rounds_remain(monkeypatch):
    from tunehost.bench.runner import Provenance, build_result

    out = _bursty_run(monkeypatch, lambda t: t if t > 3.0 else 0.0)  # busy from 3 s on: nearly every round
    result = build_result(out, settings(), Provenance("llama-bench", {}))
    assert out.rounds - sum(w.disturbed for w in out.round_watch) < 5
    assert all(row.verdict == "disturbed" for row in result.comparison.rows)
    assert any("too few for a verdict" in n for n in result.comparison.notes)
