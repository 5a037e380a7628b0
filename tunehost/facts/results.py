"""Results facts: what the results store says about this box's speed over time (samples/results.json).

    r = facts.get(ResultsFacts)          # the validated runs (newest first), or why there are none
    for m in speed_history(facts):       # per model: its reference run, the newest drift re-measure after it,
        m.changed_since_reference        # and what changed on this host since each ("kernel 6.8 -> 6.11")

The sample is the raw store (tunehost.store.doctor_sample: the CLI records it before the checks run, because the
store is above the checks in the layer contract). Every field is hostile until validated here: a run with a wrong
type in a field that matters is dropped (counted in ``problems``), text is one printable line, numbers are finite
and bounded. The reference of a model is what ``tunehost history --drift`` re-measures (tunehost.ops.drift
``last_best``): its newest bench or tune run that recorded per-round values; drift and server-bench runs never are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping

from tunehost.bounds import number, whole
from tunehost.facts.identity import FIELDS, HostIdentity, changes
from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.facts import HostFacts
    from tunehost.host import Host

RESULTS_SAMPLE = "results"
RESULTS_FORMAT = 1
SAMPLE_FILE = f"samples/{RESULTS_SAMPLE}.json"
LIST_FIELDS = ("memory", "gpus")  # HostIdentity's fields that are lists of text; the others are text
MAX_RUNS = 1000          # a sample holds at most this many runs (the sampler records 200); more are not read
MAX_CONFIGS = 64         # TG medians (and drift rows) kept per run; the sampler records no more either
MAX_CHANGED = 32         # "what changed" lines kept per drift run
MAX_TS = 1e7             # no llama.cpp reaches ten million tokens/s: a larger figure is garbage
MAX_PERCENT = 1e6
REFERENCE_COMMANDS = ("bench", "tune")  # what drift re-measures; "drift" and "server-bench" runs never are
DRIFT_VERDICTS = ("slower beyond the noise", "faster beyond the noise", "no clear change")
ROW_VERDICTS = ("slower", "faster", "no clear difference")  # tunehost.bench.stats verdicts
_HASH = re.compile(r"^[A-Za-z0-9:_-]{1,64}$")
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:]{5,8}Z?)?$")
_BUILD_NUMBER = re.compile(r"^b([0-9]{1,7})\b")
NOT_READ = "the results store was not read in this run (`tunehost doctor` and `tunehost snapshot` read it)"
NO_SAMPLE = (f"no {SAMPLE_FILE} in the snapshot (written by a tunehost before doctor read the results store); "
             "`tunehost snapshot` records it")


@dataclass(frozen=True)
class DriftRow:
    """One test of a drift re-measure: then → now t/s, the change and its 95 % interval (ratios, 1 = same)."""

    test: str
    then: float | None
    now: float | None
    change_percent: float | None
    low: float | None
    high: float | None
    verdict: str | None


@dataclass(frozen=True)
class RecordedRun:
    """One validated run of the sample."""

    id: int
    created: str
    command: str
    host: HostIdentity | None  # None: the run's identity was not an object (nothing to compare with)
    build: str | None
    model: str  # the model file's name (never a path)
    model_hash: str
    tg: tuple[tuple[str, float], ...]  # (configuration, TG median t/s)
    best: str | None
    rounds_recorded: bool
    verdict: str | None = None  # drift runs: one of DRIFT_VERDICTS
    since_run: int | None = None
    changed: tuple[str, ...] = ()
    rows: tuple[DriftRow, ...] = ()

    @property
    def date(self) -> str:
        return self.created[:10]

    @property
    def best_tg(self) -> float | None:
        """The TG of the summary's best configuration, else the highest TG the run measured."""
        chosen = next((ts for config, ts in self.tg if config == self.best), None)
        return chosen if chosen is not None else max((ts for _, ts in self.tg), default=None)


