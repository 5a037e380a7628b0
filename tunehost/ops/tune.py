"""`tunehost tune` as an operation: advise's plan on the host the CLI opened, the race around it
(:mod:`tunehost.tune.race`, :mod:`tunehost.tune.space`), its resume key and journal, and the stored run.

It takes the host and its facts (opened once by the CLI), an opener of the results store and a frozen
:class:`TuneOptions`; it returns a :class:`TuneResult` and never prints (progress goes to the caller's hooks).
Bad input (a model that does not fit, a budget too short) is one TunehostError before anything is measured.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunehost.errors import TunehostError
from tunehost.tune import race, space

if TYPE_CHECKING:
    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import Plan
    from tunehost.advise.unit_access import UnitCheck, UnitKind
    from tunehost.facts import HostFacts
    from tunehost.host import Host
    from tunehost.launch import LaunchConfig
    from tunehost.model import ModelFacts
    from tunehost.store import Store

CLOCK = time.monotonic  # the budget clock's source (tests drive it with a simulated llama-bench's clock)
PLAN_LABEL = "advise's plan"


@dataclass(frozen=True)
class TuneOptions:
    """What the user asked for, validated by the CLI."""

    model: str  # the model's resolved path
    ctx: int | None = None
    objective: str = "tg"
    n_prompt: int = 512
    n_gen: int = 128
    reps: int = 3
    budget_s: float = 600.0
    llama_bench: Path | None = None
    fresh: bool = False  # start over instead of resuming an interrupted tune
    allow_busy: bool = False
    unit: "UnitKind | None" = None  # --format systemd: the unit's account, checked before any measurement


@dataclass(frozen=True)
class TuneHooks:
    """What the caller sees while the race runs: its progress, and how many stored runs a resumed tune reuses."""

    progress: Callable[[race.TuneProgress], None] | None = None
    resuming: Callable[[int], None] | None = None
    # the output format's refusals (tunehost.formats.refuse_unwritable), run on the plan's launch before anything
    # is measured: a path the format cannot write is refused before the budget is spent, not after
    writable: "Callable[[LaunchConfig], None] | None" = None


@dataclass(frozen=True)
class TuneResult:
    outcome: race.TuneOutcome
    settings: race.TuneSettings
    tune_key: str | None  # the journal's key (None without a store)
    summary: dict[str, Any] | None  # the stored run's summary (None without a store)
    unit_check: "UnitCheck | None"  # the unit's access check, made before the race (--format systemd)
    journal_note: str | None  # why the journal stopped being replayed, when a stored step was bad
    record_note: str | None = None  # why the measured tune is not in the results store (a store failing after it)


@dataclass(frozen=True)
class _Prepared:
    """The race's inputs: the plan as a candidate, the knobs, the settings, the llama-bench to run."""

    plan: race.Candidate
    knobs: list[race.Knob]
    settings: race.TuneSettings
    binary: Path
    unit_check: "UnitCheck | None"


@dataclass(frozen=True)
class _RunKeys:
    """What the store keys a tune by: the host's identity (JSON and fingerprint) and the model file's hash."""

    identity: dict[str, Any]
    fingerprint: str
    model_hash: str


