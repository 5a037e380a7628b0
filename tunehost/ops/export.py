"""`tunehost export`'s operation: one doctor run and the results store as metric families (data only; the text
exposition format is tunehost.formats.prometheus's, the atomic write the CLI's).

    metrics = export(facts, ExportRequest(checks, quick=False, runs=store.runs(limit=200)))
    metrics.families     # (name, help, samples) in a fixed order: what a node_exporter textfile carries
    metrics.notes        # what could not be read (a snapshot without bandwidth, a store that failed), for stderr

Every value is what doctor and the store already validated (tunehost.bounds, tunehost.facts.results); numbers that
are not finite never become a sample, label values are raw text here and escaped and bounded by the format.
Names follow the Prometheus conventions: the `tunehost_` prefix, base units (`_bytes_per_second`, `_hertz`,
`_transfers_per_second`, `_seconds`), `_info` metrics for text, one 0/1 series per state for an enumeration.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tunehost.timestamps import epoch_seconds

if TYPE_CHECKING:
    from tunehost.doctor import Report
    from tunehost.facts import HostFacts
    from tunehost.store.repository import StoredRun

SEVERITIES = ("ok", "info", "skip", "warn", "error", "fail")  # tunehost.check.Severity, every state exported
DRIFT_STATES = {"slower beyond the noise": "slower", "faster beyond the noise": "faster",
                "no clear change": "no_change"}  # tunehost.facts.results.DRIFT_VERDICTS -> label values
MAX_MODELS = 50  # models exported (newest measured first): a textfile is scraped every 15-60 s
MAX_CONFIGS = 16  # configurations per model (its newest runs' first ones)
MAX_GPUS = 16
MAX_TESTS = 16  # tests per model and configuration (pp512, tg128 and their depths)
MAX_SPEEDS = 1000  # speed series in all: what a scrape carries stays bounded whatever the store holds


@dataclass(frozen=True)
class Sample:
    labels: tuple[tuple[str, str], ...]  # raw text: tunehost.formats.prometheus escapes and bounds each value
    value: float


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    samples: tuple[Sample, ...]
    type: str = "gauge"


@dataclass(frozen=True)
class ExportRequest:
    checks: tuple[Any, ...]  # tunehost.check.Check instances, as doctor selects them
    warnings: tuple[str, ...] = ()
    quick: bool = False  # judge the settings only: no bandwidth or clock measurement
    runs: "Sequence[StoredRun] | None" = None  # the results store's newest runs (live); None: the results sample
    store_note: str | None = None  # why the store's runs are not there (it could not be read)


@dataclass(frozen=True)
class Metrics:
    families: tuple[Family, ...]
    verdict: str
    notes: tuple[str, ...] = ()
    doctor_notes: tuple[str, ...] = field(default=())  # diagnose's notes and refusals, for stderr


class _Families:
    """Families in the order they are declared; a family without samples is left out."""

    def __init__(self) -> None:
        self.order: list[tuple[str, str]] = []
        self.samples: dict[str, list[Sample]] = {}

    def add(self, name: str, help_text: str, value: float | int | None, /, **labels: str) -> None:
        if name not in self.samples:
            self.order.append((name, help_text))
            self.samples[name] = []
        if value is None:
            return
        number = float(value)
        if math.isfinite(number):
            self.samples[name].append(Sample(tuple(labels.items()), number))

    def families(self) -> tuple[Family, ...]:
        return tuple(Family(n, h, tuple(self.samples[n])) for n, h in self.order if self.samples[n])


def export(facts: "HostFacts", request: ExportRequest, *, now: Callable[[], float] | None = None) -> Metrics:
    """doctor's judgement of the host of `facts` (measuring on the live host unless quick) and the latest speed of
    each model from the store (or a snapshot's results sample) as metric families."""
    import time

    from tunehost import __version__
    from tunehost.ops.doctor import DoctorRequest, diagnose

    diagnosis = diagnose(facts, DoctorRequest(request.checks, request.warnings, quick=request.quick))
    report = diagnosis.report
    host = facts.host
    measured_at = _snapshot_time(host) if not host.live else (now or time.time)()
    out = _Families()
    notes: list[str] = [request.store_note] if request.store_note else []
    out.add("tunehost_info", "The tunehost that wrote this file.", 1, version=__version__)
    out.add("tunehost_doctor_ready", "1 when tunehost doctor judges the host ready for llama.cpp, else 0.",
            1 if report.ready else 0)
    if measured_at is not None:
        out.add("tunehost_doctor_timestamp_seconds", "When the host was judged (a snapshot: when it was taken).",
                measured_at)
    _checks(out, report)
    _ram(out, facts, notes)
    _measured(out, facts, measured_at, notes)
    _gpus(out, facts)
    _speeds(out, facts, request.runs, notes)
    return Metrics(out.families(), report.verdict, tuple(notes),
                   tuple(diagnosis.notes) + tuple(f"snapshot: {r}" for r in diagnosis.refusals))


def _snapshot_time(host: Any) -> float | None:
    return epoch_seconds(str((getattr(host, "manifest", None) or {}).get("created") or ""))


def _checks(out: _Families, report: "Report") -> None:
    from tunehost.check import Severity

    worst: dict[str, Severity] = {}
    for f in report.findings:
        if f.check not in worst or f.severity.rank > worst[f.check].rank:
            worst[f.check] = f.severity
    for check, severity in worst.items():
        for state in SEVERITIES:
            out.add("tunehost_check_status", "Each check's worst finding: 1 for its severity, 0 for the others "
                    "(ok, info, skip, warn, error, fail).", 1 if severity.value == state else 0,
                    check=check, severity=state)


def _ram(out: _Families, facts: "HostFacts", notes: list[str]) -> None:
    from tunehost.facts.memory_layout import layout
    from tunehost.facts.ram import RamFacts

    try:
        ram = facts.get(RamFacts)
        lay = layout(ram) if ram.memory is not None and ram.modules else None
    except Exception as exc:  # a layout the facts cannot make is "not exported", never a failed export
        notes.append(f"RAM speed not exported: {exc}")
        return
    if lay is None:
        notes.append(f"RAM speed not exported: {ram.unavailable or 'no installed memory modules found'}")
        return
    mts = 1e6
    out.add("tunehost_ram_configured_transfers_per_second", "The data rate the memory runs at (the slowest "
            "module's configured speed, MT/s x 10^6).", lay.effective * mts if lay.effective else None,
            type=lay.mem_type)
    out.add("tunehost_ram_rated_transfers_per_second", "The modules' rated data rate (XMP/EXPO or JEDEC, the "
            "slowest module's), MT/s x 10^6.", lay.rated * mts if lay.rated else None, type=lay.mem_type)


def _measured(out: _Families, facts: "HostFacts", measured_at: float | None, notes: list[str]) -> None:
    from tunehost.facts.measure import MeasureFacts

    m = facts.get(MeasureFacts)
    if m.memory_read_gbps is not None:
        out.add("tunehost_memory_read_bytes_per_second", "Memory read bandwidth measured by doctor's probe.",
                m.memory_read_gbps * 1e9)
    else:
        notes.append(f"memory bandwidth not exported: {m.why_missing('memory_read_gbps')}")
    for load, clocks in (("single", m.cpu_mhz_single), ("all", m.cpu_mhz_all)):
        values = [v * 1e6 for v in clocks.values() if math.isfinite(v) and v > 0]
        if not values:
            continue
        for stat, value in (("min", min(values)), ("median", statistics.median(values)), ("max", max(values))):
            out.add("tunehost_cpu_load_clock_hertz", "CPU clocks under doctor's load probe (load: one core busy or "
                    "all; the min, median and max over the CPUs measured).", value, load=load, stat=stat)
    if m.memory_read_gbps is not None or m.cpu_mhz_all or m.cpu_mhz_single:
        out.add("tunehost_measurement_timestamp_seconds", "When doctor measured the bandwidth and clocks.",
                measured_at)


def _gpus(out: _Families, facts: "HostFacts") -> None:
    from tunehost.facts.gpu import GpuFacts

    try:
        gpus = facts.get(GpuFacts).gpus[:MAX_GPUS]
    except Exception:
        return
    for i, g in enumerate(gpus):
        gpu = str(g.index if g.index is not None else i)
        out.add("tunehost_gpu_info", "A GPU doctor found (1), with its name, vendor and PCI address.", 1, gpu=gpu,
                name=g.name or "", vendor=g.vendor or "", bus_id=g.pci_bus_id or "")
        link = g.pcie
        if link is None or g.integrated or g.unified_memory:
            continue
        for state, width, gen in (("current", link.width_current, link.gen_current),
                                  ("max", link.width_max, link.gen_max)):
            out.add("tunehost_gpu_pcie_link_width_lanes", "The GPU's PCIe link width (current: as it runs now; max: "
                    "what card and slot allow).", width, gpu=gpu, state=state)
            out.add("tunehost_gpu_pcie_link_generation", "The GPU's PCIe link generation (1-6; current and max).",
                    gen, gpu=gpu, state=state)


@dataclass(frozen=True)
class _Speed:
    model: str
    config: str
    test: str
    kind: str
    median: float
    low: float | None
    high: float | None
    at: float | None
    rounds: int | None
    source: str  # the command that measured it: bench, tune or server-bench


def _speeds(out: _Families, facts: "HostFacts", runs: "Sequence[StoredRun] | None", notes: list[str]) -> None:
    from tunehost.facts.results import ResultsFacts

    results = facts.get(ResultsFacts)
    speeds = _from_store(runs) if runs is not None else _from_sample(results.runs)
    if runs is None and results.unavailable:
        notes.append(f"no speeds exported: {results.unavailable}")
    for s in speeds:
        labels = {"model": s.model, "config": s.config, "test": s.test, "source": s.source}
        out.add("tunehost_bench_tokens_per_second", "The latest llama-bench median per model, configuration and test "
                "(kind tg: generation, pp: prompt processing; source: bench, tune or server-bench).", s.median, kind=s.kind, **labels)
        out.add("tunehost_bench_low_tokens_per_second", "The lower end of that bench's 95 % interval.", s.low,
                kind=s.kind, **labels)
        out.add("tunehost_bench_high_tokens_per_second", "The upper end of that bench's 95 % interval.", s.high,
                kind=s.kind, **labels)
        out.add("tunehost_bench_timestamp_seconds", "When that bench ran.", s.at, kind=s.kind, **labels)
        out.add("tunehost_bench_rounds", "How many rounds that bench's median and interval come from.", s.rounds,
                kind=s.kind, **labels)
    for run in _latest_drift(results.runs):
        at = epoch_seconds(run.created)
        for verdict, state in DRIFT_STATES.items():
            out.add("tunehost_drift_status", "The last `history --drift` verdict per model: 1 for it, 0 for the "
                    "others (slower, faster, no_change).", 1 if run.verdict == verdict else 0,
                    model=run.model, verdict=state)
        out.add("tunehost_drift_timestamp_seconds", "When that drift re-measure ran.", at, model=run.model)
        for row in run.rows:
            if row.change_percent is not None:
                out.add("tunehost_drift_change_ratio", "That re-measure's change per test (now / then; 1 = same).",
                        1 + row.change_percent / 100, model=run.model, test=row.test)


def _latest_drift(runs: Iterable[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for run in runs:  # newest first
        if run.command == "drift" and run.verdict is not None and run.model_hash not in seen:
            if len(seen) >= MAX_MODELS:
                break
            seen[run.model_hash] = run
    return list(seen.values())


def _from_sample(runs: Iterable[Any]) -> list[_Speed]:
    """A snapshot's results sample: TG medians per configuration (the sample records no PP nor rounds)."""
    out: list[_Speed] = []
    seen: set[tuple[str, str]] = set()
    models: set[str] = set()
    for run in runs:  # newest first
        if run.command not in ("bench", "tune"):
            continue
        if run.model_hash not in models and len(models) >= MAX_MODELS:
            continue
        models.add(run.model_hash)
        for config, ts in run.tg[:MAX_CONFIGS]:
            if (run.model_hash, config) not in seen:
                seen.add((run.model_hash, config))
                out.append(_Speed(run.model, config, "tg", "tg", ts, None, None, epoch_seconds(run.created), None,
                                  run.command))
    return out


def _from_store(runs: "Sequence[StoredRun]") -> list[_Speed]:
    """The store's runs (newest first): per model, configuration and test the newest median, its interval from
    the per-round values the run kept (tunehost.ops.report.level_interval), and when it ran."""
    from pathlib import PurePath

    from tunehost.bounds import tokens_per_s
    from tunehost.ops.report import level_interval

    out: list[_Speed] = []
    seen: set[tuple[str, str, str, str]] = set()
    tests: dict[tuple[str, str, str], int] = {}
    models: set[str] = set()
    for run in runs:
        if len(out) >= MAX_SPEEDS:
            break
        if run.command not in ("bench", "tune", "server-bench") or not isinstance(run.model_hash, str):
            continue
        if run.model_hash not in models and len(models) >= MAX_MODELS:
            continue
        models.add(run.model_hash)
        name = PurePath(str(run.model_name or run.model_path or run.model_hash)).name  # never a directory
        summary = run.summary if isinstance(run.summary, Mapping) else {}
        per_round = summary.get("rounds_ts") if isinstance(summary.get("rounds_ts"), Mapping) else {}
        configs: list[str] = []
        for r in run.results:
            median = tokens_per_s(r.median_ts)
            if median is None or not isinstance(r.config, str) or not isinstance(r.test, str):
                continue
            if r.config not in configs:
                if len(configs) >= MAX_CONFIGS:
                    continue
                configs.append(r.config)
            key = (run.model_hash, r.config, r.test, run.command)
            if key in seen or tests.get(key[:2] + (run.command,), 0) >= MAX_TESTS or len(out) >= MAX_SPEEDS:
                continue
            seen.add(key)
            tests[key[:2] + (run.command,)] = tests.get(key[:2] + (run.command,), 0) + 1
            values = per_round.get(r.config, {}).get(r.test) if isinstance(per_round.get(r.config), Mapping) else None
            low, high, _ = level_interval(values, median)
            kind = r.kind if r.kind in ("tg", "pp") else "other"
            rounds = r.rounds if isinstance(r.rounds, int) and not isinstance(r.rounds, bool) else None
            out.append(_Speed(name, r.config, r.test, kind, median, low, high, epoch_seconds(str(run.created)), rounds,
                              run.command))
    return out


__all__ = ["ExportRequest", "Family", "Metrics", "Sample", "export"]
