"""The cpu group's expectations (tests/data/expectations/<snapshot>/cpu.json) on the composite snapshots.

The snapshots' cpu files are written by tests/cpu/build_snapshots.py (see its docstring for their sources)."""

from __future__ import annotations

import json

import pytest

from tunehost.checks.core_topology import CoreTopologyCheck
from tunehost.checks.cpu_epp import CpuEppCheck
from tunehost.checks.cpu_frequency import CpuFrequencyCheck
from tunehost.checks.cpu_governor import CpuGovernorCheck
from tunehost.checks.swap import SwapCheck
from tunehost.doctor import run_check
from tunehost.facts import HostFacts
from tunehost.host import open_host

from tests.conftest import DATA, SNAPSHOTS

CHECKS = (CpuGovernorCheck, CpuEppCheck, CpuFrequencyCheck, SwapCheck, CoreTopologyCheck)
NAMES = sorted(p.parent.name for p in (DATA / "expectations").glob("*/cpu.json"))


@pytest.mark.parametrize("name", NAMES)
def test_composite_snapshot_expectations(name):
    expected = json.loads((DATA / "expectations" / name / "cpu.json").read_text())
    facts = HostFacts(open_host(SNAPSHOTS / name))
    got = {cls.id: [f.severity.value for f in run_check(cls(), facts)] for cls in CHECKS}
    assert got == expected
    for cls in CHECKS:
        for finding in run_check(cls(), facts):
            assert finding.summary and (finding.severity.value in ("ok", "skip") or finding.evidence)
            if finding.severity.value in ("warn", "fail"):
                assert finding.fix is not None


def test_every_composite_snapshot_has_cpu_expectations():
    assert NAMES == ["desktop-12700f-rtx3060", "desktop-9950x3d-rtx5090", "laptop-5800u-apu", "server-epyc9654-2s",
                     "strix-halo-395"]
