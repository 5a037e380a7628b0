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
from tunehost.store.rows import (MAX_FLAGS_READ, MAX_HOST_READ, MAX_STEP_READ, MAX_SUMMARY_READ,
                                 MAX_WATCH_READ)


SCHEMA_VERSION = 2  # 2: the rounds table (per-round host watch); a version-1 store is migrated when opened
DB_NAME = "results.sqlite3"
STATE_ENV = "TUNEHOST_STATE_DIR"
BUSY_TIMEOUT_S = 30.0
HASH_BLOCKS = 16  # model_hash: this many blocks ...
HASH_BLOCK_BYTES = 64 * 1024  # ... of this size, evenly spaced, first and last included: 1 MiB read at most

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
    """Where the results store lives: $TUNEHOST_STATE_DIR (a relative one is taken from the working directory and
    every message names it absolute), else $XDG_STATE_HOME/tunehost (only an absolute one: the XDG spec says a
    relative one is invalid and ignored), else ~/.local/state/tunehost."""
    env = os.environ if environ is None else environ
    if env.get(STATE_ENV):
        return Path(env[STATE_ENV]).absolute()
    xdg = env.get("XDG_STATE_HOME") or ""
    base = xdg if os.path.isabs(xdg) else str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
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

    def _iter(self, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of one query, one at a time (the store's errors as one line each, like :meth:`_read`)."""
        try:
            cursor = self._db.execute(sql, tuple(args))
            while True:
                row = cursor.fetchone()
                if row is None:
                    return
                yield row
        except sqlite3.OperationalError as exc:
            raise _operational(self.path, exc) from None
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
                (_now(), run.command, run.host_fp, _dump(run.host, MAX_HOST_READ), run.build, run.model_path,
                 run.model_hash, run.model_name, run.label, _dump(run.summary, MAX_SUMMARY_READ)))
            run_id = int(cursor.lastrowid or 0)
            db.executemany(
                "INSERT OR REPLACE INTO results (run_id, config, config_key, flags_json, test, kind, median_ts, rounds)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, r.config, r.config_key, _dump(list(r.flags), MAX_FLAGS_READ), r.test, r.kind,
                  float(r.median_ts), int(r.rounds)) for r in run.results])
            db.executemany(
                "INSERT INTO rounds (run_id, seq, stage, round, counted, disturbed, watch_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(run_id, seq, r.stage, int(r.round), int(bool(r.counted)), int(bool(r.disturbed)),
                  _dump(r.watch, MAX_WATCH_READ))
                 for seq, r in enumerate(run.rounds)])
        return run_id

    def rounds(self, run_id: int) -> list[StoredRound]:
        """The valid rounds recorded for one run, in order ([] for a run recorded before rounds were kept)."""
        return self.round_rows(run_id)[0]

    def round_rows(self, run_id: int) -> tuple[list[StoredRound], list[str]]:
        """The rounds recorded for one run, in order, and one line per row left out: a store is read as hostile
        (tunehost.store.rows), so a row of text, NULL or out-of-range values is skipped with its reason."""
        from tunehost.store.rows import MAX_SKIPPED_SHOWN, MAX_WATCH_READ, round_problem, shown

        valid, skipped = [], []
        read = 0
        for row in self._iter("SELECT seq, stage, round, counted, disturbed, CASE WHEN"
                              f" length(CAST(watch_json AS BLOB)) <= {MAX_WATCH_READ} THEN watch_json END"
                              " FROM rounds WHERE run_id = ? ORDER BY seq LIMIT ?", [int(run_id), MAX_ROUNDS_READ]):
            read += len(row[5]) if isinstance(row[5], str) else 0
            if read > MAX_READ_BYTES:  # a run's rounds are bounded as a whole too
                skipped.append(f"run {int(run_id)}: rounds beyond {MAX_READ_BYTES // MiB} MiB of watch data "
                               "left out")
                break
            fields, why = round_problem(row)
            if fields is not None:
                valid.append(StoredRound(*fields))
            elif len(skipped) < MAX_SKIPPED_SHOWN:
                skipped.append(f"run {int(run_id)}, round row {shown(row[0])}: {why}")
        return valid, skipped

    def runs(self, *, model_hash: str | None = None, model_path: str | None = None, command: str | None = None,
             host_fp: str | None = None, limit: int = 200, keep: Sequence[str] | None = None) -> list[StoredRun]:
        """Runs, newest first, optionally only one model (by hash or path), one command or one host; a stored row
        that is not a valid run is left out (:meth:`run_rows` says why)."""
        return self.run_rows(model_hash=model_hash, model_path=model_path, command=command, host_fp=host_fp,
                             limit=limit, keep=keep)[0]

    def run_rows(self, **query: Any) -> tuple[list[StoredRun], list[str]]:
        """The valid runs of :meth:`iter_runs` and one line per row left out (each a short line: as many as the
        query's limit allows, so a count of them is the count)."""
        runs: list[StoredRun] = []
        skipped: list[str] = []
        for run, why in self.iter_runs(**query):
            if run is not None:
                runs.append(run)
            else:
                skipped.append(why or "")
        return runs, skipped

    def iter_runs(self, *, model_hash: str | None = None, model_path: str | None = None, command: str | None = None,
                  host_fp: str | None = None, limit: int = 200,
                  keep: Sequence[str] | None = None) -> Iterator[tuple[StoredRun | None, str | None]]:
        """(run, None) for each valid run, newest first, or (None, why) for a row left out (a run row of the wrong
        types or JSON shapes, tunehost.store.rows; a results row of one is left out of its run with its reason).
        One run is in memory at a time, its JSON documents capped in SQL; ``keep``: only these summary keys are
        kept (a reader that needs a few keeps a few)."""
        from tunehost.store.rows import RESULT_COLUMNS, RUN_COLUMNS, result_problem, run_problem, shown

        where, args = [], []
        for column, value in (("model_hash", model_hash), ("model_path", model_path), ("command", command),
                              ("host_fp", host_fp)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        sql = (f"SELECT {RUN_COLUMNS} FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY created DESC, id DESC LIMIT ?")
        for row in self._iter(sql, [*args, int(limit)]):
            fields, why = run_problem(row)
            if fields is None:
                yield None, f"run {shown(row[0])} left out: {why}"
                continue
            if keep is not None:
                fields["summary"] = {k: v for k, v in fields["summary"].items() if k in keep}
            results, notes = [], []
            for result in self._iter(f"SELECT {RESULT_COLUMNS} FROM results WHERE run_id = ? ORDER BY rowid LIMIT ?",
                                     [fields["id"], MAX_RESULTS_READ]):
                found, why = result_problem(result)
                if found is not None:
                    results.append(StoredResult(*found))
                else:
                    notes.append(f"run {fields['id']}, result row {shown(result[0])}/{shown(result[3])} left out: "
                                 f"{why}")
            yield StoredRun(**fields, results=tuple(results)), None
            for note in notes[:MAX_NOTES_PER_RUN]:
                yield None, note

    # ------------------------------------------------------------ the tune journal

    def tune_steps(self, tune_key: str) -> list[tuple[int, list[str], float, Any]]:
        """(seq, argv, duration_s, outcome) of every stored step of one tune, in order, up to the first row that
        is not a valid step (tunehost.store.rows): a resumed tune replays what is sound and measures the rest."""
        return self.tune_step_rows(tune_key)[0]

    def tune_step_rows(self, tune_key: str) -> tuple[list[tuple[int, list[str], float, Any]], str | None]:
        """The valid steps of one tune up to the first bad one, and why that one is not valid (None: all are)."""
        from tunehost.store.rows import MAX_STEP_READ, shown, step_problem

        steps = []
        read = 0
        for row in self._iter("SELECT seq, argv_json, duration_s, CASE WHEN length(CAST(outcome_json AS BLOB)) <= ?"
                              " THEN outcome_json END, length(CAST(outcome_json AS BLOB)) FROM tune_steps"
                              " WHERE tune_key = ? ORDER BY seq LIMIT ?", [MAX_STEP_READ, tune_key, MAX_ROUNDS_READ]):
            read += row[4] if isinstance(row[4], int) and row[3] is not None else 0
            if read > MAX_READ_BYTES:
                return steps, f"the stored tune's steps beyond {MAX_READ_BYTES // MiB} MiB"
            step, why = step_problem(row)
            if step is None:
                return steps, f"the stored tune's step {shown(row[0])}: {why}"
            steps.append(step)
        return steps, None

    def add_tune_step(self, tune_key: str, seq: int, argv: Sequence[str], duration_s: float, outcome: Any) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO tune_steps (tune_key, seq, argv_json, duration_s, outcome_json)"
                       " VALUES (?, ?, ?, ?, ?)", (tune_key, int(seq), _dump(list(argv), MAX_STEP_READ),
                                                   float(duration_s),
                                                   _dump(outcome, MAX_STEP_READ)))

    def tune_keys(self, prefix: str) -> list[str]:
        """Tune journals whose key starts with ``prefix`` (one per attempt), oldest first."""
        return [str(r[0]) for r in self._read(
            "SELECT tune_key FROM tune_steps WHERE substr(tune_key, 1, ?) = ? GROUP BY tune_key ORDER BY MIN(rowid)",
            [len(prefix), prefix])]

    def tune_finished(self, tune_key: str) -> bool:
        return bool(self._read("SELECT 1 FROM runs WHERE command = 'tune' AND typeof(summary_json) = 'text' AND"
                               " CASE WHEN json_valid(summary_json) THEN json_extract(summary_json, '$.tune_key') END"
                               " = ? LIMIT 1", [tune_key]))  # a row of malformed JSON is no match, not an error


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
    _refuse_links(target)
    if target.exists() and not target.is_file():
        raise StoreUnavailable(f"results store {target} is not a file")
    if not target.exists() and not os.access(target.parent, os.W_OK):
        raise StoreUnavailable(f"results store {target.parent}: not writable")
    try:
        db = sqlite3.connect(str(target), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"results store {target}: {exc}") from None
    db.text_factory = _stored_text
    deadline, pause = time.monotonic() + BUSY_TIMEOUT_S, 0.02
    while True:
        try:
            _prepare(db, target, create)
            break
        except sqlite3.OperationalError as exc:
            # two tunehosts creating a store at once: SQLite answers "database is locked" at once, without its
            # busy handler, to the one whose journal-mode switch or schema transaction meets the other's (half of
            # 30 simultaneous first opens here); such a lock is waited out like any other, up to BUSY_TIMEOUT_S
            if db.in_transaction:
                db.rollback()
            if _locked(exc) and time.monotonic() + pause < deadline:
                time.sleep(pause)
                pause = min(pause * 2, 0.25)
                continue
            db.close()
            raise _operational(target, exc) from None
        except sqlite3.DatabaseError as exc:
            db.close()
            raise _damaged(target, exc) from None
        except TunehostError:
            db.close()
            raise
    return Store(target, db)


