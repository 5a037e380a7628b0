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
from tunehost.bench.stats import MIN_ROUNDS, PRACTICAL_THRESHOLD, RoundsComparison, compare_rounds, round_value
from tunehost.errors import TunehostError
from tunehost.launch import LaunchConfig

Invoke = Callable[[Sequence[str]], list[BenchResult]]
OBJECTIVES = ("tg", "pp", "balanced")
ALPHA = 0.05


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

    def tests(self) -> tuple[str, ...]:
        """The kinds measured: the objective's (pp, tg or both)."""
        return {"tg": ("tg",), "pp": ("pp",), "balanced": ("pp", "tg")}[self.objective]

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


class Journal(Protocol):
    def steps(self) -> list[tuple[int, list[str], float, Any]]: ...

    def add(self, seq: int, argv: Sequence[str], duration_s: float, outcome: Any) -> None: ...


class Measurer:
    """Every llama-bench call of one tune: replayed from the journal while it matches, else run and recorded.

    ``spent_s`` (the budget clock) is the sum of the calls' durations, replayed ones included."""

    def __init__(self, invoke: Invoke, journal: Journal | None = None, clock: Callable[[], float] = time.monotonic):
        self.invoke = invoke
        self.journal = journal
        self.clock = clock
        self.stored = {seq: (argv, duration, outcome) for seq, argv, duration, outcome in
                       (journal.steps() if journal is not None else [])}
        self.seq = 0
        self.spent_s = 0.0
        self.reused_steps = 0
        self.reused_s = 0.0
        self.replaying = True
        self.build: str | None = None  # "b11312 (0c1e570)": the llama.cpp build llama-bench reported

    def _seen(self, results: list[BenchResult]) -> list[BenchResult]:
        if self.build is None:
            first = next((r for r in results if r.build_commit or r.build_number is not None), None)
            if first is not None:
                self.build = (f"b{first.build_number} ({first.build_commit})" if first.build_number is not None
                              else str(first.build_commit))
        return results

    @property
    def stored_steps(self) -> int:
        return len(self.stored)

    def run(self, args: Sequence[str]) -> list[BenchResult]:
        """llama-bench's results, or TunehostError with its message (a failure is journaled too)."""
        seq = self.seq
        self.seq += 1
        stored = self.stored.get(seq) if self.replaying else None
        if stored is not None and list(stored[0]) == list(args):
            duration, outcome = float(stored[1]), stored[2]
            self.spent_s += duration
            self.reused_steps += 1
            self.reused_s += duration
            return self._seen(_outcome_results(outcome))
        self.replaying = False
        began = self.clock()
        try:
            results = self.invoke(args)
            outcome: Any = {"results": [result_to_json(r) for r in results]}
        except TunehostError as exc:
            results, outcome = None, {"error": str(exc)}
        duration = self.clock() - began
        self.spent_s += duration
        if self.journal is not None:
            self.journal.add(seq, args, duration, outcome)
        if results is None:
            raise TunehostError(outcome["error"])
        return self._seen(results)


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


def score(results: Sequence[BenchResult], objective: str) -> float:
    """One arm's throughput in one round: the median of its repetitions (tg or pp), or for "balanced" the
    geometric mean of the pp and tg medians (each counts the same, whatever their scale)."""
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

    def describe(self) -> str:
        """"threads: 3 configurations, 9 rounds, → -t 4 (decided); -t 4 +12.0 %, interval +4.1..+20.3 %"."""
        result = "kept" if self.winner == self.incumbent else f"→ {self.winner.label}"
        line = f"{self.knob}: {self.arms} configurations, {self.rounds} rounds, {result} ({self.stop_reason})"
        if self.comparison is not None and self.challenger and self.comparison.rounds:
            line += f"; {self.challenger} {_interval(self.comparison)}"
        return line


