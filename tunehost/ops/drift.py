"""`tunehost history --drift`'s operation: re-measure a model's last known best configuration and say whether this
box got slower since (docs/history.md).

:func:`measure_drift` takes the host's facts and the open results store from the CLI (tunehost/cli/history.py),
finds the reference (:func:`last_best`), measures it again with the real llama-bench, compares the rounds,
decides, records the drift run, and returns a :class:`DriftResult`. It never prints; the CLI renders.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunehost.errors import TunehostError

if TYPE_CHECKING:
    from tunehost.bench.results import SavedResult
    from tunehost.facts import HostFacts
    from tunehost.store import Store, StoredRun

LOOKBACK_RUNS = 1000  # the newest runs of the model searched for a reference


@dataclass(frozen=True)
class Reference:
    """What drift re-measures: a bench or tune run, its best configuration's llama-bench flags and that
    configuration's per-round values per test (test -> values)."""

    run: "StoredRun"
    flags: tuple[str, ...]
    rounds: Mapping[str, list[float]]


def last_best(runs: Iterable["StoredRun"]) -> Reference | None:
    """The newest bench or tune run that knows a best configuration, its llama-bench flags and its per-round
    values per test (tune: the winner; bench: the configuration with the highest TG). Drift runs are skipped."""
    from tunehost.facts.results import REFERENCE_COMMANDS  # doctor's speed-drift picks the same reference

    for run in runs:
        s = run.summary
        if run.command not in REFERENCE_COMMANDS:  # a re-measure is no reference; a server bench has no llama-bench flags
            continue
        if s.get("disturbed"):  # measured under background load: no reference for "this box got slower"
            continue
        if run.command == "tune" and s.get("winner_rounds"):
            objective = (s.get("settings") or {}).get("objective", "tg")
            return Reference(run, tuple(s.get("winner_flags") or ()), {objective: list(s["winner_rounds"])})
        per_config = s.get("rounds_ts") or {}
        if per_config and run.results:
            best = max((r for r in run.results if r.kind == "tg"), key=lambda r: r.median_ts, default=run.results[0])
            rounds = per_config.get(best.config) or {}
            if rounds:
                return Reference(run, best.flags, {test: list(v) for test, v in rounds.items()})
    return None


@dataclass(frozen=True)
class DriftRequest:
    model: Path
    model_hash: str  # tunehost.store.model_hash of the model: its earlier runs, whatever the file is called now
    budget_s: float
    llama_bench: Path | None = None  # the binary or its directory; None: the usual search


@dataclass(frozen=True)
class DriftRow:
    """One test compared: the medians then and now (t/s), the change and its 95 % interval (ratios now/then;
    ``high`` may be infinite), the verdict (tunehost.bench.stats.compare_rounds) and the rounds behind each side."""

    test: str
    then: float
    now: float
    change_percent: float
    low: float
    high: float
    verdict: str
    rounds_then: int
    rounds_now: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DriftResult:
    since: "StoredRun"  # the reference run
    flags: tuple[str, ...]  # the configuration re-measured
    rows: tuple[DriftRow, ...]
    verdict: str
    changed: tuple[str, ...]  # host facts (and the llama.cpp build) that changed since the reference
    disturbed: tuple[str, ...]  # the first reason of each round other processes disturbed (left out)
    watched: int  # rounds the host watch judged
    measured: int  # rounds measured
    mismatch: bool  # disturbed rounds, but the marks do not line up with the rounds: nothing was judged
    run_id: int | None = None  # the drift run as recorded in the store
    record_note: str | None = None  # why the drift run is not in the store (it failed after the measurement)

    @property
    def slower(self) -> bool:
        return any(r.verdict == "slower" for r in self.rows)

    @property
    def not_judged(self) -> bool:
        """Nothing comparable was left once the disturbed rounds were taken out."""
        return not self.rows and bool(self.disturbed)

    def to_json(self) -> dict[str, Any]:
        """The `tunehost history --drift --json` document."""
        return {"schema": "tunehost-drift/1", "since_run": self.since.id, "since": self.since.created,
                "flags": list(self.flags), "verdict": self.verdict, "rows": [r.to_json() for r in self.rows],
                "changed": list(self.changed)}


