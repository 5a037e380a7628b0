"""`tunehost gate` from a clean `pip install <repo>` (no -e, no checkout on sys.path): the bug was "No module named
tunehost" from a gate that only worked inside a checkout."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import SNAPSHOTS
from tunehost.tuning.gate import EXIT_NOT_READY

pytestmark = pytest.mark.install


def run(venv_bin, *args, cwd):
    # cwd outside the repo and a clean environment: only what pip installed can be imported
    env = {"PATH": f"{venv_bin}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    return subprocess.run([str(venv_bin / "tunehost"), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)


def test_installed_gate_runs_the_command(venv_bin, tmp_path):
    result = run(venv_bin, "gate", "--snapshot", str(SNAPSHOTS / "ci-vm"), "--", "true", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "gate: tunehost doctor: ready" in result.stderr and result.stdout == ""


def test_installed_gate_on_this_host(venv_bin, tmp_path):
    """Live and quick: whatever this host is, the gate judges it and either runs the command or refuses with 69."""
    result = run(venv_bin, "gate", "--quick", "--out", str(tmp_path / "out"), "--", "sh", "-c", "echo ran",
                 cwd=tmp_path)
    assert result.returncode in (0, EXIT_NOT_READY), result.stderr
    assert result.stdout == ("ran\n" if result.returncode == 0 else "")
    assert (tmp_path / "out" / "host" / "snapshot" / "manifest.json").is_file()
    assert "Traceback" not in result.stderr
