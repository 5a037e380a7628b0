"""The tune race: candidates measured in paired rounds against the incumbent; losers dropped beyond the noise.

**Which race.** Successive elimination (Even-Dar, Mannor & Mansour 2006, "Action elimination and stopping
conditions for the multi-armed bandit and reinforcement learning problems", JMLR 7:1079; the "racing" of Maron &
Moore 1997, "The racing algorithm", Artificial Intelligence Review 11:193) with the bench engine's anytime-valid
confidence sequences (:mod:`tunehost.bench.stats`, Lai 1976 / Howard et al. 2021) in place of Hoeffding bounds:

- every round runs every arm still in the race once (back to back, the order reversed every other round: the
  bench engine's interleaving); each round gives one paired log ratio per pair of arms;
- every pairwise interval is a confidence sequence at level ``1 - alpha / P`` (Bonferroni over the P pairs of the
  stage's arms), so ALL of them hold at every round at once with probability at least ``1 - alpha``, whatever
  rule stops the race (budget, "decided");
- from :data:`~tunehost.bench.stats.MIN_ROUNDS` rounds on, an arm is dropped when its interval against the
  incumbent lies below ``1 + threshold`` (it cannot win by the 2 % that would make it worth changing), or its
  interval against the current leader lies wholly below 1 (worse than the leader beyond the noise);
- a challenger wins the stage only when its interval against the incumbent lies wholly above ``1 + threshold``
  (the bench engine's "faster"); else the incumbent stays. With all intervals valid at once, the chance that a
  stage names a winner that is not really >2 % faster (A/A: any winner) is at most alpha.

Stages search one knob each (threads, CPU set, -ub, KV types, flash attention, mmap, repack, offload, priority:
:mod:`tunehost.tune.space`); the stage's winner is the next stage's incumbent. When the final configuration
won a stage raced against advise's plan itself, that stage's interval is the result: it holds simultaneously with
every other interval of the stage, so selecting the arm does not void it. When it is the product of several
stages (never compared with the plan as a whole), a fresh paired race of it against the plan (two arms,
alpha = 0.05, the engine's stopping rule) measures the reported interval, and that confirmation, not the search,
decides "faster than advise's plan".

**A busy host.** Interleaving cancels a steady load's effect on a *comparison*, not a load that changes *which*
configuration wins (fewer threads win while another process holds a core). So every llama-bench call is watched
(:mod:`tunehost.bench.watch`: the CPU time other processes took, steal, swapping, throttle counters, the GPUs'
throttle reasons) and a round is judged by the same :func:`~tunehost.bench.watch.reasons_for` bench uses, for
the CPUs the round's configurations keep busy. A disturbed round is discarded (its values never enter an
interval) and run again; after :attr:`TuneSettings.busy_streak` disturbed rounds in a row the race waits for
quiet (:func:`~tunehost.bench.watch.wait_for_quiet`). Challengers that keep more CPUs busy than the incumbent
(``-t 16`` against ``-t 8``) are the first a load disturbs: when quiet does not come within a quarter of the stage's
time left, they leave the race ("not raced under that load") and the rest goes on, judged for the CPUs they use;
otherwise it waits until the budget's end, and stops (``stopped``) when quiet does not come: no winner is ever
declared from disturbed rounds. Before the first call it waits for quiet too.
``allow_busy`` counts disturbed rounds instead, and the outcome says how many (the winner holds under that
load only). The waits are journaled steps and count on the budget clock.

**The budget.** Each stage gets an equal share of what is left of the search's part (the rest is the
confirmation's reserve). When the search is over and no confirmation is needed (nothing won, or the winner was
raced against the plan itself), the reserve and whatever the stages left are handed back: the undecided stages
("kept (budget)") are resumed where they stopped, their intervals being anytime-valid.

Every llama-bench call goes through :class:`Measurer`, which keeps a journal (the results store's
``tune_steps``): a tune killed halfway replays the stored calls in order (the race is deterministic given its
measurements) and measures only what is missing. The budget clock is the sum of the calls' durations, so a
replayed tune makes the same decisions as the one that was killed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.watch import QUIET_WINDOW_S, QUIET_WINDOWS, QuietWait, WatchReport, combine, cpus_used_by, rejudge
from tunehost.bench.stats import (
    MIN_ROUNDS, PRACTICAL_THRESHOLD, RoundsComparison, VerdictRule, compare_rounds, round_value,
)
from tunehost.errors import TunehostError
from tunehost.facts.llama import build_label
from tunehost.launch import LaunchConfig

Invoke = Callable[[Sequence[str]], list[BenchResult]]
ENERGY_OBJECTIVE = "tokens-per-joule"  # generated tokens per joule of the CPU package and GPUs (bench.energy)
OBJECTIVES = ("tg", "pp", "balanced", ENERGY_OBJECTIVE)
ALPHA = 0.05
GREEDY_WAIT_SHARE = 0.25  # of a stage's time left, waited for quiet before challengers using more CPUs are dropped
WAIT_STEP = "(wait for quiet)"  # the journal's argv[0] of a wait: no llama-bench option starts with "("


@dataclass(frozen=True)
class Candidate:
    """One configuration in the race: a label ("-t 2"), the launch configuration and its llama-bench flags."""

    label: str
    launch: LaunchConfig = field(compare=False)
    args: tuple[str, ...]


@dataclass(frozen=True)
class TuneSettings:
    model: str
    n_prompt: int = 512
    n_gen: int = 128
    reps: int = 3
    budget_s: float = 600.0
    objective: str = "tg"
    alpha: float = ALPHA
    threshold: float = PRACTICAL_THRESHOLD
    min_rounds: int = MIN_ROUNDS
    max_rounds: int = 60  # per stage
    confirm_share: float = 0.3  # of the budget kept for the final confirmation against advise's plan
    warmup: bool = True
    allow_busy: bool = False  # count disturbed rounds instead of discarding them (the outcome says so)
    busy_streak: int = 2  # disturbed rounds in a row before the race waits for quiet
    quiet_wait_share: float = 0.5  # of the budget the wait before the first call may take at most

    def tests(self) -> tuple[str, ...]:
        """The kinds measured: the objective's (pp, tg or both)."""
        return {"tg": ("tg",), "pp": ("pp",), "balanced": ("pp", "tg"), ENERGY_OBJECTIVE: ("tg",)}[self.objective]

    def base_args(self, reps: int) -> list[str]:
        kinds = self.tests()
        return ["-m", self.model, "-p", str(self.n_prompt if "pp" in kinds else 0),
                "-n", str(self.n_gen if "tg" in kinds else 0), "-r", str(reps)]