def measure_drift(request: DriftRequest, *, facts: "HostFacts", store: "Store",
                  on_progress: Callable[[Any], None] | None = None,
                  on_status: Callable[[str], None] | None = None) -> DriftResult:
    """Re-measure the last best configuration of ``request.model`` on ``facts``' host, compare, decide and record
    the drift run in ``store``. Raises TunehostError (nothing measured) when the store holds no reference or the
    reference was tuned for --objective balanced."""
    reference = last_best(store.runs(model_hash=request.model_hash, limit=LOOKBACK_RUNS))
    if reference is None:
        raise TunehostError("no earlier run of this model with per-round results in the store: run `tunehost tune` "
                            "or `tunehost bench` first")
    tuned_for = (reference.run.summary.get("settings") or {}).get("objective")
    if tuned_for in ("balanced", "tokens-per-joule"):
        raise TunehostError(f"the last best configuration was tuned for --objective {tuned_for}; re-measure it with "
                            "`tunehost bench --baseline FLAGS` and compare")
    result = _measure(request, reference, facts, on_progress, on_status)
    changed = what_changed(reference.run, _identity(facts), result.llama_bench)
    judged = replace(judge(reference, result), changed=tuple(changed))
    recorded_rows = [{k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in r.to_json().items()}
                     for r in judged.rows]  # the store refuses infinity (an open-ended interval): null there
    try:  # measured: a store failing now (locked, damaged since) loses the record, never the result
        run_id = _record(store, result, facts, extra={"verdict": judged.verdict, "since_run": reference.run.id,
                                                       "changed": list(changed), "rows": recorded_rows,
                                                       "discarded_rounds": len(judged.disturbed)})
    except TunehostError as exc:
        return replace(judged, record_note=f"not recorded in the results store: {exc}")
    return replace(judged, run_id=run_id)


def judge(reference: Reference, result: "SavedResult") -> DriftResult:
    """Compare the rounds measured now with the reference's (pure): the rounds other processes disturbed are no
    evidence about this box (tunehost.bench.watch.reasons_for) and are left out; when the watch's marks do not
    line up with the rounds, which values they were is unknown and nothing is judged."""
    now = _counted(result)
    rows = tuple(row for test, values in reference.rounds.items()
                 if (row := _compare(test, values, now.rounds)) is not None)
    verdict = ("slower beyond the noise" if any(r.verdict == "slower" for r in rows) else
               "faster beyond the noise" if any(r.verdict == "faster" for r in rows) else "no clear change")
    busy = now.disturbed
    if now.mismatch:
        verdict = (f"not judged: {len(busy)} of {now.watched} watched rounds were disturbed ({busy[0]}) and "
                   f"{now.measured} were measured: which values they were is unknown")
    elif not rows and busy:
        verdict = f"not judged: the host was busy in {len(busy)} of {now.watched} rounds ({busy[0]})"
    return DriftResult(since=reference.run, flags=reference.flags, rows=rows, verdict=verdict, changed=(),
                       disturbed=busy, watched=now.watched, measured=now.measured, mismatch=now.mismatch)


@dataclass(frozen=True)
class _Counted:
    rounds: Mapping[str, list[tuple[float, ...]]]  # test -> the undisturbed rounds' repetitions ({}: judge nothing)
    disturbed: tuple[str, ...]
    watched: int
    measured: int
    mismatch: bool


