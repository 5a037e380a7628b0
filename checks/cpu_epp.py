"""cpu-epp — energy_performance_preference on every online CPU (intel_pstate / amd-pstate in active mode)."""

from __future__ import annotations

from tunehost.check import Check, Fix, Severity
from tunehost.cpulist import format_cpu_list
from tunehost.facts.cpu import CpuFacts

SET_EPP = "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
NAMED = {
    "performance": Severity.OK,
    "balance_performance": Severity.WARN,
    "default": Severity.WARN,  # the firmware's value, usually balance_performance
    "balance_power": Severity.FAIL,
    "power": Severity.FAIL,
}
# numeric EPP (HWP scale 0-255: 0 performance, 128 balance_performance, 192 balance_power, 255 power)
NUMERIC_FAIL_FROM = 192


def judge_epp(value: str | None) -> Severity:
    """The severity of one CPU's EPP: named values, or the raw 0-255 number intel_pstate shows for custom values."""
    if value is None:
        return Severity.SKIP
    if value in NAMED:
        return NAMED[value]
    try:
        number = int(value, 0)
    except ValueError:
        return Severity.WARN
    if number <= 0:
        return Severity.OK
    return Severity.FAIL if number >= NUMERIC_FAIL_FROM else Severity.WARN


class CpuEppCheck(Check):
    id = "cpu-epp"
    title = "CPU energy-performance preference"
    judges = "energy_performance_preference on every online CPU (intel_pstate / amd-pstate active mode)"

    def run(self, facts):
        cpu = facts.get(CpuFacts)
        if not cpu.has_cpufreq:
            yield self.skip(cpu.reason or "no cpufreq information", cpu.evidence)
            return
        if cpu.mode != "active":
            mode = f"{cpu.mode} mode" if cpu.mode in ("passive", "guided") else "no EPP"
            yield self.skip(f"EPP does not apply: {cpu.driver} ({mode}) leaves the frequency to the governor "
                            "(see cpu-governor)", cpu.driver_evidence)
            return
        with_epp = [c for c in cpu.per_cpu if c.epp is not None]
        if not with_epp:
            yield self.skip(f"{cpu.driver} is active but exposes no energy_performance_preference "
                            "(no HWP/CPPC EPP support): the governor alone decides", cpu.driver_evidence)
            return
        groups = cpu.group("epp", with_epp)
        evidence = {**cpu.driver_evidence, **cpu.grouped_evidence("scaling_governor"),
                    **cpu.grouped_evidence("energy_performance_preference", with_epp)}
        without = [c.cpu for c in cpu.per_cpu if c.epp is None]
        if without:
            evidence["CPUs without energy_performance_preference"] = format_cpu_list(without)
        judged = {value: judge_epp(value) for value in groups}
        worst = max(groups, key=lambda v: judged[v].rank)
        severity = judged[worst]
        fix = Fix("Set EPP to performance on every CPU (or select the performance governor, which forces it; "
                  "with power-profiles-daemon, `powerprofilesctl set performance` does it and keeps it).",
                  (SET_EPP,))
        detail = ("With the powersave governor the hardware picks the clock itself, biased by EPP: anything but "
                  "performance lets it run lower clocks while llama.cpp's threads are memory-bound, which costs "
                  "token-generation speed.")
        if len(groups) > 1:
            parts = "; ".join(f"{v} on CPUs {format_cpu_list(m)}" for v, m in groups.items())
            yield self.finding(max(severity, Severity.WARN, key=lambda s: s.rank),
                               f"CPUs disagree on EPP: {parts}", evidence, fix, detail)
            return
        n = len(groups[worst])
        if severity is Severity.OK:
            yield self.ok(f"EPP {worst} on all {n} CPUs", evidence)
        else:
            yield self.finding(severity, f"EPP {worst} on all {n} CPUs: the CPU favours saving energy over speed",
                               evidence, fix, detail)