@dataclass(frozen=True)
class TuneProgress:
    stage: str
    stage_index: int
    stages: int
    round: int
    leader: str
    leader_change: float | None  # leader / incumbent - 1
    alive: int
    spent_s: float
    budget_s: float
    reused_steps: int
    discarded: int = 0  # disturbed rounds discarded so far in this stage
    note: str | None = None  # "waiting for quiet: ..." while the race waits


@dataclass(frozen=True)
class RoundMark:
    """One round as the host watch saw it: counted (its values entered the intervals) or discarded."""

    stage: str
    round: int  # the attempt's number in its stage, 1-based (discarded attempts included)
    counted: bool
    watch: WatchReport | None

    @property
    def disturbed(self) -> bool:
        return self.watch is not None and self.watch.disturbed


class RaceWatch(Protocol):
    """What watches the host around each llama-bench call (tunehost.bench.watch.HostWatcher, adapted by the CLI)."""

    def begin(self) -> None: ...

    def end(self) -> WatchReport: ...

    def wait_quiet(self, timeout_s: float, cpus_used: int | None) -> QuietWait: ...


class Journal(Protocol):
    def steps(self) -> list[tuple[int, list[str], float, Any]]: ...

    def add(self, seq: int, argv: Sequence[str], duration_s: float, outcome: Any) -> None: ...


class Measurer:
    """Every llama-bench call of one tune: replayed from the journal while it matches, else run and recorded.

    ``spent_s`` (the budget clock) is the sum of the calls' durations, replayed ones included."""

    def __init__(self, invoke: Invoke, journal: Journal | None = None, clock: Callable[[], float] = time.monotonic,
                 watch: RaceWatch | None = None, budget_s: float | None = None):
        self.invoke = invoke
        self.budget_s = budget_s  # a replayed step longer than this (or not a number of seconds) is a mismatch
        self.journal_note: str | None = None  # why the journal stopped being replayed, when it did so for a bad step
        self.journal = journal
        self.clock = clock
        self.watch = watch
        self.last_watch: WatchReport | None = None  # the latest call's report, judged for its configuration
        self.stored = {seq: (argv, duration, outcome) for seq, argv, duration, outcome in
                       (journal.steps() if journal is not None else [])}
        # a journal read as hostile (tunehost.store.rows) stops at its first bad step and says why
        self.journal_note = getattr(journal, "note", None)
        self.seq = 0
        self.calls = 0  # llama-bench calls (the journal's steps but the waits)
        self.waited_s = 0.0  # the waits for quiet (part of spent_s)
        self.spent_s = 0.0
        self.reused_steps = 0
        self.reused_s = 0.0
        self.replaying = True
        self.build: str | None = None  # "b11312 (0c1e570)": the llama.cpp build llama-bench reported

    def _seen(self, results: list[BenchResult]) -> list[BenchResult]:
        if self.build is None:
            self.build = next((label for r in results if (label := build_label(r.build_number, r.build_commit))),
                              None)
        return results

    def _replayable(self, stored: Any, args: Sequence[str]) -> float | None:
        """The stored step's duration when it is the step asked for and its duration is a number of seconds
        within [0, budget]; else None (the journal no longer matches: from here on everything is measured)."""
        if stored is None or list(stored[0]) != list(args):
            return None
        try:
            duration = float(stored[1])
        except (TypeError, ValueError, OverflowError):
            duration = math.nan
        limit = math.inf if self.budget_s is None else self.budget_s
        if not (math.isfinite(duration) and 0.0 <= duration <= limit):
            self.journal_note = (f"the stored tune's step {self.seq - 1} has a duration that is not a number of "
                                 "seconds within the budget; measuring afresh from there")
            return None
        return duration

    @property
    def stored_steps(self) -> int:
        """llama-bench calls in the journal (waits for quiet are not counted)."""
        return sum(1 for argv, _, _ in self.stored.values() if not (argv and argv[0] == WAIT_STEP))

    def run(self, args: Sequence[str]) -> list[BenchResult]:
        """llama-bench's results, or TunehostError with its message (a failure is journaled too)."""
        seq = self.seq
        self.seq += 1
        self.calls += 1
        stored = self.stored.get(seq) if self.replaying else None
        duration_ok = self._replayable(stored, args) if stored is not None else None
        replayed = _replayed(stored[2]) if stored is not None and duration_ok is not None else None
        if stored is not None and duration_ok is not None and replayed is None:
            self.journal_note = (f"the stored tune's step {seq} is not a llama-bench result or error tunehost "
                                 "wrote; measuring afresh from there")
        if stored is not None and duration_ok is not None and replayed is not None:
            duration, outcome = duration_ok, stored[2]
            self.spent_s += duration
            self.reused_steps += 1
            self.reused_s += duration
            self.last_watch = self._judged(args, outcome.get("watch") if isinstance(outcome, Mapping) else None)
            if isinstance(replayed, str):
                raise TunehostError(replayed)  # a failed call, replayed as it failed
            return self._seen(replayed)
        self.replaying = False
        if self.watch is not None:
            self.watch.begin()
        began = self.clock()
        try:
            results = self.invoke(args)
            outcome: Any = {"results": [result_to_json(r) for r in results]}
        except TunehostError as exc:
            results, outcome = None, {"error": str(exc)}
        duration = self.clock() - began
        if self.watch is not None:
            outcome["watch"] = self.watch.end().to_json()  # the raw facts: a replay judges them again
        self.last_watch = self._judged(args, outcome.get("watch"))
        self.spent_s += duration
        if self.journal is not None:
            self.journal.add(seq, args, duration, outcome)
        if results is None:
            raise TunehostError(outcome["error"])
        return self._seen(results)

    @staticmethod
    def _judged(args: Sequence[str], data: Any) -> WatchReport | None:
        if not isinstance(data, Mapping):
            return None
        try:  # the journal is read as hostile: a malformed watch is an unwatched call, never a traceback
            report = WatchReport.from_json(data)
            return rejudge(report, cpus_used_by(args, report.cpu_count))
        except (TypeError, ValueError, AttributeError, OverflowError):
            return None

    def wait_quiet(self, timeout_s: float, cpus_used: int | None) -> QuietWait:
        """Wait for quiet (at most ``timeout_s``), journaled like a call: the wait counts on the budget clock and a
        replay takes the same path. Quiet at once when nothing watches the host."""
        args = [WAIT_STEP, "all" if cpus_used is None else str(cpus_used), f"{max(0.0, timeout_s):.1f}"]
        seq = self.seq
        self.seq += 1
        stored = self.stored.get(seq) if self.replaying else None
        duration_ok = self._replayable(stored, args) if stored is not None else None
        waited_then = _replayed_wait(stored[2]) if stored is not None and duration_ok is not None else None
        if stored is not None and duration_ok is not None and waited_then is None:
            self.journal_note = (f"the stored tune's step {seq} is not a wait for quiet tunehost wrote; measuring "
                                 "afresh from there")
        if stored is not None and duration_ok is not None and waited_then is not None:
            duration = duration_ok
            self.spent_s += duration
            self.waited_s += duration
            self.reused_s += duration
            return waited_then
        self.replaying = False
        if self.watch is None or timeout_s <= 0:
            waited = QuietWait(self.watch is None, 0.0, None if self.watch is None else "no budget left to wait")
            duration = 0.0
        else:
            began = self.clock()
            waited = self.watch.wait_quiet(timeout_s, cpus_used)
            duration = self.clock() - began
        self.spent_s += duration
        self.waited_s += duration
        if self.journal is not None:
            self.journal.add(seq, args, duration, waited.to_json())
        return waited


