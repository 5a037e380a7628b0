"""cpu-governor, cpu-epp and cpu-frequency on real corpus data, composite snapshots and their quirks.

Where the data comes from:
- cpufreq/intel-i7-1370p-hybrid-...-sysfs.txt (`grep -H` of a real hwloc dump: policy directories only) plus
  topology/intel-i7-1370p-...-topology-sysfs.txt (the same machine's cpuN directories).
- cpufreq/tlp-stat-p-i5-6300u-capped-800mhz-no-turbo.txt and ...-after-fix-3000mhz-turbo-on.txt: `tlp-stat -p`
  lines "sysfs path = value [unit]" turned into files (tests/cpu/fixtures.tlp_stat_files); cpu0 only, as TLP shows.
- cpufreq/xeon-e5-2680-2s-acpi-cpufreq-performance-turbo-2701000-sysfs.txt (acpi-cpufreq, 16 CPUs).
- topology/nvidia-dgx-spark-gb10-...-cpu_capacity-sysfs.txt (cppc_cpufreq, big.LITTLE).
- Everything else is a hand-written variation of those files (same paths and formats), named after its quirk.
"""

from __future__ import annotations

import os

import pytest

from tunehost.check import Severity
from tunehost.checks.cpu_epp import CpuEppCheck, judge_epp
from tunehost.checks.cpu_frequency import CpuFrequencyCheck
from tunehost.checks.cpu_governor import CpuGovernorCheck
from tunehost.facts import HostFacts
from tunehost.facts.cpu import CpuFacts
from tunehost.host import open_host

from tests.conftest import SNAPSHOTS, corpus
from tests.cpu.fixtures import grep_h_files, tlp_stat_files

CPU = "/sys/devices/system/cpu"
I7_1370P = "cpufreq/intel-i7-1370p-hybrid-elitebook-840-g10-cpufreq-intel_pstate-sysfs.txt"
I7_1370P_TOPO = "topology/intel-i7-1370p-hybrid-6p8e-elitebook-840-g10-topology-sysfs.txt"
TLP_CAPPED = "cpufreq/tlp-stat-p-i5-6300u-capped-800mhz-no-turbo.txt"
TLP_FIXED = "cpufreq/tlp-stat-p-i5-6300u-after-fix-3000mhz-turbo-on.txt"
XEON = "cpufreq/xeon-e5-2680-2s-acpi-cpufreq-performance-turbo-2701000-sysfs.txt"
DGX = "topology/nvidia-dgx-spark-gb10-arm-big-little-cpu_capacity-sysfs.txt"


def run(check, snap):
    return list(check.run(HostFacts(open_host(snap))))


def severities(findings):
    return [f.severity for f in findings]


def cpufreq_fs(cpus, *, driver, governor, epp=None, max_khz=3000000, scaling_max=None, base=None, online=True):
    """Hand-written cpuN/cpufreq files (value may be a function of the CPU number)."""
    pick = lambda v, n: v(n) if callable(v) else v  # noqa: E731
    fs = {f"{CPU}/online": f"0-{max(cpus)}\n"} if online else {}
    for n in cpus:
        d = f"{CPU}/cpu{n}/cpufreq"
        fs[f"{d}/scaling_driver"] = driver + "\n"
        fs[f"{d}/scaling_governor"] = pick(governor, n) + "\n"
        fs[f"{d}/cpuinfo_max_freq"] = f"{max_khz}\n"
        fs[f"{d}/scaling_max_freq"] = f"{pick(scaling_max, n) or max_khz}\n"
        fs[f"{d}/scaling_min_freq"] = "800000\n"
        if epp is not None:
            fs[f"{d}/energy_performance_preference"] = pick(epp, n) + "\n"
        if base is not None:
            fs[f"{d}/base_frequency"] = f"{base}\n"
    return fs


# ---- corpus: i7-1370P (policy directories only) ----

def i7_1370p(make_snapshot):
    return make_snapshot(fs={**grep_h_files(corpus(I7_1370P)), **grep_h_files(corpus(I7_1370P_TOPO))})


def test_i7_1370p_policy_only_dump_is_read_through_policyN(make_snapshot):
    cpu = CpuFacts.gather(open_host(i7_1370p(make_snapshot)))
    assert [c.cpu for c in cpu.per_cpu] == list(range(20))
    assert cpu.per_cpu[12].directory == f"{CPU}/cpufreq/policy12"
    assert cpu.driver == "intel_pstate" and cpu.mode == "active"
    assert cpu.per_cpu[4].cpuinfo_max_khz == 5200000 and cpu.per_cpu[12].base_khz == 1400000


