"""The apply journal: JSON lines under $TUNEHOST_STATE_DIR, written and fsync'd before every change.

One file, `journal.jsonl`, appended by every apply and rollback (format in docs/apply.md). Records of one apply share
a `run` id:

    {"type": "begin", "run": ..., "time": ..., "profile": ..., "root": "/", "expect": [...], "files": [...]}
    {"type": "intent", "run": ..., "step": 1, "kind": "setting", "knob": {...}, "target": ..., "previous": ...}
    {"type": "result", "run": ..., "step": 1, "ok": true, "wrote": ..., "after": ...}
    {"type": "undo", "run": ..., "step": 1, "outcome": "restored" | "unchanged" | "left" | "failed", ...}
    {"type": "end", "run": ..., "status": "applied" | "reverted" | "revert-incomplete"}
    {"type": "rolled-back", "run": ..., "time": ..., "complete": true}

An intent without a result is a change that may or may not have happened (a crash): rollback treats it like a done one.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunehost.errors import TunehostError

STATE_ENV = "TUNEHOST_STATE_DIR"
DEFAULT_STATE_DIR = "/var/lib/tunehost"
JOURNAL_NAME = "journal.jsonl"


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


class Journal:
    def __init__(self, directory: Path | None = None):
        self.dir = Path(directory) if directory is not None else state_dir()
        self.path = self.dir / JOURNAL_NAME

    def ensure_writable(self) -> None:
        """Create the state directory (0700) and prove the journal can be appended to, before any change."""
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.path, "a"):
                pass
            probe = self.dir / f".probe-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise TunehostError(f"the journal directory {self.dir} is not writable ({exc.strerror or exc}); "
                                f"nothing was changed (set {STATE_ENV} to a writable directory)") from None

    def append(self, record: dict[str, Any]) -> None:
        """Write one record and fsync it: once this returns, the record survives a crash."""
        line = json.dumps(record, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        except PermissionError:
            raise TunehostError(f"cannot read the journal {self.path}: permission denied (it is root's: "
                                f"run this with sudo)") from None
        except OSError as exc:
            raise TunehostError(f"cannot read the journal {self.path}: {exc.strerror or exc}") from None
        out = []
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                if i == len(lines) - 1:
                    continue  # a line cut short by a crash: the intent it would have been was never acted on
                raise TunehostError(f"the journal {self.path} is damaged at line {i + 1}") from None
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def runs(self) -> list[Run]:
        runs: dict[str, Run] = {}
        for rec in self.records():
            rid = rec.get("run")
            kind = rec.get("type")
            if kind == "begin":
                runs[rid] = Run(rid, rec)
                continue
            run = runs.get(rid)
            if run is None:
                continue
            if kind == "intent":
                run.intents[int(rec["step"])] = rec
            elif kind == "result":
                run.results[int(rec["step"])] = rec
            elif kind == "undo":
                run.undos.append(rec)
            elif kind == "end":
                run.end = rec
            elif kind == "rolled-back":
                run.rolled_back = rec
        return list(runs.values())

    def active_runs(self) -> list[Run]:
        """Applies whose changes may still be in place, oldest first (rollback undoes the last one)."""
        return [r for r in self.runs() if r.active]
