"""tune on a busy host, against a llama-bench whose speed depends on a simulated background load (tests/tune/busy.py):
while the load holds one of the 2 CPUs, -t 1 "wins" by far; on the quiet host -t 2 is faster. A winner is never
declared from disturbed rounds: the race waits for quiet or stops; --allow-busy crowns, and says so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.advise.conftest import dense_tensors, write_gguf
from tests.tune.busy import LoadedBench, bursty, one_core, quiet
from tests.tune.test_race import MemoryJournal, cand, threads_knob, ubatch_knob
from tests.tune.test_tune_cli import SUPPORTED
from tunehost.advise.host_view import HostView
from tunehost.bench import runner
from tunehost.tune.race import WAIT_STEP, Measurer, TuneSettings, tune

GiB = 1024 ** 3

PLAN = cand("plan", t="2", ub="512")
SETTINGS = TuneSettings(model="m.gguf", n_gen=16, reps=3, budget_s=600.0, objective="tg")


def run(bench: LoadedBench, settings: TuneSettings = SETTINGS, knobs=None, journal=None):
    measurer = Measurer(bench, journal, clock=bench.clock, watch=bench.watch())
    return tune(PLAN, knobs or [threads_knob(("1",))], measurer, settings)


def test_the_simulation_makes_one_thread_win_only_under_load():
    # the premise: without the watch (as tune was), a held core crowns -t 1 by a wide margin
    loaded = tune(PLAN, [threads_knob(("1",))], Measurer(LoadedBench(one_core, seed=1), clock=lambda: 0.0), SETTINGS)
    assert loaded.winner.label == "-t 1" and loaded.confirmation.ratio > 1.5
    calm = tune(PLAN, [threads_knob(("1",))], Measurer(LoadedBench(quiet, seed=1), clock=lambda: 0.0), SETTINGS)
    assert calm.winner == PLAN


@pytest.mark.parametrize("seed", range(5))
def test_a_core_held_throughout_stops_the_tune_before_it_measures(seed):
    bench = LoadedBench(one_core, seed=seed)
    outcome = run(bench)
    assert outcome.winner == PLAN and not outcome.improved
    assert outcome.stopped is not None and "busy" in outcome.stopped and "other processes used 1.00 of 2" in outcome.stopped
    assert outcome.disturbed and not bench.invocations  # refused before any llama-bench run
    assert outcome.waited_s == pytest.approx(SETTINGS.budget_s * SETTINGS.quiet_wait_share, abs=2.5)
    assert outcome.spent_s <= SETTINGS.budget_s


@pytest.mark.parametrize("seed", range(5))
def test_a_load_that_starts_mid_race_discards_the_rounds_and_never_crowns_one_thread(seed):
    bench = LoadedBench(lambda t: 1.0 if t > 20.0 else 0.0, seed=seed)
    outcome = run(bench)
    assert outcome.winner.label != "-t 1"
    assert outcome.discarded_rounds >= SETTINGS.busy_streak and outcome.disturbed_rounds == 0
    assert outcome.stopped is not None and "stayed busy" in outcome.stopped
    assert all(not m.counted for m in outcome.marks if m.disturbed)  # no disturbed round entered an interval
    assert any(m.counted and not m.disturbed for m in outcome.marks)
    assert outcome.spent_s <= SETTINGS.budget_s + 1.0


@pytest.mark.parametrize("seed", range(5))
def test_a_bursty_load_never_crowns_one_thread(seed):
    bench = LoadedBench(bursty, seed=seed)
    outcome = run(bench)
    assert outcome.winner.label != "-t 1"
    assert outcome.stopped is not None  # 2 s on / 3 s off is never quiet for 4 s in a row


def test_a_load_that_goes_away_is_waited_out_and_the_quiet_ranking_wins():
    bench = LoadedBench(lambda t: 1.0 if t < 60.0 else 0.0, seed=3)
    outcome = run(bench)
    assert outcome.stopped is None and not outcome.disturbed
    assert outcome.winner == PLAN  # -t 2 is the faster on the quiet host: nothing beats the plan
    assert 60.0 <= outcome.waited_s <= 70.0
    assert outcome.stages[0].dropped and outcome.stages[0].dropped[0][0] == "-t 1"


def test_a_load_that_comes_and_goes_mid_race_is_discarded_and_waited_out():
    bench = LoadedBench(lambda t: 1.0 if 20.0 < t < 80.0 else 0.0, seed=4)
    outcome = run(bench)
    assert outcome.stopped is None and outcome.winner == PLAN
    assert outcome.discarded_rounds >= 1 and outcome.waited_s > 0
    assert all(m.counted != m.disturbed for m in outcome.marks)


def test_allow_busy_crowns_under_the_load_and_says_how_many_rounds_were_disturbed():
    bench = LoadedBench(one_core, seed=2)
    outcome = run(bench, TuneSettings(model="m.gguf", n_gen=16, reps=3, budget_s=600.0, objective="tg",
                                      allow_busy=True))
    assert outcome.winner.label == "-t 1" and outcome.allow_busy and outcome.disturbed
    assert outcome.disturbed_rounds == sum(1 for m in outcome.marks if m.counted) > 0
    assert outcome.waited_s == 0.0 and outcome.stopped is None


def test_a_killed_busy_tune_replays_its_waits_and_decides_the_same():
    journal = MemoryJournal()
    load = lambda t: 1.0 if 20.0 < t < 80.0 else 0.0  # noqa: E731
    first = run(LoadedBench(load, seed=4), journal=journal)
    assert any(argv[0] == WAIT_STEP for argv, _, _ in journal.rows.values())
    replay = Measurer(LoadedBench(load, seed=4), journal, clock=lambda: 0.0, watch=None)
    again = tune(PLAN, [threads_knob(("1",))], replay, SETTINGS)
    assert again.winner == first.winner and again.spent_s == pytest.approx(first.spent_s)
    assert [m.counted for m in again.marks] == [m.counted for m in first.marks]
    assert replay.reused_steps == replay.calls  # nothing measured again


def test_unused_budget_goes_to_the_undecided_stages():
    # an A/A space: every stage stops "budget" undecided in its share; the confirmation's reserve is not needed
    bench = LoadedBench(quiet, seed=7, threads_speed={1: 1.0, 2: 1.0, 3: 1.0})
    settings = TuneSettings(model="m.gguf", n_gen=16, reps=3, budget_s=240.0, objective="tg")
    outcome = run(bench, settings, knobs=[threads_knob(("1", "3")), ubatch_knob(("256",))])
    assert outcome.winner == PLAN and outcome.confirmation is None
    # before: the search stopped at (1 - confirm_share) of the budget and handed nothing back
    assert outcome.spent_s > settings.budget_s * (1.0 - settings.confirm_share) + 10.0
    assert outcome.spent_s <= settings.budget_s


# ---------------------------------------------------------------- through the CLI and the store

HOST2 = HostView(online_cpus=(0, 1), cores=((0,), (1,)), pin_cpus=(0, 1), performance_cores=2, threads=2, smt=False,
                 hybrid=False, ram_total=16 * GiB, ram_available=12 * GiB, memlock_unlimited=True, numa_nodes=1)


@pytest.fixture
def model(tmp_path) -> Path:
    return write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)


@pytest.fixture
def loaded(monkeypatch, tmp_path):
    """`tunehost tune` on a simulated 2-CPU host: llama-bench and the host watch are a LoadedBench."""
    from tunehost import store
    from tunehost.bench import llama_bench
    from tunehost.ops import tune as tune_op

    binary = tmp_path / "llama-bench"
    binary.write_text("#!/bin/sh\n")
    state = {"bench": LoadedBench(one_core, seed=5)}
    monkeypatch.setattr(runner, "resolve_binary", lambda explicit: binary)
    monkeypatch.setattr(runner, "_supported", lambda b: SUPPORTED)
    monkeypatch.setattr(runner, "tg_ceiling", lambda *a, **k: {"error": "not measured in tests"})
    monkeypatch.setattr(llama_bench, "run_llama_bench", lambda b, args, timeout: state["bench"](args))
    monkeypatch.setattr(store.records, "host_identity", lambda host=None: ({"cpu": "Test CPU", "kernel": "6.8"}, "fp"))

    def plan_here(path, ctx, facts):
        from tunehost.advise.plan import AdviseOptions, plan
        from tunehost.model import read_model

        facts = read_model(path)
        return plan(facts, HOST2, AdviseOptions(model_path=path, ctx=ctx or 512)), HOST2, facts

    monkeypatch.setattr(tune_op, "_plan", plan_here)
    monkeypatch.setattr(tune_op, "CLOCK", lambda: state["bench"].now)
    monkeypatch.setattr(tune_op, "race_watch", lambda host: state["bench"].watch())
    return state


def stored_tune(cli) -> dict:
    (run,) = json.loads(cli("history", "--json").stdout)["runs"]
    return run


def test_a_busy_host_stops_the_tune_exit_75_and_the_store_says_disturbed(cli, model, loaded):
    result = cli("tune", "--model", str(model), "--budget", "4m", "-n", "16")
    assert result.exit_code == 75, result.output
    assert "no winner: the host stayed busy (other processes used 1.00 of 2 CPUs" in result.stdout
    assert "--allow-busy" in result.stdout and "llama-server" not in result.stdout
    assert "waiting for a quiet host" in result.stderr  # a plain progress line: stderr is not a terminal here
    run = stored_tune(cli)
    assert run["summary"]["disturbed"] is True and run["summary"]["stopped"].startswith("the host stayed busy")
    assert run["summary"]["improved"] is False and not loaded["bench"].invocations


def test_a_load_mid_tune_is_discarded_round_by_round_and_marked_in_the_store(cli, model, loaded):
    from tunehost.store import open_store

    loaded["bench"] = LoadedBench(lambda t: 1.0 if 20.0 < t < 70.0 else 0.0, seed=5)
    result = cli("tune", "--model", str(model), "--budget", "10m", "-n", "16")
    assert result.exit_code == 0, result.output
    assert "-t 1" not in result.stdout.split("\n\n")[-2]  # the headline: nothing crowned from the load
    assert "disturbed rounds discarded" in result.stdout or "disturbed round discarded" in result.stdout
    run = stored_tune(cli)
    assert run["summary"]["disturbed"] is False and run["summary"]["discarded_rounds"] >= 1
    with open_store() as store:
        rounds = store.rounds(run["id"])
    assert rounds and any(r.disturbed and not r.counted for r in rounds)
    assert all(r.counted for r in rounds if not r.disturbed)
    assert any("other processes used" in reason for r in rounds for reason in r.reasons)
    assert {r.stage for r in rounds} >= {"threads"}
    assert [x["disturbed"] for x in run["rounds"]] == [r.disturbed for r in rounds]  # history --json shows them


def test_allow_busy_crowns_and_says_the_winner_holds_only_under_that_load(cli, model, loaded):
    result = cli("tune", "--model", str(model), "--budget", "10m", "-n", "16", "--allow-busy")
    assert result.exit_code == 0, result.output
    headline = " ".join(result.stdout.split())
    assert "-t 1: +" in headline and "UNDER BACKGROUND LOAD" in headline
    assert "this winner holds only under that load" in headline
    run = stored_tune(cli)
    assert run["summary"]["allow_busy"] is True and run["summary"]["disturbed"] is True
    assert run["summary"]["disturbed_rounds"] > 0 and "ceiling" not in run["summary"]


def test_piped_progress_prints_a_plain_line_per_stage_and_round_batch(cli, model, loaded):
    loaded["bench"] = LoadedBench(quiet, seed=5)
    result = cli("tune", "--model", str(model), "--budget", "10m", "-n", "16")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("tune: ")]
    assert any("threads" in line and "racing" in line for line in lines)
    assert any(": round 5, " in line for line in lines)
    assert all(len(line) <= 160 and "\x1b" not in line for line in lines)


def test_on_an_smt_desktop_a_small_load_is_judged_as_if_every_cpu_were_used_in_the_threads_stage():
    # a browser's 0.4 cores on 16 logical CPUs: -t 8 leaves 8 idle, but on an 8-core/16-thread box they are the
    # SMT siblings of llama's cores, exactly where a load makes fewer threads win: not tolerated for thread counts
    bench = LoadedBench(lambda t: 0.4, cpus=16, seed=1, threads_speed={8: 1.0, 16: 1.1})
    plan = cand("plan", t="8", ub="512")
    measurer = Measurer(bench, clock=bench.clock, watch=bench.watch())
    outcome = tune(plan, [threads_knob(("16",))], measurer, SETTINGS)
    assert outcome.stopped is not None and "0.40 of 16 CPUs" in outcome.stopped and not bench.invocations
    assert not outcome.has_result and outcome.winner == plan
    # a stage that races no thread count or CPU set still tolerates it (the configuration leaves CPUs idle)
    bench = LoadedBench(lambda t: 0.4, cpus=16, seed=1, threads_speed={8: 1.0})
    measurer = Measurer(bench, clock=bench.clock, watch=bench.watch())
    outcome = tune(plan, [ubatch_knob(("256",))], measurer, SETTINGS)
    assert outcome.stopped is None and outcome.discarded_rounds == 0 and bench.invocations


def test_challengers_dropped_for_load_mark_the_outcome_disturbed_and_the_headline_says_so():
    from tunehost.formats.tune_report import headline
    from tunehost.ops.tune import tune_summary

    # the load comes mid-race: -t 16 cannot be raced under it, -t 8 (the plan) stays; that is no quiet result
    bench = LoadedBench(lambda t: 0.4 if t > 40.0 else 0.0, cpus=16, seed=1, threads_speed={8: 1.0, 16: 1.0})
    plan = cand("plan", t="8", ub="512")
    measurer = Measurer(bench, clock=bench.clock, watch=bench.watch())
    outcome = tune(plan, [threads_knob(("16",))], measurer, SETTINGS)
    assert outcome.stopped is None and outcome.winner == plan
    assert outcome.load_dropped == ("-t 16",) and outcome.disturbed  # never a quiet result, never a reference
    text = headline(outcome, "tg")
    assert "already the fastest" not in text and "not raced under that load: -t 16" in text
    summary = tune_summary(outcome, None)
    assert summary["disturbed"] is True and summary["load_dropped"] == ["-t 16"]


def test_the_confirmation_never_drops_the_searchs_best_for_load():
    from tunehost.tune.race import Stage, race_stage

    # the best uses more CPUs than the plan; a load comes during the confirmation: it waits, then stops
    bench = LoadedBench(lambda t: 0.4 if t > 40.0 else 0.0, cpus=16, seed=1, threads_speed={8: 1.0, 16: 1.0})
    plan = cand("plan", t="8", ub="512")
    best = cand("best", t="16", ub="256")
    measurer = Measurer(bench, clock=bench.clock, watch=bench.watch())
    stage = race_stage(Stage("confirmation", plan, (best,), measurer, SETTINGS, end_s=SETTINGS.budget_s))
    assert stage.stop_reason == "host busy" and not stage.dropped and not stage.load_dropped
    assert stage.winner == plan and stage.busy and "waited" in stage.busy


def test_a_long_wait_is_not_blamed_on_the_budget():
    # reps 9: a round takes ~15 s, a verdict ~107 s of the 120 s budget; the load holds a core for the first 55 s
    settings = TuneSettings(model="m.gguf", n_gen=16, reps=9, budget_s=120.0, objective="tg")
    bench = LoadedBench(lambda t: 1.0 if t < 55.0 else 0.0, seed=2)
    outcome = run(bench, settings)  # before: TunehostError "--budget 120 s is too short ... give --budget 2m"
    assert outcome.stopped is not None and outcome.stopped.startswith("waiting for quiet took")
    assert not outcome.has_result and outcome.waited_s >= 55.0
    # without the wait the same budget is enough: the budget was not the problem
    assert run(LoadedBench(quiet, seed=2), settings).stopped is None


def test_stages_not_searched_are_named_and_the_plan_is_not_called_the_fastest():
    from tunehost.formats.tune_report import headline
    from tunehost.tune.race import TuneOutcome

    plan = PLAN
    outcome = TuneOutcome(plan, plan, plan, None, (), (("ubatch", "no budget left for it"),), 100.0, 120.0, 3, 0, 0.0,
                          waited_s=60.0, not_searched=(("ubatch", "no budget left for it"),))
    text = headline(outcome, "tg")
    assert outcome.has_result and "already the fastest" not in text
    assert text.startswith("advise's plan stands") and "not searched: ubatch (no budget left for it)" in text


def test_a_load_after_a_quiet_stage_keeps_the_result_exit_0_and_names_what_was_not_searched():
    from tunehost.formats.tune_report import headline

    bench = LoadedBench(quiet, seed=3)
    measure = bench.__call__

    class Switch:  # the load comes with the first ubatch run
        def __call__(self, args):
            if "-ub" in args and "256" in args[args.index("-ub") + 1]:
                bench.load = one_core
            return measure(args)

    measurer = Measurer(Switch(), clock=bench.clock, watch=bench.watch())
    outcome = tune(PLAN, [threads_knob(("1",)), ubatch_knob(("256",))], measurer, SETTINGS)
    assert outcome.stopped is not None and outcome.winner == PLAN
    assert outcome.has_result  # the threads stage ran on a quiet host: the plan kept is a result
    assert ("ubatch", "the host stayed busy") in outcome.not_searched
    text = headline(outcome, "tg")
    assert text.startswith("advise's plan stands") and "not searched: ubatch" in text and "stopped" in text


@pytest.mark.parametrize("duration", [-1e9, float("nan"), float("inf"), 1e12, "x"])
def test_a_replayed_step_whose_duration_is_not_sane_is_a_journal_mismatch(duration):
    journal = MemoryJournal()
    first = run(LoadedBench(quiet, seed=4), journal=journal)
    seq = max(seq for seq, (argv, _, _) in journal.rows.items() if argv[0] != WAIT_STEP)
    argv, _, outcome = journal.rows[seq]
    journal.rows[seq] = (argv, duration, outcome)
    bench = LoadedBench(quiet, seed=4)
    replay = Measurer(bench, journal, clock=bench.clock, watch=bench.watch(), budget_s=SETTINGS.budget_s)
    again = tune(PLAN, [threads_knob(("1",))], replay, SETTINGS)
    assert replay.journal_note is not None and "measuring afresh" in replay.journal_note
    assert replay.reused_steps < replay.calls and bench.invocations  # the bad step was measured again
    assert math.isfinite(again.spent_s) and 0.0 <= again.spent_s <= SETTINGS.budget_s + 1.0
    assert again.winner == first.winner


def test_a_malformed_watch_in_the_journal_is_an_unwatched_call():
    from tunehost.tune.race import Measurer as M

    assert M._judged(["-t", "2"], {"wall_s": "x", "busiest_others": ["not a dict"]}) is None
    assert M._judged(["-t", "2"], ["not", "a", "mapping"]) is None
    judged = M._judged(["-t", "1"], {"wall_s": 4.0, "cpu_count": 2, "other_cpu_cores": 0.4})
    assert judged is not None and judged.cpus_used == 1 and not judged.disturbed  # 0.4 < 0.10 + half a spare CPU