def result_to_json(r: BenchResult) -> dict[str, Any]:
    return {"test": r.test, "n_prompt": r.n_prompt, "n_gen": r.n_gen, "n_depth": r.n_depth, "avg_ts": r.avg_ts,
            "stddev_ts": r.stddev_ts, "samples_ts": list(r.samples_ts), "model_type": r.model_type,
            "n_params": r.n_params, "backend": r.backend, "build_commit": r.build_commit,
            "build_number": r.build_number}


def _outcome_results(outcome: Any) -> list[BenchResult]:
    if not isinstance(outcome, Mapping):
        raise TunehostError("the tune journal holds a step that is not a result")
    if "error" in outcome:
        raise TunehostError(str(outcome["error"]))
    out = []
    for item in outcome.get("results") or ():
        samples = tuple(float(s) for s in item.get("samples_ts") or ())
        if not all(math.isfinite(s) and s > 0 for s in samples):
            raise TunehostError("the tune journal holds a throughput that is not a positive number")
        out.append(BenchResult(test=str(item["test"]), n_prompt=int(item["n_prompt"]), n_gen=int(item["n_gen"]),
                               n_depth=int(item.get("n_depth") or 0), avg_ts=float(item["avg_ts"]),
                               stddev_ts=float(item.get("stddev_ts") or 0.0), samples_ts=samples,
                               model_type=item.get("model_type"), n_params=item.get("n_params"),
                               backend=item.get("backend"), build_commit=item.get("build_commit"),
                               build_number=item.get("build_number")))
    return out


def _replayed(outcome: Any) -> list[BenchResult] | str | None:
    """A stored step as it happened: its results, its error's message (str), or None when the stored JSON is not
    a shape tunehost writes (a hostile or damaged journal): the step is then measured afresh, never a traceback."""
    if isinstance(outcome, Mapping) and "error" in outcome:
        error = outcome["error"]
        return error if isinstance(error, str) and error else None
    if not isinstance(outcome, Mapping) or not isinstance(outcome.get("results"), list):
        return None
    try:
        return _outcome_results(outcome)
    except (TunehostError, TypeError, ValueError, KeyError, AttributeError, OverflowError):
        return None


def _replayed_wait(outcome: Any) -> "QuietWait | None":
    if not isinstance(outcome, Mapping):
        return None
    try:
        return QuietWait.from_json(outcome)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
        return None

# ---------------------------------------------------------------- invocations: several values in one llama-bench


@dataclass(frozen=True)
class Group:
    """Arms measured by ONE llama-bench call: their flags differ in at most one option's value, which is given
    as a comma list (llama-bench runs one instance per value, in the order given: llama-bench.cpp
    get_cmd_params_instances)."""

    arms: tuple[Candidate, ...]
    position: int | None = None  # index in args of the value that differs (None: a single arm)

    def args(self, reverse: bool) -> list[str]:
        arms = self.arms[::-1] if reverse else self.arms
        args = list(arms[0].args)
        if self.position is not None:
            args[self.position] = ",".join(a.args[self.position] for a in arms)
        return args


def groups_of(arms: Sequence[Candidate]) -> list[Group]:
    """One multi-value call when every arm has the same options and they differ in one value that carries no
    comma itself; else one call per arm."""
    if len(arms) > 1:
        shape = [a.args for a in arms]
        if len({len(s) for s in shape}) == 1:
            differing = [i for i in range(len(shape[0])) if len({s[i] for s in shape}) > 1]
            if len(differing) == 1:
                i = differing[0]
                same_names = all(s[j] == shape[0][j] for s in shape for j in range(len(s)) if j != i)
                if same_names and i > 0 and shape[0][i - 1].startswith("-") and not any("," in s[i] for s in shape):
                    return [Group(tuple(arms), i)]
    return [Group((a,)) for a in arms]


def split_results(group: Group, results: Sequence[BenchResult], kinds: Sequence[str],
                  reverse: bool) -> dict[Candidate, list[BenchResult]]:
    """Results of one call, mapped back to its arms (each instance gives one result per measured kind)."""
    arms = group.arms[::-1] if reverse else group.arms
    per = len(kinds)
    if len(results) != per * len(arms):
        raise TunehostError(f"llama-bench returned {len(results)} results for {len(arms)} configurations x "
                            f"{per} tests")
    out = {}
    for i, arm in enumerate(arms):
        chunk = list(results[i * per:(i + 1) * per])
        if sorted(_kind(r) for r in chunk) != sorted(kinds):
            raise TunehostError("llama-bench's results came in an unexpected order")
        out[arm] = chunk
    return out


def _kind(result: BenchResult) -> str:
    return "pp" if result.n_gen == 0 else "tg"


def score(results: Sequence[BenchResult], objective: str, energy: Mapping[str, Any] | None = None) -> float | None:
    """One arm's throughput in one round: the median of its repetitions (tg or pp), or for "balanced" the
    geometric mean of the pp and tg medians (each counts the same, whatever their scale). For
    "tokens-per-joule": the tokens its repetitions generated per joule of its llama-bench run (``energy``: that
    run's tunehost.bench.energy.Energy; the whole run, its model load and one-token warm-up included); None
    without an energy figure."""
    if objective == ENERGY_OBJECTIVE:
        from tunehost.bench.energy import Energy

        joules = (Energy.from_json(energy) or Energy(0.0)).joules if energy is not None else None
        tokens = sum(r.n_gen * len(r.samples_ts or (r.avg_ts,)) for r in results)
        return tokens / joules if joules and tokens > 0 else None
    values = {_kind(r): round_value(r.samples_ts or (r.avg_ts,)) for r in results}
    if objective == "balanced":
        return math.exp((math.log(values["pp"]) + math.log(values["tg"])) / 2.0)
    return values[objective]


