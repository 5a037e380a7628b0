"""The tune race against a simulated llama-bench: a clear winner wins, an A/A space names none, a crashing
candidate is dropped, a killed tune resumes from its journal."""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Sequence

import numpy as np
import pytest

from tunehost.bench.llama_bench import BenchResult
from tunehost.errors import TunehostError
from tunehost.bench.runner import bench_flags
from tunehost.launch import Flag, LaunchConfig
from tunehost.tune.race import Candidate, Knob, Measurer, Stage, TuneSettings, groups_of, race_stage, tune

# the busy 2-vCPU VM's noise (tests/bench/test_bench_simulation.py): invocation offset, repetition noise
BETWEEN, WITHIN = 0.067, 0.048


class FakeBench:
    """llama-bench with a speed per (option, value) and the VM's noise; several values per call supported.

    The rng is drawn per call number, so a resumed run that starts at call N draws what the killed one would have."""

    def __init__(self, speed: dict[tuple[str, str], float], *, seed: int = 0, start: int = 0,
                 crash: set[tuple[str, str]] = frozenset(), kill_after: int | None = None, level: float = 50.0):
        self.speed, self.seed, self.calls, self.crash, self.kill_after = speed, seed, start, crash, kill_after
        self.level = level
        self.now = 0.0
        self.invocations: list[list[str]] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, args: Sequence[str]) -> list[BenchResult]:
        if self.kill_after is not None and len(self.invocations) >= self.kill_after:
            raise KeyboardInterrupt  # the process dies here
        self.invocations.append(list(args))
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        reps = int(args[args.index("-r") + 1])
        multi = next((i for i, a in enumerate(args) if "," in a), None)
        values = args[multi].split(",") if multi is not None else [None]
        out = []
        for value in values:
            current = list(args)
            if multi is not None:
                current[multi] = value
            pairs = {(current[i], current[i + 1]) for i in range(len(current) - 1)}
            if pairs & self.crash:
                raise TunehostError("llama-bench failed (killed by SIGSEGV): ggml_abort")
            scale = math.prod(self.speed.get(p, 1.0) for p in pairs)
            self.now += 1.0 + 0.5 * reps
            offset = rng.standard_normal() * BETWEEN
            samples = tuple(self.level * scale * math.exp(offset + z * WITHIN) for z in rng.standard_normal(reps))
            out.append(BenchResult(test="tg16", n_prompt=0, n_gen=16, n_depth=0, avg_ts=sum(samples) / reps,
                                   stddev_ts=0.0, samples_ts=samples))
        return out


class MemoryJournal:
    def __init__(self):
        self.rows: dict[int, tuple[list[str], float, object]] = {}

    def steps(self):
        return [(seq, argv, d, o) for seq, (argv, d, o) in sorted(self.rows.items())]

    def add(self, seq, argv, duration_s, outcome):
        self.rows[seq] = (list(argv), duration_s, outcome)


def cand(label: str, **flags: str) -> Candidate:
    launch = LaunchConfig(model="m.gguf", flags=tuple(Flag(f"-{k}", v) for k, v in flags.items()))
    return Candidate(label, launch, bench_flags(launch).flags)


PLAN = cand("plan", t="2", ub="512")


def threads_knob(values=("1", "3")) -> Knob:
    return Knob("threads", lambda inc: [Candidate(f"-t {v}", inc.launch.with_flag("-t", v),
                                                  bench_flags(inc.launch.with_flag("-t", v)).flags)
                                        for v in values if v != inc.launch.value("-t")], uses_cpus=True)


def ubatch_knob(values=("128", "256", "1024")) -> Knob:
    return Knob("ubatch", lambda inc: [Candidate(f"-ub {v}", inc.launch.with_flag("-ub", v),
                                                 bench_flags(inc.launch.with_flag("-ub", v)).flags)
                                       for v in values if v != inc.launch.value("-ub")])


SETTINGS = TuneSettings(model="m.gguf", n_gen=16, reps=3, budget_s=2000.0, objective="tg")


def run(fake: FakeBench, knobs, journal=None, settings=SETTINGS):
    return tune(PLAN, knobs, Measurer(fake, journal, clock=fake.clock), settings)


def test_one_llama_bench_call_measures_every_value_of_one_option():
    arms = [PLAN, cand("-t 1", t="1", ub="512"), cand("-t 3", t="3", ub="512")]
    (group,) = groups_of(arms)
    assert group.args(False) == ["-t", "2,1,3", "-ub", "512"] and group.args(True) == ["-t", "3,1,2", "-ub", "512"]
    assert len(groups_of([PLAN, cand("x", t="1", ub="256")])) == 2  # two options differ: one call each


def test_a_clearly_better_candidate_wins_and_is_confirmed():
    fake = FakeBench({("-t", "3"): 1.25}, seed=1)
    outcome = run(fake, [threads_knob(), ubatch_knob()])
    assert outcome.winner.launch.value("-t") == "3" and outcome.improved
    assert outcome.confirmation is not None and outcome.confirmation.verdict == "faster"
    assert 1.15 < outcome.confirmation.ratio < 1.35 and outcome.confirmation.low > 1.02
    assert outcome.spent_s <= SETTINGS.budget_s


