"""`tunehost gate` from a clean `pip install <repo>` (no -e, no checkout on sys.path): the bug was "No module named
tunehost" from a gate that only worked inside a checkout."""

from __future__ import annotations

import pytest

from tests.conftest import SNAPSHOTS
from tests.install.conftest import run_installed
from tunehost.ops.gate import EXIT_NOT_READY

pytestmark = pytest.mark.install



def test_installed_gate_runs_the_command(venv_bin, tmp_path):
    result = run_installed(venv_bin, "gate", "--snapshot", str(SNAPSHOTS / "ci-vm"), "--", "true", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "gate: tunehost doctor: ready" in result.stderr and result.stdout == ""


def test_installed_gate_on_this_host(venv_bin, tmp_path):
    """Live and quick: whatever this host is, the gate judges it and either runs the command or refuses with 69."""
    result = run_installed(venv_bin, "gate", "--quick", "--out", str(tmp_path / "out"), "--", "sh", "-c", "echo ran",
                 cwd=tmp_path)
    assert result.returncode in (0, EXIT_NOT_READY), result.stderr
    assert result.stdout == ("ran\n" if result.returncode == 0 else "")
    assert (tmp_path / "out" / "host" / "snapshot" / "manifest.json").is_file()
    assert "Traceback" not in result.stderr
