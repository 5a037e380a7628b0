"""`tunehost report`'s operation: everything tunehost knows about one host, gathered for one shareable page.

    report = build_report(facts, ReportRequest(checks=...), store)  # store: None reads a snapshot's sample
    report.diagnosis.findings    # doctor's judgement (every finding, its evidence and fix)
    report.plans                 # advise's plan for each model in the store that is on this machine
    report.latest                # the newest bench / tune / server-bench runs, each result with its interval
    report.series                # TG over time per model, with drift marks and host changes
    report.hardware              # what this box is

The CLI (tunehost/cli/report.py) opens the host once (live or a snapshot) and the results store, calls
:func:`build_report` and renders the result through tunehost.formats.report_html. Nothing here prints.

Runs come from the results store (live, or ``--store FILE``) or, for a snapshot without a store, from its
``samples/results.json`` (TG medians only: no intervals there). Both are hostile input: every string is one printable
line, and unless ``full`` every text is made shareable (:func:`shareable`): model paths become file names, home
directories and the user names in them become ``~``, secrets become ``<redacted>``.
"""

from __future__ import annotations

import bisect

import dataclasses
import math
import re
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunehost import __version__
from tunehost.errors import TunehostError
from tunehost.printable import printable_lines

if TYPE_CHECKING:
    from tunehost.advise.plan import BudgetRow
    from tunehost.check import Finding
    from tunehost.facts import HostFacts
    from tunehost.facts.identity import HostIdentity
    from tunehost.facts.results import RecordedRun
    from tunehost.host import Host
    from tunehost.store import Store, StoredRun

MAX_RUNS = 10_000  # the newest runs of a store the page is built from (docs/report.md)
MAX_POINTS = 400  # per chart series: more are thinned evenly (the marks always kept), and the page says so
MAX_MARKS = 60  # drift and host-change marks per chart
MAX_SERIES = 24  # charts on one page (the most recently measured models): each one is drawn by the browser
MAX_LATEST = 12  # the newest bench / tune / server-bench runs shown with their results
MAX_ROWS_PER_RUN = 16
MAX_PLANS = 6  # models planned (advise runs once per model)
MAX_TEXT = 400  # one value on the page, in characters (a whole evidence value is kept in the host's own report)
LATEST_COMMANDS = ("bench", "tune", "server-bench", "drift")
SERIES_COMMANDS = ("bench", "tune", "drift")
DRIFT_CLASSES = {"slower beyond the noise": "slower", "faster beyond the noise": "faster"}


@dataclass(frozen=True)
class ReportRequest:
    checks: tuple[Any, ...]  # tunehost.check.Check instances (doctor's registry, chosen by the CLI)
    warnings: tuple[str, ...] = ()  # the registry's (a plugin that did not load)
    quick: bool = False  # doctor without measuring (the live host)
    full: bool = False  # keep paths and user names (not shareable)
    models: tuple[Path, ...] = ()  # plan these; none: the models of the store that are on this machine
    snapshot: Path | None = None  # the snapshot the CLI opened, named on the page
    max_runs: int = MAX_RUNS
    max_points: int = MAX_POINTS


# ---------------------------------------------------------------- the result


@dataclass(frozen=True)
class ResultRow:
    """One configuration and test of a run: its median t/s and, where the rounds were recorded, the 95 % interval
    of its level (tunehost.bench.stats.level_radius) and the verdict against the run's baseline."""

    config: str
    test: str
    kind: str
    median: float
    low: float | None = None
    high: float | None = None
    rounds: int | None = None
    verdict: str | None = None
    flags: str = ""


@dataclass(frozen=True)
class LatestRun:
    id: int
    created: str
    command: str
    model: str
    build: str | None
    rows: tuple[ResultRow, ...]
    outcome: str  # the verdicts, or the tune's result with its confirmation interval
    disturbed: bool = False


@dataclass(frozen=True)
class Point:
    at: str  # created, ISO 8601 UTC
    tg: float
    run_id: int
    command: str


@dataclass(frozen=True)
class Mark:
    """An annotation on a TG chart: a drift re-measure ("drift", its verdict class) or a host change ("change":
    kernel, BIOS, memory modules and their speed, GPUs, CPU, the llama.cpp build)."""

    at: str
    kind: str  # drift | change
    text: str
    tone: str = "neutral"  # slower | faster | neutral | change


