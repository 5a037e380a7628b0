"""The results store: every measurement tunehost makes, in one local SQLite database.

Where: ``$TUNEHOST_STATE_DIR/results.sqlite3`` when that variable is set (tests, a system-wide install), else
``$XDG_STATE_HOME/tunehost/results.sqlite3`` (default ``~/.local/state/tunehost``): benchmarks run as the user
who owns the model, not as root, so the per-user state directory is the default (docs/history.md).

Each run is keyed by what decides its speed: the host fingerprint (:mod:`tunehost.facts.identity`: CPU, memory
modules, GPUs, kernel, BIOS), the llama.cpp build (commit and number llama-bench reports), the model file's fast
hash (:func:`model_hash`) and the configuration (its llama-bench flags, :func:`config_key`).

Durability: WAL journal mode, every write one ``BEGIN IMMEDIATE`` transaction (a torn write leaves the last
committed state; two processes writing at once wait for each other up to :data:`BUSY_TIMEOUT_S`), a schema
version in ``meta``. A file that is not a tunehost store (or is damaged) is ONE clear error line naming the file;
a state directory that cannot be written is :class:`StoreUnavailable` (the commands then run without recording
and say so in one warning line).

The tune journal (``tune_steps``) keeps every llama-bench invocation of a ``tunehost tune`` as it finishes, so a
tune killed halfway replays them and measures only what is missing (:mod:`tunehost.tune.race`).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunehost.errors import TunehostError


SCHEMA_VERSION = 2  # 2: the rounds table (per-round host watch); a version-1 store is migrated when opened
DB_NAME = "results.sqlite3"
STATE_ENV = "TUNEHOST_STATE_DIR"
BUSY_TIMEOUT_S = 30.0
HASH_BLOCKS = 16  # model_hash: this many blocks ...
HASH_BLOCK_BYTES = 64 * 1024  # ... of this size, evenly spaced, first and last included: 1 MiB read at most
MAX_JSON_BYTES = 4 * 1024 * 1024  # one stored document (a tune step, a run summary) is at most this big

# the per-round host watch (schema 2): written once here, used by the schema and by the v1 -> v2 migration
ROUNDS_TABLE = """CREATE TABLE IF NOT EXISTS rounds (
    run_id INTEGER NOT NULL REFERENCES runs (id),
    seq INTEGER NOT NULL,
    stage TEXT NOT NULL,
    round INTEGER NOT NULL,
    counted INTEGER NOT NULL,
    disturbed INTEGER NOT NULL,
    watch_json TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
)"""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    command TEXT NOT NULL,
    host_fp TEXT NOT NULL,
    host_json TEXT NOT NULL,
    build TEXT,
    model_path TEXT NOT NULL,
    model_hash TEXT NOT NULL,
    model_name TEXT,
    label TEXT,
    summary_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_model ON runs (model_hash, created);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL REFERENCES runs (id),
    config TEXT NOT NULL,
    config_key TEXT NOT NULL,
    flags_json TEXT NOT NULL,
    test TEXT NOT NULL,
    kind TEXT NOT NULL,
    median_ts REAL NOT NULL,
    rounds INTEGER NOT NULL,
    PRIMARY KEY (run_id, config, test)
);
""" + ROUNDS_TABLE + """;
CREATE TABLE IF NOT EXISTS tune_steps (
    tune_key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    argv_json TEXT NOT NULL,
    duration_s REAL NOT NULL,
    outcome_json TEXT NOT NULL,
    PRIMARY KEY (tune_key, seq)
);
"""

# what turns a store of version N into N + 1 (additive only: a store this tunehost migrated still holds every row)
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (ROUNDS_TABLE,),
}


class StoreUnavailable(TunehostError):
    """The state directory cannot hold the store (read-only, not a directory, no permission)."""


def store_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(STATE_ENV):
        return Path(env[STATE_ENV])
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base) / "tunehost"


def _stored_text(raw: bytes) -> str:
    """A TEXT value as read: bytes that are not UTF-8 (another program wrote the row) become U+FFFD, so one bad
    value is one odd character in one row, never a store that cannot be read at all."""
    return raw.decode("utf-8", errors="replace")


def store_path(environ: Mapping[str, str] | None = None) -> Path:
    return store_dir(environ) / DB_NAME


