"""cpu-clocks — effective clocks measured under load vs what this very CPU should reach (its max and base clock)."""

from __future__ import annotations

from dataclasses import dataclass

from tunehost.check import Check, Fix
from tunehost.bounds import whole_text
from tunehost.cpulist import format_cpu_list
from tunehost.facts.clocks import ClockFacts, ClockReference, clock_reference, throttle_causes
from tunehost.facts.cpu import CpuFacts
from tunehost.facts.measure import SAMPLE_FILE, MeasureFacts
from tunehost.facts.power import PowerFacts
from tunehost.facts.power_limits import PLATFORM_PROFILE, PowerLimitFacts
from tunehost.facts.thermal import ThermalFacts
from tunehost.facts.topology import EFFICIENCY, PERFORMANCE, CpuTopology

CLAMP_RATIO = 0.6     # below 60 % of the base clock under load: clamped, not a normal turbo/thermal variation
BOOST_RATIO = 0.8     # single-core below 80 % of cpuinfo_max_freq *and* below base: the boost is not reached
# all-core below 90 % of base under a CPU-bound load: throttled (base is what the part guarantees on every core at
# its rated power; the probe's own spread is a few %)
THROTTLE_RATIO = 0.9
KIND_LABEL = {PERFORMANCE: "P-cores", EFFICIENCY: "E-cores", None: "cores"}
PHASE_LABEL = {"single": "single-core", "all": "all-core"}
WHY = ("Prompt processing is compute-bound and token generation needs the cores awake: a CPU held far below its "
       "base clock makes llama.cpp several times slower while every setting looks right.")
CLAMP_COMMANDS = (
    "powerprofilesctl set performance",
    "tunehost doctor --check power-limits --check thermals",
    "systemctl suspend",
    "tunehost doctor --check cpu-clocks",
)
CLAMP_FIX = ("The settings allow full speed, so something below them holds the clock. Likely causes: "
             "power-profiles-daemon's balanced/power-saver profile or a firmware power limit (check power-limits; "
             "`sudo systemctl disable --now power-profiles-daemon` rules the daemon out), firmware or the embedded "
             "controller clamping the CPU after a suspend-resume (AMD laptops: replugging the charger, one more "
             "suspend-resume cycle or a reboot clears it; update the BIOS), BD PROCHOT from a worn battery or weak "
             "adapter, or heat (check thermals). Set the performance profile, check power limits and thermals, "
             "then suspend and resume once (or reboot) and measure again.")
THROTTLE_FIX = ("Below base under load the CPU is throttled: a power limit (power-limits names the ruling PL1 and "
                "how to raise it within the cooling), heat (thermals: clean the fans, check the paste), a "
                "scaling_max_freq cap (cpu-frequency), or a power profile other than performance. Fix the cause "
                "named in the summary, then measure again.")


@dataclass(frozen=True)
class Reading:
    """One measured CPU next to what it should reach."""

    cpu: int
    phase: str            # "single" | "all"
    mhz: float
    ref: ClockReference
    kind: str | None


def _mhz(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} MHz"