# ---------------------------------------------------------------- one stage


@dataclass(frozen=True)
class StageOutcome:
    knob: str
    incumbent: Candidate
    winner: Candidate
    comparison: RoundsComparison | None  # winner vs incumbent (None: the incumbent stayed and nothing was compared)
    rounds: int
    dropped: tuple[tuple[str, str], ...]  # (label, why)
    stop_reason: str
    arms: int
    scores: Mapping[str, tuple[float, ...]] = field(default_factory=dict, hash=False)  # label -> per-round score
    challenger: str | None = None  # whose interval ``comparison`` is (the winner, or the best challenger seen)
    discarded: int = 0  # disturbed rounds discarded (run again)
    disturbed_rounds: int = 0  # disturbed rounds counted (allow_busy)
    busy: str | None = None  # why the stage stopped on a busy host ("host busy"), or the first disturbance seen
    marks: tuple[RoundMark, ...] = field(default=(), hash=False)
    candidates: tuple[Candidate, ...] = field(default=(), hash=False)  # every arm raced, the incumbent first
    load_dropped: tuple[str, ...] = ()  # challengers dropped because the host stayed busy (never raced under it)

    @property
    def undecided(self) -> bool:
        """Stopped by the budget with a challenger still in the race and no winner: more rounds could decide."""
        alive = {c.label for c in self.candidates} - {label for label, _ in self.dropped}
        return self.stop_reason == "budget" and self.winner == self.incumbent and len(alive) > 1

    def describe(self) -> str:
        """"threads: 3 configurations, 9 rounds, → -t 4 (decided); -t 4 +12.0 %, interval +4.1..+20.3 %"."""
        result = "kept" if self.winner == self.incumbent else f"→ {self.winner.label}"
        line = f"{self.knob}: {self.arms} configurations, {self.rounds} rounds, {result} ({self.stop_reason})"
        if self.comparison is not None and self.challenger and self.comparison.rounds:
            line += f"; {self.challenger} {_interval(self.comparison)}"
        if self.discarded:
            line += f"; {self.discarded} disturbed round{'s' if self.discarded != 1 else ''} discarded"
        if self.disturbed_rounds:
            line += f"; {self.disturbed_rounds} of {self.rounds} rounds disturbed (--allow-busy)"
        if self.load_dropped:
            line += f"; not raced under that load: {', '.join(self.load_dropped)}"
        return line


@dataclass(frozen=True)
class Stage:
    """One stage to race: ``challengers`` against ``incumbent`` on ``measurer``, until ``end_s`` on the measurer's
    budget clock once ``min_rounds`` ran (``hard_end_s``: even before). ``alpha``: the stage's error level (the
    settings' by default). ``resume``: an earlier outcome of this very stage, continued where it stopped (its
    intervals are confidence sequences: valid at any number of rounds). ``on_progress`` gets a TuneProgress whose
    stage index and count the caller fills in."""

    knob: str
    incumbent: Candidate
    challengers: tuple[Candidate, ...]
    measurer: Measurer = field(compare=False)
    settings: TuneSettings
    end_s: float
    hard_end_s: float | None = None
    alpha: float | None = None
    on_progress: Callable[[TuneProgress], None] | None = field(default=None, compare=False)
    resume: StageOutcome | None = None
    uses_cpus: bool = False  # the knob's arms compete for CPUs (Knob.uses_cpus)

    @property
    def limit_s(self) -> float:
        """The end no round may pass (the hard end when there is one)."""
        return self.end_s if self.hard_end_s is None else self.hard_end_s


def race_stage(stage: Stage) -> StageOutcome:
    """Race the stage's challengers against its incumbent until one remains, the result is clear, or the budget
    (:class:`Stage`) ends it. See the module docstring for the rules."""
    arms: list[Candidate] = [stage.incumbent]
    for c in stage.challengers:
        if c.args not in {a.args for a in arms}:
            arms.append(c)
    if len(arms) == 1:
        return StageOutcome(stage.knob, stage.incumbent, stage.incumbent, None, 0, (), "no alternative fits", 1,
                            candidates=(stage.incumbent,))
    race = _StageRace(stage, arms)
    if stage.settings.warmup and stage.resume is None:
        race.warm_up()
    race.run()
    return race.outcome()