@dataclass(frozen=True)
class Series:
    model: str
    model_hash: str
    points: tuple[Point, ...]
    marks: tuple[Mark, ...]
    total_points: int  # before thinning
    total_marks: int = 0  # before keeping the newest MAX_MARKS / 2 of each kind

    @property
    def thinned(self) -> bool:
        return self.total_points > len(self.points)


@dataclass(frozen=True)
class ModelPlan:
    """advise's plan for one model, or why there is none (``skipped``)."""

    model: str
    skipped: str | None = None
    fits: bool = False
    path: str = ""  # gpu | moe | split | unified | cpu
    command: str = ""
    items: tuple["BudgetRow", ...] = ()  # advise's budget rows, as advise gives them
    gpu_free: int | None = None
    ram_available: int | None = None
    gpu_label: str | None = None
    shortfalls: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    ceiling_tg: float | None = None
    band_tg: tuple[float, float] | None = None       # advise's expected TG at the start of a context (low, high)
    band_full_tg: tuple[float, float] | None = None  # ... when a slot's context fills, `ctx` tokens deep
    ctx: int = 0


@dataclass(frozen=True)
class ShownFinding:
    check: str
    severity: str
    rank: int
    summary: str
    evidence: tuple[tuple[str, str], ...]
    fix: str | None
    fix_commands: tuple[str, ...]
    detail: str | None


@dataclass(frozen=True)
class HostReport:
    generated: str
    tunehost: str
    source: str  # "this host" | "snapshot NAME"
    verdict: str  # ready | not-ready
    findings: tuple[ShownFinding, ...]
    hardware: tuple[tuple[str, str], ...]
    plans: tuple[ModelPlan, ...]
    latest: tuple[LatestRun, ...]
    series: tuple[Series, ...]
    runs_source: str  # where the runs came from
    runs_read: int
    runs_note: str | None = None  # why there are none, or what was left out
    notes: tuple[str, ...] = ()  # what the page left out or limited
    full: bool = False

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.severity] = out.get(f.severity, 0) + 1
        return out


# ---------------------------------------------------------------- where the runs come from


@dataclass(frozen=True)
class RunView:
    """One run, whether read from a store (StoredRun: rounds, so intervals) or a snapshot's results sample
    (RecordedRun: TG medians only)."""

    id: int
    created: str
    command: str
    model: str  # the model's file name (its path with full)
    model_hash: str
    build: str | None
    identity: "HostIdentity | None"
    tg: float | None  # the best configuration's TG median
    rows: tuple[ResultRow, ...] = ()
    outcome: str = ""
    verdict: str | None = None  # drift runs
    changed: tuple[str, ...] = ()
    disturbed: bool = False
    model_path: str | None = None  # the store's path of the model file (a snapshot's sample keeps none)
    stored: Any = field(default=None, compare=False, repr=False)  # the StoredRun it was read from

    def details(self) -> tuple[tuple[ResultRow, ...], str]:
        """Its results (with the intervals of their levels, from a store) and its outcome in words."""
        if self.stored is None:
            return self.rows, self.outcome
        summary = self.stored.summary if isinstance(self.stored.summary, Mapping) else {}
        return _rows(self.stored, summary), _outcome(self.command, summary)


@dataclass(frozen=True)
class RunSource:
    """The runs the page is built from, newest first, and what to say about them."""

    runs: tuple[RunView, ...]
    source: str
    note: str | None = None


def store_runs(store: "Store", *, limit: int = MAX_RUNS, full: bool = False) -> RunSource:
    """The newest ``limit`` runs of an open results store (read-only use)."""
    runs, skipped = store.run_rows(limit=limit)  # a stored row that is not a valid run is left out, and said
    notes = [f"the newest {limit} runs of the store are shown"] if len(runs) + len(skipped) >= limit else []
    if skipped:
        notes.append(f"{len(skipped)} stored row{'s' if len(skipped) != 1 else ''} left out as not valid runs "
                     f"(first: {skipped[0][:160]})")
    note = "; ".join(notes) or None
    identities: dict[str, Any] = {}  # by fingerprint: a store holds a few hosts in thousands of runs
    return RunSource(tuple(_from_stored(r, full, identities) for r in runs), "results store", note)


