"""``tunehost bench --serve``: start llama-server on a free loopback port, wait for /health, stop it afterwards.

No process is left behind: the server runs in its own session (process group), is stopped with SIGTERM then
SIGKILL on every way out of :class:`ServedServer` (normal end, an error, Ctrl-C, SIGTERM/SIGHUP to tunehost via
signal handlers, interpreter exit via atexit), and on Linux asks the kernel to kill it if tunehost itself dies
(PR_SET_PDEATHSIG). Its output goes to a temporary log whose last lines are shown when it fails.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunehost.bench.server.client import ServerClient, Target, redact
from tunehost.errors import TunehostError
from tunehost.printable import one_line

SERVER_BINARY = "llama-server"
DEFAULT_START_TIMEOUT_S = 300.0  # loading a large model from a cold disk takes minutes
STOP_GRACE_S = 10.0
HEALTH_TIMEOUT_S = 5.0  # one /health request while the server starts (within --start-timeout)
LOG_TAIL_BYTES = 4096
# llama-server options tunehost sets itself -> what to use instead (checked in common/arg.cpp of b11312)
CONTROLLED_SERVER_OPTIONS: dict[str, str] = {
    "--host": "tunehost serves on 127.0.0.1 only",
    "--port": "tunehost picks a free loopback port",
    "--api-key": "a key on the command line is visible to every user of this host: use tunehost's --api-key-file",
    "--api-key-file": "give it to tunehost (--api-key-file): tunehost passes it on",
    "--reuse-port": "tunehost picks a free loopback port",
    "--path": "tunehost measures the API, not the web UI",
}

_live: set["ServedServer"] = set()
_lock = threading.Lock()


def resolve_server_binary(program: str) -> Path:
    """The llama-server to run: a path as given (anything with a slash: that very file, made absolute, never a
    PATH search), else tunehost's llama.cpp search, else PATH."""
    from tunehost.host.samples import llama_bin_dir_problem, llama_program_candidates

    if "/" in program:
        path = Path(program).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            # absolute: Path("./llama-server") prints as "llama-server", which exec would look up on PATH
            return Path(os.path.abspath(path))
        raise TunehostError(f"--serve: no executable {one_line(program, 200)}")
    if program != SERVER_BINARY:
        found = shutil.which(program)
        if found:
            return Path(found)
        raise TunehostError(f"--serve: {one_line(program, 100)} not found on PATH")
    problem = llama_bin_dir_problem(None, SERVER_BINARY)
    if problem:  # the user's chosen build: never another llama-server in its place
        raise TunehostError(f"--serve: {problem}")
    found_list = llama_program_candidates(SERVER_BINARY)
    if found_list:
        return Path(found_list[0][0])
    raise TunehostError("--serve: llama-server not found ($TUNEHOST_LLAMA_BIN_DIR, $LLAMA_CPP_DIR, PATH, the build "
                        "cache); give its path after --, or build it with scripts/build_llama_cpp.py")


