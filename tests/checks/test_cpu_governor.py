"""cpu-governor: the scaling governor of every online CPU, on hand-built cpufreq trees and real dumps."""

from __future__ import annotations

import os

import pytest

from tunehost.check import Severity
from tunehost.checks.cpu_governor import CpuGovernorCheck
from tunehost.facts import HostFacts
from tunehost.host import open_host

from tests.conftest import SNAPSHOTS
from tests.cpu.test_cpufreq import CPU, cpufreq_fs, run


def test_governor_disagreement_lists_the_cpus(make_snapshot):
    snap = make_snapshot(fs=cpufreq_fs(range(8), driver="acpi-cpufreq",
                                       governor=lambda n: "performance" if n < 6 else "powersave"))
    [gov] = run(CpuGovernorCheck(), snap)
    assert gov.severity is Severity.FAIL
    assert "performance on CPUs 0-5" in gov.summary and "powersave on CPUs 6-7" in gov.summary
    assert gov.evidence[f"{CPU}/cpu*/cpufreq/scaling_governor"] == "0-5: performance; 6-7: powersave"


def test_active_mode_mixed_performance_and_powersave_is_warn(make_snapshot):
    snap = make_snapshot(fs=cpufreq_fs(range(4), driver="intel_pstate", epp="performance",
                                       governor=lambda n: "performance" if n else "powersave"))
    [gov] = run(CpuGovernorCheck(), snap)
    assert gov.severity is Severity.WARN and "disagree" in gov.summary


@pytest.mark.parametrize("governor, severity", [("ondemand", Severity.WARN), ("schedutil", Severity.WARN),
                                                ("powersave", Severity.FAIL), ("performance", Severity.OK),
                                                ("userspace", Severity.WARN)])
def test_acpi_cpufreq_governors(make_snapshot, governor, severity):
    [gov] = run(CpuGovernorCheck(), make_snapshot(fs=cpufreq_fs(range(2), driver="acpi-cpufreq", governor=governor)))
    assert gov.severity is severity


@pytest.mark.skipif(os.path.isdir("/sys/devices/system/cpu/cpu0/cpufreq"), reason="this host has cpufreq")
@pytest.mark.live
def test_live_host_without_cpufreq_is_skip():
    [finding] = CpuGovernorCheck().run(HostFacts(open_host()))
    assert finding.severity is Severity.SKIP


def test_offline_cpu_is_not_judged(make_snapshot):
    fs = cpufreq_fs(range(4), driver="acpi-cpufreq", governor=lambda n: "powersave" if n == 3 else "performance")
    fs[f"{CPU}/online"] = "0-2\n"
    [gov] = run(CpuGovernorCheck(), make_snapshot(fs=fs))
    assert gov.severity is Severity.OK and "all 3 CPUs" in gov.summary


def test_epyc_snapshot_all_384_cpus_judged():
    facts = HostFacts(open_host(SNAPSHOTS / "server-epyc9654-2s"))
    [gov] = CpuGovernorCheck().run(facts)
    assert gov.severity is Severity.OK and "all 384 CPUs" in gov.summary