def _prepare(db: sqlite3.Connection, target: Path, create: bool) -> None:
    """A fresh connection made ready: busy timeout, WAL, the schema created or migrated, its version checked. What
    it raises, open_store closes the connection for."""
    _refuse_links(target)  # again once open: a link put in its place meanwhile is refused too
    db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    if not create and _version(db) is None:
        raise TunehostError(f"{target} is not a tunehost results store (no tunehost schema): not read, "
                            "not changed")
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        raise sqlite3.OperationalError(f"cannot switch to WAL (journal mode {mode[0] if mode else '?'})")
    db.execute("PRAGMA synchronous = NORMAL")
    version = _version(db)
    if version is None:
        db.execute("BEGIN IMMEDIATE")
        if _version(db) is None:  # another tunehost may have created it while this one waited for the lock
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                db.execute(statement)
            db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        db.commit()
        version = _version(db)
    if version is not None and version < SCHEMA_VERSION:
        version = _migrate(db, version)
    if version != SCHEMA_VERSION:
        raise TunehostError(f"results store {target} has schema {version}; this tunehost reads {SCHEMA_VERSION} "
                            "(a newer tunehost wrote it): use that version, or move the file aside")


def _locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


STORE_FILES = ("", "-wal", "-shm", "-journal")  # the database and the files SQLite keeps beside it


