"""The one validating read layer of the results store: every row a read returns passed through here.

A store is hostile input (a hand-edited file, a foreign tool, a damaged page, another tunehost's bug): SQLite's
column affinities keep text in a REAL column, NULL where NOT NULL was meant (a store built by hand has no
constraints), any JSON in a ``*_json`` column. Each function here takes one raw row and returns the typed value, or
the reason it is not one (one printable line): the reader leaves the row out and says why, never a traceback.

What is checked: every column's type, text lengths, numbers finite and within physical bounds
(tunehost.bounds), JSON strict (no NaN/Infinity/1e999) and of bounded size and depth, and the JSON shapes the
readers use: a run's ``summary`` is an object whose known keys have the types tunehost writes (``SUMMARY_SHAPES``),
``host`` an object, a result's flags a list of text. Sizes are capped in SQL (:data:`RUN_COLUMNS`), so an
oversized document is never read into memory at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunehost.bounds import MAX_TOKENS_PER_S, number, strict_json, whole

MAX_SUMMARY_READ = 256 * 1024  # bytes of a run's summary a read parses (tunehost writes a few KB; a tune ~20 KB)
MAX_HOST_READ = 64 * 1024  # bytes of a run's host identity (a few hundred bytes written)
MAX_STEP_READ = 256 * 1024  # bytes of one tune step's outcome (llama-bench's results and the watch: a few KB)
MAX_WATCH_READ = 64 * 1024  # bytes of one round's watch (its raw facts: a few hundred bytes to a few KB)
MAX_FLAGS_READ = 64 * 1024  # bytes of one result's flags
MAX_TEXT = 2000  # characters of a stored name (config, test, build, label, command, fingerprint)
MAX_PATH = 4096
MAX_ID = (1 << 63) - 1
MAX_ROUND = 10_000_000
MAX_STAGE = 200  # characters of a round's stage (a knob's name)
MAX_SKIPPED_SHOWN = 20  # reasons kept per read for rows left out

# the runs columns a read selects: the JSON documents only when within their caps (else NULL, and their size)
def _cut(column: str, limit: int) -> str:
    """``column`` as read: text or blob cut by SQLite one past ``limit``, so a 1 MB name never reaches Python
    whole and the validation below still sees that it was too long (the row is left out, not silently cut)."""
    return f"CASE WHEN typeof({column}) IN ('text', 'blob') THEN substr({column}, 1, {limit + 1}) ELSE {column} END"


# the runs columns a read selects: names cut past their caps, the JSON documents only when within their caps (else
# NULL, and their size)
RUN_COLUMNS = ("id, " + ", ".join(_cut(c, MAX_TEXT) for c in ("created", "command", "host_fp", "build")) + ", "
               + ", ".join((_cut("model_path", MAX_PATH), _cut("model_hash", MAX_TEXT), _cut("model_name", MAX_PATH),
                            _cut("label", MAX_TEXT))) + ","
               f" CASE WHEN length(CAST(host_json AS BLOB)) <= {MAX_HOST_READ} THEN host_json END,"
               " length(CAST(host_json AS BLOB)),"
               f" CASE WHEN length(CAST(summary_json AS BLOB)) <= {MAX_SUMMARY_READ} THEN summary_json END,"
               " length(CAST(summary_json AS BLOB))")
RESULT_COLUMNS = (f"{_cut('config', MAX_TEXT)}, {_cut('config_key', MAX_TEXT)}, CASE WHEN length(CAST(flags_json AS "
                  f"BLOB)) <= {MAX_FLAGS_READ} THEN flags_json END, {_cut('test', MAX_TEXT)}, {_cut('kind', MAX_TEXT)},"
                  " median_ts, rounds")


def shown(value: Any) -> str:
    """A stored value in a reason: its repr, one printable line, shortened."""
    from tunehost.printable import one_line

    return one_line(repr(value), 40)


# ---------------------------------------------------------------- JSON shapes of a run's summary


def _text_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, str) and len(v) <= MAX_TEXT)


def _count_or_none(v: Any) -> bool:
    return v is None or whole(v, 0, MAX_ROUND) is not None


def _flag_or_none(v: Any) -> bool:
    return v is None or isinstance(v, bool)


def _object_or_none(v: Any) -> bool:
    return v is None or isinstance(v, dict)


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and len(x) <= MAX_TEXT for x in v)


def _verdicts(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) and len(x) <= MAX_TEXT for x in v.values())


def _settings(v: Any) -> bool:
    return isinstance(v, dict) and all(_count_or_none(v.get(k)) for k in ("n_prompt", "n_gen", "n_depth", "reps")) \
        and _text_or_none(v.get("objective"))


def _confirmation(v: Any) -> bool:
    if v is None:
        return True
    return isinstance(v, dict) and all(v.get(k) is None or number(v.get(k), 0.0, 1e6) is not None
                                       for k in ("ratio", "low", "high")) \
        and _count_or_none(v.get("rounds")) and _text_or_none(v.get("verdict"))


def _rounds_ts(v: Any) -> bool:
    """{config: {test: [t/s per round]}}: what drift compares with."""
    return isinstance(v, dict) and all(
        isinstance(tests, dict) and all(_values(values) for values in tests.values()) for tests in v.values())


def _values(v: Any) -> bool:
    return isinstance(v, list) and all(number(x, 0.0, MAX_TOKENS_PER_S) is not None for x in v)


def _drift_rows(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(r, dict) and _text_or_none(r.get("test"))
                                       and _text_or_none(r.get("verdict"))
                                       and all(r.get(k) is None or number(r.get(k), -1e12, 1e12) is not None
                                               for k in ("then", "now", "change_percent", "low", "high"))
                                       for r in v)


def _since_run(v: Any) -> bool:
    return v is None or whole(v, 0, MAX_ID) is not None


# key -> (what it must be, its check): the keys tunehost writes and some reader uses; other keys are kept as read
SUMMARY_SHAPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "rounds": ("a whole number", _count_or_none),
    "reused_steps": ("a whole number", _count_or_none),
    "discarded_rounds": ("a whole number", _count_or_none),
    "since_run": ("a run id", _since_run),
    "best": ("text", _text_or_none),
    "winner": ("text", _text_or_none),
    "verdict": ("text", _text_or_none),
    "stopped": ("text", _text_or_none),
    "stop_reason": ("text", _text_or_none),
    "busy_reason": ("text", _text_or_none),
    "tune_key": ("text", _text_or_none),
    "ceiling_config": ("text", _text_or_none),
    "improved": ("true or false", _flag_or_none),
    "disturbed": ("true or false", _flag_or_none),
    "verdicts": ("an object of texts", _verdicts),
    "changed": ("a list of texts", _texts),
    "settings": ("an object of whole numbers", _settings),
    "confirmation": ("an object of finite numbers", _confirmation),
    "ceiling": ("an object", _object_or_none),
    "rounds_ts": ("an object of lists of t/s", _rounds_ts),
    "rows": ("a list of drift rows", _drift_rows),
    "winner_rounds": ("a list of t/s", _values),
    "winner_flags": ("a list of texts", _texts),
    "plan_flags": ("a list of texts", _texts),
}


def summary_problem(summary: Any) -> str | None:
    """Why a parsed summary is not one a reader can use (None: it is)."""
    if not isinstance(summary, dict):
        return f"summary is {type(summary).__name__}, not an object"
    for key, (what, ok) in SUMMARY_SHAPES.items():
        if key in summary and not ok(summary[key]):
            return f"summary's {key} {shown(summary[key])} is not {what}"
    return None


def document(text: Any, size: Any, cap: int, name: str) -> tuple[Any, str | None]:
    """A JSON column (selected only when within ``cap``; ``size`` its length in bytes) parsed strictly."""
    if text is None:
        if size is None:
            return None, f"{name} is NULL"
        return None, f"{name} of {shown(size)} bytes is beyond the {cap // 1024} KiB a read takes"
    if isinstance(text, bytes):
        return None, f"{name} is a blob, not text"
    if not isinstance(text, str):
        return None, f"{name} {shown(text)} is not JSON text"
    try:
        return strict_json(text), None
    except ValueError as exc:
        return None, f"{name} is not strict JSON ({shown(str(exc))})"


# ---------------------------------------------------------------- one row each


def _text(value: Any, name: str, limit: int = MAX_TEXT, *, optional: bool = False) -> str | None:
    """Why a text column is not one (None: it is)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > limit:
        return f"{name} {shown(value)} is not text of at most {limit} characters"
    return None