def sample_runs(facts: "HostFacts") -> RunSource:
    """The runs of the host's `results` sample (a snapshot's samples/results.json): TG medians, no rounds."""
    from tunehost.facts.results import ResultsFacts

    results = facts.get(ResultsFacts)
    if results.unavailable:
        return RunSource((), "snapshot results sample", results.unavailable)
    note = (f"{results.dropped} runs of the sample were not valid and are left out" if results.dropped else None)
    return RunSource(tuple(_from_recorded(r) for r in results.runs), "snapshot results sample (TG medians only: "
                     "intervals need the results store, --store FILE)", note)


def _from_stored(run: "StoredRun", full: bool, identities: dict[str, Any]) -> RunView:
    """The run as the page uses it; its results and their intervals are worked out only for the runs shown
    (:meth:`RunView.details`)."""
    from tunehost.facts.identity import HostIdentity

    summary = run.summary if isinstance(run.summary, Mapping) else {}
    # the GGUF's name when recorded (it may hold a "/"), else the file's name; its path only with full
    model = (run.model_path if full and run.model_path else
             str(run.model_name) if run.model_name else Path(str(run.model_path or "?")).name)
    key = f"{run.host_fp}|{len(str(run.host))}"
    if key not in identities:
        identities[key] = HostIdentity.from_json(run.host) if isinstance(run.host, Mapping) else None
    identity = identities[key]
    verdict = summary.get("verdict") if run.command == "drift" else None
    changed = summary.get("changed") if run.command == "drift" and isinstance(summary.get("changed"), list) else ()
    return RunView(id=int(run.id), created=str(run.created), command=str(run.command), model=model,
                   model_hash=str(run.model_hash), build=run.build, identity=identity, tg=_best_tg(run),
                   stored=run, verdict=str(verdict) if isinstance(verdict, str) else None,
                   changed=tuple(str(c) for c in changed), disturbed=bool(summary.get("disturbed")),
                   model_path=str(run.model_path) if run.model_path else None)


def _from_recorded(run: "RecordedRun") -> RunView:
    rows = tuple(ResultRow(config, "tg", "tg", ts) for config, ts in run.tg)
    return RunView(id=run.id, created=run.created, command=run.command, model=run.model, model_hash=run.model_hash,
                   build=run.build, identity=run.host, tg=run.best_tg, rows=rows,
                   outcome=run.verdict or "", verdict=run.verdict, changed=run.changed)


def _best_tg(run: "StoredRun") -> float | None:
    try:
        chosen = run.tg()
    except (TypeError, AttributeError):
        chosen = None
    if chosen is None:
        chosen = max((r.median_ts for r in run.results if r.kind == "tg"), default=None)
    return _finite(chosen)


def _rows(run: "StoredRun", summary: Mapping[str, Any]) -> tuple[ResultRow, ...]:
    """Each result of the run with its interval where the rounds are in the summary: a bench's ``rounds_ts``
    (per configuration and test), a tune's ``winner_rounds`` (its winner, the objective)."""
    per_config = summary.get("rounds_ts") if isinstance(summary.get("rounds_ts"), Mapping) else {}
    verdicts = summary.get("verdicts") if isinstance(summary.get("verdicts"), Mapping) else {}
    winner_rounds = summary.get("winner_rounds") if isinstance(summary.get("winner_rounds"), list) else None
    best = summary.get("best")
    rows = []
    for r in run.results[:MAX_ROWS_PER_RUN]:
        values: Any = None
        if run.command == "tune" and r.config == best and winner_rounds:
            values = winner_rounds
        elif isinstance(per_config.get(r.config), Mapping):
            values = per_config[r.config].get(r.test)
        low, high, rounds = level_interval(values)
        verdict = verdicts.get(r.test) if r.config != (run.results[0].config if run.results else None) else None
        rows.append(ResultRow(r.config, r.test, r.kind, r.median_ts, low, high, rounds or r.rounds,
                              str(verdict) if isinstance(verdict, str) else None, " ".join(r.flags)))
    return tuple(rows)