def tune(host: "Host", facts: "HostFacts", open_store: Callable[[], "Store | None"], options: TuneOptions,
         hooks: TuneHooks = TuneHooks()) -> TuneResult:
    """Plan, check, race and record. ``open_store`` is called once the tune is sure to measure (a refused tune
    leaves the store untouched); it returns None when the store cannot be written."""
    from tunehost.bench.runner import run_only_named

    run_only_named(facts, options.llama_bench)  # before the plan reads the host's llama.cpp builds
    prepared = _prepare(host, facts, options, hooks.writable)
    if options.objective == race.ENERGY_OBJECTIVE:  # before any measurement: no counter, no race
        why = energy_unavailable(host)
        if why is not None:
            raise TunehostError(f"--objective {race.ENERGY_OBJECTIVE} needs an energy counter, and none can be read "
                                f"here: {why[:400]}")
    store = open_store()
    keys: _RunKeys | None = None
    tune_key: str | None = None
    journal: _StoreJournal | None = None
    if store is not None:  # the journal a killed tune resumes from
        from tunehost.store import model_hash

        identity, fingerprint = _identity(facts)
        keys = _RunKeys(identity, fingerprint, model_hash(options.model))  # the model file is hashed once
        tune_key = _tune_key(store, keys, options, prepared)
        journal = _StoreJournal(store, tune_key)
    watch = race_watch(host)
    measurer = race.Measurer(_invoke(prepared.binary, options.budget_s), journal, clock=CLOCK, watch=watch,
                             budget_s=options.budget_s)
    if measurer.stored_steps and hooks.resuming is not None:
        hooks.resuming(measurer.stored_steps)
    try:
        outcome = race.tune(prepared.plan, prepared.knobs, measurer, prepared.settings, on_progress=hooks.progress)
    finally:
        close = getattr(watch, "close", None)
        if close is not None:
            close()
    summary = None
    record_note: str | None = None
    if store is not None and keys is not None:
        ceiling = None
        if options.objective == "tg" and not outcome.disturbed:  # the placement's bytes and bandwidths: advise's
            # calibration point (a busy host's bandwidth is no calibration point)
            ceiling = _tg_ceiling(options.model, outcome.winner.args, facts)
        summary = stored_summary(outcome, tune_key, options, ceiling)
        try:  # the tune is measured: a store that fails now (locked, damaged since) loses the record, not the result
            _record(store, keys, outcome, measurer.build, options, summary)
        except TunehostError as exc:
            record_note = f"not recorded in the results store: {exc}"
        if journal is not None and journal.failed is not None:
            record_note = journal.failed + (f"; {record_note}" if record_note else "")
    return TuneResult(outcome, prepared.settings, tune_key, summary, prepared.unit_check, measurer.journal_note,
                      record_note)


def _prepare(host: "Host", facts: "HostFacts", options: TuneOptions,
             writable: "Callable[[LaunchConfig], None] | None" = None) -> _Prepared:
    """advise's plan here (refused when it does not fit), llama-bench and its options, the unit check, the knobs."""
    made, view, model = _plan(options.model, options.ctx, facts)
    if not made.fits:
        raise TunehostError("the model does not fit on this host at this context ("
                            + "; ".join(s.text for s in made.shortfalls)[:300]
                            + "): nothing to tune; see `tunehost advise` for what would fit")
    binary, supported = _llama_bench(options.llama_bench)
    launch = _with_server(made.launch(), binary, view)
    if writable is not None:
        writable(launch)
    unit_check = None
    if options.unit is not None:  # before any measurement: a unit that could not start is refused up front
        from tunehost.advise.unit_access import check_unit

        unit_check = check_unit(host, launch, options.unit)
    plan_candidate = space.candidate(PLAN_LABEL, launch, supported)
    knobs = space.knobs(model, view, made.path, supported, options.objective, options.n_prompt)
    settings = race.TuneSettings(model=options.model, n_prompt=options.n_prompt, n_gen=options.n_gen,
                                 reps=options.reps, budget_s=options.budget_s, objective=options.objective,
                                 allow_busy=options.allow_busy)
    return _Prepared(plan_candidate, knobs, settings, binary, unit_check)


def plan_for(model: str, ctx: int | None, facts: "HostFacts") -> tuple["Plan", "HostView", "ModelFacts"]:
    """advise's plan for ``model`` on the host of ``facts`` (no probes: tune measures instead), the host view and
    the model facts."""
    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import AdviseOptions, plan
    from tunehost.model import read_model

    model_facts = read_model(model)
    view = HostView.from_facts(facts)
    return plan(model_facts, view, AdviseOptions(model_path=model, ctx=ctx)), view, model_facts


_plan = plan_for  # the seam tests replace with a hand-built host view


def _with_server(launch: "LaunchConfig", bench: Path, view: Any) -> "LaunchConfig":
    """The launch with the llama-server of the build that is measured (beside llama-bench), else the one the host
    view found; unchanged (`llama-server`, from PATH) when there is neither."""
    beside = bench.parent / "llama-server"
    if beside.is_file():
        return replace(launch, server=str(beside))
    found = getattr(view, "llama_server", None)
    return replace(launch, server=found) if found else launch