class _StageRace:
    """The state of one stage's race: the arms still in it, their per-round scores, the rounds the host watch
    counted or discarded, and why it stopped."""

    def __init__(self, stage: Stage, arms: list[Candidate]):
        resume = stage.resume
        self.stage, self.arms = stage, arms
        alpha = stage.settings.alpha if stage.alpha is None else stage.alpha
        self.confidence = 1.0 - alpha / (len(arms) * (len(arms) - 1) // 2)  # Bonferroni over the pairs
        self.kinds = stage.settings.tests()
        self.dropped: list[tuple[str, str]] = list(resume.dropped) if resume else []
        self.alive = [a for a in arms if a.label not in {label for label, _ in self.dropped}]
        self.scores: dict[Candidate, dict[int, float]] = {
            a: dict(enumerate(resume.scores.get(a.label, ()))) if resume else {} for a in arms}
        self.marks: list[RoundMark] = list(resume.marks) if resume else []
        self.discarded = resume.discarded if resume else 0
        self.disturbed_rounds = resume.disturbed_rounds if resume else 0
        self.busy: str | None = resume.busy if resume else None
        self.load_dropped: list[str] = list(resume.load_dropped) if resume else []
        self.round_reports: list[WatchReport] = []
        self.rounds = resume.rounds if resume else 0
        self.attempts = len(self.marks)
        self.streak = 0
        self.stop = "max rounds"
        self.leader = stage.incumbent
        self.last_round_s = 0.0
        self.last: dict[Candidate, RoundsComparison] = {}  # each challenger's latest interval against the incumbent
        if resume and resume.comparison is not None and resume.challenger:
            for a in self.alive:
                if a.label == resume.challenger:
                    self.last[a] = resume.comparison

    # ---- the round loop

    def warm_up(self) -> None:
        for group in self.groups():
            self.call(group, 1, False)

    def groups(self) -> list[Group]:
        """The llama-bench calls of a round: several arms in one call when they differ in one value, except for
        tokens per joule (the energy is read per call, so each arm runs alone)."""
        if self.stage.settings.objective == ENERGY_OBJECTIVE:
            return [Group((a,)) for a in self.alive]
        return groups_of(self.alive)

    def run(self) -> None:
        """Rounds until the stage stops (``self.stop`` says why)."""
        while True:
            if len(self.alive) == 1:
                self.stop = "every challenger dropped"
                return
            report = self.play_round()
            disturbed = report is not None and report.disturbed
            if disturbed and self.busy is None and report is not None:
                self.busy = report.reasons[0]
            if disturbed and not self.stage.settings.allow_busy:
                if self.discard(report):
                    return
                continue
            self.streak = 0
            if self.count(report, disturbed):
                return

    def play_round(self) -> WatchReport | None:
        """Every arm alive once (the order reversed every other attempt); the round's watch report, judged."""
        measurer, settings = self.stage.measurer, self.stage.settings
        began = measurer.spent_s
        reverse = self.attempts % 2 == 1
        self.attempts += 1
        groups = self.groups()
        self.round_reports.clear()
        for group in (groups[::-1] if reverse else groups):
            got = self.call(group, settings.reps, reverse)
            for arm, results in (got or {}).items():
                if arm in self.alive:
                    watch = self.stage.measurer.last_watch  # this arm's own call (energy: one arm per call)
                    energy = watch.energy if watch is not None and len(group.arms) == 1 else None
                    value = score(results, settings.objective, energy)
                    if value is None:
                        why = "; ".join((energy or {}).get("missing") or ()) or "no energy reading"
                        raise TunehostError(f"--objective {ENERGY_OBJECTIVE}: the run of {arm.label} has no energy "
                                            f"figure ({why[:300]}); no winner is named without one")
                    self.scores[arm][self.rounds] = value
        self.last_round_s = measurer.spent_s - began
        return self.judged(combine(self.round_reports))

    def discard(self, report: WatchReport | None) -> bool:
        """A disturbed round is never counted: its values leave the race and it is run again (after waiting for
        quiet when the host stays busy). True when the stage stops here."""
        stage = self.stage
        for arm in self.arms:
            self.scores[arm].pop(self.rounds, None)
        self.marks.append(RoundMark(stage.knob, self.attempts, False, report))
        self.discarded += 1
        self.streak += 1
        if self.streak >= stage.settings.busy_streak:
            waited = self.wait_quiet(report)
            if waited is None:  # the challengers that need the busy CPUs left the race: go on without them
                return False
            if not waited.quiet:
                self.busy = (f"{report.reasons[0] if report else self.busy}; waited {waited.waited_s:.0f} s "
                             "for quiet")
                self.stop = "host busy"
                return True
            self.streak = 0
        if stage.measurer.spent_s + self.last_round_s > stage.limit_s:
            self.stop = "budget" if self.rounds >= stage.settings.min_rounds else "host busy"
            return True
        return False

    def wait_quiet(self, report: WatchReport | None) -> QuietWait | None:
        """Wait for quiet after disturbed rounds in a row. Challengers that keep more CPUs busy than the incumbent
        are the first a load disturbs: when quiet does not come for them, they leave the race (never raced under
        the load, and the outcome says so: it is marked disturbed) and None is returned. Never in the
        confirmation: dropping the search's best there would turn "not raced" into "the plan is the fastest"."""
        stage = self.stage
        self.progress(None, f"waiting for quiet: {self.busy}")
        base = cpus_of([stage.incumbent])
        greedy = [] if stage.knob == "confirmation" else [
            a for a in self.alive if a != stage.incumbent and base is not None and (cpus_of([a]) or 1 << 16) > base]
        share = GREEDY_WAIT_SHARE if greedy else 1.0
        waited = stage.measurer.wait_quiet((stage.limit_s - stage.measurer.spent_s) * share,
                                           None if self.strict() else cpus_of(self.alive))
        if waited.quiet or not greedy:
            return waited
        why = report.reasons[0] if report and report.reasons else self.busy
        for arm in greedy:
            self.drop(arm, f"needs CPUs that other processes kept busy ({why}); not raced under that load")
            self.load_dropped.append(arm.label)
        self.streak = 0
        return None

    def count(self, report: WatchReport | None, disturbed: bool) -> bool:
        """A counted round: the intervals against the incumbent, the leader, the arms dropped beyond the noise.
        True when the stage stops here."""
        stage, settings = self.stage, self.stage.settings
        incumbent = stage.incumbent
        for arm in list(self.alive):  # an arm that failed this round after others ran: its partial round is dropped
            if self.rounds not in self.scores[arm]:
                self.drop(arm, "no result this round")
        self.marks.append(RoundMark(stage.knob, self.attempts, True, report))
        if disturbed:
            self.disturbed_rounds += 1
        self.rounds += 1
        comparisons = {a: self.compare(incumbent, a) for a in self.alive if a != incumbent}
        self.last.update(comparisons)
        leader = max(comparisons, key=lambda a: comparisons[a].ratio, default=incumbent)
        if leader != incumbent and comparisons[leader].ratio <= 1.0:
            leader = incumbent
        self.leader = leader
        self.progress(comparisons[leader].ratio - 1.0 if leader != incumbent else None)
        if self.rounds >= settings.min_rounds:
            self.prune(comparisons)
            challengers_left = [a for a in self.alive if a != incumbent]
            if len(challengers_left) == 1 and comparisons[challengers_left[0]].verdict == "faster":
                self.stop = "decided"
                return True
        if len(self.alive) == 1:
            self.stop = "every challenger dropped"
            return True
        if self.rounds >= settings.max_rounds:
            self.stop = f"max rounds ({settings.max_rounds})"
            return True
        # the stage's share ends it once it could decide (min_rounds); the hard end (the whole search's) always
        spent = stage.measurer.spent_s + self.last_round_s
        if (self.rounds >= settings.min_rounds and spent > stage.end_s) or spent > stage.limit_s:
            self.stop = "budget"
            return True
        return False

    def prune(self, comparisons: Mapping[Candidate, RoundsComparison]) -> None:
        """Drop the arms that cannot beat the incumbent by the threshold, or lose to the leader beyond the noise."""
        incumbent, threshold, leader = self.stage.incumbent, self.stage.settings.threshold, self.leader
        for arm, comparison in comparisons.items():
            if comparison.high < 1.0 + threshold:
                self.drop(arm, f"cannot beat {incumbent.label} by {threshold:.0%} "
                               f"({_interval(comparison)}, {self.rounds} rounds)")
            elif arm != leader and leader != incumbent:
                versus = self.compare(leader, arm)
                if versus.high < 1.0:
                    self.drop(arm, f"slower than {leader.label} beyond the noise ({_interval(versus)})")

    def outcome(self) -> StageOutcome:
        stage, incumbent = self.stage, self.stage.incumbent
        final = {a: self.compare(incumbent, a) for a in self.alive if a != incumbent}
        faster = [a for a in final if final[a].verdict == "faster"]
        winner = max(faster, key=lambda a: final[a].ratio) if faster else incumbent
        if winner != incumbent:
            best: Candidate | None = winner
        else:  # the incumbent stayed: the best any challenger showed (for the report)
            best = max(self.last, key=lambda a: self.last[a].ratio, default=None)
        return StageOutcome(stage.knob, incumbent, winner, self.last.get(best) if best is not None else None,
                            self.rounds, tuple(self.dropped), self.stop, len(self.arms),
                            {a.label: tuple(v for _, v in sorted(s.items())) for a, s in self.scores.items()},
                            best.label if best is not None else None, discarded=self.discarded,
                            disturbed_rounds=self.disturbed_rounds, busy=self.busy, marks=tuple(self.marks),
                            candidates=tuple(self.arms), load_dropped=tuple(self.load_dropped))

    # ---- the pieces

    def compare(self, base: Candidate, arm: Candidate) -> RoundsComparison:
        return _compare(self.scores[base], self.scores[arm], self.confidence, self.stage.settings)

    def strict(self) -> bool:
        """Judge as if every CPU were busy: a threads or CPU-set stage, or arms that keep different numbers of
        CPUs busy. A load on the CPUs one arm leaves idle lands on the SMT siblings or the shared caches of the
        others: exactly the load that changes which thread count wins."""
        return self.stage.uses_cpus or len({cpus_of([a]) for a in self.alive}) > 1

    def judged(self, report: WatchReport | None) -> WatchReport | None:
        if report is None or not self.strict():
            return report
        return rejudge(replace(report, cpus_used=None))

    def drop(self, arm: Candidate, why: str) -> None:
        if arm == self.stage.incumbent:
            raise TunehostError(f"the configuration being tuned ({arm.label}) fails in llama-bench: {why}")
        if arm in self.alive:
            self.alive.remove(arm)
            self.dropped.append((arm.label, why))

    def call(self, group: Group, reps: int, reverse: bool) -> dict[Candidate, list[BenchResult]] | None:
        """One llama-bench call for ``group``; a failing multi-value call is retried one arm at a time (to find
        which value failed), a failing arm is dropped."""
        measurer = self.stage.measurer
        args = [*self.stage.settings.base_args(reps), *group.args(reverse)]
        try:
            got = split_results(group, measurer.run(args), self.kinds, reverse)
        except TunehostError as exc:
            if measurer.last_watch is not None:
                self.round_reports.append(self.judged(measurer.last_watch))  # type: ignore[arg-type]
            if len(group.arms) == 1:
                self.drop(group.arms[0], str(exc))
                return None
            out: dict[Candidate, list[BenchResult]] = {}  # find which value failed: each arm alone
            for arm in group.arms:
                got_one = self.call(Group((arm,)), reps, False)
                if got_one:
                    out.update(got_one)
            return out
        if measurer.last_watch is not None:
            self.round_reports.append(self.judged(measurer.last_watch))  # type: ignore[arg-type]
        return got

    def progress(self, change: float | None, note: str | None = None) -> None:
        stage = self.stage
        if stage.on_progress is not None:
            stage.on_progress(TuneProgress(stage.knob, 0, 1, self.rounds, self.leader.label, change, len(self.alive),
                                           stage.measurer.spent_s, stage.settings.budget_s,
                                           stage.measurer.reused_steps, self.discarded, note))


def cpus_of(arms: Sequence[Candidate]) -> int | None:
    """The CPUs the busiest of ``arms`` keeps busy (what "quiet" is judged for); None (every CPU) when one of them
    leaves the thread count to llama-bench."""
    used = [cpus_used_by(a.args, 1 << 16) for a in arms]  # capped at the host's CPUs by the judgement itself
    return None if not used or any(u is None for u in used) else max(u for u in used if u is not None)


def _compare(base: Mapping[int, float], cand: Mapping[int, float], confidence: float,
             settings: TuneSettings) -> RoundsComparison:
    common = sorted(set(base) & set(cand))
    if not common:
        return RoundsComparison(1.0, 0.0, math.inf, "no clear difference", 0, None, 0,
                                "paired rounds, t-mixture confidence sequence")
    rule = VerdictRule(settings.threshold, confidence, settings.min_rounds)
    return compare_rounds([[base[r]] for r in common], [[cand[r]] for r in common], paired=True, rule=rule,
                          describe=False)


def _interval(c: RoundsComparison) -> str:
    low = f"{(c.low - 1) * 100:+.1f}" if c.low > 0 else "-100"
    high = f"{(c.high - 1) * 100:+.1f}" if math.isfinite(c.high) else "+inf"
    return f"{c.change_percent:+.1f} %, interval {low}..{high} %"


# ---------------------------------------------------------------- the whole tune


@dataclass(frozen=True)
class Knob:
    """One dimension of the search: ``variants(incumbent)`` gives the challengers of the current incumbent
    (only configurations advise's memory model says fit)."""

    name: str
    variants: Callable[[Candidate], list[Candidate]] = field(compare=False)
    not_searched: str | None = None  # why this knob cannot change the objective here (then it is skipped, said so)
    uses_cpus: bool = False  # its arms compete for CPUs (threads, CPU sets): judged as if every CPU were busy


@dataclass(frozen=True)
class TuneOutcome:
    plan: Candidate
    best: Candidate  # what the stages selected (the plan when nothing won a stage)
    winner: Candidate  # what is recommended: best when the confirmation called it faster, else the plan
    confirmation: RoundsComparison | None  # best vs plan, fresh rounds; None when best is the plan
    stages: tuple[StageOutcome, ...]
    skipped: tuple[tuple[str, str], ...]  # (knob, why)
    spent_s: float
    budget_s: float
    steps: int
    reused_steps: int
    reused_s: float
    stopped: str | None = None  # why the tune stopped before its end (the host stayed busy)
    allow_busy: bool = False
    waited_s: float = 0.0  # waiting for quiet (part of spent_s)
    not_searched: tuple[tuple[str, str], ...] = ()  # (knob, why): knobs that could change the result, not raced

    @property
    def improved(self) -> bool:
        return self.winner != self.plan

    @property
    def load_dropped(self) -> tuple[str, ...]:
        """Challengers that left the race because the host stayed busy (never raced under that load)."""
        return tuple(dict.fromkeys(label for s in self.stages for label in s.load_dropped))

    @property
    def has_result(self) -> bool:
        """A result from quiet rounds: a winner, or the plan kept after at least one stage raced on a quiet host.
        False when the tune stopped before any (or while confirming the search's best)."""
        if self.stopped is None or self.improved:
            return True
        if any(s.knob == "confirmation" for s in self.stages):
            return False
        return any(s.rounds and s.stop_reason != "host busy" for s in self.stages)

    @property
    def marks(self) -> tuple[RoundMark, ...]:
        return tuple(m for s in self.stages for m in s.marks)

    @property
    def discarded_rounds(self) -> int:
        return sum(s.discarded for s in self.stages)

    @property
    def disturbed_rounds(self) -> int:
        """Disturbed rounds whose values were counted (only with allow_busy)."""
        return sum(s.disturbed_rounds for s in self.stages)

    @property
    def disturbed(self) -> bool:
        """The result is a busy host's: it stopped for load, dropped challengers for load, or counted disturbed
        rounds (allow_busy). A disturbed result is never a drift reference."""
        return self.stopped is not None or self.disturbed_rounds > 0 or bool(self.load_dropped)

    @property
    def busy_reason(self) -> str | None:
        """The first disturbance seen (what the headline names)."""
        return next((s.busy for s in self.stages if s.busy), None)


def tune(plan: Candidate, knobs: Sequence[Knob], measurer: Measurer, settings: TuneSettings, *,
         on_progress: Callable[[TuneProgress], None] | None = None) -> TuneOutcome:
    """Wait for quiet, stages in order (each knob raced around the incumbent), the undecided stages resumed with
    what is left, then the confirmation against the plan."""
    if settings.objective not in OBJECTIVES:
        raise TunehostError(f"--objective must be one of {', '.join(OBJECTIVES)}, not {settings.objective!r}")
    run = _Tune(plan, tuple(knobs), measurer, settings, on_progress)
    if not settings.allow_busy:  # (journaled even when nothing watches: a replay takes the same steps)
        waited = run.wait_first_quiet()
        if not waited.quiet:
            return run.finish(plan, None, f"the host stayed busy ({waited.reason}); waited {waited.waited_s:.0f} s "
                                          "for quiet")
    early = run.search()
    if early is not None:
        return early
    if run.stopped is None and (run.incumbent == plan or run.direct_stage(run.incumbent) is not None):
        run.resume_undecided()  # no confirmation is needed: its reserve and what the stages left go to them
    return run.conclude()


class _Tune:
    """The state of one tune: the incumbent, the stages raced and skipped, the round time estimate, why it
    stopped."""

    def __init__(self, plan: Candidate, knobs: tuple[Knob, ...], measurer: Measurer, settings: TuneSettings,
                 on_progress: Callable[[TuneProgress], None] | None):
        self.plan, self.knobs, self.measurer, self.settings = plan, knobs, measurer, settings
        self.on_progress = on_progress
        self.search_end = settings.budget_s * (1.0 - settings.confirm_share)
        self.incumbent = plan
        self.stages: list[StageOutcome] = []
        self.skipped: list[tuple[str, str]] = []
        self.first_round_s: float | None = None
        self.round_s = 0.0
        self.stopped: str | None = None

    # ---- the steps

    def wait_first_quiet(self) -> QuietWait:
        """A load that holds a CPU changes which thread count or CPU set wins: start only on a quiet host."""
        plan, measurer, settings = self.plan, self.measurer, self.settings
        if self.on_progress is not None:
            self.on_progress(TuneProgress("quiet", 0, len(self.knobs), 0, plan.label, None, 0, measurer.spent_s,
                                          settings.budget_s, measurer.reused_steps, 0, "waiting for a quiet host"))
        # judged for every CPU when a stage will race thread counts or CPU sets (see _StageRace.strict())
        cpu_stages = any(k.uses_cpus and not k.not_searched for k in self.knobs)
        return measurer.wait_quiet(max(settings.budget_s * settings.quiet_wait_share,
                                       QUIET_WINDOWS * QUIET_WINDOW_S + 0.5), None if cpu_stages else cpus_of([plan]))

    def search(self) -> TuneOutcome | None:
        """Each knob's stage around the incumbent, in order; an outcome when the tune ends before the stages."""
        measurer, settings = self.measurer, self.settings
        for index, knob in enumerate(self.knobs):
            if knob.not_searched:
                self.skipped.append((knob.name, knob.not_searched))
                continue
            challengers = knob.variants(self.incumbent)
            if not challengers:
                self.skipped.append((knob.name, "no other value fits or applies here"))
                continue
            if self.first_round_s is None:
                early = self.first_round()
                if early is not None:
                    return early
            # the stages still to race around this incumbent (a knob with nothing to try takes no share of it)
            left = max(1, sum(1 for k in self.knobs[index:]
                              if not k.not_searched and (k is knob or k.variants(self.incumbent))))
            end = measurer.spent_s + max(0.0, self.search_end - measurer.spent_s) / left
            arms = 1 + len(challengers)
            if measurer.spent_s + settings.min_rounds * self.round_s * arms / 2 > self.search_end:
                self.skipped.append((knob.name, "no budget left for it"))
                continue
            stage_began = measurer.spent_s
            outcome = race_stage(Stage(knob.name, self.incumbent, tuple(challengers), measurer, settings, end_s=end,
                                       hard_end_s=self.search_end, on_progress=self.relay(index),
                                       uses_cpus=knob.uses_cpus))
            self.stages.append(outcome)
            if outcome.rounds:  # the incumbent may have changed speed (-t 1 on a busy box): what a round took now
                self.round_s = ((measurer.spent_s - stage_began) / (outcome.rounds + outcome.discarded + 1) * 2
                                / outcome.arms)
            self.incumbent = outcome.winner
            if outcome.stop_reason == "host busy":
                self.stopped = f"the host stayed busy ({outcome.busy})"
                break
        return None

    def first_round(self) -> TuneOutcome | None:
        """The plan alone once: how long is one call here? is the budget enough at all? (an outcome when the wait
        for quiet left too little of it)."""
        plan, measurer, settings = self.plan, self.measurer, self.settings
        began = measurer.spent_s
        try:
            measurer.run([*settings.base_args(1), *plan.args])
        except TunehostError as exc:
            raise TunehostError(f"the configuration being tuned ({plan.label}) fails in llama-bench: {exc}") from None
        # -r 1 is llama-bench's warm-up pass + 1 repetition; -r N is N + 1 passes; a round has two arms at least
        first_round_s = (measurer.spent_s - began) * (max(1, settings.reps) + 1) / 2 * 2
        self.first_round_s = self.round_s = first_round_s  # a paired round: re-estimated after every stage
        needed = settings.min_rounds * first_round_s / (1.0 - settings.confirm_share)
        # the budget is blamed only for what measuring takes: the waits for quiet are the host's doing
        if needed > settings.budget_s - (began - measurer.waited_s):
            raise TunehostError(f"--budget {settings.budget_s:g} s is too short: one paired round takes about "
                                f"{first_round_s:.0f} s here and a verdict needs {settings.min_rounds} rounds; "
                                f"give --budget {math.ceil(needed / 60.0)}m or more")
        if needed > settings.budget_s - began:
            return self.finish(plan, None, f"waiting for quiet took {measurer.waited_s:.0f} s of the "
                                           f"{settings.budget_s:g} s budget and what is left is too short "
                                           f"for a verdict ({settings.min_rounds} rounds of about "
                                           f"{first_round_s:.0f} s)")
        return None

    def resume_undecided(self) -> None:
        """The stages the budget stopped undecided, resumed with what is left (their intervals are anytime-valid)."""
        plan, measurer, settings = self.plan, self.measurer, self.settings
        for i, stage in enumerate(list(self.stages)):
            if not self.eligible(stage):
                continue
            # a win here on top of an earlier one needs a confirmation: keep what a short one takes then
            reserve = min(settings.budget_s * settings.confirm_share, 3 * settings.min_rounds * self.round_s)
            last = settings.budget_s if stage.incumbent == plan else settings.budget_s - reserve
            waiting = sum(1 for s in self.stages[i:] if self.eligible(s))  # what is left is shared among them
            end = measurer.spent_s + max(0.0, last - measurer.spent_s) / max(1, waiting)
            if measurer.spent_s + self.round_s * stage.arms / 2 > end:
                continue
            index = next((k for k, knob in enumerate(self.knobs) if knob.name == stage.knob), 0)
            uses_cpus = any(knob.uses_cpus for knob in self.knobs if knob.name == stage.knob)
            again = race_stage(Stage(stage.knob, stage.incumbent, stage.candidates[1:], measurer, settings,
                                     end_s=end, hard_end_s=end, resume=stage, on_progress=self.relay(index),
                                     uses_cpus=uses_cpus))
            self.stages[i] = again
            if again.stop_reason == "host busy":
                self.stopped = f"the host stayed busy ({again.busy})"
                break
            if again.winner != again.incumbent:
                self.incumbent = again.winner
                if stage.incumbent == plan:
                    break  # a direct winner: the later stages raced around the plan, not around it

    def eligible(self, stage: StageOutcome) -> bool:
        """An undecided stage around the current incumbent or the plan that more rounds could still change."""
        plan, incumbent = self.plan, self.incumbent
        if not stage.undecided or stage.incumbent != incumbent and stage.incumbent != plan:
            return False
        # the best already won against the plan: re-racing a stage around the plan cannot add to it
        return not (incumbent != plan and stage.incumbent == plan)

    def conclude(self) -> TuneOutcome:
        """The winner: the search's best when a stage raced it against the plan itself, else when a fresh
        confirmation against the plan calls it faster."""
        plan, incumbent, settings = self.plan, self.incumbent, self.settings
        confirmation = None
        winner = plan
        direct = self.direct_stage(incumbent)
        if incumbent != plan and direct is not None and direct.comparison is not None:
            # the best was raced against the plan itself: that stage's interval holds together with every other
            # interval of the stage (Bonferroni), so it stays valid for the arm the race selected
            confirmation, winner = direct.comparison, incumbent
        elif incumbent != plan and self.stopped is None:
            final = race_stage(Stage("confirmation", plan, (incumbent,), self.measurer, settings,
                                     end_s=settings.budget_s, alpha=settings.alpha,
                                     on_progress=self.relay(len(self.knobs) - 1)))
            self.stages.append(final)
            confirmation = final.comparison
            if final.winner != plan:
                winner = final.winner
            if final.stop_reason == "host busy":
                self.stopped = f"the host stayed busy ({final.busy})"
        return self.finish(winner, confirmation, self.stopped, best=incumbent)

    # ---- the pieces

    def direct_stage(self, best: Candidate) -> StageOutcome | None:
        return next((s for s in self.stages if s.incumbent == self.plan and s.winner == best), None)

    def relay(self, index: int) -> Callable[[TuneProgress], None] | None:
        on_progress = self.on_progress
        if on_progress is None:
            return None
        return lambda event: on_progress(replace(event, stage_index=index, stages=len(self.knobs)))

    def gaps(self, stopped: str | None) -> tuple[tuple[str, str], ...]:
        """The knobs that could change the result but were not raced: skipped for budget, stopped by load, or
        never reached because the tune stopped."""
        out = []
        for knob in self.knobs:
            if knob.not_searched:
                continue
            why = next((w for name, w in self.skipped if name == knob.name), None)
            stage = next((s for s in reversed(self.stages) if s.knob == knob.name), None)
            if why is not None:
                if why.startswith("no budget left"):
                    out.append((knob.name, why))
            elif stage is not None:
                if stage.stop_reason == "host busy":
                    out.append((knob.name, "the host stayed busy"))
            elif stopped is not None:
                out.append((knob.name, "the tune stopped first"))
        return tuple(out)

    def finish(self, winner: Candidate, confirmation: RoundsComparison | None, stopped: str | None, *,
               best: Candidate | None = None) -> TuneOutcome:
        """The outcome; ``best`` (what the stages selected) is the winner unless given."""
        m, settings = self.measurer, self.settings
        return TuneOutcome(not_searched=self.gaps(stopped), plan=self.plan, best=winner if best is None else best,
                           winner=winner, confirmation=confirmation, stages=tuple(self.stages),
                           skipped=tuple(self.skipped), spent_s=m.spent_s, budget_s=settings.budget_s,
                           steps=m.calls, reused_steps=m.reused_steps, reused_s=m.reused_s, stopped=stopped,
                           allow_busy=settings.allow_busy, waited_s=m.waited_s)