def model_hash(path: str | os.PathLike[str]) -> str:
    """A fast identity of a model file: sha256 over its size and 16 blocks of 64 KiB at evenly spaced offsets
    (the first and the last block included), so at most 1 MiB is read even from a 100 GB file. Two files with
    the same size whose sampled blocks agree are taken to be the same model (a re-download, a copy); any
    re-quantization or a different split changes the header block, the tensor data sampled, or the size."""
    from tunehost.inputs import input_file_size

    input_file_size(path, "a model file")  # a FIFO or a device: one line, never a hang
    try:
        # O_NONBLOCK: a file swapped for a FIFO since the check still cannot block the open
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise TunehostError(f"{path}: not a regular file")
            size = info.st_size
            digest = hashlib.sha256(size.to_bytes(8, "little"))
            last = max(0, size - HASH_BLOCK_BYTES)
            offsets = sorted({round(i * last / (HASH_BLOCKS - 1)) for i in range(HASH_BLOCKS)})
            for offset in offsets:
                fh.seek(offset)
                digest.update(fh.read(HASH_BLOCK_BYTES))
    except OSError as exc:
        raise TunehostError(f"cannot read the model {path}: {exc.strerror or exc}") from None
    return digest.hexdigest()[:24]


def config_key(flags: Sequence[str]) -> str:
    """The configuration's identity: 12 hex digits of sha256 over its llama-bench flags (order kept)."""
    return hashlib.sha256(json.dumps(list(flags)).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class StoredResult:
    config: str
    config_key: str
    flags: tuple[str, ...]
    test: str
    kind: str
    median_ts: float
    rounds: int


@dataclass(frozen=True)
class StoredRound:
    """One round of a run as the host watch saw it (tunehost.bench.watch: the raw facts and the reasons judged
    when it ran). ``stage``: "" for a bench, the knob for a tune; ``counted``: its values entered the verdict (a
    tune discards a disturbed round unless --allow-busy)."""

    stage: str
    round: int
    counted: bool
    disturbed: bool
    watch: Mapping[str, Any]

    @property
    def reasons(self) -> tuple[str, ...]:
        found = self.watch.get("reasons") if isinstance(self.watch, Mapping) else None
        return tuple(str(r) for r in found) if isinstance(found, list) else ()

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "round": self.round, "counted": self.counted, "disturbed": self.disturbed,
                "watch": dict(self.watch) if isinstance(self.watch, Mapping) else {}}


@dataclass(frozen=True)
class StoredRun:
    id: int
    created: str
    command: str
    host_fp: str
    host: Mapping[str, Any]
    build: str | None
    model_path: str
    model_hash: str
    model_name: str | None
    label: str | None
    summary: Mapping[str, Any]
    results: tuple[StoredResult, ...]

    def tg(self, config: str | None = None) -> float | None:
        """The TG median of ``config`` (default: the summary's "best" config, else the last one)."""
        config = config or self.summary.get("best") or (self.results[-1].config if self.results else None)
        return next((r.median_ts for r in self.results if r.config == config and r.kind == "tg"), None)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "created": self.created, "command": self.command, "host_fingerprint": self.host_fp,
                "host": dict(self.host), "build": self.build, "model": {"path": self.model_path,
                                                                         "hash": self.model_hash,
                                                                         "name": self.model_name},
                "label": self.label, "summary": dict(self.summary),
                "results": [{"config": r.config, "config_key": r.config_key, "flags": list(r.flags),
                             "test": r.test, "kind": r.kind, "median_ts": r.median_ts, "rounds": r.rounds}
                            for r in self.results]}


@dataclass(frozen=True)
class NewRun:
    """What one run records: where, what, and one row per (config, test)."""

    command: str  # bench | tune | drift
    host: Mapping[str, Any]  # HostIdentity.to_json()
    host_fp: str
    build: str | None
    model_path: str
    model_hash: str
    model_name: str | None
    results: tuple[StoredResult, ...]
    summary: Mapping[str, Any]
    label: str | None = None
    rounds: tuple[StoredRound, ...] = ()  # one per round the host watch saw


