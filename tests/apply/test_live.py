"""Live: apply a profile for real to THP and vm.swappiness on this machine, verify, roll back.

Runs as root where both files are writable (CI), else skips. A finalizer puts the original values back even when
the test fails.
"""

from __future__ import annotations

import os

import pytest

from tunehost.facts.memory import THP_ENABLED, selected_mode
from tunehost.host.files import HostFiles
from tunehost.apply.settings import SWAPPINESS

pytestmark = pytest.mark.live


@pytest.fixture
def live_values(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root to change THP and vm.swappiness")
    files = HostFiles("/")
    thp_raw, swap = files.read_value(THP_ENABLED), files.read_value(SWAPPINESS)
    thp = selected_mode(thp_raw)
    if thp is None or swap is None:
        pytest.skip(f"{THP_ENABLED} or {SWAPPINESS} is not readable here")
    try:  # writing the current value back changes nothing and proves the files are writable
        files.write(THP_ENABLED, thp + "\n")
        files.write(SWAPPINESS, swap + "\n")
    except OSError as exc:
        pytest.skip(f"THP / swappiness are not writable here: {exc}")
    monkeypatch.delenv("TUNEHOST_ROOT", raising=False)
    yield thp, swap
    files.write(THP_ENABLED, thp + "\n")
    files.write(SWAPPINESS, swap + "\n")


def test_live_apply_verify_rollback(cli, live_values, tmp_path, monkeypatch):
    thp, swap = live_values
    target_thp = "always" if thp != "always" else "madvise"
    target_swap = "10" if swap != "10" else "20"
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "live-test.toml").write_text(f'description = "live test"\nthp = "{target_thp}"\n'
                                             f"swappiness = {target_swap}\n")
    monkeypatch.setenv("TUNEHOST_PROFILES_DIR", str(profiles))
    files = HostFiles("/")

    result = cli("apply", "--profile", "live-test", "--yes")
    assert result.exit_code == 0, result.output
    assert f"set thp: {thp} -> {target_thp}" in result.stdout
    assert selected_mode(files.read_value(THP_ENABLED)) == target_thp
    assert files.read_value(SWAPPINESS) == target_swap

    verified = cli("verify")
    assert verified.exit_code == 0, verified.output

    back = cli("rollback")
    assert back.exit_code == 0, back.output
    assert selected_mode(files.read_value(THP_ENABLED)) == thp
    assert files.read_value(SWAPPINESS) == swap
