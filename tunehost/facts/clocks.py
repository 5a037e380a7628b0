"""Clock reference facts: what each CPU *should* reach, to judge the clocks measured under load (cpu-clocks).

    refs = facts.get(ClockFacts)
    refs.cppc[2]                 # Cppc(nominal_mhz=4001, nominal_perf=149, highest_perf=232, reference_perf=149)
    clock_reference(cpu, refs, 2)  # ClockReference(cpu=2, max_mhz=5263.1, base_mhz=4001.0, base_source=...)

Sources per CPU, all world-readable: cpufreq/cpuinfo_max_freq (the single-core ceiling), cpufreq/base_frequency
(intel_pstate) or acpi_cppc/nominal_freq (AMD, CPPC servers: the guaranteed all-core clock), else the "@ 2.40GHz" of
the model name. ACPI CPPC (Linux Documentation/admin-guide/acpi/cppc_sysfs.rst): highest_perf, nominal_perf,
reference_perf and nominal_freq (MHz); feedback_ctrs "ref:<n> del:<n>" counts reference and delivered cycles, so the
delivered clock over an interval is reference_perf * d(del)/d(ref) in perf units, scaled by nominal_freq/nominal_perf.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.bounds import whole_text
from tunehost.facts.cpu import CPU_ROOT, CpuFacts
from tunehost.facts.power_limits import PLATFORM_PROFILE
from tunehost.facts.thermal import throttle_evidence

if TYPE_CHECKING:
    from tunehost.facts.power_limits import PowerLimitFacts
    from tunehost.facts.thermal import ThermalFacts
    from tunehost.host import Host

CPPC_FILES = ("nominal_freq", "nominal_perf", "highest_perf", "reference_perf")
MAX_PERF_UNITS = 1 << 20
MAX_REFERENCE_MHZ = 20_000
FEEDBACK = re.compile(r"ref:\s*([0-9]{1,19})\s+del:\s*([0-9]{1,19})\b")


def cppc_dir(cpu: int) -> str:
    return f"{CPU_ROOT}/cpu{cpu}/acpi_cppc"


@dataclass(frozen=True)
class Cppc:
    """One CPU's ACPI CPPC statics (None: absent or garbage)."""

    nominal_mhz: int | None = None
    nominal_perf: int | None = None
    highest_perf: int | None = None
    reference_perf: int | None = None


@dataclass(frozen=True)
class ClockReference:
    """What one CPU should reach: max (single-core ceiling) and base (guaranteed all-core), in MHz."""

    cpu: int
    max_mhz: float | None
    base_mhz: float | None
    base_source: str | None    # the file (or "model name") the base came from


@dataclass(frozen=True)
class ClockFacts:
    cppc: Mapping[int, Cppc] = field(default_factory=dict)   # online CPUs with an acpi_cppc directory
    evidence: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def gather(cls, host: "Host") -> "ClockFacts":
        cpu = CpuFacts.gather(host)
        cppc: dict[int, Cppc] = {}
        evidence: dict[str, str] = {}
        online = list(cpu.online or ())
        if online and host.files.is_dir(cppc_dir(online[0])):  # all CPUs have acpi_cppc or none do
            for n in online:
                values = read_cppc(host, n)
                if values is not None:
                    cppc[n] = values
        nominal = {c.nominal_mhz for c in cppc.values() if c.nominal_mhz}
        if nominal:
            evidence[f"{CPU_ROOT}/cpu*/acpi_cppc/nominal_freq"] = ", ".join(str(v) for v in sorted(nominal))
        return cls(cppc, evidence)


def read_cppc(host: "Host", cpu: int) -> Cppc | None:
    values: dict[str, int | None] = {}
    for name in CPPC_FILES:
        raw = host.files.read_value(f"{cppc_dir(cpu)}/{name}")
        number = whole_text(raw)
        limit = MAX_REFERENCE_MHZ if name == "nominal_freq" else MAX_PERF_UNITS
        values[name] = number if number and number <= limit else None
    if not any(values.values()):
        return None
    return Cppc(values["nominal_freq"], values["nominal_perf"], values["highest_perf"], values["reference_perf"])