def _refuse_links(target: Path) -> None:
    """A store file (or its -wal/-shm/-journal) that is a symbolic link is refused, dangling or not: SQLite
    would follow it and create or write the store outside the state directory (lstat: the link itself)."""
    for suffix in STORE_FILES:
        path = Path(f"{target}{suffix}")
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreUnavailable(f"results store {path}: {(exc.strerror or str(exc)).lower()}") from None
        if stat.S_ISLNK(info.st_mode):
            raise TunehostError(f"results store {path} is a symbolic link; tunehost keeps its store only in the "
                                "state directory itself: remove the link (or set TUNEHOST_STATE_DIR)")


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


def _dump(value: Any, limit: int) -> str:
    """A document as the store keeps it: strict JSON within ``limit`` bytes (the cap its reader takes, so tunehost
    never writes what it would not read back: tunehost.store.rows)."""
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False, default=str)
    except ValueError as exc:  # NaN or infinity in a summary: JSON has no such number, and the store keeps none
        raise TunehostError(f"results store: not recorded (a stored document holds {exc})") from None
    if len(text.encode()) > limit:
        raise TunehostError(f"results store: not recorded (a stored document would be {len(text)} bytes, limit "
                            f"{limit})")
    return text


MAX_ROUNDS_READ = 10_000  # rounds rows (and tune steps) read per run (a tune records a few hundred)
MiB = 1024 * 1024
MAX_READ_BYTES = 64 * MiB  # JSON read for one run's rounds, or one tune's journal, at most
# results rows read per run (a bench has 2, a tune a few dozen, a llama-bench sweep one per combination): more in
# one run is not a store tunehost wrote, and every reader reads them all (export twice)
MAX_RESULTS_READ = 10_000
MAX_NOTES_PER_RUN = 5  # reasons given per run for its results rows left out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
