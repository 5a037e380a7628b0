#!/usr/bin/env python3
"""Seconds, exit status and requests of `tunehost bench --server/--serve` against the hostile servers of issue 32
(tests/bounds/hostile_http.py), for a before/after table (changes/i32-http.md, docs/bounds.md).

    python scripts/bench_http_bounds.py                                   # this checkout's .venv/bin/tunehost
    python scripts/bench_http_bounds.py --tunehost /work/main/.venv/bin/tunehost --limit 60

Each case runs the given `tunehost` executable in its own process group under a wall-clock limit (killed and shown
as "killed at LIMIT s" when still running); the hostile servers run in this process (--serve: as programs). One
JSON line per case: its name, seconds, exit status, /tokenize and all requests the server saw, the last output line,
and whether a secret (the API key, a URL password) or a served child outlived tunehost.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bounds.hostile_http import HostileServer  # noqa: E402

QUICK = ["--depths", "32", "--budget", "0", "-n", "4"]
KEY = "sk-SECRET-4242"
PASSWORD = "hunter2pw"


class Runner:
    def __init__(self, tunehost: str, limit: float, work: Path):
        self.tunehost = tunehost
        self.limit = limit
        self.work = work
        self.env = dict(os.environ, TUNEHOST_STATE_DIR=str(work / "state"), COLUMNS="200")
        self.env.pop("PYTHONPATH", None)  # the executable's own tree, never this one

    def run(self, argv: list[str]) -> tuple[float, object, str]:
        began = time.monotonic()
        proc = subprocess.Popen([self.tunehost, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=self.env, cwd=self.work, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.limit)
            rc: object = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            rc = f"killed at {self.limit:g} s"
        return round(time.monotonic() - began, 2), rc, out.decode("utf-8", "replace")


def _program(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tunehost", default=str(ROOT / ".venv" / "bin" / "tunehost"))
    parser.add_argument("--limit", type=float, default=60.0, help="seconds before a case is killed")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tunehost-http-bounds-"))
    runner = Runner(args.tunehost, args.limit, work)
    key_file = work / "key"
    key_file.write_text(KEY + "\n")

    def say(case: str, took: float, rc: object, out: str, **extra: object) -> None:
        lines = [ln for ln in out.splitlines() if ln.strip()]
        print(json.dumps({"case": case, "s": took, "rc": rc, **extra, "last": (lines[-1] if lines else "")[:300]}),
              flush=True)

    cases = [("headers trickled, --timeout 3", "trickle-headers", [*QUICK, "--timeout", "3"], 1.0),
             ("/health body trickled, --timeout 3", "trickle-body", [*QUICK, "--timeout", "3"], 1.0),
             ("one streamed line trickled, --timeout 3", "trickle-line", [*QUICK, "--timeout", "3"], 1.0),
             ("stream flooded, --timeout 30", "flood", [*QUICK, "--timeout", "30"], 1.0),
             ("one token per /tokenize, --depths 512", "one-token", ["--depths", "512", "--budget", "0", "-n", "4"],
              1.0),
             ("a real tokenizer, 5 rounds", "ok", QUICK, 1.0),
             ("key echoed in a 500 body", "echo-secret", [*QUICK, "--api-key-file", str(key_file)], 1.0),
             ("key echoed in /props", "echo-props", [*QUICK, "--api-key-file", str(key_file)], 1.0),
             ("key echoed in /props, \\u-escaped", "echo-escaped", [*QUICK, "--api-key-file", str(key_file)], 1.0)]
    for case, mode, argv, interval in cases:
        with HostileServer(mode, interval=interval) as server:
            took, rc, out = runner.run(["bench", "--server", server.url, *argv])
            say(case, took, rc, out, tokenize=server.count("/tokenize"), requests=len(server.requests),
                key_printed=KEY in out)
    fifo = work / "fifo"
    os.mkfifo(fifo)
    with HostileServer("ok") as server:
        say("--api-key-file FIFO", *runner.run(["bench", "--server", server.url, *QUICK, "--api-key-file", str(fifo)]))
    for url in (f"http://admin:{PASSWORD}@127.0.0.1:9/", f"http://admin:{PASSWORD}@127.0.0.1:99999/"):
        took, rc, out = runner.run(["bench", "--server", url])
        say(f"--server {url.replace(PASSWORD, 'PASSWORD')}", took, rc, out, password_printed=PASSWORD in out)
    hostile = ROOT / "tests" / "bounds" / "hostile_http.py"
    trickle = _program(work / "trickle-server", f'exec "{sys.executable}" "{hostile}" --mode trickle-headers "$@"')
    say("--serve, /health trickled, --start-timeout 3",
        *runner.run(["bench", "--serve", "--start-timeout", "3", *QUICK, "--", str(trickle)]))
    pid_file = work / "child.pid"
    stubborn = _program(work / "stubborn-server", f"( trap '' TERM; exec \"{sys.executable}\" \"{hostile}\" --mode ok "
                                                  f"\"$@\" ) &\necho $! > {pid_file}\nwait")
    took, rc, out = runner.run(["bench", "--serve", *QUICK, "--", str(stubborn)])
    child = int(pid_file.read_text()) if pid_file.exists() else None
    time.sleep(0.5)
    alive = child is not None and _alive(child)
    say("--serve, the wrapper exits on SIGTERM, its child ignores it", took, rc, out, child_left_running=alive)
    if alive and child is not None:
        os.kill(child, signal.SIGKILL)
    say("--serve -- ./stubborn-server (a relative path)",
        *runner.run(["bench", "--serve", *QUICK, "--", "./stubborn-server"]))
    if pid_file.exists() and _alive(int(pid_file.read_text())):
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


if __name__ == "__main__":
    main()