def run_problem(row: Sequence[Any]) -> tuple[dict[str, Any] | None, str | None]:
    """A runs row (RUN_COLUMNS) as the StoredRun's fields but its results, or why it is not one."""
    (run_id, created, command, host_fp, build, model_path, model_hash, model_name, label,
     host_json, host_size, summary_json, summary_size) = row
    if whole(run_id, 1, MAX_ID) is None:
        return None, f"id {shown(run_id)} is not a run id"
    for value, name, limit, optional in ((created, "created", 64, False), (command, "command", 64, False),
                                         (host_fp, "host_fp", MAX_TEXT, False), (build, "build", MAX_TEXT, True),
                                         (model_path, "model_path", MAX_PATH, False),
                                         (model_hash, "model_hash", MAX_TEXT, False),
                                         (model_name, "model_name", MAX_PATH, True), (label, "label", MAX_TEXT, True)):
        why = _text(value, name, limit, optional=optional)
        if why is not None:
            return None, why
    host, why = document(host_json, host_size, MAX_HOST_READ, "host")
    if why is None and not isinstance(host, dict):
        why = f"host is {type(host).__name__}, not an object"
    if why is not None:
        return None, why
    summary, why = document(summary_json, summary_size, MAX_SUMMARY_READ, "summary")
    if why is None:
        why = summary_problem(summary)
    if why is not None:
        return None, why
    return {"id": run_id, "created": created, "command": command, "host_fp": host_fp, "host": host, "build": build,
            "model_path": model_path, "model_hash": model_hash, "model_name": model_name, "label": label,
            "summary": summary}, None