def race_stage(knob: str, incumbent: Candidate, challengers: Sequence[Candidate], measurer: Measurer,
               settings: TuneSettings, *, end_s: float, hard_end_s: float | None = None, alpha: float | None = None,
               on_progress: Callable[[str, int, Candidate, float | None, int], None] | None = None) -> StageOutcome:
    """Race ``challengers`` against ``incumbent`` until one remains, the result is clear, or ``end_s`` (on the
    measurer's budget clock) would be passed by another round once ``min_rounds`` ran (``hard_end_s``: even
    before). See the module docstring for the rules."""
    arms: list[Candidate] = [incumbent]
    for c in challengers:
        if c.args not in {a.args for a in arms}:
            arms.append(c)
    if len(arms) == 1:
        return StageOutcome(knob, incumbent, incumbent, None, 0, (), "no alternative fits", 1)
    alpha = settings.alpha if alpha is None else alpha
    pairs = len(arms) * (len(arms) - 1) // 2
    confidence = 1.0 - alpha / pairs
    kinds = settings.tests()
    dropped: list[tuple[str, str]] = []
    alive = list(arms)
    scores: dict[Candidate, dict[int, float]] = {a: {} for a in arms}

    def drop(arm: Candidate, why: str) -> None:
        if arm == incumbent:
            raise TunehostError(f"the configuration being tuned ({incumbent.label}) fails in llama-bench: {why}")
        if arm in alive:
            alive.remove(arm)
            dropped.append((arm.label, why))

    def call(group: Group, reps: int, reverse: bool) -> dict[Candidate, list[BenchResult]] | None:
        args = [*settings.base_args(reps), *group.args(reverse)]
        try:
            return split_results(group, measurer.run(args), kinds, reverse)
        except TunehostError as exc:
            if len(group.arms) == 1:
                drop(group.arms[0], str(exc))
                return None
            out: dict[Candidate, list[BenchResult]] = {}  # find which value failed: each arm alone
            for arm in group.arms:
                got = call(Group((arm,)), reps, False)
                if got:
                    out.update(got)
            return out

    if settings.warmup:
        for group in groups_of(alive):
            call(group, 1, False)
    rounds = 0
    stop = "max rounds"
    leader = incumbent
    last_round_s = 0.0
    last: dict[Candidate, RoundsComparison] = {}  # each challenger's latest interval against the incumbent
    while True:
        if len(alive) == 1:
            stop = "every challenger dropped"
            break
        began = measurer.spent_s
        reverse = rounds % 2 == 1
        groups = groups_of(alive)
        for group in (groups[::-1] if reverse else groups):
            got = call(group, settings.reps, reverse)
            for arm, results in (got or {}).items():
                if arm in alive:
                    scores[arm][rounds] = score(results, settings.objective)
        for arm in list(alive):  # an arm that failed this round after others ran: its partial round is dropped
            if rounds not in scores[arm]:
                drop(arm, "no result this round")
        rounds += 1
        last_round_s = measurer.spent_s - began
        comparisons = {a: _compare(scores[incumbent], scores[a], confidence, settings) for a in alive if a != incumbent}
        last.update(comparisons)
        leader = max(comparisons, key=lambda a: comparisons[a].ratio, default=incumbent)
        if leader != incumbent and comparisons[leader].ratio <= 1.0:
            leader = incumbent
        if on_progress is not None:
            change = comparisons[leader].ratio - 1.0 if leader != incumbent else None
            on_progress(knob, rounds, leader, change, len(alive))
        if rounds >= settings.min_rounds:
            for arm, comparison in comparisons.items():
                if comparison.high < 1.0 + settings.threshold:
                    drop(arm, f"cannot beat {incumbent.label} by {settings.threshold:.0%} "
                              f"({_interval(comparison)}, {rounds} rounds)")
                elif arm != leader and leader != incumbent:
                    versus = _compare(scores[leader], scores[arm], confidence, settings)
                    if versus.high < 1.0:
                        drop(arm, f"slower than {leader.label} beyond the noise ({_interval(versus)})")
            challengers_left = [a for a in alive if a != incumbent]
            if len(challengers_left) == 1 and comparisons[challengers_left[0]].verdict == "faster":
                stop = "decided"
                break
        if len(alive) == 1:
            stop = "every challenger dropped"
            break
        if rounds >= settings.max_rounds:
            stop = f"max rounds ({settings.max_rounds})"
            break
        # the stage's share ends it once it could decide (min_rounds); the hard end (the whole search's) always
        if (rounds >= settings.min_rounds and measurer.spent_s + last_round_s > end_s) \
                or measurer.spent_s + last_round_s > (end_s if hard_end_s is None else hard_end_s):
            stop = "budget"
            break
    final = {a: _compare(scores[incumbent], scores[a], confidence, settings) for a in alive if a != incumbent}
    faster = [a for a in final if final[a].verdict == "faster"]
    winner = max(faster, key=lambda a: final[a].ratio) if faster else incumbent
    if winner != incumbent:
        best: Candidate | None = winner
    else:  # the incumbent stayed: the best any challenger showed (for the report)
        best = max(last, key=lambda a: last[a].ratio, default=None)
    return StageOutcome(knob, incumbent, winner, last.get(best) if best is not None else None, rounds, tuple(dropped),
                        stop, len(arms), {a.label: tuple(v for _, v in sorted(s.items())) for a, s in scores.items()},
                        best.label if best is not None else None)