def level_interval(values: Any, centre: float | None = None) -> tuple[float | None, float | None, int | None]:
    """The 95 % interval of a level measured in these per-round values (tunehost.bench.stats.level_radius):
    (low, high, rounds), or Nones when fewer than two valid rates (tunehost.bounds.tokens_per_s) were recorded.
    Centred on ``centre`` (a run's stored median: `tunehost export`) or, without one, on the values' median."""
    from tunehost.bench.stats import level_radius
    from tunehost.bounds import tokens_per_s

    if not isinstance(values, list):
        return None, None, None
    clean = [rate for rate in map(tokens_per_s, values) if rate is not None][:10_000]
    if len(clean) < 2:
        return None, None, len(clean) or None
    radius = level_radius([[v] for v in clean])
    if not math.isfinite(radius):
        return None, None, len(clean)
    if centre is None:
        centre = statistics.median(clean)
    return centre * math.exp(-radius), centre * math.exp(radius), len(clean)


def _outcome(command: str, s: Mapping[str, Any]) -> str:
    if command == "tune":
        c = s.get("confirmation") if isinstance(s.get("confirmation"), Mapping) else None
        if s.get("improved") and c and _finite(c.get("ratio")) is not None:
            low, high = _finite(c.get("low")), _finite(c.get("high"))
            interval = (f" [{(low - 1) * 100:+.1f} %, {(high - 1) * 100:+.1f} %]"
                        if low is not None and high is not None else "")
            text = (f"{s.get('winner')}: {(c['ratio'] - 1) * 100:+.1f} %{interval} against advise's plan "
                    f"({c.get('rounds')} rounds, {c.get('verdict')})")
        else:
            text = "advise's plan kept"
        return text + ("; stopped: " + str(s["stopped"]) if s.get("stopped") else "")
    if command == "drift":
        return _drift_text(s)
    verdicts = s.get("verdicts") if isinstance(s.get("verdicts"), Mapping) else {}
    text = ", ".join(f"{t} {v}" for t, v in verdicts.items())
    rounds = s.get("rounds")
    return text or (f"{rounds} rounds" if rounds else "")


def _drift_text(s: Mapping[str, Any]) -> str:
    """A drift re-measure in words: its verdict, since which run, and per test then -> now with the change and its
    95 % interval (ratios now/then as the store keeps them; an open end is null)."""
    parts = [str(s.get("verdict") or "no verdict recorded")]
    if isinstance(s.get("since_run"), int) and not isinstance(s.get("since_run"), bool):
        parts[0] += f" since run #{s['since_run']}"
    rows = s.get("rows") if isinstance(s.get("rows"), list) else []
    for row in rows[:MAX_ROWS_PER_RUN]:
        if not isinstance(row, Mapping):
            continue
        then, now, change = _finite(row.get("then")), _finite(row.get("now")), _finite(row.get("change_percent"))
        if then is None or now is None or change is None:
            continue
        low, high = _finite(row.get("low")), _finite(row.get("high"))
        interval = (f" [{(low - 1) * 100:+.1f} %, " + (f"{(high - 1) * 100:+.1f} %]" if high is not None else "+inf]")
                    if low is not None else "")
        parts.append(f"{row.get('test')} {then:.2f} -> {now:.2f} t/s, {change:+.1f} %{interval} "
                     f"{row.get('verdict') or ''}".rstrip())
    return "; ".join(parts)


def _finite(value: Any) -> float | None:
    """A finite number as float (tunehost.bounds.number: bools, text, NaN, infinity and ints beyond a float are
    None)."""
    from tunehost.bounds import number

    return number(value, -math.inf)


# ---------------------------------------------------------------- the operation