def result_problem(row: Sequence[Any]) -> tuple[tuple[Any, ...] | None, str | None]:
    """A results row (RESULT_COLUMNS) as StoredResult's fields, or why it is not one."""
    config, key, flags_json, test, kind, median, rounds = row
    for value, name in ((config, "config"), (key, "config_key"), (test, "test"), (kind, "kind")):
        why = _text(value, name)
        if why is not None:
            return None, why
    ts = number(median, 0.0, MAX_TOKENS_PER_S)
    if ts is None:
        return None, f"median_ts {shown(median)} is not a finite t/s from 0 to {MAX_TOKENS_PER_S:g}"
    count = whole(rounds, 0, MAX_ROUND)
    if count is None:
        return None, f"rounds {shown(rounds)} is not a whole number from 0 to {MAX_ROUND}"
    flags, why = document(flags_json, None if flags_json is None else 0, MAX_FLAGS_READ, "flags")
    if why is None and not _texts(flags):
        why = f"flags {shown(flags)} are not a list of texts"
    if why is not None:
        return None, why
    return (config, key, tuple(flags), test, kind, ts, count), None


def round_problem(row: Sequence[Any]) -> tuple[tuple[Any, ...] | None, str | None]:
    """A rounds row (seq, stage, round, counted, disturbed, watch_json) as StoredRound's fields, or why not."""
    _seq, stage, rnd, counted, disturbed, watch = row
    if not isinstance(stage, str) or len(stage) > MAX_STAGE:
        return None, f"stage {shown(stage)} is not text of at most {MAX_STAGE} characters"
    if whole(rnd, 0, MAX_ROUND) is None:
        return None, f"round {shown(rnd)} is not a whole number from 0 to {MAX_ROUND}"
    for name, flag in (("counted", counted), ("disturbed", disturbed)):
        if whole(flag, 0, 1) is None:
            return None, f"{name} {shown(flag)} is not 0 or 1"
    loaded, _ = document(watch, 0, MAX_WATCH_READ, "watch") if isinstance(watch, str) else ({}, None)
    return (stage, rnd, bool(counted), bool(disturbed), loaded if isinstance(loaded, Mapping) else {}), None


def step_problem(row: Sequence[Any], budget_cap: float = 1e9) -> tuple[tuple[Any, ...] | None, str | None]:
    """A tune_steps row (seq, argv_json, duration_s, outcome_json within MAX_STEP_READ, its size) as
    (seq, argv, duration, outcome), or why it is not one a resumed tune can replay."""
    seq, argv_json, duration, outcome_json, outcome_size = row
    if whole(seq, 0, MAX_ROUND) is None:
        return None, f"seq {shown(seq)} is not a whole number"
    argv, why = document(argv_json, 0, MAX_STEP_READ, "argv")
    if why is None and not _texts(argv):
        why = f"argv {shown(argv)} is not a list of texts"
    if why is not None:
        return None, why
    seconds = number(duration, 0.0, budget_cap)
    if seconds is None or not math.isfinite(seconds):
        return None, f"duration {shown(duration)} is not a number of seconds"
    outcome, why = document(outcome_json, outcome_size, MAX_STEP_READ, "outcome")
    if why is None and not isinstance(outcome, dict):
        why = f"outcome is {type(outcome).__name__}, not an object"
    if why is not None:
        return None, why
    return (seq, argv, seconds, outcome), None
