"""cpu-clocks and power-limits on snapshots built from public bug reports (tests/data/clocks/<name>/).

Each directory is written by tests/power/build_clock_fixtures.py; its SOURCE.md names the report (URL, author, date)
and says which values were copied from it, and expected.json holds the verdicts ({check id: [severities]}).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunehost.checks.cpu_clocks import CpuClocksCheck
from tunehost.checks.power_limits import PowerLimitsCheck
from tunehost.doctor import run_check
from tunehost.facts import HostFacts
from tunehost.host import open_host

from tests.conftest import DATA
from tests.power.build_clock_fixtures import FIXTURES, write

CLOCKS = DATA / "clocks"
NAMES = sorted(p.name for p in CLOCKS.iterdir() if p.is_dir())
CHECKS = (CpuClocksCheck, PowerLimitsCheck)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_gives_its_expected_verdicts(name):
    expected = json.loads((CLOCKS / name / "expected.json").read_text())
    facts = HostFacts(open_host(CLOCKS / name))
    findings = {cls.id: run_check(cls(), facts) for cls in CHECKS}
    assert {cid: [f.severity.value for f in fs] for cid, fs in findings.items()} == expected
    for fs in findings.values():
        for f in fs:
            assert f.summary and "\n" not in f.summary
            if f.severity.value in ("warn", "fail"):
                assert f.fix is not None and f.fix.commands and f.evidence


@pytest.mark.parametrize("name", NAMES)
def test_fixture_cites_its_report(name):
    source = (CLOCKS / name / "SOURCE.md").read_text()
    assert "Source: https://github.com/" in source


def test_fixtures_are_what_the_builder_writes(tmp_path):
    """The committed directories are exactly the builder's output: nothing edited by hand."""
    built = sorted(write(make(), tmp_path).name for make in FIXTURES)
    assert built == NAMES

    def tree(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    for name in NAMES:
        assert tree(tmp_path / name) == tree(CLOCKS / name), name


def test_clamped_ryzen_names_causes_and_commands():
    """FrameworkComputer/SoftwareFirmwareIssueTracker#91: governor, EPP and platform_profile all performance."""
    facts = HostFacts(open_host(CLOCKS / "framework16-7940hs-clamped-1ghz-after-resume"))
    [finding] = run_check(CpuClocksCheck(), facts)
    assert "964 MHz of 4001 MHz base" in finding.summary
    assert "governor, EPP and platform_profile all say performance" in finding.summary
    assert finding.evidence["/sys/devices/system/cpu/cpu*/acpi_cppc/nominal_freq"] == "4001"
    text = finding.fix.text
    for cause in ("power-profiles-daemon", "power-limits", "suspend-resume", "reboot", "thermals"):
        assert cause in text
    assert "powerprofilesctl set performance" in finding.fix.commands
    assert "tunehost doctor --check power-limits --check thermals" in finding.fix.commands