def _counted(result: "SavedResult") -> _Counted:
    """The baseline's rounds per test without the ones the host watch marked disturbed; none at all when the marks
    and the rounds do not line up."""
    from tunehost.bench.results import rounds_of

    rounds = {t: list(v) for t, v in rounds_of(result.invocations, "baseline").items()}
    marks = [w.disturbed for w in result.round_watch]
    busy = tuple(w.reasons[0] for w in result.round_watch if w.disturbed)
    measured = max((len(v) for v in rounds.values()), default=0)
    mismatch = bool(busy) and len(marks) != measured
    if mismatch:
        rounds = {}
    elif busy:
        rounds = {t: [r for r, disturbed in zip(v, marks) if not disturbed] for t, v in rounds.items()}
    return _Counted(rounds, busy, len(marks), measured, mismatch)


def _compare(test: str, then: list[float], now_by_test: Mapping[str, list[tuple[float, ...]]]) -> DriftRow | None:
    """One test then against now (the same test, else one of the same kind: pp or tg); None when either side has
    too few rounds."""
    from tunehost.bench.stats import compare_rounds

    kind = "pp" if test.startswith("pp") else "tg"
    now = now_by_test.get(test) or next((v for t, v in now_by_test.items() if t[:2] == kind), None)
    if not now or len(then) < 2:
        return None
    c = compare_rounds([[v] for v in then], now, paired=False)
    return DriftRow(test, _median(then), _median([_median(r) for r in now]), round(c.change_percent, 2),
                    c.low, c.high, c.verdict, len(then), len(now))


def what_changed(since: "StoredRun", identity: Mapping[str, Any], llama_bench: Mapping[str, Any]) -> list[str]:
    """The host facts that changed between the reference run and now, and the llama.cpp build when both are
    known and differ (one label writer, tunehost.facts.llama.build_label, so the same build never differs)."""
    from tunehost.facts.identity import HostIdentity, changes
    from tunehost.facts.llama import build_label

    changed = changes(HostIdentity.from_json(since.host), HostIdentity.from_json(identity))
    build_now = build_label(llama_bench.get("build_number"), llama_bench.get("build_commit"))
    if since.build and build_now and since.build != build_now:
        changed.append(f"llama.cpp build {since.build} -> {build_now}")
    return changed


# ---------------------------------------------------------------- the calls into bench and the store
# (kept together: tunehost.bench.runner.measure and tunehost.store.records take their inputs from here)


def _measure(request: DriftRequest, reference: Reference, facts: "HostFacts",
             on_progress: Callable[[Any], None] | None, on_status: Callable[[str], None] | None) -> "SavedResult":
    """The reference's configuration, measured as it was (its prompt/generation lengths, depth, repetitions)."""
    from tunehost.bench import runner

    settings = reference.run.summary.get("settings") or {}
    kinds = {("pp" if t.startswith("pp") else "tg") for t in reference.rounds}
    n_prompt = int(settings.get("n_prompt") or 0) if "pp" in kinds else 0
    n_gen = int(settings.get("n_gen") or 0) if "tg" in kinds else 0
    return runner.measure(runner.BenchSettings(
        model=str(request.model), n_prompt=n_prompt or (0 if n_gen else 512), n_gen=n_gen,
        depth=int(settings.get("n_depth") or 0), reps=int(settings.get("reps") or 3), budget_s=request.budget_s,
        llama_bench=request.llama_bench, label="drift", ceiling=False), [runner.BenchConfig("baseline", reference.flags)],
        facts, runner.MeasureHooks(on_progress=on_progress, on_status=on_status))


def _identity(facts: "HostFacts") -> dict[str, Any]:
    """The host identity now (tunehost.facts.identity), as the store records it."""
    from tunehost.store import records

    identity, _ = records.host_identity(facts)
    return identity


def _record(store: "Store", result: "SavedResult", facts: "HostFacts", *, extra: dict[str, Any]) -> int:
    from tunehost.store import records

    return store.record(records.bench_run(result, facts, command="drift", extra=extra))


def _median(values: Sequence[Any]) -> float:
    return float(statistics.median(values))