def parse_feedback(text: str | None) -> tuple[int, int] | None:
    """acpi_cppc/feedback_ctrs ("ref:342156 del:279001") -> (reference, delivered) counts."""
    match = FEEDBACK.search(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def feedback_mhz(before: tuple[int, int], after: tuple[int, int], cppc: Cppc) -> float | None:
    """Delivered MHz over an interval from two feedback_ctrs readings; None when the counters did not advance or
    the CPU's nominal frequency is unknown."""
    d_ref, d_del = after[0] - before[0], after[1] - before[1]
    if d_ref <= 0 or d_del < 0 or not cppc.nominal_mhz:
        return None
    # counters tick at reference_perf and delivered perf; nominal_freq/nominal_perf turns perf into MHz
    scale = (cppc.reference_perf / cppc.nominal_perf) if cppc.reference_perf and cppc.nominal_perf else 1.0
    return cppc.nominal_mhz * scale * d_del / d_ref


def clock_reference(cpu_facts: CpuFacts, clocks: ClockFacts, cpu: int) -> ClockReference:
    freq = next((c for c in cpu_facts.per_cpu if c.cpu == cpu), None)
    # the hardware ceiling; a dump without it still has the allowed ceiling, scaling_max_freq
    top = (freq.cpuinfo_max_khz or freq.scaling_max_khz) if freq else None
    max_mhz = top / 1000 if top else None
    if freq and freq.base_khz:
        return ClockReference(cpu, max_mhz, freq.base_khz / 1000, freq.path("base_frequency"))
    cppc = clocks.cppc.get(cpu)
    if cppc and cppc.nominal_mhz:
        return ClockReference(cpu, max_mhz, float(cppc.nominal_mhz), f"{cppc_dir(cpu)}/nominal_freq")
    nominal = cpu_facts.nominal_khz
    if nominal:
        return ClockReference(cpu, max_mhz, nominal / 1000, "/proc/cpuinfo model name")
    return ClockReference(cpu, max_mhz, None, None)


# --- why a CPU runs below its base clock under load ------------------------------------------------------------

THERMAL_MARGIN_C = 5.0   # a CPU sensor within this of its critical limit is being held back by heat
SLOW_PROFILES = {"low-power", "quiet", "cool", "balanced", "balanced-power", "power-saver"}


@dataclass(frozen=True)
class ThrottleCause:
    """One readable reason for clocks below base under load: what it is (one phrase) and where it was read."""

    what: str                                        # "the RAPL PL1 of 15 W (MMIO)"
    evidence: Mapping[str, str] = field(default_factory=dict)
    profile: bool = False                            # fixed by choosing the performance profile


def throttle_causes(cpu: CpuFacts, cpus: list[int], limits: "PowerLimitFacts", thermal: "ThermalFacts",
                    ppd_profile: str | None) -> tuple[ThrottleCause, ...]:
    """What can hold `cpus` below their base clock under load, as far as the host shows it: a scaling_max_freq
    below base, the ruling RAPL PL1, a CPU sensor at its thermal limit (or thermal-throttle counters), a
    platform_profile or power-profiles-daemon profile other than performance. () when nothing readable says."""
    found: list[ThrottleCause] = []
    capped = [c for c in cpu.per_cpu if c.cpu in cpus and c.scaling_max_khz and (c.base_khz or cpu.nominal_khz)
              and c.scaling_max_khz < (c.base_khz or cpu.nominal_khz or 0)]
    if capped:
        top = max(c.scaling_max_khz or 0 for c in capped)
        found.append(ThrottleCause(f"scaling_max_freq caps it at {top / 1000:.0f} MHz",
                                   cpu.grouped_evidence("scaling_max_freq", capped)))
    ruling = limits.ruling_limit()
    if ruling is not None:
        zone, pl1 = ruling
        watts = (pl1.limit_uw or 0) / 1e6
        rated = f", below the rated {pl1.max_uw / 1e6:g} W" if pl1.max_uw and (pl1.limit_uw or 0) < pl1.max_uw else ""
        found.append(ThrottleCause(f"the package power limit PL1 of {watts:g} W ({zone.kind}{rated})",
                                   {f"{zone.path}/constraint_{pl1.index}_power_limit_uw": str(pl1.limit_uw)}))
    hot = [r for r in thermal.cpu if r.value_c is not None and r.crit_c is not None
           and r.value_c >= r.crit_c - THERMAL_MARGIN_C]
    if hot:
        worst = max(hot, key=lambda r: r.value_c or 0)
        found.append(ThrottleCause(f"heat: {worst.chip} {worst.label} at {worst.value_c:.0f} °C of its "
                                   f"{worst.crit_c:.0f} °C limit", {worst.source or worst.chip: worst.raw}))
    else:
        counters = throttle_evidence(thermal.throttle)
        if counters:
            found.append(ThrottleCause("heat: thermal-throttle counters have counted since boot", counters))
    if limits.platform_profile in SLOW_PROFILES:
        found.append(ThrottleCause(f"platform_profile {limits.platform_profile}",
                                   {PLATFORM_PROFILE: limits.platform_profile}, profile=True))
    if ppd_profile in SLOW_PROFILES:
        found.append(ThrottleCause(f"the power-profiles-daemon profile {ppd_profile}",
                                   {"powerprofilesctl get": ppd_profile}, profile=True))
    return tuple(found)
