"""The system group's expectations on every composite snapshot (tests/data/expectations/<snapshot>/system.json).

What each composite holds for this group (power managers, processes, sockets, llama.cpp builds) is described in
the test modules beside this one and in docs/snapshot.d/samples.md.
"""

import json
from pathlib import Path

import pytest

from tunehost.doctor import run_doctor, select_checks
from tunehost.facts import HostFacts
from tunehost.host import open_host
from tunehost.doctor.registry import load_checks

DATA = Path(__file__).parents[1] / "data"
NAMES = sorted(p.parent.name for p in DATA.glob("expectations/*/system.json"))


@pytest.mark.parametrize("name", NAMES)
def test_system_expectations(name):
    wanted = json.loads((DATA / "expectations" / name / "system.json").read_text())
    checks = select_checks(load_checks().checks, list(wanted))
    report = run_doctor(HostFacts(open_host(DATA / "snapshots" / name)), checks)
    got = {cid: [f.severity.value for f in report.by_check(cid)] for cid in wanted}
    assert got == wanted
    for finding in report.findings:
        assert finding.fix is not None or finding.severity.value in ("ok", "skip", "info"), finding


def test_every_composite_has_expectations():
    # real captures (ci-vm) carry one expectation file for every check: tests/core/test_snapshots.py asserts it
    composites = {p.name for p in (DATA / "snapshots").iterdir() if (p / "manifest.json").is_file()
                  and not p.name.startswith(("system-", "ci-"))}
    assert set(NAMES) >= composites


@pytest.mark.live
def test_live_snapshot_replays_the_same_findings(tmp_path):
    from tunehost.host.snapshot import write_snapshot

    ids = ["power-manager", "cpu-hogs", "headless", "llama-exposure", "llama-build"]
    checks = select_checks(load_checks().checks, ids)
    host = open_host(record=True)
    live = run_doctor(HostFacts(host), checks)
    write_snapshot(host, tmp_path / "snap")
    replay = run_doctor(HostFacts(open_host(tmp_path / "snap")), checks)
    assert [(f.check, f.severity, f.summary) for f in replay.findings] == [
        (f.check, f.severity, f.summary) for f in live.findings]
