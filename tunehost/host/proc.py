"""The one bounded way tunehost runs a program: argument list (never a shell), a deadline, a cap per stream and per line.

    result = run_bounded(["llama-bench", "--help"], timeout_s=30, max_stdout=1 << 20, max_stderr=1 << 20,
                         max_line=64 * 1024)
    result.problem   # None, or one line: "timed out after 30 s" / "output too large (stdout past 1 MiB)" / "cannot run ..."

Bounds (docs/bounds.md):
- time: the program runs in its own session (process group); at `timeout_s` the whole group gets SIGTERM, then
  SIGKILL after `KILL_GRACE_S`, so neither a program that never exits nor one that ignores SIGTERM holds tunehost.
  A leader that exits while a child it left behind keeps the pipes open is followed by the same kill.
  A descendant that left the group (a double fork and setsid()) is found by the mark in its environment
  (MARK_VAR, unique per run: :func:`marked_env`) and gets the same signals (:func:`signal_marked`).
- memory: both pipes are read as they fill (no thread per stream, one `selectors` loop), each stream keeps at most
  `max_stdout` / `max_stderr` bytes and a line may be at most `max_line` bytes; past either the group is killed
  and the result says "output too large", so a flood costs at most the caps, never the flood.
- `on_line(stream, line)` receives each complete line ("stdout" or "stderr", decoded, without its newline) as it
  arrives, from the calling thread.
"""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL to the process group
DRAIN_S = 1.0  # after the leader exits, how long a child it left behind may keep the pipes open
READ_CHUNK = 64 * 1024
TIMED_OUT_RC = 124  # the exit status a timed-out command reports (as timeout(1))
TOO_LARGE_RC = 125  # ... one whose output passed a cap
NOT_RUN_RC = 126  # ... one that could not be started (not executable, exec format error)


@dataclass(frozen=True)
class BoundedResult:
    """What a bounded run produced. `rc` is the exit status (negative: killed by that signal, as subprocess reports),
    TIMED_OUT_RC / TOO_LARGE_RC / NOT_RUN_RC when tunehost ended or could not start it; `stdout`/`stderr` hold at most
    the caps (decoded as UTF-8 with replacement)."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False
    too_large: str | None = None  # which bound was passed: "stdout", "stderr", "a stdout line", "a stderr line"
    not_run: str | None = None  # why the program could not be started
    elapsed_s: float = 0.0
    timeout_s: float = 0.0  # the deadline it ran under

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.problem is None

    @property
    def problem(self) -> str | None:
        """One line saying why the output cannot be trusted, or None when the program ran to its own end."""
        if self.not_run is not None:
            return self.not_run
        if self.too_large is not None:
            return f"output too large ({self.too_large})"
        if self.timed_out:
            return f"timed out after {self.timeout_s:g} s"
        return None


def _size(limit: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= scale and limit % scale == 0:
            return f"{limit // scale} {unit}"
    return f"{limit} bytes"


class _Stream:
    """One pipe's kept bytes, its unfinished line, and whether it passed a cap."""

    def __init__(self, name: str, cap: int, max_line: int, on_line: Callable[[str, str], None] | None):
        self.name, self.cap, self.max_line, self.on_line = name, cap, max_line, on_line
        self.kept = bytearray()
        self.line = bytearray()
        self.over: str | None = None

    def feed(self, chunk: bytes) -> None:
        if len(self.kept) + len(chunk) > self.cap:
            self.over = f"{self.name} past {_size(self.cap)}"
            return
        self.kept += chunk
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            self.line += chunk[start:end]
            self._emit()
            start = end + 1
        self.line += chunk[start:]
        if len(self.line) > self.max_line:
            self.over = f"a {self.name} line past {_size(self.max_line)}"

    def _emit(self) -> None:
        if len(self.line) > self.max_line:
            self.over = f"a {self.name} line past {_size(self.max_line)}"
        elif self.on_line is not None:
            self.on_line(self.name, self.line.decode("utf-8", "replace").rstrip("\r"))
        self.line.clear()

    def finish(self) -> None:
        if self.line and self.over is None:
            self._emit()


MARK_VAR = "TUNEHOST_RUN_MARK"  # in the environment of every program tunehost runs and stops: its descendants inherit it
MAX_ENVIRON_BYTES = 1 << 20  # of one process's /proc/PID/environ while looking for the mark


def marked_env(env: Mapping[str, str] | None = None) -> tuple[dict[str, str], str]:
    """(`env` or tunehost's environment with a fresh run mark, the mark): what :func:`signal_marked` finds again."""
    mark = secrets.token_hex(12)
    return {**(os.environ if env is None else env), MARK_VAR: mark}, mark