@dataclass(frozen=True)
class ResultsFacts:
    """The validated `results` sample: runs newest first, or why there are none."""

    runs: tuple[RecordedRun, ...] = ()
    unavailable: str | None = None  # no sample, a store that could not be read, an unknown format
    problems: tuple[str, ...] = ()  # runs dropped as not valid (one line each, at most a few)
    dropped: int = 0

    @classmethod
    def from_sample(cls, data: Any, *, missing: str | None = None) -> "ResultsFacts":
        if data is None:
            return cls(unavailable=missing or NO_SAMPLE)
        if not isinstance(data, Mapping):
            return cls(unavailable=f"{SAMPLE_FILE} is not a JSON object")
        fmt = data.get("format", RESULTS_FORMAT)
        if fmt != RESULTS_FORMAT or isinstance(fmt, bool):
            return cls(unavailable=f"{SAMPLE_FILE} has format {one_line(str(fmt)[:40], 20)}; this tunehost reads format "
                                   f"{RESULTS_FORMAT}")
        if data.get("skipped") is not None:
            return cls(unavailable=one_line(str(data["skipped"])[:1200], 300))
        if data.get("error") is not None:
            return cls(unavailable=f"the results store could not be read: {one_line(str(data['error'])[:1200], 300)}")
        raw = data.get("runs")
        if not isinstance(raw, list):
            return cls(unavailable=f"{SAMPLE_FILE} has no list of runs")
        runs, problems = [], []
        for item in raw[:MAX_RUNS]:
            run, problem = _run(item)
            if run is not None:
                runs.append(run)
            elif len(problems) < 5:
                problems.append(problem)
        dropped = len(raw[:MAX_RUNS]) - len(runs)
        runs.sort(key=lambda r: (r.created, r.id), reverse=True)
        return cls(tuple(runs), None, tuple(problems), dropped)

    @classmethod
    def gather(cls, host: "Host") -> "ResultsFacts":
        """Replayed from a snapshot, or what the CLI put on the live host (tunehost.store.doctor_sample)."""
        if host.live and RESULTS_SAMPLE not in host.recorded_samples:
            # recorded, so that a snapshot of this run replays the same reason
            host.put_sample(RESULTS_SAMPLE, {"format": RESULTS_FORMAT, "skipped": NOT_READ})
        data = host.sample(RESULTS_SAMPLE)
        missing = host.sample_errors.get(RESULTS_SAMPLE)
        return cls.from_sample(data, missing=NO_SAMPLE if missing and "has no" in missing else missing)


@dataclass(frozen=True)
class ModelHistory:
    """One model's speed history on this host, judged against the host as it is now."""

    model: str
    model_hash: str
    reference: RecordedRun | None  # what `history --drift` would re-measure (None: beyond the sample)
    drift: RecordedRun | None  # the newest drift re-measure after the reference
    changed_since_reference: tuple[str, ...]
    changed_since_drift: tuple[str, ...]

    @property
    def last(self) -> RecordedRun:
        """The newest measurement of the pair: what "changed since" is counted from."""
        newest = self.drift or self.reference
        assert newest is not None
        return newest

    @property
    def changed_since_last(self) -> tuple[str, ...]:
        return self.changed_since_drift if self.drift is not None else self.changed_since_reference


def speed_history(facts: "HostFacts") -> tuple[ResultsFacts, HostIdentity, tuple[ModelHistory, ...]]:
    """The sample, this host's identity now, and one ModelHistory per model that has a reference or a drift run
    (newest first). The llama.cpp build now is llama-bench's (its `--version`), when found."""
    from tunehost.facts.llama import LlamaBuildFacts

    results = facts.get(ResultsFacts)
    if results.unavailable or not results.runs:
        return results, HostIdentity(), ()
    now = current_identity(facts)
    bench = next((b for b in _safe_binaries(facts, LlamaBuildFacts) if b.name == "llama-bench"
                  and b.version.build_number is not None), None)
    build_now = bench.version.build_number if bench is not None else None
    return results, now, histories(results.runs, now, build_now)


def current_identity(facts: "HostFacts") -> HostIdentity:
    """This host's identity now (as tunehost.store records it); hand-built facts (tests): the one given, else
    unknown."""
    if facts.host is None:
        try:
            return facts.get(HostIdentity)
        except LookupError:
            return HostIdentity()
    return HostIdentity.gather(facts)


def histories(runs: tuple[RecordedRun, ...], now: HostIdentity, build_now: int | None) -> tuple[ModelHistory, ...]:
    """Per model (by hash, newest first): the reference, the newest drift after it, what changed since each."""
    by_model: dict[str, list[RecordedRun]] = {}
    for run in runs:  # newest first
        by_model.setdefault(run.model_hash, []).append(run)
    out = []
    for digest, model_runs in by_model.items():
        reference = next((r for r in model_runs if r.command in REFERENCE_COMMANDS and r.rounds_recorded), None)
        drift = next((r for r in model_runs if r.command == "drift" and r.verdict is not None
                      and (reference is None or r.id > reference.id)), None)
        if reference is None and drift is None:
            continue
        out.append(ModelHistory(model_runs[0].model, digest, reference, drift,
                                _changed(reference, now, build_now), _changed(drift, now, build_now)))
    return tuple(out)


