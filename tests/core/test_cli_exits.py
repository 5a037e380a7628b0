"""Exit statuses and messages of the CLI edge (issue 12): bare `tunehost`, a reader that closes the pipe early,
check selections that leave nothing to run, `snapshot` into a file, and messages that say what is really wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS

NOT_READY = SNAPSHOTS / "desktop-12700f-rtx3060"  # a real machine with a fail finding: doctor exits 2
READY = SNAPSHOTS / "ci-vm"


def one_error_line(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunehost: error: "), result.stderr
    return lines[0]


def tunehost(*args: str, close_stdout: bool = False, env: dict | None = None) -> tuple[int, str]:
    """The real console entry point in a fresh process; close_stdout: the reader goes away before any output."""
    argv = [sys.executable, "-c", "import sys; from tunehost.cli import main; sys.argv[0] = 'tunehost'; main()", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    if close_stdout:
        proc.stdout.close()  # like `| head -1` that has already exited: every write meets EPIPE
        err = proc.stderr.read().decode()
        return proc.wait(timeout=60), err
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out.decode() + err.decode()


def test_bare_tunehost_prints_help_and_exits_0(cli):
    result = cli()
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: tunehost") and "doctor" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("snapshot, args, verdict", [
    (NOT_READY, [], 2), (NOT_READY, ["--json"], 2), (NOT_READY, ["--quiet"], 2), (READY, [], 0),
])
def test_a_closed_pipe_keeps_the_verdict(snapshot, args, verdict):
    status, err = tunehost("doctor", "--snapshot", str(snapshot), *args, close_stdout=True)
    assert status == verdict and err == ""


def test_the_verdict_is_the_same_with_the_pipe_open():
    assert tunehost("doctor", "--snapshot", str(NOT_READY))[0] == 2


@pytest.mark.parametrize("args, message", [
    (["--check", "thp", "--skip", "thp"], "no check left to run: --skip thp removes what --check asked for"),
    (["--check", "thp", "--check", "swap", "--skip", "thp", "--skip", "swap"],
     "no check left to run: --skip swap, thp removes what --check asked for"),
    (["--check", "nope"], "unknown check id: nope"),
    (["--skip", "nope"], "unknown check id: nope"),
])
def test_a_selection_that_runs_nothing_is_an_error(cli, args, message):
    result = cli("doctor", "--snapshot", str(READY), *args)
    line = one_error_line(result)
    assert line.startswith(f"tunehost: error: {message}") and "ready" not in result.stdout


def test_skipping_every_check_is_an_error(cli):
    from tunehost.doctor.registry import load_checks

    skips = [arg for c in load_checks().checks for arg in ("--skip", c.id)]
    line = one_error_line(cli("doctor", "--snapshot", str(READY), *skips))
    assert "no check left to run: every check is skipped" in line


def test_snapshot_into_a_file_fails_at_once_before_sampling(cli, tmp_path, monkeypatch):
    target = tmp_path / "report.txt"
    target.write_text("keep")

    def no_sampling(*args, **kwargs):
        raise AssertionError("sampled before refusing")

    monkeypatch.setattr("tunehost.host.open_host", no_sampling)
    line = one_error_line(cli("snapshot", str(target)))
    assert line == f"tunehost: error: {target} is a file, not a directory; choose a new directory"
    assert target.read_text() == "keep"
    inside = one_error_line(cli("snapshot", str(target / "snap")))
    assert f"{target} (in the path of {target / 'snap'}) is a file" in inside


def test_a_snapshot_manifest_that_cannot_be_read_says_so(cli, tmp_path, monkeypatch):
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "manifest.json").write_text('{"format": 1}')
    import os

    real = os.open

    def denied(path, *args, **kwargs):
        if os.fspath(path).endswith("manifest.json"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)  # what a user meets on a snapshot root wrote 0600
    line = one_error_line(cli("doctor", "--snapshot", str(snap)))
    assert line == f"tunehost: error: {snap / 'manifest.json'} cannot be read: permission denied"


def test_an_mmproj_that_is_a_directory_says_so(cli, tmp_path):
    from tests.conftest import write_tiny_gguf

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    line = one_error_line(cli("advise", "--model", str(model), "--mmproj", str(tmp_path), "--snapshot", str(READY)))
    assert line == f"tunehost: error: {tmp_path}: is a directory, not a GGUF file"


@pytest.mark.parametrize("args, message", [
    (["--ctx", str(10**30)], f"--ctx must be at most 2147483647 tokens (llama-server's -c is a 32-bit number), "
                             f"not {10**30}"),
    (["--ctx", "1000000000", "--parallel", "4"], "--ctx x --parallel must be at most 2147483647 tokens"),
    (["--ctx", "-5"], "--ctx must be a positive number of tokens, not -5"),
    (["--parallel", "100000"], "--parallel x the default context (32768) must be at most 2147483647 tokens"),
])
def test_advise_numbers_llama_server_cannot_take(cli, tmp_path, args, message):
    from tests.conftest import write_tiny_gguf

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    line = one_error_line(cli("advise", "--model", str(model), "--snapshot", str(READY), *args))
    assert line.startswith(f"tunehost: error: {message}")


def test_llama_cpp_dir_that_is_set_but_empty_is_named(tmp_path, monkeypatch):
    from tunehost.bench.llama_bench import find_llama_bench
    from tunehost.errors import TunehostError

    env = {"LLAMA_CPP_DIR": str(tmp_path), "PATH": str(tmp_path / "nothing"), "TUNEHOST_CACHE_DIR": str(tmp_path / "c")}
    with pytest.raises(TunehostError) as exc:
        find_llama_bench(environ=env)
    assert f"LLAMA_CPP_DIR is set ({tmp_path}) but has no llama-bench" in str(exc.value)
    assert "set LLAMA_CPP_DIR" not in str(exc.value)


def test_llama_build_check_names_the_llama_cpp_dir_that_is_set(make_snapshot, tmp_path):
    from tunehost.doctor import run_doctor
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.doctor.registry import load_checks

    snap = make_snapshot(samples={"llama_install": {"binaries": [], "search_dirs": [
        {"dir": "/opt/llama.cpp", "from": "$LLAMA_CPP_DIR"},
        {"dir": "/opt/llama.cpp/build/bin", "from": "$LLAMA_CPP_DIR/build/bin"}]}})
    checks = [c for c in load_checks().checks if c.id == "llama-build"]
    [finding] = run_doctor(HostFacts(open_host(snap)), checks).findings
    assert finding.severity.value == "skip"
    assert "$LLAMA_CPP_DIR is set to /opt/llama.cpp" in finding.summary and "set LLAMA_CPP_DIR" not in finding.summary


def test_verify_keeps_exit_2_for_drift_when_the_reader_stops_early(tmp_path):
    from tests.apply.fakehost import build_root
    from tunehost.apply.engine import apply_plan, build_plan
    from tunehost.apply.journal import Journal
    from tunehost.apply.profiles import builtin_dir, load_profile
    from tunehost.apply.root import open_writable_root

    root = build_root(tmp_path / "root", "intel_pstate", cpus=2)
    host = open_writable_root(root)
    journal = Journal(tmp_path / "state")
    journal.ensure_writable()
    assert apply_plan(host, build_plan(host, load_profile("throughput", [builtin_dir()])), journal,
                      root=str(root.resolve())).ok
    (root / "proc/sys/vm/swappiness").write_text("60\n")  # drift
    env = {"TUNEHOST_ROOT": str(root), "TUNEHOST_STATE_DIR": str(tmp_path / "state")}
    assert tunehost("verify", env=env)[0] == 2
    assert tunehost("verify", close_stdout=True, env=env) == (2, "")


TOO_LONG = "9" * 5000  # the system refuses the path itself (ENAMETOOLONG), before tunehost can look at it


@pytest.mark.parametrize("args", [("advise", "--model", TOO_LONG), ("bench", "--model", TOO_LONG),
                                  ("doctor", "--snapshot", TOO_LONG), ("snapshot", TOO_LONG), ("fleet", TOO_LONG),
                                  ("apply", "--dry-run", "--profile", TOO_LONG)])
def test_a_path_the_system_refuses_is_one_line(cli, args):
    line = one_error_line(cli(*args))
    assert len(line) < 300 and ("too long" in line or "invalid profile name" in line)


def test_the_gate_reports_a_refused_path_with_its_own_status_not_1(cli):
    result = cli("gate", "--snapshot", TOO_LONG, "--", "true")
    assert result.exit_code == 70 and "Traceback" not in result.output
    assert "file name too long" in result.stderr
