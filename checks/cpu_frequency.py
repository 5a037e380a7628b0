"""cpu-frequency — turbo/boost enabled, and no CPU's maximum frequency capped."""

from __future__ import annotations

from tunehost.bounds import whole_text
from tunehost.check import Check, Fix
from tunehost.cpulist import format_cpu_list
from tunehost.facts.cpu import BOOST, INTEL_PSTATE, CpuFacts, CpuFreq

ENABLE_TURBO = f"echo 0 | sudo tee {INTEL_PSTATE}/no_turbo"
ENABLE_BOOST = f"echo 1 | sudo tee {BOOST}"
MAX_PERF_100 = f"echo 100 | sudo tee {INTEL_PSTATE}/max_perf_pct"
UNCAP = ("for d in /sys/devices/system/cpu/cpu*/cpufreq; do sudo tee $d/scaling_max_freq < $d/cpuinfo_max_freq; "
         "done")
CAP_TOLERANCE = 0.98  # scaling_max_freq within 2 % of cpuinfo_max_freq is not a cap (rounding to a P-state)
WHY = ("Token generation speed follows the core clock as well as memory bandwidth: a cap or a disabled turbo "
       "shows up directly as fewer tokens per second, most of all in prompt processing.")


def mhz(khz: int | None) -> str:
    return "?" if khz is None else f"{khz / 1000:.0f} MHz"