def test_i7_1370p_powersave_with_balance_performance_laptop_default(make_snapshot):
    # SOURCES: "Governor powersave + EPP balance_performance (laptop default): suggest EPP performance on AC"
    snap = i7_1370p(make_snapshot)
    [gov] = run(CpuGovernorCheck(), snap)
    assert gov.severity is Severity.INFO and "powersave" in gov.summary and "active" in gov.summary
    [epp] = run(CpuEppCheck(), snap)
    assert epp.severity is Severity.WARN and "balance_performance on all 20 CPUs" in epp.summary
    assert epp.evidence[f"{CPU}/cpufreq/policy*/energy_performance_preference"] == "balance_performance (all 20 CPUs)"
    assert "energy_performance_preference" in epp.fix.commands[0] and "performance" in epp.fix.commands[0]


# ---- corpus: TLP before/after ----

def test_tlp_capped_800mhz_no_turbo_is_critical(make_snapshot):
    # SOURCES: "scaling_max_freq AND cpuinfo_max_freq = 800000 kHz on a 2.4/3.0 GHz part, no_turbo = 1 -> flag critical"
    snap = make_snapshot(fs=tlp_stat_files(corpus(TLP_CAPPED)))
    findings = run(CpuFrequencyCheck(), snap)
    assert severities(findings) == [Severity.FAIL, Severity.FAIL]
    turbo, clamp = findings
    assert "no_turbo = 1" in turbo.summary and turbo.fix.commands == (f"echo 0 | sudo tee {CPU}/intel_pstate/no_turbo",)
    assert "800 MHz" in clamp.summary and "2400 MHz" in clamp.summary
    assert clamp.evidence[f"{CPU}/cpu*/cpufreq/cpuinfo_max_freq"] == "800000 (all 1 CPUs)"
    # governor powersave with intel_pstate is normal; EPP balance_performance
    assert severities(run(CpuGovernorCheck(), snap)) == [Severity.INFO]
    assert severities(run(CpuEppCheck(), snap)) == [Severity.WARN]


def test_tlp_after_fix_3000mhz_turbo_on_is_healthy(make_snapshot):
    # SOURCES: "Healthy: cpuinfo_max_freq/scaling_max_freq 3000000 kHz, no_turbo 0 ... EPP balance_performance
    # (could suggest EPP performance for inference on AC)"
    snap = make_snapshot(fs=tlp_stat_files(corpus(TLP_FIXED)))
    [freq] = run(CpuFrequencyCheck(), snap)
    assert freq.severity is Severity.OK and "3000 MHz" in freq.summary
    [epp] = run(CpuEppCheck(), snap)
    assert epp.severity is Severity.WARN and "balance_performance" in epp.summary
    cpu = CpuFacts.gather(open_host(snap))
    assert cpu.available_epp == ("default", "performance", "balance_performance", "balance_power", "power")
    assert cpu.intel_pstate["min_perf_pct"] == "13"


# ---- corpus: Xeon acpi-cpufreq, DGX Spark cppc ----

def test_xeon_acpi_cpufreq_2701000_turbo_marker(make_snapshot):
    # SOURCES: "Governor performance on all CPUs ... cpuinfo_max_freq 2701000 = base + 1 MHz, the legacy marker for
    # turbo available ... no EPP"
    snap = make_snapshot(fs=grep_h_files(corpus(XEON)))
    [gov] = run(CpuGovernorCheck(), snap)
    assert gov.severity is Severity.OK and "performance on all 16 CPUs" in gov.summary
    assert gov.evidence[f"{CPU}/cpu0/cpufreq/scaling_available_governors"] == "ondemand userspace performance"
    [epp] = run(CpuEppCheck(), snap)
    assert epp.severity is Severity.SKIP and "acpi-cpufreq" in epp.summary
    [freq] = run(CpuFrequencyCheck(), snap)
    assert freq.severity is Severity.OK and "base + 1 MHz" in freq.summary


def test_dgx_spark_cppc_performance_without_scaling_limits(make_snapshot):
    snap = make_snapshot(fs=grep_h_files(corpus(DGX)))
    [gov] = run(CpuGovernorCheck(), snap)
    assert gov.severity is Severity.OK and "cppc_cpufreq" in gov.summary
    # big and little cores have different cpuinfo_max_freq; with no scaling_max_freq nothing can be judged
    [freq] = run(CpuFrequencyCheck(), snap)
    assert freq.severity is Severity.SKIP


# ---- per-CPU disagreement, passive/guided modes ----