def split_serve_args(args: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``llama-server ARGS_A [--vs [--] [llama-server] ARGS_B]`` -> (A, B or None); each starts with its program."""
    args = list(args)
    if "--vs" not in args:
        return args, None
    at = args.index("--vs")
    first, second = args[:at], args[at + 1:]
    if second and second[0] == "--":
        second = second[1:]
    if "--vs" in second:
        raise TunehostError("--serve compares two configurations: give --vs once")
    if not first:
        raise TunehostError("--serve: nothing before --vs")
    if not second or second[0].startswith("-"):
        second = [first[0], *second]  # ARGS_B without a program: the same llama-server
    return first, second


def check_server_args(argv: Sequence[str], *, what: str) -> None:
    if not argv:
        raise TunehostError(f"{what}: give the llama-server command after --: --serve -- llama-server -m MODEL.gguf")
    for token in argv[1:]:
        name = token.split("=", 1)[0]
        if name in CONTROLLED_SERVER_OPTIONS:
            raise TunehostError(f"{what}: {name} is set by tunehost; {CONTROLLED_SERVER_OPTIONS[name]}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ServedServer:
    """One llama-server tunehost started; a context manager that always stops it."""

    def __init__(self, argv: Sequence[str], *, name: str, api_key_file: str | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S, api_key: str | None = None):
        check_server_args(argv, what=f"--serve ({name})")
        self.name = name
        self.binary = resolve_server_binary(argv[0])
        self.port = free_port()
        self.target = Target("http", "127.0.0.1", self.port)
        extra = ["--api-key-file", api_key_file] if api_key_file else []
        self.argv = [str(self.binary), *argv[1:], "--host", "127.0.0.1", "--port", str(self.port), *extra]
        self.start_timeout_s = start_timeout_s
        self._api_key = api_key
        self.proc: subprocess.Popen[bytes] | None = None
        self._mark: str | None = None
        self._log: Any = None

    @property
    def command(self) -> tuple[str, ...]:
        return tuple(self.argv)

    def __enter__(self) -> "ServedServer":
        from tunehost.host.proc import marked_env

        self._log = tempfile.TemporaryFile(prefix="tunehost-llama-server-")
        env, self._mark = marked_env()
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log, env=env,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        except OSError as exc:
            self._log.close()
            raise TunehostError(f"--serve: cannot start {one_line(self.binary, 200)}: {exc.strerror or exc}") from None
        with _lock:
            _live.add(self)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def died(self) -> None:
        """check_alive with a grace period: the check after a failed request."""
        self.check_alive(grace_s=2.0)

    def wait_ready(self) -> None:
        """Poll /health until 200 (503 = loading), the process exits, or start_timeout_s passes."""
        client = ServerClient(self.target, timeout_s=HEALTH_TIMEOUT_S, api_key=self._api_key)
        deadline = time.monotonic() + self.start_timeout_s  # wall clock: no request outlasts what is left of it
        while True:
            self.check_alive()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TunehostError(f"--serve ({self.name}): llama-server did not become ready within "
                                    f"{self.start_timeout_s:g} s (--start-timeout){self._tail()}")
            try:
                status, _ = client.request_json("GET", "/health", ok=(200, 503),
                                                timeout_s=min(HEALTH_TIMEOUT_S, left))
                if status == 200:
                    return
            except TunehostError:
                pass  # not listening yet
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def check_alive(self, grace_s: float = 0.0) -> None:
        """Raise, saying how, when the server has exited (waiting up to ``grace_s`` for an exit in progress: a
        dying server closes its connections a moment before its exit status is there)."""
        if self.proc is None:
            return
        try:
            rc = self.proc.wait(grace_s) if grace_s > 0 else self.proc.poll()
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            return
        raise TunehostError(f"--serve ({self.name}): llama-server ended ({describe_exit(rc)}){self._tail()}"
                            f"{crash_explanation(rc)}")

    def _tail(self) -> str:
        if self._log is None or self._log.closed:
            return ""
        try:
            self._log.flush()
            size = self._log.seek(0, os.SEEK_END)
            self._log.seek(max(0, size - LOG_TAIL_BYTES))
            lines = [ln for ln in self._log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return f"; its last words: {one_line(redact(lines[-1], (self._api_key,)), 300)}" if lines else ""

    def stop(self) -> None:
        """SIGTERM to the server's whole process group; once the server (the group's leader) has exited, or after
        STOP_GRACE_S, SIGKILL to the group, always: a child of it that ignores SIGTERM or outlives its parent (a
        wrapper script's llama-server) goes with it, as run_bounded does for every other command; so does every
        process carrying the server's run mark (one that left the group: a double fork and setsid()). A Ctrl-C while
        it stops cuts the grace short (SIGKILL at once) instead of leaving the server running. Idempotent."""
        from tunehost.host.proc import signal_run

        proc = self.proc
        if proc is not None:
            try:
                if proc.poll() is None:
                    signal_run(proc.pid, signal.SIGTERM, self._mark)
                    try:
                        proc.wait(STOP_GRACE_S)
                    except subprocess.TimeoutExpired:
                        pass
            except KeyboardInterrupt:  # another Ctrl-C while it stops: no more grace (and no traceback)
                pass
            signal_run(proc.pid, signal.SIGKILL, self._mark)  # whatever is left in its group, the leader included
            try:
                proc.wait(STOP_GRACE_S)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):  # a leader stuck in the kernel (D state), or
                pass  # Ctrl-C again: not waited on forever; SIGKILL went out
        with _lock:
            _live.discard(self)
        if self._log is not None and not self._log.closed:
            self._log.close()


def describe_exit(rc: int) -> str:
    """'exit 1' / 'killed by SIGSEGV' (the signal's name from signal.Signals, as for llama-bench)."""
    from tunehost.facts.llama_exit import exit_status

    return exit_status(rc)


def crash_explanation(rc: int) -> str:
    """" — why": what is known to kill llama-server by that signal on this CPU (tunehost.facts.llama_exit: AMX and
    SIGSEGV, SIGILL and a build for another CPU); "" for an ordinary exit."""
    if rc >= 0:
        return ""
    from tunehost.facts.llama_exit import explain_exit
    from tunehost.host.cpuinfo import live_cpu_flags

    why = explain_exit("llama-server", rc, live_cpu_flags())
    return f" — {why}" if why else ""


def stop_all() -> None:
    """Stop every server this process started (atexit, and the SIGTERM/SIGHUP handlers)."""
    with _lock:
        live = list(_live)
    for server in live:
        server.stop()


def _on_signal(signum: int, frame: Any) -> None:
    stop_all()
    raise SystemExit(128 + signum)


def install_handlers() -> None:
    """atexit and SIGTERM/SIGHUP handlers that stop the servers (main thread only; Ctrl-C unwinds the context
    managers as KeyboardInterrupt)."""
    atexit.register(stop_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)