class CpuClocksCheck(Check):
    id = "cpu-clocks"
    title = "CPU clocks under load"
    judges = "effective clocks measured under load vs the CPU's own maximum (single-core) and base (all-core) clock"

    def run(self, facts):
        measured = facts.get(MeasureFacts)
        if not measured.cpu_mhz_single and not measured.cpu_mhz_all:
            yield self.skip(measured.why_missing("cpu_mhz_all"))
            return
        cpu = facts.get(CpuFacts)
        clocks = facts.get(ClockFacts)
        topo = facts.get(CpuTopology)
        kinds = {c.cpu: c.kind for c in topo.cpus}
        readings = [Reading(n, phase, mhz, clock_reference(cpu, clocks, n), kinds.get(n))
                    for phase, values in (("single", measured.cpu_mhz_single), ("all", measured.cpu_mhz_all))
                    for n, mhz in sorted(values.items())]
        # all-core clocks are judged against the base clock only (all-core turbo varies); single-core against both
        judged = [r for r in readings if r.ref.base_mhz or (r.phase == "single" and r.ref.max_mhz)]
        source = measured.cpu_mhz_source or "unknown"
        evidence = self._evidence(readings, source, cpu, clocks)
        if not judged:
            yield self.skip("clocks were measured, but nothing says what this CPU should reach (no base_frequency, "
                            "acpi_cppc/nominal_freq or rated clock in the model name"
                            + (", no cpuinfo_max_freq" if measured.cpu_mhz_single else "") + ")", evidence)
            return
        clamped = [r for r in judged if r.ref.base_mhz and r.mhz < CLAMP_RATIO * r.ref.base_mhz]
        if clamped:
            yield self._clamped(clamped, cpu, facts.get(PowerLimitFacts), facts.get(PowerFacts), evidence)
            return
        throttled = [r for r in judged if r.phase == "all" and r.ref.base_mhz
                     and r.mhz < THROTTLE_RATIO * r.ref.base_mhz]
        if throttled:
            yield self._throttled(throttled, facts, evidence)
            return
        slow_boost = [r for r in judged if r.phase == "single" and r.ref.max_mhz and r.mhz < BOOST_RATIO * r.ref.max_mhz
                      and (r.ref.base_mhz is None or r.mhz < r.ref.base_mhz)]
        if slow_boost:
            worst = min(slow_boost, key=lambda r: r.mhz / (r.ref.max_mhz or 1))
            yield self.warn(f"single-core boost not reached: CPU {worst.cpu} ran at {_mhz(worst.mhz)} alone under "
                            f"load, of its {_mhz(worst.ref.max_mhz)} maximum"
                            + (f" (base {_mhz(worst.ref.base_mhz)})" if worst.ref.base_mhz else ""), evidence,
                            fix=Fix("A single busy core should boost close to its maximum. Check power-limits and "
                                    "thermals; a boost clamp that appears after a suspend-resume is a firmware bug "
                                    "that a reboot clears (update the BIOS).", CLAMP_COMMANDS[1:]), detail=WHY)
            return
        yield self.ok("clocks under load as expected: " + self._summary(judged), evidence)

    def _clamped(self, clamped: list[Reading], cpu: CpuFacts, limits: PowerLimitFacts, power: PowerFacts,
                 evidence: dict):
        worst = min(clamped, key=lambda r: r.mhz / (r.ref.base_mhz or 1))
        cpus = format_cpu_list(sorted({r.cpu for r in clamped}))
        phases = " and ".join(PHASE_LABEL[p] for p in ("single", "all") if any(r.phase == p for r in clamped))
        summary = (f"CPU held far below its base clock under load: {_mhz(worst.mhz)} of {_mhz(worst.ref.base_mhz)} "
                   f"base on CPU {worst.cpu} ({phases}, CPUs {cpus})")
        explained = _settings_explain(cpu)
        if explained:
            recheck = "tunehost doctor --check cpu-governor --check cpu-epp --check cpu-frequency --check cpu-clocks"
            return self.warn(f"{summary}; {explained}", evidence,
                             fix=Fix("The CPU's own settings hold it low: fix them first (see the check named "
                                     "above), then measure again.", (recheck,)), detail=WHY)
        if limits.on_battery:
            return self.info(f"{summary}, on battery: laptops often clamp on battery; measure again on AC power",
                             evidence)
        said = _settings_say(cpu, limits, power)
        for key, (_, value) in said.items():
            evidence.setdefault(key, value)
        summary += _while(list(said.values()))
        return self.fail(summary, evidence, fix=Fix(CLAMP_FIX, CLAMP_COMMANDS), detail=WHY)

    def _throttled(self, throttled: list[Reading], facts, evidence: dict):
        """All-core below base (not far enough for a clamp): throttling, with what the host shows as its cause."""
        worst = min(throttled, key=lambda r: r.mhz / (r.ref.base_mhz or 1))
        base = worst.ref.base_mhz or 1.0
        cpus = sorted({r.cpu for r in throttled})
        limits, power = facts.get(PowerLimitFacts), facts.get(PowerFacts)
        causes = throttle_causes(facts.get(CpuFacts), cpus, limits, facts.get(ThermalFacts), power.ppd_profile)
        for cause in causes:
            for key, value in cause.evidence.items():
                evidence.setdefault(key, value)
        summary = (f"CPU throttled under an all-core load: {_mhz(worst.mhz)} on CPU {worst.cpu} is "
                   f"{worst.mhz / base:.0%} of its {_mhz(base)} base (CPUs {format_cpu_list(cpus)})")
        summary += ("; held by " + "; ".join(c.what for c in causes) if causes else
                    "; nothing readable explains it (a firmware or embedded-controller limit, BD PROCHOT?)")
        if limits.on_battery:
            return self.info(f"{summary}, on battery: laptops often hold the clock on battery; measure again on AC "
                             "power", evidence)
        commands = []
        if any(c.profile for c in causes):
            commands.append("powerprofilesctl set performance" if power.ppd_profile
                            else f"echo performance | sudo tee {PLATFORM_PROFILE}")
        commands += [CLAMP_COMMANDS[1], "tunehost doctor --check cpu-frequency --check cpu-clocks"]
        return self.warn(summary, evidence, fix=Fix(THROTTLE_FIX, tuple(commands)), detail=WHY)

    def _summary(self, judged: list[Reading]) -> str:
        parts = []
        for kind in (PERFORMANCE, EFFICIENCY, None):
            for phase in ("single", "all"):
                group = [r for r in judged if r.kind == kind and r.phase == phase]
                if not group:
                    continue
                low = min(group, key=lambda r: r.mhz)
                ref = low.ref.max_mhz if phase == "single" else low.ref.base_mhz
                what = "max" if phase == "single" else "base"
                label = f"{PHASE_LABEL[phase]}" + (f" {KIND_LABEL[kind]}" if kind else "")
                parts.append(f"{label} {_mhz(low.mhz)}" + (f" ({what} {_mhz(ref)})" if ref else ""))
        return ", ".join(parts)

    def _evidence(self, readings: list[Reading], source: str, cpu: CpuFacts, clocks: ClockFacts) -> dict:
        evidence: dict[str, object] = {f"{SAMPLE_FILE} cpu_mhz_source": source}
        for phase in ("single", "all"):
            group = [r for r in readings if r.phase == phase]
            if group:
                shown = ", ".join(f"cpu{r.cpu}={r.mhz:.0f}" for r in group[:32])
                more = f", ... ({len(group)} CPUs)" if len(group) > 32 else ""
                evidence[f"{SAMPLE_FILE} cpu_mhz_{phase}"] = shown + more
        evidence.update(cpu.grouped_evidence("cpuinfo_max_freq") if any(c.cpuinfo_max_khz for c in cpu.per_cpu)
                        else cpu.grouped_evidence("scaling_max_freq"))
        evidence.update(cpu.grouped_evidence("base_frequency") if any(c.base_khz for c in cpu.per_cpu) else {})
        evidence.update(clocks.evidence)
        evidence.update(cpu.grouped_evidence("scaling_governor"))
        if any(c.epp for c in cpu.per_cpu):
            evidence.update(cpu.grouped_evidence("energy_performance_preference"))
        evidence.update(cpu.driver_evidence)
        return evidence