class Store:
    """One open results store. Use :func:`open_store`; close with :meth:`close` (or ``with``)."""

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self._db = connection

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.rollback()
                raise
            self._db.commit()
        except sqlite3.OperationalError as exc:
            raise _operational(self.path, exc) from None
        except sqlite3.IntegrityError as exc:  # a value the schema refuses (NaN becomes NULL): nothing was written
            raise TunehostError(f"results store {self.path}: not recorded ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, exc) from None

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(sql, tuple(args)).fetchall()
        except sqlite3.OperationalError as exc:
            raise _operational(self.path, exc) from None
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, exc) from None

    # ------------------------------------------------------------ runs

    def record(self, run: NewRun) -> int:
        """Store one run and its results in one transaction; returns its id."""
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO runs (created, command, host_fp, host_json, build, model_path, model_hash, model_name,"
                " label, summary_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_now(), run.command, run.host_fp, _dump(run.host), run.build, run.model_path, run.model_hash,
                 run.model_name, run.label, _dump(run.summary)))
            run_id = int(cursor.lastrowid or 0)
            db.executemany(
                "INSERT OR REPLACE INTO results (run_id, config, config_key, flags_json, test, kind, median_ts, rounds)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, r.config, r.config_key, _dump(list(r.flags)), r.test, r.kind, float(r.median_ts),
                  int(r.rounds)) for r in run.results])
            db.executemany(
                "INSERT INTO rounds (run_id, seq, stage, round, counted, disturbed, watch_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(run_id, seq, r.stage, int(r.round), int(bool(r.counted)), int(bool(r.disturbed)), _dump(r.watch))
                 for seq, r in enumerate(run.rounds)])
        return run_id

    def rounds(self, run_id: int) -> list[StoredRound]:
        """The valid rounds recorded for one run, in order ([] for a run recorded before rounds were kept)."""
        return self.round_rows(run_id)[0]

    def round_rows(self, run_id: int) -> tuple[list[StoredRound], list[str]]:
        """The rounds recorded for one run, in order, and one line per row left out: a store is read as hostile
        (_stored_round), so a row of text, NULL or out-of-range values is skipped with its reason, never raised."""
        valid, skipped = [], []
        for row in self._read("SELECT seq, stage, round, counted, disturbed, watch_json FROM rounds WHERE run_id = ?"
                              " ORDER BY seq", [int(run_id)])[:MAX_ROUNDS_READ]:
            found, why = _stored_round(row)
            if found is not None:
                valid.append(found)
            elif len(skipped) < MAX_SKIPPED_SHOWN:
                skipped.append(f"run {int(run_id)}, round row {_shown(row[0])}: {why}")
        return valid, skipped

    def runs(self, *, model_hash: str | None = None, model_path: str | None = None, command: str | None = None,
             limit: int = 200) -> list[StoredRun]:
        """Runs, newest first, optionally only one model (by hash or path) or one command."""
        where, args = [], []
        if model_hash:
            where.append("model_hash = ?")
            args.append(model_hash)
        if model_path:
            where.append("model_path = ?")
            args.append(model_path)
        if command:
            where.append("command = ?")
            args.append(command)
        text, doc = _capped_text, _capped_json
        sql = (f"SELECT id, {text('created')}, {text('command')}, {text('host_fp')}, {doc('host_json')},"
               f" {text('build')}, {text('model_path')}, {text('model_hash')}, {text('model_name')}, {text('label')},"
               f" {doc('summary_json')} FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY created DESC, id DESC LIMIT ?")
        rows = self._read(sql, [*args, int(limit)])
        by_run: dict[int, list[StoredResult]] = {}
        if rows:
            ids = [r[0] for r in rows]
            for start in range(0, len(ids), 500):  # SQLite before 3.32 allows 999 parameters per statement
                chunk = ids[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for row in self._read(  # the first MAX_RESULTS_READ results of each run (window: SQLite 3.25+)
                        f"SELECT run_id, {text('config')}, {text('config_key')}, {doc('flags_json')}, {text('test')},"
                        f" {text('kind')}, median_ts, rounds FROM (SELECT rowid AS seq, *, ROW_NUMBER() OVER"
                        f" (PARTITION BY run_id ORDER BY rowid) AS nth FROM results WHERE run_id IN ({marks}))"
                        f" WHERE nth <= {MAX_RESULTS_READ} ORDER BY seq", chunk):
                    found = _stored_result(row[1:])
                    if found is not None:  # a row of text, NULL or out-of-range values is left out, never raised
                        by_run.setdefault(row[0], []).append(found)
        return [StoredRun(id=r[0], created=r[1], command=r[2], host_fp=r[3], host=_load(r[4], {}), build=r[5],
                          model_path=r[6], model_hash=r[7], model_name=r[8], label=r[9], summary=_load(r[10], {}),
                          results=tuple(by_run.get(r[0], ()))) for r in rows]

    # ------------------------------------------------------------ the tune journal

    def tune_steps(self, tune_key: str) -> list[tuple[int, list[str], float, Any]]:
        """(seq, argv, duration_s, outcome) of every stored step of one tune, in order."""
        return [(int(seq), _load(argv, []), float(duration), _load(outcome, None)) for seq, argv, duration, outcome in
                self._read("SELECT seq, argv_json, duration_s, outcome_json FROM tune_steps WHERE tune_key = ?"
                           " ORDER BY seq", [tune_key])]

    def add_tune_step(self, tune_key: str, seq: int, argv: Sequence[str], duration_s: float, outcome: Any) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO tune_steps (tune_key, seq, argv_json, duration_s, outcome_json)"
                       " VALUES (?, ?, ?, ?, ?)", (tune_key, int(seq), _dump(list(argv)), float(duration_s),
                                                   _dump(outcome)))

    def tune_keys(self, prefix: str) -> list[str]:
        """Tune journals whose key starts with ``prefix`` (one per attempt), oldest first."""
        return [str(r[0]) for r in self._read(
            "SELECT tune_key FROM tune_steps WHERE substr(tune_key, 1, ?) = ? GROUP BY tune_key ORDER BY MIN(rowid)",
            [len(prefix), prefix])]

    def tune_finished(self, tune_key: str) -> bool:
        return bool(self._read("SELECT 1 FROM runs WHERE command = 'tune' AND json_extract(summary_json, '$.tune_key')"
                               " = ? LIMIT 1", [tune_key]))