def signal_marked(mark: str, sig: int) -> int:
    """Send `sig` to every process whose environment carries `mark` (:func:`marked_env`): the descendants of a
    program tunehost started, also those that left its process group and session (a double fork and setsid()),
    which killpg cannot reach. Bounded: one read of at most MAX_ENVIRON_BYTES per process. How many were signalled."""
    needle = f"{MARK_VAR}={mark}".encode()
    signalled = 0
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return 0
    for name in entries:
        pid = int(name)
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                environ = fh.read(MAX_ENVIRON_BYTES)
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            try:
                os.kill(pid, sig)
                signalled += 1
            except (ProcessLookupError, PermissionError):
                pass
    return signalled


def signal_run(pgid: int, sig: int, mark: str | None) -> None:
    """Send `sig` to the process group `pgid` (a program started in its own session: its pgid is its pid) and, when
    `mark` is given, to every process carrying it (:func:`signal_marked`: one that left the group)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    if mark:
        signal_marked(mark, sig)


def start_detached(argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Start a program and do not wait for it: a browser outlives tunehost (run_bounded would kill it at its
    deadline). An argument list, never a shell; in its own session; its input and output go nowhere."""
    subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def run_bounded(
    argv: Sequence[str],
    *,
    timeout_s: float,
    max_stdout: int,
    max_stderr: int,
    max_line: int,
    on_line: Callable[[str, str], None] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> BoundedResult:
    """Run `argv` (argv[0] without a "/" is looked up on PATH, with one it is that file) within the bounds above.
    Never raises for the program's behaviour; an interrupt (KeyboardInterrupt) kills the group and propagates."""
    args = tuple(str(a) for a in argv)
    started = time.monotonic()
    run_env, mark = marked_env(env)
    try:
        process = subprocess.Popen(
            list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, env=run_env, cwd=cwd, close_fds=True,
        )
    except (OSError, ValueError) as exc:  # not found, not executable, exec format error, a NUL in an argument
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return BoundedResult(args, NOT_RUN_RC, "", "", not_run=f"cannot run {args[0] if args else '?'}: {reason}")
    streams = {process.stdout: _Stream("stdout", max_stdout, max_line, on_line),
               process.stderr: _Stream("stderr", max_stderr, max_line, on_line)}
    deadline = started + max(0.0, timeout_s)
    timed_out = False
    try:
        timed_out = _pump(process, streams, deadline, mark)
    except BaseException:
        _kill_group(process, mark)
        raise
    finally:
        for pipe in streams:
            pipe.close()  # type: ignore[union-attr]
    over = next((s.over for s in streams.values() if s.over), None)
    out, err = (s.kept.decode("utf-8", "replace") for s in streams.values())
    rc = process.returncode
    if over is not None:
        rc = TOO_LARGE_RC
    elif timed_out:
        rc = TIMED_OUT_RC
    return BoundedResult(args, rc, out, err, timed_out=timed_out and over is None, too_large=over,
                         elapsed_s=time.monotonic() - started, timeout_s=timeout_s)


def _pump(process: subprocess.Popen[bytes], streams: dict, deadline: float, mark: str) -> bool:
    """Read both pipes until they close; kill the group at the deadline or past a cap. True when it timed out."""
    selector = selectors.DefaultSelector()
    for pipe in streams:
        os.set_blocking(pipe.fileno(), False)
        selector.register(pipe, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                _kill_group(process, mark)
                return True
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > DRAIN_S:
                _kill_group(process, mark)  # a child left behind holds the pipes: the command is over
                break
            wait = min(deadline - now, 0.1 if exited_at is None else DRAIN_S)
            for key, _ in selector.select(timeout=max(0.0, wait)):
                try:
                    chunk = os.read(key.fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fileobj)
                    streams[key.fileobj].finish()
                    continue
                stream = streams[key.fileobj]
                stream.feed(chunk)
                if stream.over is not None:
                    _kill_group(process, mark)
                    return False
    finally:
        selector.close()
    remaining = deadline - time.monotonic()
    try:
        process.wait(timeout=max(0.0, remaining))
    except subprocess.TimeoutExpired:  # closed both pipes but lives on
        _kill_group(process, mark)
        return True
    return False


def _kill_group(process: subprocess.Popen[bytes], mark: str) -> None:
    """SIGTERM to the process group (and every process carrying the run's mark), SIGKILL after KILL_GRACE_S if the
    leader is still there; reaps the leader."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        signal_run(process.pid, sig, mark)
        try:
            process.wait(timeout=grace)
            if sig == signal.SIGTERM:
                signal_run(process.pid, signal.SIGKILL, mark)  # the leader went: its children go with it
            return
        except subprocess.TimeoutExpired:
            continue