def _tune_key(store: "Store", keys: _RunKeys, options: TuneOptions, prepared: _Prepared) -> str:
    """The journal's key: a hash of what decides the race (host, model, llama-bench build, settings, the plan's
    flags) and the attempt's number; the last attempt's key again when it did not finish (it resumes)."""
    stat = prepared.binary.stat()
    prefix = hashlib.sha256(json.dumps([keys.fingerprint, keys.model_hash, str(prepared.binary), stat.st_size,
                                        int(stat.st_mtime), options.objective, options.n_prompt, options.n_gen,
                                        options.reps, options.budget_s, list(prepared.plan.args)]
                                       + (["allow-busy"] if options.allow_busy else []))
                            .encode()).hexdigest()[:16]
    attempts = store.tune_keys(prefix)
    last = attempts[-1] if attempts else None
    if last is not None and not options.fresh and not store.tune_finished(last):
        return last
    return f"{prefix}-{len(attempts) + 1}"


class _StoreJournal:
    def __init__(self, store: Any, key: str):
        self.store, self.key = store, key

    note: str | None = None  # why the stored steps stop where they do (a row the store's reader left out)

    def steps(self) -> list[tuple[int, list[str], float, Any]]:
        steps, why = self.store.tune_step_rows(self.key)
        if why is not None:
            self.note = f"{why}; measuring afresh from there"
        return steps

    failed: str | None = None  # why the journal stopped being written (the race goes on: a measurement is kept)

    def add(self, seq: int, argv: Any, duration_s: float, outcome: Any) -> None:
        if self.failed is not None:
            return
        try:
            self.store.add_tune_step(self.key, seq, argv, duration_s, outcome)
        except TunehostError as exc:
            self.failed = f"the tune journal stopped at step {seq} (a later run cannot resume past it): {exc}"


def stored_summary(outcome: race.TuneOutcome, tune_key: str | None, options: TuneOptions,
                   ceiling: dict[str, Any] | None) -> dict[str, Any]:
    """The stored run's summary: the outcome, the settings, and the winner's TG ceiling when it was measured
    (advise's calibration point)."""
    objective = options.objective
    summary = dict(tune_summary(outcome, tune_key), settings={
        "n_prompt": options.n_prompt if objective not in ("tg", race.ENERGY_OBJECTIVE) else 0,
        "n_gen": options.n_gen if objective != "pp" else 0, "reps": options.reps, "objective": objective})
    if ceiling and "error" not in ceiling:
        summary.update(ceiling=ceiling, ceiling_config=summary["best"])
    return summary


def _record(store: "Store", keys: _RunKeys, outcome: race.TuneOutcome, build: Any, options: TuneOptions,
            summary: dict[str, Any]) -> None:
    """The tune as one stored run: the plan's and the winner's medians, the summary, every round."""
    from tunehost.store import NewRun, StoredResult, config_key

    with store:
        results = []
        sides = [(PLAN_LABEL, outcome.plan)] + ([("winner", outcome.winner)] if outcome.improved else [])
        for name, c in sides:
            values = scores_of(outcome, c)
            if values:
                results.append(StoredResult(name, config_key(c.args), c.args, options.objective, options.objective,
                                            float(statistics.median(values)), len(values)))
        store.record(NewRun(command="tune", host=keys.identity, host_fp=keys.fingerprint, build=build,
                            model_path=options.model, model_hash=keys.model_hash,
                            model_name=Path(options.model).name, results=tuple(results), summary=summary,
                            rounds=stored_rounds(outcome)))


def stored_rounds(outcome: race.TuneOutcome) -> tuple[Any, ...]:
    """Every round the tune's host watch saw, counted or discarded, as the store keeps them."""
    from tunehost.store import StoredRound

    return tuple(StoredRound(m.stage, m.round, m.counted, m.disturbed, m.watch.to_json() if m.watch else {})
                 for m in outcome.marks)