def open_store(path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Store:
    """Open (creating when absent) the store. Raises StoreUnavailable when the directory cannot hold it and
    TunehostError (one line, naming the file) when the file is not a tunehost store or is damaged. With
    ``create=False`` (a command that only reads: report, export) a file without the tunehost schema (an empty
    file a user named) is refused before anything is written to it, instead of becoming a store."""
    target = Path(path) if path is not None else store_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailable(f"results store {target.parent}: {(exc.strerror or str(exc)).lower()}") from None
    if target.exists() and not target.is_file():
        raise StoreUnavailable(f"results store {target} is not a file")
    if not target.exists() and not os.access(target.parent, os.W_OK):
        raise StoreUnavailable(f"results store {target.parent}: not writable")
    try:
        db = sqlite3.connect(str(target), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"results store {target}: {exc}") from None
    db.text_factory = _stored_text
    try:
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if not create and _version(db) is None:
            db.close()
            raise TunehostError(f"{target} is not a tunehost results store (no tunehost schema): not read, "
                                "not changed")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise sqlite3.OperationalError(f"cannot switch to WAL (journal mode {mode[0] if mode else '?'})")
        db.execute("PRAGMA synchronous = NORMAL")
        version = _version(db)
        if version is None:
            db.execute("BEGIN IMMEDIATE")
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                db.execute(statement)
            db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            db.commit()
            version = _version(db)
        if version is not None and version < SCHEMA_VERSION:
            version = _migrate(db, version)
        if version != SCHEMA_VERSION:
            db.close()
            raise TunehostError(f"results store {target} has schema {version}; this tunehost reads {SCHEMA_VERSION} "
                                "(a newer tunehost wrote it): use that version, or move the file aside")
    except sqlite3.OperationalError as exc:
        db.close()
        raise _operational(target, exc) from None
    except sqlite3.DatabaseError as exc:
        db.close()
        raise _damaged(target, exc) from None
    return Store(target, db)


def open_for_recording(warn: Any) -> Store | None:
    """The store for a command that measures: None (after one ``warn(line)``) when it cannot be written, so the
    measurement itself still runs. A damaged store is an error (its data would silently stop growing)."""
    try:
        return open_store()
    except StoreUnavailable as exc:
        warn(f"not recorded in the results store: {exc} (set {STATE_ENV} to a writable directory)")
        return None


def _migrate(db: sqlite3.Connection, version: int) -> int:
    """Bring an older store up to SCHEMA_VERSION in one transaction (another process may have done it already)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        current = _version(db) or version
        while current in _MIGRATIONS and current < SCHEMA_VERSION:
            for statement in _MIGRATIONS[current]:
                db.execute(statement)
            current += 1
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(current),))
    except BaseException:
        db.rollback()
        raise
    db.commit()
    return current


def _version(db: sqlite3.Connection) -> int | None:
    has_meta = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if not has_meta:
        if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise sqlite3.DatabaseError("it holds tables but no tunehost schema")
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    try:
        return int(row[0]) if row else None
    except (TypeError, ValueError):
        raise sqlite3.DatabaseError(f"schema version {row[0]!r} is not a number") from None


def _operational(path: Path, exc: sqlite3.OperationalError) -> TunehostError:
    text = str(exc)
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StoreUnavailable(f"results store {path}: {text}")
    if "locked" in text or "busy" in text:
        return TunehostError(f"results store {path} stayed locked by another tunehost for {BUSY_TIMEOUT_S:g} s; "
                             "try again when it has finished")
    if "malformed" in text or "not a database" in text:
        return _damaged(path, exc)
    return TunehostError(f"results store {path}: {text}")


def _damaged(path: Path, exc: sqlite3.DatabaseError) -> TunehostError:
    from tunehost.printable import one_line

    return TunehostError(f"results store {path} is damaged or not a tunehost store ({one_line(exc, 120)}); move it "
                         "aside and tunehost starts a new one")


def _dump(value: Any) -> str:
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False, default=str)
    except ValueError as exc:  # NaN or infinity in a summary: JSON has no such number, and the store keeps none
        raise TunehostError(f"results store: not recorded (a stored document holds {exc})") from None
    if len(text) > MAX_JSON_BYTES:
        raise TunehostError(f"a stored document would be {len(text)} bytes (limit {MAX_JSON_BYTES})")
    return text


MAX_RESULTS_READ = 2000  # results read per run (a tune records a few hundred): a run with 100,000 is cut here
MAX_TEXT_CHARS = 4096  # one stored name, path or label as read (PATH_MAX): a longer one is cut in SQLite


def _capped_text(column: str) -> str:
    """`column` as read: at most MAX_TEXT_CHARS, cut by SQLite, so a 1 MB name never reaches Python whole."""
    return (f"CASE WHEN typeof({column}) IN ('text', 'blob') THEN substr({column}, 1, {MAX_TEXT_CHARS})"
            f" ELSE {column} END")


def _capped_json(column: str) -> str:
    """`column` as read: NULL (an unreadable document) when it is longer than any document tunehost stores."""
    return f"CASE WHEN length({column}) > {MAX_JSON_BYTES} THEN NULL ELSE {column} END"


def _load(text: Any, default: Any) -> Any:
    if not isinstance(text, str) or len(text) > MAX_JSON_BYTES:
        return default
    try:  # NaN and infinities are refused as _dump refuses them; a document nested too deep is not a summary
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return default


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a stored number")


MAX_ROUNDS_READ = 100_000  # rounds rows read per run (a tune records a few hundred)
MAX_SKIPPED_SHOWN = 20  # reasons kept per run for rows left out
MAX_ROUND = 10_000_000
MAX_STAGE = 200  # characters of a round's stage (a knob's name)


def _shown(value: Any) -> str:
    """A stored value in a reason: its repr, one printable line, shortened."""
    from tunehost.printable import one_line

    return one_line(repr(value), 40)


def _stored_result(row: Sequence[Any]) -> StoredResult | None:
    """One results row (config, config_key, flags_json, test, kind, median_ts, rounds) validated, or None."""
    from tunehost.bounds import number, whole

    config, key, flags, test, kind, ts, rounds = row
    if not all(isinstance(v, str) and len(v) <= MAX_STAGE * 10 for v in (config, key, test, kind)):
        return None
    median, count = number(ts, 0.0, 1e9), whole(rounds, 0, MAX_ROUND)
    if median is None or count is None:
        return None
    loaded = _load(flags, [])
    return StoredResult(config, key, tuple(str(f) for f in loaded) if isinstance(loaded, list) else (), test, kind,
                        median, count)


def _stored_round(row: Sequence[Any]) -> tuple[StoredRound | None, str | None]:
    """One rounds row (seq, stage, round, counted, disturbed, watch_json) as a StoredRound, or why it is not one:
    every column is validated (tunehost.bounds), none converted on faith."""
    from tunehost.bounds import whole

    _seq, stage, rnd, counted, disturbed, watch = row
    if not isinstance(stage, str) or len(stage) > MAX_STAGE:
        return None, f"stage {_shown(stage)} is not text of at most {MAX_STAGE} characters"
    if whole(rnd, 0, MAX_ROUND) is None:
        return None, f"round {_shown(rnd)} is not a whole number from 0 to {MAX_ROUND}"
    for name, flag in (("counted", counted), ("disturbed", disturbed)):
        if whole(flag, 0, 1) is None:
            return None, f"{name} {_shown(flag)} is not 0 or 1"
    loaded = _load(watch, {})
    return StoredRound(stage, rnd, bool(counted), bool(disturbed), loaded if isinstance(loaded, Mapping) else {}), None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
