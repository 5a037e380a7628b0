"""Issue 22, classes 2, 3 and 6: every command tunehost runs has a cap per stream and per line ("output too large"),
a deadline at which its whole process group is killed (SIGTERM, then SIGKILL), and `--llama-bench ./x` runs x."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, group_alive, program, within
from tunehost.errors import TunehostError
from tunehost.host.proc import KILL_GRACE_S, TIMED_OUT_RC, TOO_LARGE_RC, run_bounded

CAP = 1 * MiB
LINE = 64 * 1024


def flood_argv(stream: str, size: int, lines: bool) -> list[str]:
    """A program writing `size` bytes to `stream`, as one line or as many short ones (dd: no Python start-up)."""
    script = f'head -c {size} /dev/zero | tr "\\0" x {"| fold -w 63" if lines else ""}'
    target = ">&2" if stream == "stderr" else ""
    return ["sh", "-c", f"{script} {target}"]


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["stdout", "stderr"]), st.sampled_from([2 * MiB, 64 * MiB, 1536 * MiB]), st.booleans())
def test_a_flood_costs_the_caps_not_the_flood(stream: str, size: int, lines: bool) -> None:
    """1.5 GB on a stream (or in one line) took 2.9 GB of RSS when read whole; now the read stops at the cap."""
    with within(f"{size >> 20} MiB on {stream}", seconds=10.0, peak_bytes=8 * CAP):
        result = run_bounded(flood_argv(stream, size, lines), timeout_s=60, max_stdout=CAP, max_stderr=CAP,
                             max_line=LINE)
    assert result.rc == TOO_LARGE_RC and result.problem is not None
    assert result.problem.startswith("output too large")
    assert ("line" in result.problem) == (not lines)
    assert len(result.stdout) <= CAP and len(result.stderr) <= CAP


def test_lines_reach_the_callback_as_they_come() -> None:
    seen: list[tuple[str, str]] = []
    result = run_bounded(["sh", "-c", "echo one; echo two >&2; printf three"], timeout_s=10, max_stdout=CAP,
                         max_stderr=CAP, max_line=LINE, on_line=lambda s, line: seen.append((s, line)))
    assert result.ok and result.stdout == "one\nthree" and result.stderr == "two\n"
    assert sorted(seen) == [("stderr", "two"), ("stdout", "one"), ("stdout", "three")]


@settings(max_examples=4, deadline=None)
@given(st.booleans(), st.booleans(), st.booleans())
def test_the_deadline_kills_the_whole_group(ignores_term: bool, with_child: bool, talks: bool) -> None:
    """A program that never exits, ignores SIGTERM or leaves a child holding the pipes ends at its deadline."""
    body = ("trap '' TERM; " if ignores_term else "") + ("sleep 300 & " if with_child else "") + \
        ("echo started; " if talks else "") + "echo $$ >&2; sleep 300"
    started = time.monotonic()
    with within("a program that never ends", seconds=0.5 + KILL_GRACE_S + 5, peak_bytes=4 * MiB):
        result = run_bounded(["sh", "-c", body], timeout_s=0.5, max_stdout=CAP, max_stderr=CAP, max_line=LINE)
    assert result.timed_out and result.rc == TIMED_OUT_RC and result.problem == "timed out after 0.5 s"
    assert time.monotonic() - started >= 0.5
    pgid = int(result.stderr.split()[0])
    time.sleep(0.2)
    assert not group_alive(pgid), "a process of the group outlived the deadline"


def test_a_program_that_cannot_start_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "not-exec"
    script.write_text("#!/bin/sh\n")
    for argv in ([str(tmp_path / "absent")], [str(script)], [str(tmp_path)]):
        result = run_bounded(argv, timeout_s=5, max_stdout=CAP, max_stderr=CAP, max_line=LINE)
        assert result.not_run is not None and result.problem.startswith("cannot run ") and "\n" not in result.problem



def test_llama_bench_that_floods_or_hangs_is_one_line(tmp_path: Path) -> None:
    from tunehost.bench.llama_bench import run_llama_bench

    flood = program(tmp_path / "flood", "head -c 100000000 /dev/zero")
    with within("llama-bench flooding stdout", seconds=10.0, peak_bytes=64 * MiB):
        with pytest.raises(TunehostError, match="output too large .*stdout line past 1 MiB"):
            run_llama_bench(flood, [], timeout=60)
    hang = program(tmp_path / "hang", "trap '' TERM; sleep 300")
    with within("llama-bench that never exits", seconds=10.0, peak_bytes=8 * MiB):
        with pytest.raises(TunehostError, match="did not finish within 1 s"):
            run_llama_bench(hang, [], timeout=1)


def test_a_host_command_that_floods_is_a_failed_command(tmp_path: Path) -> None:
    """`<llama binary> --version` flooding took doctor to 3.8 GB; now it is a failed command saying why."""
    from tunehost.host.commands import MAX_COMMAND_STDOUT, LiveCommands

    flood = program(tmp_path / "llama-server", "head -c 2000000000 /dev/zero | tr '\\0' x | fold -w 100")
    with within("--version flooding", seconds=20.0, peak_bytes=4 * MAX_COMMAND_STDOUT):
        result = LiveCommands().run([str(flood), "--version"], timeout=60)
    assert result is not None and not result.ok and result.stdout == ""
    assert result.stderr == "output too large (stdout past 8 MiB)"


def test_the_bench_deadline_follows_the_budget() -> None:
    from tunehost.bench.runner import MIN_RUN_DEADLINE_S, run_deadline_s

    assert run_deadline_s(0) == MIN_RUN_DEADLINE_S and run_deadline_s(600) == 600


def test_a_named_llama_bench_runs_that_file(tmp_path: Path, monkeypatch) -> None:
    """`--llama-bench ./llama-bench` ran the llama-bench on PATH (Path("./x") prints as "x")."""
    from tunehost.bench.llama_bench import find_llama_bench, run_llama_bench

    on_path = tmp_path / "path"
    on_path.mkdir()
    program(on_path / "llama-bench", "echo '{\"n_prompt\":1,\"n_gen\":0,\"avg_ts\":1,\"samples_ts\":[1]}'")
    here = tmp_path / "here"
    here.mkdir()
    program(here / "llama-bench", "echo '{\"n_prompt\":7,\"n_gen\":0,\"avg_ts\":7,\"samples_ts\":[7]}'")
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(here)
    found = find_llama_bench("./llama-bench")
    assert found == here / "llama-bench" and found.is_absolute()
    [result] = run_llama_bench(found, [], timeout=10)
    assert result.n_prompt == 7


def test_run_bounded_is_the_one_runner() -> None:
    """No module spawns a process another way (clock_probe's launcher and the server bench's llama-server, which
    own their processes' whole life, aside: docs/bounds.md)."""
    root = Path(__file__).resolve().parents[2] / "tunehost"
    spawners = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                      if "subprocess.Popen(" in p.read_text() or "import sh\n" in p.read_text())
    assert spawners == ["bench/server/launch.py", "host/proc.py", "probes/clock_probe.py"], spawners