class CpuFrequencyCheck(Check):
    id = "cpu-frequency"
    title = "CPU maximum frequency and turbo"
    judges = "turbo/boost enabled and no CPU's maximum frequency capped (scaling_max_freq, max_perf_pct)"

    def run(self, facts):
        cpu = facts.get(CpuFacts)
        if not cpu.has_cpufreq:
            yield self.skip(cpu.reason or "no cpufreq information", cpu.evidence)
            return
        findings = []
        turbo_off = False
        no_turbo = cpu.intel_pstate.get("no_turbo")
        if no_turbo == "1":
            turbo_off = True
            findings.append(self.fail("turbo is disabled (intel_pstate/no_turbo = 1)",
                                      {f"{INTEL_PSTATE}/no_turbo": no_turbo, **cpu.driver_evidence},
                                      fix=Fix("Enable turbo (TLP's CPU_BOOST_ON_AC/BAT or a BIOS option may turn it "
                                              "off again).", (ENABLE_TURBO,)), detail=WHY))
        if cpu.boost == "0":
            turbo_off = True
            findings.append(self.fail("CPU boost is disabled (cpufreq/boost = 0)",
                                      {BOOST: cpu.boost, **cpu.driver_evidence},
                                      fix=Fix("Enable boost (TLP's CPU_BOOST_ON_AC/BAT, auto-cpufreq or a BIOS "
                                              "option may turn it off again).", (ENABLE_BOOST,)), detail=WHY))
        max_pct = _int(cpu.intel_pstate.get("max_perf_pct"))
        if max_pct is not None and max_pct < 100:
            findings.append(self.warn(f"intel_pstate caps performance at {max_pct} % (max_perf_pct)",
                                      {f"{INTEL_PSTATE}/max_perf_pct": max_pct,
                                       f"{INTEL_PSTATE}/min_perf_pct": cpu.intel_pstate.get("min_perf_pct")},
                                      fix=Fix("Allow 100 % (TLP's CPU_MAX_PERF_ON_AC/BAT sets this too).",
                                              (MAX_PERF_100,)), detail=WHY))
        findings.extend(self._below_rated(cpu))
        findings.extend(self._capped(cpu, turbo_off))
        if findings:
            yield from findings
            return
        known = [c for c in cpu.per_cpu if c.cpuinfo_max_khz and c.scaling_max_khz]
        if not known and no_turbo is None and cpu.boost is None:
            yield self.skip("no frequency limits readable (cpuinfo_max_freq/scaling_max_freq, boost)",
                            cpu.driver_evidence)
            return
        evidence = {**cpu.driver_evidence, **cpu.grouped_evidence("scaling_max_freq"),
                    **cpu.grouped_evidence("cpuinfo_max_freq")}
        if no_turbo is not None:
            evidence[f"{INTEL_PSTATE}/no_turbo"] = no_turbo
        if cpu.boost is not None:
            evidence[BOOST] = cpu.boost
        top = max((c.cpuinfo_max_khz for c in cpu.per_cpu if c.cpuinfo_max_khz), default=None)
        turbo = "turbo on" if no_turbo == "0" or cpu.boost == "1" else _acpi_turbo_marker(cpu)
        summary = f"maximum frequency not capped (up to {mhz(top)})" if known else "frequency limits not capped"
        yield self.ok(summary + (f", {turbo}" if turbo else ""), evidence)

    def _below_rated(self, cpu: CpuFacts):
        """cpuinfo_max_freq below the CPU's own rated base clock: a platform/firmware clamp (BD PROCHOT, a weak
        power adapter, a TLP/BIOS limit), not something a governor can undo."""
        nominal = cpu.nominal_khz
        low = [c for c in cpu.per_cpu if c.cpuinfo_max_khz and (c.base_khz or nominal)
               and c.cpuinfo_max_khz < (c.base_khz or nominal) * CAP_TOLERANCE]  # type: ignore[operator]
        if not low:
            return
        worst = min(low, key=lambda c: c.cpuinfo_max_khz or 0)
        rated = worst.base_khz or nominal
        evidence = {**cpu.driver_evidence, **cpu.grouped_evidence("cpuinfo_max_freq"),
                    **cpu.grouped_evidence("scaling_max_freq")}
        if worst.base_khz:
            evidence.update(cpu.grouped_evidence("base_frequency"))
        elif cpu.model_name:
            evidence["/proc/cpuinfo model name"] = cpu.model_name
        yield self.fail(f"CPUs {format_cpu_list(c.cpu for c in low)} top out at {mhz(worst.cpuinfo_max_khz)}, "
                        f"below the rated {mhz(rated)} base clock", evidence,
                        fix=Fix("The platform clamps the CPU below its base clock: check the power adapter/battery "
                                "(BD PROCHOT), BIOS power limits, thermals, and TLP/auto-cpufreq limits; restarting "
                                "TLP with its limits removed lifts a TLP clamp.", ("sudo tlp start",)
                                if cpu.intel_pstate or cpu.boost is not None else ()), detail=WHY)

    def _capped(self, cpu: CpuFacts, turbo_off: bool):
        capped: list[CpuFreq] = []
        for c in cpu.per_cpu:
            if not (c.scaling_max_khz and c.cpuinfo_max_khz):
                continue
            if c.scaling_max_khz < c.cpuinfo_max_khz * CAP_TOLERANCE:
                rated = c.base_khz or cpu.nominal_khz
                if turbo_off and (rated is None or c.scaling_max_khz >= rated * CAP_TOLERANCE):
                    continue  # just the turbo range, reported above
                capped.append(c)
        if not capped:
            return
        nominal = cpu.nominal_khz
        below_base = [c for c in capped if (c.base_khz or nominal) and
                      c.scaling_max_khz < (c.base_khz or nominal) * CAP_TOLERANCE]  # type: ignore[operator]
        groups: dict[tuple[int | None, int | None], list[int]] = {}
        for c in capped:
            groups.setdefault((c.scaling_max_khz, c.cpuinfo_max_khz), []).append(c.cpu)
        parts = "; ".join(f"CPUs {format_cpu_list(m)} at {mhz(s)} of {mhz(i)}" for (s, i), m in groups.items())
        evidence = {**cpu.driver_evidence, **cpu.grouped_evidence("scaling_max_freq"),
                    **cpu.grouped_evidence("cpuinfo_max_freq")}
        fix = Fix("Raise scaling_max_freq back to cpuinfo_max_freq on every CPU (and find what set it: TLP's "
                  "CPU_SCALING_MAX_FREQ_ON_AC/BAT, auto-cpufreq, cpupower frequency-set -u, a tuned profile).", (UNCAP,))
        if below_base:
            yield self.fail(f"maximum frequency capped below the base clock: {parts}", evidence, fix=fix, detail=WHY)
        else:
            yield self.warn(f"maximum frequency capped below the CPU's maximum: {parts}", evidence, fix=fix,
                            detail=WHY)


def _int(value: str | None) -> int | None:
    return whole_text(value, 0, 100)  # a percentage of the CPU's maximum


def _acpi_turbo_marker(cpu: CpuFacts) -> str | None:
    """acpi-cpufreq lists turbo as base + 1 MHz (e.g. 2701000 kHz for a 2.7 GHz Xeon): turbo is available, and its
    real ceiling is not visible in sysfs."""
    if cpu.driver != "acpi-cpufreq":
        return None
    tops = {c.cpuinfo_max_khz for c in cpu.per_cpu if c.cpuinfo_max_khz}
    if tops and all(t % 100_000 == 1000 for t in tops):
        return "turbo available (acpi-cpufreq's base + 1 MHz marker; the turbo ceiling itself is not shown)"
    return None
