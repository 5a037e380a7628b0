"""The apply journal: JSON lines under $TUNEHOST_STATE_DIR, written and fsync'd before every change.

One file, `journal.jsonl`, appended by every apply and rollback (format in docs/apply.md). Records of one apply share
a `run` id:

    {"type": "begin", "run": ..., "time": ..., "profile": ..., "root": "/", "settings": {...}, "expect": [...],
     "files": [...], "skipped": [{"key": ..., "unit": ..., "reason": ...}]}
    {"type": "intent", "run": ..., "step": 1, "kind": "setting", "knob": {...}, "target": ..., "previous": ...}
    {"type": "result", "run": ..., "step": 1, "ok": true, "wrote": ..., "after": ...}
    {"type": "undo", "run": ..., "step": 1, "outcome": "restored" | "unchanged" | "left" | "failed", ...}
    {"type": "end", "run": ..., "status": "applied" | "reverted" | "revert-incomplete"}
    {"type": "rolled-back", "run": ..., "time": ..., "complete": true}

An intent without a result is a change that may or may not have happened (a crash): rollback treats it like a done one.
Every line is checked when read (`Journal.read()`): a damaged line (not UTF-8, not JSON, a field of the wrong type, a
missing step, an unknown knob kind) is reported as `Damage` ("journal damaged at line N: why") and skipped, so every
intact step can still be rolled back.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunehost.bounds import json_text
from tunehost.errors import TunehostError

STATE_ENV = "TUNEHOST_STATE_DIR"
DEFAULT_STATE_DIR = "/var/lib/tunehost"
JOURNAL_NAME = "journal.jsonl"
JOURNAL_MODE = 0o600  # docs/apply.md: the journal names what was changed on the host; only root reads it
RECORD_TYPES = ("begin", "intent", "result", "undo", "end", "rolled-back")
LOCK_NAME = "lock"  # flock'd by apply and rollback: one of them changes the host at a time
MAX_JOURNAL_BYTES = 64 * 1024 * 1024  # ~100,000 applies; a larger journal is not tunehost's


class JournalUnwritable(TunehostError):
    """A record could not be made durable (a full disk, an I/O error): the change it announces must not be made.
    Nothing of the record is left in the journal (a short write is cut back off)."""


def state_dir() -> Path:
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE_DIR)


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


@dataclass
class Run:
    """Everything the journal says about one apply."""

    id: str
    begin: dict[str, Any]
    intents: dict[int, dict[str, Any]] = field(default_factory=dict)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    undos: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    rolled_back: dict[str, Any] | None = None

    @property
    def profile(self) -> str:
        return str(self.begin.get("profile", "?"))

    @property
    def root(self) -> str:
        return str(self.begin.get("root", "/"))

    @property
    def begin_damaged(self) -> bool:
        """Its begin line is damaged: the profile and root are unknown, its intact steps are still here."""
        return bool(self.begin.get("begin_damaged"))

    @property
    def interrupted(self) -> bool:
        """Began but never ended: the process died mid-apply."""
        return self.end is None

    @property
    def active(self) -> bool:
        """Its changes are (possibly) still in place: applied or interrupted, and not rolled back."""
        if self.rolled_back is not None and self.rolled_back.get("complete", True):
            return False
        return self.end is None or self.end.get("status") in ("applied", "revert-incomplete")

    @property
    def status(self) -> str:
        if self.rolled_back is not None:
            return "rolled back" if self.rolled_back.get("complete", True) else "partly rolled back"
        if self.end is None:
            return "interrupted"
        return str(self.end.get("status"))

    def steps(self) -> list[int]:
        return sorted(self.intents)


@dataclass(frozen=True)
class Damage:
    """One journal line that could not be used, and why. `cut_short`: the last line, cut by a crash while it was
    written (the change it announced was never made, so it is harmless)."""

    line: int
    why: str
    cut_short: bool = False

    def __str__(self) -> str:
        return f"journal damaged at line {self.line}: {self.why}"


@dataclass(frozen=True)
class JournalState:
    """What a read of the journal found: the runs built from every intact record, and the damaged lines."""

    runs: tuple[Run, ...]
    damage: tuple[Damage, ...]
    records: tuple[dict[str, Any], ...] = ()

    @property
    def active(self) -> list[Run]:
        return [r for r in self.runs if r.active]

    @property
    def harmful(self) -> tuple[Damage, ...]:
        """Damage that may hide a change (everything but a last line cut short by a crash)."""
        return tuple(d for d in self.damage if not d.cut_short)


def damage_message(journal: "Journal", damage: tuple[Damage, ...]) -> str:
    """One line for all the damage: the first damaged line and why, then how many more."""
    first, others = damage[0], damage[1:]
    more = ""
    if others:
        shown = ", ".join(str(d.line) for d in others[:5]) + (", ..." if len(others) > 5 else "")
        more = f"; {len(others)} more damaged line(s): {shown}"
    return f"{first} ({journal.path}{more})"


class Journal:
    def __init__(self, directory: Path | None = None):
        self.dir = Path(directory) if directory is not None else state_dir()
        self.path = self.dir / JOURNAL_NAME

    def ensure_writable(self) -> None:
        """Create the state directory (0700) and prove the journal can be appended to, before any change.
        Creates no journal file: that happens with the first record (nothing is written when nothing changes)."""
        self._refuse_non_directory()
        self._refuse_linked_dir()
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.path.lexists(self.path):
                os.close(self._open(self.path, os.O_WRONLY))
            probe = self.dir / f".probe-{os.getpid()}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, JOURNAL_MODE))
            probe.unlink()
        except OSError as exc:
            raise TunehostError(f"the journal directory {self.dir} is not writable ({exc.strerror or exc}); "
                                f"nothing was changed (set {STATE_ENV} to a writable directory)") from None

    def _refuse_non_directory(self) -> None:
        """A state directory (or one of its parents) that is a file: say so, instead of "File exists"."""
        for place in (self.dir, *self.dir.parents):
            if place.is_dir():
                return
            if place.exists() or place.is_symlink():
                what = str(place) if place == self.dir else f"{place} (in the path of {self.dir})"
                raise TunehostError(f"the journal directory {what} is a file, not a directory; nothing was changed "
                                    f"(set {STATE_ENV} to a directory)")

    def _open(self, path: Path, flags: int) -> int:
        """An fd on a state file: never through a link (O_NOFOLLOW), never blocking on a FIFO (O_NONBLOCK, then
        fstat: regular files only), mode 0600 enforced on what was opened. TunehostError for anything else."""
        self._refuse_linked_dir()
        try:
            _refuse_kind(path, os.lstat(path).st_mode)  # before the open: a FIFO opened for writing would block
        except (FileNotFoundError, NotADirectoryError):
            pass
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, JOURNAL_MODE)
        try:
            info = os.fstat(fd)
            _refuse_kind(path, info.st_mode)  # what was opened, in case it was swapped since
            if stat.S_IMODE(info.st_mode) != JOURNAL_MODE and flags & (os.O_WRONLY | os.O_RDWR):
                os.fchmod(fd, JOURNAL_MODE)  # it names what was changed on the host: only root reads it
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _refuse_linked_dir(self) -> None:
        if os.path.islink(self.dir):
            raise TunehostError(f"the journal directory {self.dir} is a symbolic link: refused (set {STATE_ENV} "
                                "to the directory itself)")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the state directory's lock (flock) while changing the host: a second apply or rollback is refused
        with one line instead of interleaving its changes and records with this one's."""
        path = self.dir / LOCK_NAME
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = self._open(path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise TunehostError(f"cannot take the lock {path} ({exc.strerror or exc}): nothing was changed") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise TunehostError(f"another tunehost apply or rollback is running (it holds {path}): "
                                    "nothing was changed; run this again when it has finished") from None
            yield
        finally:
            os.close(fd)  # releases the flock

    def append(self, record: dict[str, Any]) -> None:
        """Write one record and fsync it: once this returns, the record survives a crash. The file is created 0600
        whatever the umask; a last line cut short by an earlier crash is ended first, so this record stays whole.
        The space is reserved before a byte is written (posix_fallocate) and a failed or short write is cut back
        off, so a full disk leaves no cut record: JournalUnwritable, and the caller does not make the change."""
        line = json_text(record, sort_keys=True) + "\n"
        try:
            fd = self._open(self.path, os.O_RDWR | os.O_CREAT)  # appended at its size, under the lock
        except OSError as exc:
            raise JournalUnwritable(f"cannot write the journal {self.path}: {exc.strerror or exc}") from None
        size = 0
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line
            data = line.encode()
            _reserve(fd, size, len(data))
            written = os.pwrite(fd, data, size)
            if written != len(data):
                raise OSError(28, f"wrote {written} of {len(data)} bytes")
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # no cut record: the journal ends where it ended
                os.fsync(fd)
            raise JournalUnwritable(f"cannot write the journal {self.path}: "
                                    f"{(exc.strerror or str(exc)).lower()}") from None
        finally:
            os.close(fd)

    def read(self) -> JournalState:
        """Every run the journal holds, built from its intact records, and the lines that are damaged."""
        from tunehost.inputs import _read_capped

        try:
            fd = self._open(self.path, os.O_RDONLY)
            try:
                too_large = os.fstat(fd).st_size > MAX_JOURNAL_BYTES  # refused unread
                data = b"" if too_large else _read_capped(lambda n: os.read(fd, n), MAX_JOURNAL_BYTES + 1)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return JournalState((), ())
        except NotADirectoryError:
            self._refuse_non_directory()
            raise
        except PermissionError:
            raise TunehostError(f"cannot read the journal {self.path}: permission denied (it is root's: "
                                f"run this with sudo)") from None
        except OSError as exc:
            raise TunehostError(f"cannot read the journal {self.path}: {exc.strerror or exc}") from None
        if too_large or len(data) > MAX_JOURNAL_BYTES:
            raise TunehostError(f"the journal {self.path} is larger than {MAX_JOURNAL_BYTES >> 20} MiB: not "
                                "tunehost's; move it aside")
        records: list[tuple[int, dict[str, Any]]] = []
        damage: list[Damage] = []
        lines = data.split(b"\n")
        last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            rec, why = parse_record(raw)
            if rec is not None:
                records.append((i + 1, rec))
            elif i == last and not data.endswith(b"\n") and why.startswith("not JSON"):
                damage.append(Damage(i + 1, "cut short (tunehost was stopped while writing it; the change it "
                                            "announced was never made)", cut_short=True))
            else:
                damage.append(Damage(i + 1, why))
        runs = _build_runs(records, damage)
        return JournalState(tuple(runs), tuple(damage), tuple(rec for _, rec in records))

    def records(self) -> list[dict[str, Any]]:
        """The intact records, in order (damaged lines left out: see `read()`)."""
        return list(self.read().records)

    def runs(self) -> list[Run]:
        return list(self.read().runs)

    def active_runs(self) -> list[Run]:
        """Applies whose changes may still be in place, oldest first (rollback undoes the last one)."""
        return self.read().active


def _refuse_kind(path: Path, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise TunehostError(f"{path} is a symbolic link: refused (tunehost never writes its state through a link; "
                            "move it aside)")
    if not stat.S_ISREG(mode):
        from tunehost.inputs import file_kind

        raise TunehostError(f"{path} is {file_kind(mode)}, not a file tunehost wrote: refused (move it aside)")


def _reserve(fd: int, offset: int, length: int) -> None:
    """Reserve the bytes a record needs, so a full disk fails before any of it is written (where the filesystem
    supports it; elsewhere the short write is cut back off). This extends the file with zeros that the record's
    pwrite then covers; a crash in between leaves a last line that reads as cut short, which is harmless."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno not in (95, 22):  # EOPNOTSUPP, EINVAL: a filesystem without fallocate
            raise
    except AttributeError:  # no posix_fallocate on this platform
        pass


# --- checking records --------------------------------------------------------------------------------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _knob_problem(knob: Any) -> str | None:
    """Why a recorded knob cannot be used, or None."""
    from tunehost.apply.settings import KNOB_KINDS, knob_from_record

    if not isinstance(knob, dict):
        return "knob is not an object"
    if knob.get("kind") not in KNOB_KINDS:
        return f"unknown knob kind {str(knob.get('kind'))[:40]!r}"
    if not all(isinstance(v, str) for v in knob.values()):
        return "a knob field is not a string"
    try:
        knob_from_record(knob)
    except (KeyError, TypeError, ValueError) as exc:
        return f"not a {knob['kind']} knob ({exc.__class__.__name__})"
    return None


def _record_problem(rec: dict[str, Any]) -> str | None:
    """Why a decoded record cannot be used (a field missing or of the wrong type), or None."""
    kind = rec.get("type")
    if kind not in RECORD_TYPES:
        return f"unknown record type {str(kind)[:40]!r}"
    if not isinstance(rec.get("run"), str):
        return f"{kind} record without a run id"
    if kind in ("intent", "result", "undo"):
        if not _is_int(rec.get("step")) or rec["step"] < 1:
            return f"{kind} record without a step number"
    if kind == "begin":
        if not isinstance(rec.get("root", "/"), str) or not isinstance(rec.get("profile", ""), str):
            return "begin record with a root or profile that is not a string"
        if not isinstance(rec.get("settings", {}), dict):
            return "begin record whose settings are not an object"
        expect, files = rec.get("expect", []), rec.get("files", [])
        if not isinstance(expect, list) or not isinstance(files, list):
            return "begin record whose expect/files are not lists"
        for item in expect:
            if not isinstance(item, dict) or not isinstance(item.get("target"), str):
                return "begin record with an expected setting without a target"
            why = _knob_problem(item.get("knob"))
            if why:
                return f"begin record: {why}"
        for item in files:
            if not isinstance(item, dict) or not isinstance(item.get("path"), str) \
                    or not _is_str_or_none(item.get("sha256")):
                return "begin record with a file entry without a path"
    elif kind == "intent":
        if rec.get("kind") == "file":
            if not isinstance(rec.get("path"), str) or not rec["path"].startswith("/"):
                return "file intent without an absolute path"
            if not all(_is_str_or_none(rec.get(k)) for k in ("target_sha256", "previous_sha256", "backup")):
                return "file intent with a checksum or backup that is not a string"
            dirs = rec.get("created_dirs") or []
            if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
                return "file intent whose created_dirs is not a list of paths"
        elif rec.get("kind") == "setting":
            if not isinstance(rec.get("target"), str) or not isinstance(rec.get("previous"), str):
                return "setting intent without a target and previous value"
            why = _knob_problem(rec.get("knob"))
            if why:
                return f"setting intent: {why}"
        else:
            return f"intent of unknown kind {str(rec.get('kind'))[:40]!r}"
    elif kind == "undo" and not isinstance(rec.get("outcome"), str):
        return "undo record without an outcome"
    elif kind == "end" and not isinstance(rec.get("status"), str):
        return "end record without a status"
    elif kind == "rolled-back" and not isinstance(rec.get("complete", True), bool):
        return "rolled-back record whose complete is not true/false"
    return None


def parse_record(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """One journal line -> (the record, "") or (None, why it is damaged). Never raises."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {exc.start + 1})"
    try:
        rec = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        return None, "not JSON (nested too deeply)"
    except ValueError as exc:
        return None, f"not JSON ({str(exc).split(':')[0][:60]})"
    if not isinstance(rec, dict):
        return None, f"not a record (a JSON {type(rec).__name__})"
    why = _record_problem(rec)
    return (None, why) if why else (rec, "")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a journal value")


def _build_runs(records: list[tuple[int, dict[str, Any]]], damage: list[Damage]) -> list[Run]:
    """Group intact records into runs. A run whose begin line is damaged still gets its intact steps (the begin's
    root and profile are then unknown), so that rollback can undo them."""
    runs: dict[str, Run] = {}
    for number, rec in records:
        rid, kind = rec["run"], rec["type"]
        if kind == "begin":
            if rid in runs:
                damage.append(Damage(number, f"a second begin for run {rid[:40]!r}"))
                continue
            runs[rid] = Run(rid, rec)
            continue
        run = runs.get(rid)
        if run is None:
            if not damage:
                continue  # records of a run begun elsewhere (a journal cut at its start): nothing to act on
            run = runs[rid] = Run(rid, {"type": "begin", "run": rid, "profile": "?", "begin_damaged": True})
        if kind == "intent":
            run.intents[rec["step"]] = rec
        elif kind == "result":
            run.results[rec["step"]] = rec
        elif kind == "undo":
            run.undos.append(rec)
        elif kind == "end":
            run.end = rec
        elif kind == "rolled-back":
            run.rolled_back = rec
    damage.sort(key=lambda d: d.line)
    return list(runs.values())