def _compare(base: Mapping[int, float], cand: Mapping[int, float], confidence: float,
             settings: TuneSettings) -> RoundsComparison:
    common = sorted(set(base) & set(cand))
    if not common:
        return RoundsComparison(1.0, 0.0, math.inf, "no clear difference", 0, None, 0,
                                "paired rounds, t-mixture confidence sequence")
    return compare_rounds([[base[r]] for r in common], [[cand[r]] for r in common], paired=True,
                          threshold=settings.threshold, confidence=confidence, min_rounds=settings.min_rounds,
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

    @property
    def improved(self) -> bool:
        return self.winner != self.plan


def tune(plan: Candidate, knobs: Sequence[Knob], measurer: Measurer, settings: TuneSettings, *,
         on_progress: Callable[[TuneProgress], None] | None = None) -> TuneOutcome:
    """Stages in order (each knob raced around the incumbent), then the confirmation against the plan."""
    if settings.objective not in OBJECTIVES:
        raise TunehostError(f"--objective must be one of {', '.join(OBJECTIVES)}, not {settings.objective!r}")
    search_end = settings.budget_s * (1.0 - settings.confirm_share)
    incumbent = plan
    stages: list[StageOutcome] = []
    skipped: list[tuple[str, str]] = []
    first_round_s: float | None = None
    round_s = 0.0

    def progress(knob: str, index: int, rounds: int, leader: Candidate, change: float | None, alive: int) -> None:
        if on_progress is not None:
            on_progress(TuneProgress(knob, index, len(knobs), rounds, leader.label, change, alive,
                                     measurer.spent_s, settings.budget_s, measurer.reused_steps))

    for index, knob in enumerate(knobs):
        if knob.not_searched:
            skipped.append((knob.name, knob.not_searched))
            continue
        challengers = knob.variants(incumbent)
        if not challengers:
            skipped.append((knob.name, "no other value fits or applies here"))
            continue
        if first_round_s is None:  # the plan alone once: how long is one call here? is the budget enough at all?
            began = measurer.spent_s
            try:
                measurer.run([*settings.base_args(1), *plan.args])
            except TunehostError as exc:
                raise TunehostError(f"the configuration being tuned ({plan.label}) fails in llama-bench: {exc}") from None
            # -r 1 is llama-bench's warm-up pass + 1 repetition; -r N is N + 1 passes; a round has two arms at least
            first_round_s = (measurer.spent_s - began) * (max(1, settings.reps) + 1) / 2 * 2
            round_s = first_round_s  # a paired round of the incumbent: re-estimated after every stage
            needed = settings.min_rounds * first_round_s / (1.0 - settings.confirm_share)
            if needed > settings.budget_s:
                raise TunehostError(f"--budget {settings.budget_s:g} s is too short: one paired round takes about "
                                    f"{first_round_s:.0f} s here and a verdict needs {settings.min_rounds} rounds; "
                                    f"give --budget {math.ceil(needed / 60.0)}m or more")
        # the stages still to race around this incumbent (a knob with nothing to try takes no share of the budget)
        left = max(1, sum(1 for k in knobs[index:] if not k.not_searched and (k is knob or k.variants(incumbent))))
        end = measurer.spent_s + max(0.0, search_end - measurer.spent_s) / left
        arms = 1 + len(challengers)
        if measurer.spent_s + settings.min_rounds * round_s * arms / 2 > search_end:
            skipped.append((knob.name, "no budget left for it"))
            continue
        stage_began = measurer.spent_s
        outcome = race_stage(knob.name, incumbent, challengers, measurer, settings, end_s=end,
                             hard_end_s=search_end,
                             on_progress=lambda k, r, lead, ch, al, i=index: progress(k, i, r, lead, ch, al))
        stages.append(outcome)
        if outcome.rounds:  # the incumbent may have changed speed (-t 1 on a busy box): what a round took now
            round_s = (measurer.spent_s - stage_began) / (outcome.rounds + 1) * 2 / outcome.arms
        incumbent = outcome.winner
    confirmation = None
    winner = plan
    direct = next((s for s in stages if s.incumbent == plan and s.winner == incumbent), None)
    if incumbent != plan and direct is not None and direct.comparison is not None:
        # the best was raced against the plan itself: that stage's interval holds together with every other
        # interval of the stage (Bonferroni), so it stays valid for the arm the race selected
        confirmation, winner = direct.comparison, incumbent
    elif incumbent != plan:
        final = race_stage("confirmation", plan, [incumbent], measurer, settings, end_s=settings.budget_s,
                           alpha=settings.alpha,
                           on_progress=lambda k, r, lead, ch, al: progress(k, len(knobs), r, lead, ch, al))
        stages.append(final)
        confirmation = final.comparison
        if final.winner != plan:
            winner = final.winner
    return TuneOutcome(plan=plan, best=incumbent, winner=winner, confirmation=confirmation, stages=tuple(stages),
                       skipped=tuple(skipped), spent_s=measurer.spent_s, budget_s=settings.budget_s,
                       steps=measurer.seq, reused_steps=measurer.reused_steps, reused_s=measurer.reused_s)


def with_label(candidate: Candidate, label: str) -> Candidate:
    return replace(candidate, label=label)