def build_report(facts: "HostFacts", request: ReportRequest, store: "Store | None" = None) -> HostReport:
    """doctor's judgement of ``facts``' host, advise's plans, the runs (of ``store``; without one a snapshot's
    results sample) as the latest results and TG charts, the hardware; every text shareable unless
    ``request.full``."""
    from tunehost.ops.doctor import DoctorRequest, diagnose

    host = facts.host
    if store is not None:
        runs = store_runs(store, limit=request.max_runs, full=request.full)
    elif not host.live:
        runs = sample_runs(facts)
    else:
        runs = RunSource((), "results store", "no results store yet: `tunehost bench` and `tunehost tune` "
                                              "record every run")
    diagnosis = diagnose(facts, DoctorRequest(tuple(request.checks), tuple(request.warnings), quick=request.quick))
    report = diagnosis.report
    findings = tuple(sorted((_shown(f) for f in report.findings), key=lambda f: -f.rank))
    notes: list[str] = [*list(report.warnings)[:5], *[f"snapshot: {r}" for r in diagnosis.refusals][:5]]
    plans = tuple(plan_models(host, facts, request, runs))
    series = tuple(chart_series(runs.runs, max_points=request.max_points))
    thinned = [s for s in series if s.thinned]
    charted = len({r.model_hash for r in runs.runs if r.command in SERIES_COMMANDS and r.tg is not None})
    if charted > len(series):
        notes.append(f"TG charts for the {len(series)} most recently measured of {charted} models")
    if any(s.total_marks > len(s.marks) for s in series):
        notes.append(f"charts mark the newest {MAX_MARKS // 2} drift verdict changes and host changes per model")
    if thinned:
        notes.append(f"charts show at most {request.max_points} points per model, thinned evenly "
                     f"({', '.join(f'{s.model}: {len(s.points)} of {s.total_points}' for s in thinned[:4])}); "
                     "`tunehost history --json` has every run")
    source = f"snapshot {request.snapshot.name}" if request.snapshot is not None else "this host"
    result = HostReport(
        generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), tunehost=__version__, source=source,
        verdict=report.verdict, findings=findings, hardware=hardware(facts), plans=plans,
        latest=tuple(latest_runs(runs.runs)), series=series, runs_source=runs.source,
        runs_read=len(runs.runs), runs_note=runs.note, notes=tuple(notes), full=request.full)
    return finish(result, full=request.full)


def _shown(f: "Finding") -> ShownFinding:
    return ShownFinding(
        check=f.check, severity=f.severity.value, rank=f.severity.rank, summary=f.summary,
        evidence=tuple((str(k), str(v)) for k, v in list(f.evidence.items())[:40]),
        fix=f.fix.text if f.fix else None, fix_commands=tuple(f.fix.commands) if f.fix else (), detail=f.detail)


def hardware(facts: "HostFacts") -> tuple[tuple[str, str], ...]:
    """What this box is: the store's identity (CPU, memory modules at their configured speed, GPUs, kernel,
    BIOS) and the sizes advise plans with."""
    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import gib
    from tunehost.facts.identity import HostIdentity

    identity = HostIdentity.gather(facts)
    rows: list[tuple[str, str]] = [("CPU", identity.cpu or "unknown")]
    try:
        view = HostView.from_facts(facts)
    except Exception:  # noqa: BLE001 - the summary is context: an unreadable fact is "unknown", never a stop
        view = None
    if view is not None:
        if view.online_cpus:
            rows.append(("CPUs online", f"{len(view.online_cpus)} logical, {len(view.cores) or '?'} cores"))
        if view.ram_total:
            avail = f", {gib(view.ram_available)} available" if view.ram_available else ""
            rows.append(("RAM", f"{gib(view.ram_total)}{avail}"))
    for module in identity.memory:
        rows.append(("memory module", module))
    for i, gpu in enumerate(view.gpus if view is not None else ()):
        size = f", {gib(gpu.total_bytes)}" if gpu.total_bytes else ""
        free = f" ({gib(gpu.free_bytes)} free)" if gpu.free_bytes is not None else ""
        rows.append((f"GPU {i}", f"{gpu.name}{size}{free}{' unified memory' if gpu.unified else ''}"))
    if view is None or not view.gpus:
        rows.extend(("GPU", g) for g in identity.gpus)
    rows += [("kernel", identity.kernel or "unknown"),
             ("BIOS", " ".join(x for x in (identity.bios_version, identity.bios_date) if x) or "unknown")]
    return tuple(rows)


def plan_models(host: "Host", facts: "HostFacts", request: ReportRequest, runs: RunSource) -> list[ModelPlan]:
    """advise's plan for each model asked for, else for the store's models that are files on this machine."""
    models = list(request.models)
    if not models and host.live:
        seen: set[str] = set()
        for run in runs.runs:
            path = Path(run.model_path) if run.model_path and run.model_path.startswith("/") else None
            if run.model_hash in seen or path is None or not path.is_file():
                continue
            seen.add(run.model_hash)
            models.append(path)
    plans: list[ModelPlan] = []
    for model in models[:MAX_PLANS]:
        plans.append(_plan(host, facts, model, request))
    return plans


