"""Recording and reading back measurements: a bench, tune or server-bench result as a stored run, this host's runs,
advise's calibration from them, and doctor's `results` sample. The SQLite side is :mod:`tunehost.store.repository`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunehost.errors import TunehostError
from tunehost.store.repository import (NewRun, StoredResult, StoredRound, StoredRun, _now, config_key, model_hash,
                                       open_for_recording, open_store, store_path)

if TYPE_CHECKING:
    from tunehost.advise.host_calibration import HostCalibration, HostPoint
    from tunehost.bench.results import SavedResult
    from tunehost.facts import HostFacts


# ---------------------------------------------------------------- recording a bench result


def host_identity(facts: "HostFacts") -> tuple[dict[str, Any], str]:
    """(identity JSON, fingerprint) of the host ``facts`` describe (the caller's, gathered once)."""
    from tunehost.facts.identity import HostIdentity

    identity = HostIdentity.gather(facts)
    return identity.to_json(), identity.fingerprint()


def check_recording() -> tuple[bool, tuple[str, ...]]:
    """Before a measurement (as tune does): (whether the store can record, and the warning line when its directory
    cannot hold it). A store that is damaged, of a newer schema or locked past the busy timeout raises its one-line
    TunehostError here, before anything is measured, so nothing measured is lost to it."""
    warnings: list[str] = []
    store = open_for_recording(warnings.append)
    if store is None:
        return False, tuple(warnings)
    store.close()
    return True, ()


def record_run(new_run: Callable[[], NewRun]) -> tuple[int | None, tuple[str, ...]]:
    """Record one measured run (``new_run()`` builds it once the store is open): its id, or None when the store
    cannot be written, and the warning lines saying so. Never raises for the store: it is called after the
    measurement was reported and saved (docs/history.md), and a store that fails then (damaged, a newer schema,
    locked past the busy timeout, read-only) loses the record, never the measurement."""
    import sqlite3

    warnings: list[str] = []
    try:
        store = open_for_recording(warnings.append)
        if store is None:
            return None, tuple(warnings)
        with store:
            return store.record(new_run()), tuple(warnings)
    except (TunehostError, sqlite3.Error, OSError) as exc:
        from tunehost.printable import one_line

        return None, (*warnings, f"not recorded in the results store: {one_line(exc, 300)}")


def results_of(saved: "SavedResult") -> tuple[StoredResult, ...]:
    """One StoredResult per (config, test) of a bench result: the median t/s and the rounds behind it."""
    rows = []
    rounds = int(saved.settings.get("rounds") or 1) if isinstance(saved.settings, Mapping) else 1
    for config in saved.configs:
        for test in config.tests:
            rows.append(StoredResult(config.name, config_key(config.flags), tuple(config.flags), test.test,
                                     test.kind, float(test.centre), rounds))
    return tuple(rows)


def bench_run(saved: "SavedResult", facts: "HostFacts", *, command: str = "bench",
              extra: Mapping[str, Any] | None = None) -> NewRun:
    """The NewRun of a bench result measured on the host of ``facts`` (model hash read from the model file);
    ``extra`` joins the summary."""
    identity, fingerprint = host_identity(facts)
    build = _build_text(saved.llama_bench)
    comparison = saved.comparison
    default_summary = {"rounds": saved.settings.get("rounds"), "stop_reason": saved.settings.get("stop_reason"),
                       "disturbed": saved.disturbed,
                       "verdicts": {r.test: r.verdict for r in comparison.rows} if comparison else {},
                       "settings": {"n_prompt": saved.settings.get("n_prompt"), "n_gen": saved.settings.get("n_gen"),
                                    "n_depth": saved.settings.get("n_depth"), "reps": saved.settings.get("reps")},
                       "rounds_ts": rounds_ts(saved)}
    if saved.energy:  # joules per generated token per configuration, with the parts measured (issue 34)
        default_summary["energy"] = dict(saved.energy)
    if saved.ceiling and "error" not in saved.ceiling:  # the placement's bytes and bandwidths: a calibration point
        default_summary["ceiling"] = dict(saved.ceiling)
        default_summary["ceiling_config"] = saved.configs[0].name if saved.configs else None  # the baseline's
    path = str(saved.model.get("path") or "")
    return NewRun(command=command, host=identity, host_fp=fingerprint, build=build, model_path=path,
                  model_hash=model_hash(path), model_name=saved.model.get("name"), results=results_of(saved),
                  summary={**default_summary, **(extra or {})}, label=saved.label,
                  rounds=rounds_of_watch(saved.round_watch))


def rounds_of_watch(reports: Sequence[Any], stage: str = "") -> tuple[StoredRound, ...]:
    """The per-round host watch of a bench (tunehost.bench.watch.WatchReport, one per counted round) as stored rows."""
    return tuple(StoredRound(stage, i + 1, True, bool(r.disturbed), r.to_json()) for i, r in enumerate(reports))


def server_run(result: Any, facts: "HostFacts") -> NewRun:
    """The NewRun of a server bench (tunehost.bench.server.ServerBenchResult): one row per (server, test), the
    servers' /props as provenance. The model is identified by its file's hash where the path /props names is a
    readable file here (a server on this host), else by the path and alias the server reported. ``facts``: this
    host's, for its identity."""
    identity, fingerprint = host_identity(facts)
    first = result.servers[0] if result.servers else None
    path = (first.model_path if first else None) or ""
    try:
        digest = model_hash(path) if path else ""
    except TunehostError:
        digest = ""
    if not digest:
        reported = f"{path}|{first.model_alias if first else ''}"
        digest = "server:" + hashlib.sha256(reported.encode()).hexdigest()[:17]
    rounds = int(result.settings.get("rounds") or 1)
    rows = tuple(StoredResult(c.name, config_key(c.flags), tuple(c.flags), t.test, t.kind, float(t.centre), rounds)
                 for c in result.configs for t in c.tests)
    comparison = result.comparison
    summary = {"rounds": rounds, "stop_reason": result.settings.get("stop_reason"),
               "verdicts": {r.test: r.verdict for r in comparison.rows} if comparison else {},
               "servers": [s.to_json() for s in result.servers], "client_overhead": dict(result.overhead),
               "disturbed": bool(getattr(result, "disturbed", False))}
    return NewRun(command="server-bench", host=identity, host_fp=fingerprint,
                  build=first.build if first else None, model_path=path, model_hash=digest,
                  model_name=first.model_alias if first else None, results=rows, summary=summary, label=result.label,
                  rounds=rounds_of_watch(getattr(result, "round_watch", ())))


def rounds_ts(saved: "SavedResult") -> dict[str, dict[str, list[float]]]:
    """{config: {test: [one value per counted round]}}: what a later re-measure compares with (drift)."""
    from tunehost.bench.results import rounds_of
    from tunehost.bench.stats import round_value

    out: dict[str, dict[str, list[float]]] = {}
    for config in saved.configs:
        per_test = rounds_of(saved.invocations, config.name)
        out[config.name] = {test: [round(round_value(r), 4) for r in runs if r] for test, runs in per_test.items()}
    return out


@dataclass(frozen=True)
class Measured:
    """What this host measured for one model: TG medians over its runs (the loop back into advise)."""

    runs: int
    tg_ts: float  # median over the runs of each run's best TG median
    last: str  # date of the newest run

    def text(self, ceiling_ts: float | None = None) -> str:
        share = f" = {self.tg_ts / ceiling_ts:.0%} of the ceiling above" if ceiling_ts else ""
        return (f"measured here: TG {self.tg_ts:.2f} t/s{share} (from {self.runs} run{'s' if self.runs != 1 else ''}"
                f" on this host, {self.last[:10]})")

    def to_json(self, ceiling_ts: float | None = None) -> dict[str, Any]:
        return {"runs": self.runs, "tg_ts": round(self.tg_ts, 3), "last": self.last,
                "efficiency": round(self.tg_ts / ceiling_ts, 4) if ceiling_ts else None}


# what the readers of this host's runs use of a summary (calibration, the quiet bandwidth, measured TG)
HOST_READ_KEYS = ("best", "ceiling", "ceiling_config", "disturbed", "settings")


def runs_on_host(facts: "HostFacts", *, strict: bool = False, limit: int = 5000,
                 skipped: list[str] | None = None) -> list[StoredRun]:
    """The runs recorded on the host of ``facts`` (its fingerprint), newest first: what advise reads back. [] with
    no store (nothing is created), and for a store that cannot be read unless ``strict`` (then its one-line error):
    advise must not fail for its store, `advise --calibrate` says why."""
    try:
        if not store_path().is_file():
            return []
        _, fingerprint = host_identity(facts)
        with open_store() as store:  # this host's runs only (in SQL), and only what their readers use of a summary
            runs, left_out = store.run_rows(host_fp=fingerprint, limit=limit, keep=HOST_READ_KEYS)
        if skipped is not None:  # the rows left out, for a caller that says so (advise --calibrate)
            skipped.extend(left_out)
        return runs
    except TunehostError:
        if strict:
            raise
        return []


def measured_on_host(model_path: str | os.PathLike[str], *, facts: "HostFacts | None" = None,
                     runs: Sequence[StoredRun] | None = None) -> Measured | None:
    """TG this host measured for this model (same model hash, same host fingerprint), or None: no store, no runs,
    or a store that cannot be read. ``runs``: this host's runs already read (:func:`runs_on_host`), else read for
    the host of ``facts``."""
    import statistics

    if runs is None:
        runs = runs_on_host(_given(facts))
    if not runs:
        return None
    try:
        digest = model_hash(model_path)
    except TunehostError:
        return None
    mine = [r for r in runs if r.model_hash == digest]
    tgs = [max(t.median_ts for t in r.results if t.kind == "tg") for r in mine
           if any(t.kind == "tg" for t in r.results)]
    if not tgs:
        return None
    return Measured(runs=len(tgs), tg_ts=float(statistics.median(tgs)), last=mine[0].created)


def calibration_points(runs: Sequence[StoredRun]) -> list["HostPoint"]:
    """Bench and tune runs (of one host: :func:`runs_on_host`) as equations of advise's band model
    (tunehost.advise.host_calibration): runs whose summary recorded the placement's ceiling, with the TG of the
    configuration that ceiling was computed for. Anything malformed is left out."""
    from tunehost.advise.host_calibration import HostPoint, RunRef
    from tunehost.facts.results import REFERENCE_COMMANDS

    points = []
    for run in runs:
        if run.command not in REFERENCE_COMMANDS:
            continue
        ceiling, config = run.summary.get("ceiling"), run.summary.get("ceiling_config")
        if not isinstance(ceiling, Mapping) or not isinstance(config, str):
            continue
        tg = run.tg(config)
        if tg is None:
            continue
        ref = RunRef(run.id, run.created, run.command, run.model_name or Path(run.model_path).name, run.model_hash)
        point = HostPoint.from_run(ref, tg, ceiling)
        if point is not None:
            points.append(point)
    return points


def host_calibration(*, facts: "HostFacts | None" = None, strict: bool = False,
                     runs: Sequence[StoredRun] | None = None,
                     skipped: list[str] | None = None) -> "HostCalibration | None":
    """advise's constants fitted to this host's recorded runs (``runs``: already read by :func:`runs_on_host`,
    else read for the host of ``facts``); None: no store, no usable run, or (unless ``strict``) a store that
    cannot be read."""
    from tunehost.advise.host_calibration import fit_host

    points = calibration_points(runs_on_host(_given(facts), strict=strict, skipped=skipped) if runs is None
                                else runs)
    return fit_host(points) if points else None


def _given(facts: "HostFacts | None") -> "HostFacts":
    """The caller's host facts: whoever reads this host's runs says which host (this module opens none)."""
    if facts is None:
        raise TypeError("give the host's facts or the runs already read")
    return facts


def _build_text(llama_bench: Mapping[str, Any]) -> str | None:
    from tunehost.facts.llama import build_label

    return build_label(llama_bench.get("build_number"), llama_bench.get("build_commit"))


# ---------------------------------------------------------------- doctor's `results` sample

DOCTOR_SAMPLE_FORMAT = 1
DOCTOR_SAMPLE_RUNS = 200  # the newest runs doctor looks at (speed-drift); older ones were re-measured or are stale
MAX_SKIPPED_SAMPLED = 20  # reasons recorded for stored rows left out
DRIFT_ROW_KEYS = ("test", "then", "now", "change_percent", "low", "high", "verdict")


def doctor_sample(limit: int = DOCTOR_SAMPLE_RUNS, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The raw `results` sample doctor records (samples/results.json, docs/snapshot.md): the newest ``limit`` runs
    of the store, each with its host identity, llama.cpp build, model (file name and hash only, never its path),
    TG median per configuration and, for a drift re-measure, its verdict, reference and what changed. Never
    raises: no store is ``{"runs": []}`` (nothing is created), one that cannot be read is ``{"error": "..."}``.
    Interpreted by tunehost.facts.results, so an old snapshot is re-judged by newer code."""
    from tunehost.printable import one_line

    path = store_path(environ)
    out: dict[str, Any] = {"format": DOCTOR_SAMPLE_FORMAT, "limit": int(limit), "sampled_at": _now()}
    if not path.is_file():
        return {**out, "runs": []}
    sampled: list[dict[str, Any]] = []
    skipped: list[str] = []
    try:  # one run in memory at a time: each becomes its small sampled row before the next is read
        with open_store(path, create=False) as store:  # a read: an empty file there never becomes a store
            for run, why in store.iter_runs(limit=limit):
                if run is not None:
                    sampled.append(_sampled_run(run))
                elif len(skipped) < MAX_SKIPPED_SAMPLED:
                    skipped.append(one_line(why, 200))
    except (TunehostError, OSError) as exc:  # the error line names the file: keep its name, not the home directory
        return {**out, "error": one_line(str(exc).replace(str(path.parent), "<state dir>"), 300)}
    return {**out, "runs": sampled, **({"rows_left_out": skipped} if skipped else {})}


def _sampled_run(run: StoredRun) -> dict[str, Any]:
    from tunehost.facts.identity import FIELDS
    from tunehost.facts.results import MAX_CONFIGS  # what the reader keeps of a run's TG medians
    from tunehost.printable import one_line

    summary = run.summary if isinstance(run.summary, Mapping) else {}
    name = Path(str(run.model_name or run.model_path or "")).name  # a basename: no directory of the user's
    tg: dict[str, float] = {}
    for r in run.results:
        if r.kind == "tg" and len(tg) < MAX_CONFIGS:
            tg.setdefault(one_line(r.config, 80), r.median_ts)
    settings = summary.get("settings") if isinstance(summary.get("settings"), Mapping) else {}
    row: dict[str, Any] = {
        "id": run.id, "created": run.created, "command": run.command, "host_fp": run.host_fp,
        # the identity's own fields only: whatever else a store's JSON holds stays there
        "host": {k: run.host.get(k) for k in FIELDS} if isinstance(run.host, Mapping) else {}, "build": run.build,
        "model": {"name": one_line(name, 120), "hash": run.model_hash}, "tg": tg, "best": summary.get("best"),
        # what drift needs of a reference (tunehost.ops.drift.last_best): per-round values of its best config
        # ... and measured on a quiet host (a disturbed run is no reference for "this box got slower")
        "rounds_recorded": bool(summary.get("winner_rounds") or summary.get("rounds_ts")) and not summary.get("disturbed"),
        "disturbed": bool(summary.get("disturbed")),
        "objective": settings.get("objective"),
    }
    if run.command == "drift":
        rows = summary.get("rows") if isinstance(summary.get("rows"), list) else []
        row["drift"] = {"verdict": summary.get("verdict"), "since_run": summary.get("since_run"),
                        "changed": summary.get("changed"),
                        "rows": [{k: r.get(k) for k in DRIFT_ROW_KEYS} for r in rows if isinstance(r, Mapping)]}
    return row