def _changed(run: RecordedRun | None, now: HostIdentity, build_now: int | None) -> tuple[str, ...]:
    if run is None:
        return ()
    lines = changes(*_known_on_both(run.host, now)) if run.host is not None else []
    then = _BUILD_NUMBER.match(run.build or "")
    if then and build_now is not None and int(then.group(1)) != build_now:
        lines.append(f"llama.cpp build b{then.group(1)} -> b{build_now}")
    return tuple(lines)


def _known_on_both(then: HostIdentity, now: HostIdentity) -> tuple[HostIdentity, HostIdentity]:
    """Both identities with every field that one side does not know blanked on both: a fact unknown then or now
    (no root for dmidecode this time, a file not readable) is not a change of the box. GPUs are always compared:
    none found is a fact (sysfs and NVML need no root), and a GPU that went away is a change."""
    blank = {name: getattr(HostIdentity(), name) for name in FIELDS
             if name != "gpus" and (not getattr(then, name) or not getattr(now, name))}
    return replace(then, **blank), replace(now, **blank)


def _safe_binaries(facts: "HostFacts", kind: Any) -> tuple[Any, ...]:
    try:
        return tuple(facts.get(kind).binaries)
    except LookupError:  # hand-built facts (tests) without llama.cpp facts: the build is unknown
        return ()


# ---------------------------------------------------------------- validating one run


def _text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return one_line(value.strip()[: limit * 4], limit)


def _ts(value: Any) -> float | None:
    return number(value, 0.0, MAX_TS, above_low=True)


def _host(value: Any) -> HostIdentity | None:
    if not isinstance(value, Mapping):
        return None
    clean: dict[str, Any] = {}
    for key in FIELDS:
        item = value.get(key)
        if key in LIST_FIELDS and isinstance(item, list):
            clean[key] = [v[:480] for v in item[:64] if isinstance(v, str)]
        elif key not in LIST_FIELDS and isinstance(item, str):
            clean[key] = item[:480]
    return HostIdentity.from_json(clean)  # every text through one_line there


def _run(item: Any) -> tuple[RecordedRun | None, str]:
    if not isinstance(item, Mapping):
        return None, "a run is not a JSON object"
    run_id = whole(item.get("id"), 1, 2**62)
    created = item.get("created")
    command = _text(item.get("command"), 20)
    model = item.get("model") if isinstance(item.get("model"), Mapping) else {}
    digest = model.get("hash")
    if run_id is None:
        return None, f"a run's id {one_line(repr(item.get('id'))[:40])} is not a run id"
    if not isinstance(created, str) or not _DATE.match(created):
        return None, f"run {run_id}: its date is not a date"
    if command is None:
        return None, f"run {run_id}: no command"
    if not isinstance(digest, str) or not _HASH.match(digest):
        return None, f"run {run_id}: no model hash"
    tg_raw = item.get("tg") if isinstance(item.get("tg"), Mapping) else {}
    tg = tuple((one_line(str(config)[:320], 80), value) for config, raw in list(tg_raw.items())[:MAX_CONFIGS]
               if (value := _ts(raw)) is not None)
    fields: dict[str, Any] = {}
    drift = item.get("drift")
    if command == "drift":
        if not isinstance(drift, Mapping):
            return None, f"run {run_id}: a drift run without its verdict"
        verdict = drift.get("verdict")
        changed = drift.get("changed")
        rows = drift.get("rows")
        fields = {"verdict": verdict if verdict in DRIFT_VERDICTS else None,
                  "since_run": whole(drift.get("since_run"), 1, 2**62),
                  "changed": tuple(one_line(c[:480], 160) for c in changed[:MAX_CHANGED] if isinstance(c, str))
                  if isinstance(changed, list) else (),
                  "rows": tuple(r for r in (_row(x) for x in rows[:MAX_CONFIGS]) if r is not None)
                  if isinstance(rows, list) else ()}
    return RecordedRun(id=run_id, created=created, command=command, host=_host(item.get("host")),
                       build=_text(item.get("build"), 80),
                       model=_text(model.get("name"), 120) or f"model {digest[:12]}", model_hash=digest, tg=tg,
                       best=_text(item.get("best"), 80), rounds_recorded=item.get("rounds_recorded") is True,
                       **fields), ""


def _row(item: Any) -> DriftRow | None:
    if not isinstance(item, Mapping):
        return None
    test = _text(item.get("test"), 20)
    if test is None:
        return None
    verdict = item.get("verdict")
    return DriftRow(test, _ts(item.get("then")), _ts(item.get("now")),
                    number(item.get("change_percent"), -100.0, MAX_PERCENT),
                    number(item.get("low"), 0.0, MAX_PERCENT), number(item.get("high"), 0.0, MAX_PERCENT),
                    verdict if verdict in ROW_VERDICTS else None)