def _settings_explain(cpu: CpuFacts) -> str | None:
    """The CPU's own settings that hold the clock low (reported by their own checks), or None."""
    govs = {c.governor for c in cpu.per_cpu if c.governor}
    if cpu.mode in ("passive", "guided", "generic") and govs & {"powersave", "userspace"}:
        return f"the {'/'.join(sorted(govs & {'powersave', 'userspace'}))} governor explains it (see cpu-governor)"
    epps = {c.epp for c in cpu.per_cpu if c.epp}
    if cpu.mode == "active" and "power" in epps:
        return "EPP power explains it (see cpu-epp)"
    low_cap = [c for c in cpu.per_cpu if c.scaling_max_khz and (c.base_khz or cpu.nominal_khz)
               and c.scaling_max_khz < CLAMP_RATIO * (c.base_khz or cpu.nominal_khz or 0)]
    if low_cap:
        return "scaling_max_freq caps it (see cpu-frequency)"
    max_perf = whole_text(cpu.intel_pstate.get("max_perf_pct"), 0, 100)
    if max_perf is not None and max_perf < 60:
        return "intel_pstate max_perf_pct caps it (see cpu-frequency)"
    return None


def _settings_say(cpu: CpuFacts, limits: PowerLimitFacts, power: PowerFacts) -> dict[str, tuple[str, str]]:
    """What the settings say, as {evidence key: (who, value)}: the governor, EPP, platform profile, ppd profile."""
    said: dict[str, tuple[str, str]] = {}
    govs = sorted({c.governor for c in cpu.per_cpu if c.governor})
    if govs:
        said[next(iter(cpu.grouped_evidence("scaling_governor")))] = ("the governor", "/".join(govs))
    epps = sorted({c.epp for c in cpu.per_cpu if c.epp})
    if epps:
        said[next(iter(cpu.grouped_evidence("energy_performance_preference")))] = ("EPP", "/".join(epps))
    if limits.platform_profile:
        said[PLATFORM_PROFILE] = ("platform_profile", limits.platform_profile)
    if power.ppd_profile:
        said["powerprofilesctl get"] = ("power-profiles-daemon", power.ppd_profile)
    return said


def _while(said: list[tuple[str, str]]) -> str:
    """" while governor, EPP and platform_profile all say performance" (or each its own value)."""
    if not said:
        return ""
    values = {v for _, v in said}
    if len(values) == 1:
        whos = [w for w, _ in said]
        names = whos[0] if len(whos) == 1 else ", ".join(whos[:-1]) + " and " + whos[-1]
        return f" while {names} {'says' if len(whos) == 1 else 'all say'} {values.pop()}"
    return " while " + ", ".join(f"{w} says {v}" for w, v in said)