def test_intel_cpufreq_passive_schedutil_warns_and_epp_skips(make_snapshot):
    fs = cpufreq_fs(range(4), driver="intel_cpufreq", governor="schedutil")
    fs[f"{CPU}/intel_pstate/status"] = "passive\n"
    snap = make_snapshot(fs=fs)
    [gov] = run(CpuGovernorCheck(), snap)
    assert gov.severity is Severity.WARN and "passive mode" in gov.summary and "schedutil" in gov.summary
    [epp] = run(CpuEppCheck(), snap)
    assert epp.severity is Severity.SKIP and "passive mode" in epp.summary


def test_amd_pstate_guided_mode_governor_matters(make_snapshot):
    fs = cpufreq_fs(range(4), driver="amd-pstate", governor="powersave")
    fs[f"{CPU}/amd_pstate/status"] = "guided\n"
    snap = make_snapshot(fs=fs)
    [gov] = run(CpuGovernorCheck(), snap)
    assert gov.severity is Severity.FAIL and "guided mode" in gov.summary
    assert gov.fix.commands == ("echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",)
    assert run(CpuEppCheck(), snap)[0].severity is Severity.SKIP


@pytest.mark.parametrize("value, severity", [("performance", Severity.OK), ("balance_performance", Severity.WARN),
                                             ("default", Severity.WARN), ("balance_power", Severity.FAIL),
                                             ("power", Severity.FAIL), ("0", Severity.OK), ("128", Severity.WARN),
                                             ("192", Severity.FAIL), ("255", Severity.FAIL), ("0x80", Severity.WARN),
                                             ("weird", Severity.WARN), (None, Severity.SKIP)])
def test_epp_numeric_and_named_values(value, severity):
    assert judge_epp(value) is severity


# ---- frequency caps ----


# ---- missing and garbage data ----

def test_vm_without_cpufreq_is_skip_with_reason(make_snapshot):
    snap = make_snapshot(fs={f"{CPU}/online": "0-1\n",
                             "/proc/cpuinfo": "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu hypervisor\n\n"})
    for check in (CpuGovernorCheck(), CpuEppCheck(), CpuFrequencyCheck()):
        [finding] = run(check, snap)
        assert finding.severity is Severity.SKIP
        assert finding.summary == "no cpufreq in this VM/container: the hypervisor controls frequency"


def test_empty_snapshot_is_skip(make_snapshot):
    for check in (CpuGovernorCheck(), CpuEppCheck(), CpuFrequencyCheck()):
        [finding] = run(check, make_snapshot())
        assert finding.severity is Severity.SKIP


def test_garbage_values_never_crash(make_snapshot):
    fs = cpufreq_fs(range(3), driver="intel_pstate", governor="powersave", epp="balance_power")
    fs[f"{CPU}/cpu1/cpufreq/cpuinfo_max_freq"] = "lots\n"
    fs[f"{CPU}/cpu1/cpufreq/scaling_max_freq"] = "-5\n"
    fs[f"{CPU}/cpu2/cpufreq/scaling_governor"] = b"\xff\xfe\x00garbage"
    fs[f"{CPU}/intel_pstate/max_perf_pct"] = "a lot\n"
    fs[f"{CPU}/intel_pstate/no_turbo"] = "maybe\n"
    fs["/proc/cpuinfo"] = b"\x00\x01 not cpuinfo"
    snap = make_snapshot(fs=fs)
    for check in (CpuGovernorCheck(), CpuEppCheck(), CpuFrequencyCheck()):
        findings = run(check, snap)
        assert findings and all(f.severity is not Severity.ERROR for f in findings)
    assert run(CpuGovernorCheck(), snap)[0].severity is Severity.WARN  # one CPU's governor is garbage: disagreement


def test_garbled_online_list_falls_back_to_cpu_directories(make_snapshot):
    fs = cpufreq_fs(range(2), driver="acpi-cpufreq", governor="performance")
    fs[f"{CPU}/online"] = "zero to one\n"
    fs[f"{CPU}/cpu1/online"] = "1\n"
    cpu = CpuFacts.gather(open_host(make_snapshot(fs=fs)))
    assert cpu.online == (0, 1)


# ---- composite snapshots ----

def test_12700f_snapshot_powersave_and_balance_power_on_e_cores():
    facts = HostFacts(open_host(SNAPSHOTS / "desktop-12700f-rtx3060"))
    [epp] = CpuEppCheck().run(facts)
    assert epp.severity is Severity.FAIL and "balance_power on CPUs 16-19" in epp.summary
    [gov] = CpuGovernorCheck().run(facts)
    assert gov.severity is Severity.INFO
