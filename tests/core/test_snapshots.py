"""Doctor on every snapshot under tests/data/snapshots: real captured machines and corpus-built composites.

Expected findings live in tests/data/expectations/<snapshot>/<group>.json as {"check-id": ["severity", ...]}.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA, SNAPSHOTS
from tests.core.test_doctor_cli import assert_contract
from tunehost.check import Severity
from tunehost.doctor import run_doctor
from tunehost.facts import HostFacts
from tunehost.host import open_host
from tunehost.doctor.registry import load_checks

EXPECTATIONS = DATA / "expectations"
SNAPSHOT_DIRS = sorted(p for p in SNAPSHOTS.iterdir() if (p / "manifest.json").is_file())


def expectations(name: str) -> dict[str, list[str]]:
    merged: dict[str, list[str]] = {}
    for path in sorted((EXPECTATIONS / name).glob("*.json")):
        for check_id, severities in json.loads(path.read_text()).items():
            assert check_id not in merged, f"{path}: {check_id} is expected twice"
            merged[check_id] = severities
    return merged


@pytest.fixture(scope="module")
def checks():
    return load_checks().checks


@pytest.mark.parametrize("snapshot", SNAPSHOT_DIRS, ids=[p.name for p in SNAPSHOT_DIRS])
def test_doctor_on_snapshot(snapshot: Path, checks):
    report = run_doctor(HostFacts(open_host(snapshot)), checks)
    assert_contract(report.to_json())
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    assert not errors, [(f.check, f.summary, dict(f.evidence)) for f in errors]
    got = {c.id: [f.severity.value for f in report.by_check(c.id)] for c in checks}
    for check_id, severities in expectations(snapshot.name).items():
        assert got.get(check_id) == severities, (check_id, [f.summary for f in report.by_check(check_id)])


def test_every_snapshot_has_expectations():
    for snapshot in SNAPSHOT_DIRS:
        assert expectations(snapshot.name), f"{snapshot.name} has no expectations"
