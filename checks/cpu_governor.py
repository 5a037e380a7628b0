"""cpu-governor — the cpufreq scaling governor on every online CPU."""

from __future__ import annotations

from tunehost.check import Check, Fix, Severity
from tunehost.cpulist import format_cpu_list
from tunehost.facts.cpu import CpuFacts

SET_PERFORMANCE = "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
PERSIST_TEXT = ("Set the performance governor on every CPU (tunehost apply --profile throughput does this and can "
                "roll it back; power-profiles-daemon, tuned or TLP may set it back — see power-manager).")

# governor -> (severity, why) where a cpufreq governor picks the frequency (passive/guided/generic drivers)
GOVERNED = {
    "performance": (Severity.OK, "runs at the highest allowed frequency"),
    "schedutil": (Severity.WARN, "follows scheduler utilisation: clocks drop whenever llama.cpp's threads wait at a "
                                 "barrier or on the GPU, and ramp up again too late"),
    "ondemand": (Severity.WARN, "samples load every few tens of ms and clocks down between bursts"),
    "conservative": (Severity.WARN, "raises the clock step by step: slow to reach full speed"),
    "userspace": (Severity.WARN, "a fixed frequency chosen by some tool (scaling_setspeed)"),
    "powersave": (Severity.FAIL, "pins the CPU at its minimum frequency"),
}
# intel_pstate / amd-pstate-epp in active mode: the driver picks frequencies; the EPP steers it (cpu-epp judges that)
ACTIVE = {
    "performance": (Severity.OK, "the driver runs at the highest performance level"),
    "powersave": (Severity.INFO, "the driver itself scales the clock; the energy-performance preference decides "
                                 "how eagerly (see cpu-epp)"),
}


class CpuGovernorCheck(Check):
    id = "cpu-governor"
    title = "CPU frequency governor"
    judges = "the cpufreq scaling governor on every online CPU (performance for inference)"

    def run(self, facts):
        cpu = facts.get(CpuFacts)
        if not cpu.has_cpufreq:
            yield self.skip(cpu.reason or "no cpufreq information", cpu.evidence)
            return
        table = ACTIVE if cpu.mode == "active" else GOVERNED
        groups = cpu.group("governor")
        evidence = {**cpu.driver_evidence, **cpu.grouped_evidence("scaling_governor")}
        if cpu.missing_cpufreq:
            evidence["CPUs without cpufreq"] = format_cpu_list(cpu.missing_cpufreq)
        if cpu.available_governors:
            evidence[cpu.per_cpu[0].path("scaling_available_governors")] = " ".join(cpu.available_governors)
        judged = {gov: table.get(gov, (Severity.WARN, "an unusual governor")) if gov else
                  (Severity.SKIP, "unreadable") for gov in groups}
        worst_gov = max(groups, key=lambda g: judged[g][0].rank)
        severity, why = judged[worst_gov]
        driver = f"{cpu.driver} in {cpu.mode} mode" if cpu.mode in ("active", "passive", "guided") else cpu.driver
        if severity is Severity.SKIP:
            yield self.skip(f"cannot read scaling_governor on CPUs {format_cpu_list(groups[None])}", evidence)
            return
        fix = Fix(PERSIST_TEXT, (SET_PERFORMANCE,))
        if cpu.available_governors and "performance" not in cpu.available_governors:
            fix = Fix(f"The {cpu.driver} driver offers no performance governor "
                      f"({' '.join(cpu.available_governors)}); choose the fastest it has.", ())
        detail = ("Token generation runs all threads in lockstep and stalls on memory; a governor that clocks down "
                  "between bursts lengthens every step.")
        if len(groups) > 1:
            parts = "; ".join(f"{g or '(unreadable)'} on CPUs {format_cpu_list(m)}" for g, m in groups.items())
            summary = f"CPUs disagree on the governor under {driver}: {parts}"
            if severity is Severity.OK:
                severity = Severity.WARN
            yield self.finding(max(severity, Severity.WARN, key=lambda s: s.rank), summary, evidence, fix,
                               f"{worst_gov}: {why}. The slowest CPU paces every step of llama.cpp's thread pool.")
            return
        gov = worst_gov
        n = len(groups[gov])
        if severity is Severity.OK:
            yield self.ok(f"governor {gov} on all {n} CPUs under {driver}", evidence)
        elif severity is Severity.INFO:
            yield self.info(f"governor {gov} on all {n} CPUs under {driver}: {why}", evidence, fix=fix)
        else:
            yield self.finding(severity, f"governor {gov} on all {n} CPUs under {driver}: {why}", evidence, fix,
                               detail)