@pytest.mark.parametrize("seed", range(40))
def test_an_aa_space_names_no_winner(seed):
    fake = FakeBench({}, seed=100 + seed)  # no option changes anything
    outcome = run(fake, [threads_knob(), ubatch_knob()], settings=SETTINGS)
    assert not outcome.improved and outcome.winner == PLAN


def test_a_crashing_candidate_is_dropped_with_its_reason_and_the_race_goes_on():
    fake = FakeBench({("-ub", "256"): 1.3}, seed=3, crash={("-ub", "1024")})
    outcome = run(fake, [ubatch_knob()])
    stage = outcome.stages[0]
    assert ("-ub 1024", "llama-bench failed (killed by SIGSEGV): ggml_abort") in stage.dropped
    assert outcome.winner.launch.value("-ub") == "256"


def test_the_plan_itself_crashing_is_one_clear_error():
    fake = FakeBench({}, crash={("-t", "2")})
    with pytest.raises(TunehostError, match="fails in llama-bench"):
        run(fake, [threads_knob()])


def test_a_budget_too_short_for_one_verdict_is_refused_after_one_call():
    fake = FakeBench({})
    with pytest.raises(TunehostError, match="--budget 20 s is too short"):
        run(fake, [threads_knob()], settings=TuneSettings(model="m.gguf", n_gen=16, budget_s=20.0))
    assert len(fake.invocations) == 1


def test_a_killed_tune_resumes_from_its_journal_and_measures_only_the_rest():
    speed = {("-t", "3"): 1.2}
    whole = run(FakeBench(speed, seed=7), [threads_knob(), ubatch_knob()])
    journal = MemoryJournal()
    killed = FakeBench(speed, seed=7, kill_after=25)
    with pytest.raises(KeyboardInterrupt):
        run(killed, [threads_knob(), ubatch_knob()], journal)
    assert len(journal.rows) == 26  # 25 llama-bench runs and the wait for quiet before them
    resumed_bench = FakeBench(speed, seed=7, start=25)
    resumed = run(resumed_bench, [threads_knob(), ubatch_knob()], journal)
    assert resumed.reused_steps == 25 and resumed.steps == whole.steps
    assert len(resumed_bench.invocations) == whole.steps - 25
    assert resumed.winner == whole.winner and resumed.confirmation == whole.confirmation
    assert math.isclose(resumed.spent_s, whole.spent_s)


def test_a_stage_with_one_arm_measures_nothing():
    fake = FakeBench({})
    outcome = race_stage(Stage("x", PLAN, (PLAN,), Measurer(fake, clock=fake.clock), SETTINGS, end_s=100))
    assert outcome.winner == PLAN and outcome.rounds == 0 and fake.invocations == []


def test_a_winner_from_one_stage_against_the_plan_keeps_that_interval_and_a_multi_stage_one_is_confirmed():
    one = run(FakeBench({("-t", "3"): 1.25}, seed=1), [threads_knob(), ubatch_knob()])
    assert [s.knob for s in one.stages] == ["threads", "ubatch"] and one.confirmation == one.stages[0].comparison
    two = run(FakeBench({("-t", "3"): 1.25, ("-ub", "256"): 1.25}, seed=2), [threads_knob(), ubatch_knob()])
    assert two.stages[-1].knob == "confirmation" and two.winner.args == cand("w", t="3", ub="256").args
    assert two.confirmation.verdict == "faster" and two.confirmation.ratio > 1.3


def test_a_knob_that_cannot_change_the_objective_is_skipped_with_its_reason_and_costs_nothing():
    fake = FakeBench({("-ub", "128"): 1.5}, seed=3)  # would win, but it is declared unable to change TG
    blocked = Knob("ubatch", ubatch_knob().variants, not_searched="decodes one token at a time")
    outcome = run(fake, [blocked, threads_knob()])
    assert ("ubatch", "decodes one token at a time") in outcome.skipped
    assert [s.knob for s in outcome.stages] == ["threads"] and outcome.winner == PLAN


def test_knobs_with_nothing_to_try_take_no_share_of_the_budget():
    empty = [Knob(f"empty {i}", lambda inc: []) for i in range(5)]
    settings = replace(SETTINGS, budget_s=300.0)

    def rounds(knobs):
        fake = FakeBench({("-t", "3"): 1.015}, seed=4)  # too close to 2 % to decide: the stage runs to its share
        outcome = tune(PLAN, knobs, Measurer(fake, None, clock=fake.clock), settings)
        return next(s.rounds for s in outcome.stages if s.knob == "threads")

    alone = rounds([threads_knob(("3",))])
    assert alone >= 10 and rounds([threads_knob(("3",)), *empty]) == alone
