"""Running host commands: live through `tunehost.host.proc.run_bounded` (argument list, deadline, output caps), or replayed from a snapshot's cmd/ directory."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TIMEOUT_S = 10.0
REFUSED_RC = 126
# every exit status, and every signal (sh reports a process killed by signal N as -N): a crash is a result with its
# status, which tunehost.facts.llama_exit explains, not an exception
OK_CODES = list(range(-64, 256))  # a snapshot's command file that links out of it: "could not be run", with the reason as stderr


@dataclass(frozen=True)
class CommandResult:
    """One command's outcome. `rc` is the exit status; 124 means it timed out; -N: killed by signal N."""

    argv: tuple[str, ...]
    stdout: str
    stderr: str = ""
    rc: int = 0

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def line(self) -> str:
        return " ".join(self.argv)


def command_file_name(argv: list[str] | tuple[str, ...]) -> str:
    """The snapshot file name of a command line (docs/snapshot.md): argv joined by spaces, [^A-Za-z0-9._-] -> "_"."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", " ".join(argv))


@dataclass
class CommandLog:
    """Commands a run made (and `which` answers), so `tunehost snapshot` can store them."""

    results: dict[str, CommandResult] = field(default_factory=dict)
    which: dict[str, str | None] = field(default_factory=dict)


class LiveCommands:
    """Runs commands on this machine. Never through a shell; every command has a deadline and output caps."""

    def __init__(self, log: CommandLog | None = None, *, cache: bool = True):
        self.log = log
        self.cache = cache  # tuning reads a value back after changing it: it runs with cache=False
        self._cache: dict[tuple[str, ...], CommandResult | None] = {}

    def which(self, name: str) -> str | None:
        found = shutil.which(name)
        if self.log is not None:
            self.log.which[name] = found
        return found

    def run(self, argv: list[str] | tuple[str, ...], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult | None:
        key = tuple(argv)
        if self.cache and key in self._cache:
            return self._cache[key]
        exe = shutil.which(argv[0]) if "/" not in argv[0] else (argv[0] if os.access(argv[0], os.X_OK) else None)
        if exe is None:
            result = None
        else:
            result = _run_bounded(exe, key, timeout)
        if self.cache:
            self._cache[key] = result
        if self.log is not None and result is not None:
            self.log.results[command_file_name(argv)] = result
        return result


# what a host command may print: dmidecode / nvidia-smi -q -x on an 8-GPU host are a few hundred KB
MAX_COMMAND_STDOUT = 8 * 1024 * 1024
MAX_COMMAND_STDERR = 1024 * 1024
MAX_COMMAND_LINE = 1024 * 1024


def _run_bounded(exe: str, argv: tuple[str, ...], timeout: float) -> CommandResult:
    """One live command through `tunehost.host.proc.run_bounded`: its group killed at `timeout`, output past the caps
    a failed command saying "output too large" (its partial output is not kept: no parser sees a cut-off text)."""
    from tunehost.host.proc import run_bounded

    env = dict(os.environ, LC_ALL="C", LANG="C")  # parsers expect untranslated output
    result = run_bounded((exe, *argv[1:]), timeout_s=timeout, max_stdout=MAX_COMMAND_STDOUT,
                         max_stderr=MAX_COMMAND_STDERR, max_line=MAX_COMMAND_LINE, env=env)
    if result.problem is not None:
        return CommandResult(argv, "", result.problem, result.rc)
    return CommandResult(argv, result.stdout, result.stderr, result.rc)


class SnapshotCommands:
    """Replays cmd/<name> (+ .rc, .stderr) from a snapshot. A command without a file is "not available"; one
    whose file links out of the snapshot (or is a FIFO, a device) is a failed command saying so, never a live read."""

    def __init__(self, cmd_dir: Path, which_answers: dict[str, str | None] | None = None,
                 root: Path | None = None):
        self.cmd_dir = cmd_dir
        self.which_answers = which_answers or {}
        self._root_real = os.path.realpath(root if root is not None else cmd_dir.parent)
        self.refused: dict[str, str] = {}  # cmd/<name> -> why it was not read

    def which(self, name: str) -> str | None:
        return self.which_answers.get(name)

    def _text(self, name: str) -> str | None:
        from tunehost.host.files import read_confined

        data = read_confined(self.cmd_dir / name, self._root_real)
        return None if data is None else data.decode("utf-8", "replace")

    def run(self, argv: list[str] | tuple[str, ...], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult | None:
        from tunehost.host.files import Refused

        name = command_file_name(argv)
        try:
            stdout = self._text(name)
            if stdout is None:
                return None
            stderr = self._text(f"{name}.stderr") or ""
            rc_text = self._text(f"{name}.rc")
        except Refused as exc:
            reason = f"cmd/{name}: {exc.reason}"
            self.refused[f"cmd/{name}"] = reason
            return CommandResult(tuple(argv), "", reason, REFUSED_RC)
        rc = 0
        if rc_text is not None:
            try:
                rc = int(rc_text.strip() or "0")
            except ValueError:
                rc = 1  # a garbled .rc file: treat the output as untrustworthy
        return CommandResult(tuple(argv), stdout, stderr, rc)