def _plan(host: "Host", facts: "HostFacts", model: Path, request: ReportRequest) -> ModelPlan:
    from tunehost.ops.advise import AdviseRequest, advise

    name = str(model) if request.full else model.name
    if not model.is_file():
        return ModelPlan(name, skipped="the model file is not on this machine")
    try:
        advice = advise(host, facts, AdviseRequest(models=(model,), no_probe=True, snapshot=request.snapshot))
    except (TunehostError, OSError, ValueError) as exc:  # one model that cannot be planned: said, the page goes on
        return ModelPlan(name, skipped=str(exc) or type(exc).__name__)
    plan = advice.plan
    if plan is None:
        return ModelPlan(name, skipped="advise returned no plan")
    budget = plan.budget
    ceiling = plan.ceiling.tokens_per_s if plan.ceiling is not None else None
    return ModelPlan(model=name, fits=plan.fits, path=plan.path, command=" ".join(plan.argv()),
                     items=tuple(budget.rows),
                     gpu_free=budget.gpu_free, ram_available=budget.ram_available, gpu_label=budget.gpu_label,
                     shortfalls=tuple(s.text for s in plan.shortfalls), warnings=tuple(plan.warnings),
                     ceiling_tg=_finite(ceiling), band_tg=_band(plan.ceiling),
                     band_full_tg=_band(plan.ceiling_full), ctx=plan.ctx)


def _band(ceiling: Any) -> tuple[float, float] | None:
    """A ceiling's expected band as (low, high) t/s, both finite; None without one."""
    band = ceiling.band if ceiling is not None else None
    if band is None:
        return None
    low, high = _finite(band.low), _finite(band.high)
    return (low, high) if low is not None and high is not None else None


def latest_runs(runs: Sequence[RunView], limit: int = MAX_LATEST) -> list[LatestRun]:
    """The newest run of each model and command (bench, tune, server-bench, drift), newest first."""
    seen: set[tuple[str, str]] = set()
    out = []
    for run in runs:
        key = (run.model_hash, run.command)
        if run.command not in LATEST_COMMANDS or key in seen:
            continue
        seen.add(key)
        rows, outcome = run.details()
        out.append(LatestRun(run.id, run.created, run.command, run.model, run.build, rows, outcome, run.disturbed))
        if len(out) >= limit:
            break
    return out


