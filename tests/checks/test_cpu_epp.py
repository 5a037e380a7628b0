"""cpu-epp: the energy-performance preference of every online CPU, on hand-built cpufreq trees and real dumps."""

from __future__ import annotations

from tunehost.check import Severity
from tunehost.checks.cpu_epp import CpuEppCheck

from tests.cpu.test_cpufreq import CPU, cpufreq_fs, run


def test_epp_disagreement_balance_power_on_some_cpus_fails(make_snapshot):
    fs = cpufreq_fs(range(8), driver="amd-pstate-epp", governor="powersave",
                    epp=lambda n: "performance" if n < 4 else "balance_power")
    fs[f"{CPU}/amd_pstate/status"] = "active\n"
    [epp] = run(CpuEppCheck(), make_snapshot(fs=fs))
    assert epp.severity is Severity.FAIL
    assert epp.summary == "CPUs disagree on EPP: performance on CPUs 0-3; balance_power on CPUs 4-7"


def test_epp_numeric_value_on_intel_pstate(make_snapshot):
    fs = cpufreq_fs(range(2), driver="intel_pstate", governor="powersave", epp="64")
    [epp] = run(CpuEppCheck(), make_snapshot(fs=fs))
    assert epp.severity is Severity.WARN and "EPP 64" in epp.summary


def test_active_mode_without_hwp_has_no_epp(make_snapshot):
    [epp] = run(CpuEppCheck(), make_snapshot(fs=cpufreq_fs(range(2), driver="intel_pstate", governor="powersave")))
    assert epp.severity is Severity.SKIP and "no energy_performance_preference" in epp.summary