def scores_of(outcome: race.TuneOutcome, candidate: race.Candidate) -> tuple[float, ...]:
    """The candidate's per-round scores in the last stage that measured it."""
    for stage in reversed(outcome.stages):
        values = stage.scores.get(candidate.label)
        if values and (candidate.label != PLAN_LABEL or stage.incumbent == outcome.plan):
            return values
    return ()


def tune_summary(outcome: race.TuneOutcome, tune_key: str | None) -> dict[str, Any]:
    """The outcome as JSON: what the store keeps and `tune --format json` prints."""
    c = outcome.confirmation
    return {
        "tune_key": tune_key, "best": "winner" if outcome.improved else PLAN_LABEL, "improved": outcome.improved,
        "winner": outcome.winner.label,
        "winner_flags": list(outcome.winner.args), "winner_launch": outcome.winner.launch.to_json(),
        "plan_flags": list(outcome.plan.args), "selected": outcome.best.label,
        "confirmation": None if c is None else {"ratio": c.ratio, "low": c.low if c.low > 0 else None,
                                                "high": c.high if math.isfinite(c.high) else None,
                                                "verdict": c.verdict, "rounds": c.rounds},
        "stages": [{"knob": s.knob, "incumbent": s.incumbent.label, "winner": s.winner.label, "rounds": s.rounds,
                    "arms": s.arms, "stop": s.stop_reason, "dropped": [list(d) for d in s.dropped]}
                   for s in outcome.stages],
        "skipped": [list(s) for s in outcome.skipped], "spent_s": round(outcome.spent_s, 1),
        "budget_s": outcome.budget_s, "steps": outcome.steps, "reused_steps": outcome.reused_steps,
        "reused_s": round(outcome.reused_s, 1),
        "winner_rounds": [round(v, 4) for v in scores_of(outcome, outcome.winner)],
        # the host watch: disturbed = the result is a busy host's (stopped for load, or counted disturbed rounds)
        "disturbed": outcome.disturbed, "allow_busy": outcome.allow_busy, "stopped": outcome.stopped,
        "busy_reason": outcome.busy_reason, "discarded_rounds": outcome.discarded_rounds,
        "disturbed_rounds": outcome.disturbed_rounds, "waited_s": round(outcome.waited_s, 1),
        "load_dropped": list(outcome.load_dropped), "not_searched": [list(n) for n in outcome.not_searched],
        "has_result": outcome.has_result,
    }


# ---------------------------------------------------------------- the seams to bench and the store (one place each)


def race_watch(host: "Host") -> Any:
    """What watches the host around each llama-bench call (tests replace it with a simulated load)."""
    from tunehost.bench.watch import CallWatcher, HostWatcher

    return CallWatcher(HostWatcher(host))


def energy_unavailable(host: "Host") -> str | None:
    """Why no energy counter can be read on ``host`` now (the CPU packages' RAPL, the GPUs' NVML or amdgpu
    counters), else None: what `--objective tokens-per-joule` needs (tests replace it)."""
    from tunehost.bench.energy import EnergyMeter, unavailable
    from tunehost.bench.gpu_watch import GpuSampler

    sampler = GpuSampler(host)
    sampler.start()
    try:
        return unavailable(EnergyMeter(host, gpu_counters=sampler.energy_counters).read())
    finally:
        sampler.stop()


def _llama_bench(explicit: Path | None) -> tuple[Path, frozenset[str]]:
    """llama-bench (the given path, else tunehost's search) and the options its --help lists."""
    from tunehost.bench import runner

    binary = runner.resolve_binary(explicit)
    return binary, runner._supported(binary)


def _invoke(binary: Path, budget_s: float) -> race.Invoke:
    from tunehost.bench import llama_bench

    return lambda args: llama_bench.run_llama_bench(binary, args, timeout=max(60.0, budget_s))


def _tg_ceiling(model: str, args: tuple[str, ...], facts: "HostFacts") -> dict[str, Any] | None:
    from tunehost.bench import runner

    return runner.tg_ceiling(model, args, facts)


def _identity(facts: "HostFacts") -> tuple[dict[str, Any], str]:
    """(identity JSON, fingerprint) of the host the tune runs on."""
    from tunehost.store import records

    return records.host_identity(facts)
