"""Issue 32 re-run with other inputs of the same classes (the red-team pass before the hidden cases): a served
server's descendant that left its process group (double fork + setsid, class 7), a key echoed in part or in
another case (class 10), a key the HTTP header cannot carry (class 2), the router's /models under --timeout
(class 1), and the output formats' refusals (classes 8, 9, 14, 15)."""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, within
from tunehost.host.proc import run_bounded

HOSTILE = Path(__file__).with_name("hostile_http.py")


def _program(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z"


def _escapee(pid_file: Path) -> str:
    """Shell that leaves a SIGTERM-ignoring process in a session of its own (a double fork and setsid())."""
    return (f"( setsid sh -c 'trap \"\" TERM INT; echo $$ > {pid_file}; exec sleep 600' "
            "</dev/null >/dev/null 2>&1 & ) ; while [ ! -s " + str(pid_file) + " ]; do sleep 0.05; done")


# ---------------------------------------------------------------- 7. nothing served is left behind


def test_a_served_descendant_in_its_own_session_is_stopped(tmp_path: Path, monkeypatch) -> None:
    """A llama-server (wrapper) whose child double-forks and setsid()s left the group killpg reaches: it kept
    running after --serve (found by the run mark in its environment now)."""
    from tunehost.bench.server import launch

    monkeypatch.setattr(launch, "STOP_GRACE_S", 1.0)
    pid_file = tmp_path / "escapee.pid"
    wrapper = _program(tmp_path / "llama-server",
                       f"{_escapee(pid_file)}\nexec \"{sys.executable}\" \"{HOSTILE}\" --mode ok \"$@\"")
    with within("stopping a served server's escaped descendant", seconds=15.0, peak_bytes=16 * MiB):
        with launch.ServedServer([str(wrapper)], name="A", start_timeout_s=10.0):
            escapee = int(pid_file.read_text())
            assert _alive(escapee)
    time.sleep(0.3)
    assert not _alive(escapee), "a descendant in its own session outlived --serve"


def test_a_bounded_commands_descendant_in_its_own_session_is_killed(tmp_path: Path) -> None:
    """run_bounded's deadline reached only the process group: a double-forked, setsid() child lived on."""
    pid_file = tmp_path / "escapee.pid"
    with within("a command that escapes its group", seconds=10.0, peak_bytes=16 * MiB):
        result = run_bounded(["sh", "-c", f"{_escapee(pid_file)}; sleep 600"], timeout_s=1.0, max_stdout=4096,
                             max_stderr=4096, max_line=4096)
    assert result.timed_out
    escapee = int(pid_file.read_text())
    time.sleep(0.3)
    assert not _alive(escapee), "a command's descendant in its own session outlived its deadline"
