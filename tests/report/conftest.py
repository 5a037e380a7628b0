"""Fixtures of `tunehost report`'s tests: a hostile snapshot (a real capture with markup, a script end tag and ANSI
in what it shows), the fixture results store, a tiny GGUF to plan."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS, write_tiny_gguf
from tests.report.fixtures import make_store

HOSTILE_CPU = "Evil</script><script>alert(5)</script>\x1b[2J CPU"
HOSTILE_BIOS = "<img src=x onerror=alert(6)>\x1b]8;;http://example.com\x07"


@pytest.fixture
def hostile_snapshot(tmp_path: Path) -> Path:
    """desktop-12700f-rtx3060 (an RTX 3060, DDR4) with a hostile CPU name, BIOS version and kernel release."""
    root = tmp_path / "snap"
    shutil.copytree(SNAPSHOTS / "desktop-12700f-rtx3060", root, symlinks=True)
    cpuinfo = root / "fs/proc/cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace("12th Gen Intel(R) Core(TM) i7-12700F", HOSTILE_CPU))
    dmi = root / "fs/sys/class/dmi/id"
    (dmi / "bios_version").write_text(HOSTILE_BIOS + "\n")
    (dmi / "bios_date").write_text("03/02/2026\n")
    (root / "fs/proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (root / "fs/proc/sys/kernel/osrelease").write_text("6.11.0-</title><script>alert(7)</script>\n")
    return root


@pytest.fixture
def fixture_store(tmp_path: Path) -> Path:
    return make_store(tmp_path / "store" / "results.sqlite3")


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    return write_tiny_gguf(tmp_path / "models" / "tiny-test-model.gguf")
