"""cpu-frequency: scaling limits, boost and max_perf_pct, on hand-built cpufreq trees and real dumps."""

from __future__ import annotations

from tunehost.check import Severity
from tunehost.checks.cpu_frequency import CpuFrequencyCheck

from tests.cpu.test_cpufreq import CPU, cpufreq_fs, i7_1370p, run


def test_i7_1370p_no_turbo_0_max_perf_pct_100_is_ok(make_snapshot):
    # SOURCES: "no_turbo 0, max_perf_pct 100 OK"; P-cores 5000/5200 MHz, E-cores 3900 MHz are not caps
    [freq] = run(CpuFrequencyCheck(), i7_1370p(make_snapshot))
    assert freq.severity is Severity.OK and "5200 MHz" in freq.summary and "turbo on" in freq.summary


def test_scaling_max_capped_above_base_warns_per_cpu(make_snapshot):
    fs = cpufreq_fs(range(4), driver="intel_pstate", governor="performance", max_khz=4900000, base=2100000,
                    scaling_max=lambda n: 3500000 if n >= 2 else None)
    [freq] = run(CpuFrequencyCheck(), make_snapshot(fs=fs))
    assert freq.severity is Severity.WARN and "CPUs 2-3 at 3500 MHz of 4900 MHz" in freq.summary
    assert "scaling_max_freq" in freq.fix.commands[0]


def test_scaling_max_capped_below_base_fails(make_snapshot):
    fs = cpufreq_fs(range(2), driver="intel_pstate", governor="performance", max_khz=4900000, base=2100000,
                    scaling_max=1200000)
    [freq] = run(CpuFrequencyCheck(), make_snapshot(fs=fs))
    assert freq.severity is Severity.FAIL and "below the base clock" in freq.summary


def test_boost_0_fails(make_snapshot):
    fs = cpufreq_fs(range(2), driver="amd-pstate-epp", governor="performance", epp="performance")
    fs[f"{CPU}/cpufreq/boost"] = "0\n"
    [freq] = run(CpuFrequencyCheck(), make_snapshot(fs=fs))
    assert freq.severity is Severity.FAIL and freq.fix.commands == (f"echo 1 | sudo tee {CPU}/cpufreq/boost",)


def test_max_perf_pct_below_100_warns(make_snapshot):
    fs = cpufreq_fs(range(2), driver="intel_pstate", governor="performance", epp="performance")
    fs.update({f"{CPU}/intel_pstate/max_perf_pct": "60\n", f"{CPU}/intel_pstate/no_turbo": "0\n"})
    [freq] = run(CpuFrequencyCheck(), make_snapshot(fs=fs))
    assert freq.severity is Severity.WARN and "60 %" in freq.summary