def chart_series(runs: Sequence[RunView], *, max_points: int = MAX_POINTS,
                 max_series: int = MAX_SERIES) -> list[Series]:
    """TG over time per model (oldest first): one point per bench, tune or drift run with a TG, the drift
    verdicts and the host changes between consecutive runs (identity and llama.cpp build) as marks; the
    ``max_series`` most recently measured models only."""
    ordered = sorted(runs, key=lambda r: (r.created, r.id))
    changes_at = host_changes(ordered)
    by_model: dict[str, list[RunView]] = {}
    for run in ordered:
        if run.command in SERIES_COMMANDS and run.tg is not None:
            by_model.setdefault(run.model_hash, []).append(run)
    newest = sorted(by_model, key=lambda d: (by_model[d][-1].created, by_model[d][-1].id))[-max_series:]
    kept = set(newest)
    change_times = [m.at for m in changes_at]  # oldest first, as `ordered`
    out = []
    for digest, model_runs in by_model.items():
        if digest not in kept:
            continue
        points = [Point(r.created, float(r.tg or 0.0), r.id, r.command) for r in model_runs]
        first, last = points[0].at, points[-1].at
        drifts = drift_marks([r for r in model_runs if r.command == "drift" and r.verdict])
        changes = changes_at[bisect.bisect_left(change_times, first):bisect.bisect_right(change_times, last)]
        shown = sorted(drifts[-MAX_MARKS // 2:] + changes[-MAX_MARKS // 2:], key=lambda m: m.at)
        out.append(Series(model_runs[-1].model, digest, tuple(thin(points, max_points, {m.at for m in shown})),
                          tuple(shown), len(points), len(drifts) + len(changes)))
    return out


def drift_marks(drifts: Sequence[RunView]) -> list[Mark]:
    """One mark where a model's drift verdict changes (oldest first): a run of the same verdict is one mark that
    says how many re-measures said it and until when."""
    marks: list[Mark] = []
    group: list[RunView] = []

    def close() -> None:
        if group:
            head, verdict = group[0], group[0].verdict or ""
            more = f" ({len(group)} re-measures to {group[-1].created[:10]})" if len(group) > 1 else ""
            marks.append(Mark(head.created, "drift", f"drift: {verdict}{more}", DRIFT_CLASSES.get(verdict, "neutral")))

    for run in drifts:
        if group and run.verdict != group[0].verdict:
            close()
            group = []
        group.append(run)
    close()
    return marks


def host_changes(ordered: Sequence[RunView]) -> list[Mark]:
    """A mark at each run whose host identity (kernel, BIOS, memory modules and their speed, GPUs, CPU) or
    llama.cpp build differs from the run before it (oldest first)."""
    from tunehost.facts.identity import changes

    marks: list[Mark] = []
    before: RunView | None = None
    for run in ordered:
        if before is not None:
            lines = []
            if before.identity is not None and run.identity is not None:
                lines = changes(before.identity, run.identity)
            if before.build and run.build and before.build != run.build:
                lines.append(f"llama.cpp build {before.build} -> {run.build}")
            if lines:
                marks.append(Mark(run.created, "change", "; ".join(lines), "change"))
        if run.identity is not None:
            before = run
    return marks


def thin(points: list[Point], limit: int, keep: set[str]) -> list[Point]:
    """At most ``limit`` points, evenly spaced, the first, the last and those at a mark kept."""
    if len(points) <= limit:
        return points
    step = len(points) / limit
    chosen = {int(i * step) for i in range(limit)} | {0, len(points) - 1}
    chosen |= {i for i, p in enumerate(points) if p.at in keep}
    return [p for i, p in enumerate(points) if i in chosen]


# ---------------------------------------------------------------- shareable by default

_HOME = re.compile(r"(/home|/Users|/var/home)/([^/\s:'\"]+)")
_ROOT_HOME = re.compile(r"(?<![\w/])/root(?=/|\b)")


def _names_in(report: HostReport) -> set[str]:
    """The user names that home directories in the report's texts give away (they are scrubbed everywhere)."""
    names: set[str] = set()
    for text in _texts(report):
        names.update(m.group(2) for m in _HOME.finditer(text))
    return {n for n in names if len(n) >= 2}


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _texts(getattr(value, f.name))
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _texts(item)


def share_text(text: str, names: Iterable[str] = ()) -> str:
    """One text made shareable: secrets redacted (tunehost.host.redact), home directories as ``~``, the user
    names they named as ``<user>``."""
    from tunehost.host.redact import redact

    # every word, whatever the count (a bound here once let a 401-word flag list through unredacted), split at
    # any white space (a line break before `--api-key` hid it); the caller bounds the text (finish: 16,000 chars)
    parts = re.split(r"(\s+)", text)
    parts[0::2] = redact(parts[0::2])
    text = "".join(parts)
    text = _HOME.sub("~", text)
    text = _ROOT_HOME.sub("~", text)
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", "<user>", text)
    return text


def finish(report: HostReport, *, full: bool) -> HostReport:
    """Every string of the report as printable text (line breaks kept, every other control character "?", at
    most MAX_TEXT characters a line); unless ``full`` also shareable (:func:`share_text`). Model hashes and
    dates are left as they are."""
    names = () if full else tuple(_names_in(report))

    def text(v: str) -> str:
        lines = printable_lines(v[:MAX_TEXT * 10]).split("\n")[:40]
        shown = "\n".join(line if len(line) <= MAX_TEXT else line[:MAX_TEXT - 1] + "…" for line in lines)
        return shown if full else share_text(shown, names)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return dataclasses.replace(v, **{f.name: walk(getattr(v, f.name)) for f in dataclasses.fields(v)
                                             if f.name not in ("model_hash", "at", "created", "generated")})
        if isinstance(v, tuple):
            return tuple(walk(x) for x in v)
        return v

    return walk(report)
