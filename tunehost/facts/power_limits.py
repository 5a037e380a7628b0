"""Power-limit facts: the ACPI platform profile, the RAPL package power limits (MSR and MMIO zones) and AC/battery.

    limits = facts.get(PowerLimitFacts)
    limits.platform_profile        # "balanced" (None: no platform_profile on this machine)
    limits.profile_choices         # ("low-power", "balanced", "performance")
    limits.package_zones()         # [RaplZone(path="/sys/class/powercap/intel-rapl:0", name="package-0", ...)]
    limits.ruling_limit("long_term")   # (RaplZone, RaplConstraint): the lowest enabled PL1 — the one that rules
    limits.on_battery              # True / False / None (unknown)

Every file here is world-readable (no root): /sys/firmware/acpi/platform_profile(+_choices) and, per powercap zone,
`name`, `enabled`, `constraint_K_name`, `constraint_K_power_limit_uw`, `constraint_K_max_power_uw` (only `energy_uj`
became root-only, in 5.10). intel-rapl:N are the MSR zones, intel-rapl-mmio:N the MMIO copy that firmware, an EC or
DPTF may program separately: the CPU obeys the lower of the two. Sub-zones (intel-rapl:0:0 core, uncore, dram) are
not read: the package limit is the one that clamps clocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.bounds import whole_text

if TYPE_CHECKING:
    from tunehost.host import Host

PLATFORM_PROFILE = "/sys/firmware/acpi/platform_profile"
PLATFORM_PROFILE_CHOICES = "/sys/firmware/acpi/platform_profile_choices"
POWERCAP = "/sys/class/powercap"
POWER_SUPPLY = "/sys/class/power_supply"
RAPL_CONTROLS = ("intel-rapl", "intel-rapl-mmio")  # MSR and MMIO package zones
ZONE_DIR = re.compile(r"(intel-rapl|intel-rapl-mmio):([0-9]{1,4})")  # top-level zones only, not intel-rapl:0:0
MAX_CONSTRAINTS = 8
MAX_POWER_UW = 100_000_000_000  # 100 kW: no CPU package limit is larger; a larger figure is garbage
LONG_TERM, SHORT_TERM, PEAK = "long_term", "short_term", "peak_power"
LIMIT_LABELS = {LONG_TERM: "PL1", SHORT_TERM: "PL2", PEAK: "PL3"}
PROFILE_WORD = re.compile(r"[a-z][a-z0-9-]{0,39}")
ZONE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
ADAPTER_TYPES = ("Mains", "USB")


@dataclass(frozen=True)
class RaplConstraint:
    index: int
    name: str                   # "long_term" (PL1), "short_term" (PL2), "peak_power" (PL3)
    limit_uw: int | None        # constraint_K_power_limit_uw (None: absent or garbage)
    max_uw: int | None          # constraint_K_max_power_uw: the part's rated power (TDP for long_term); 0 = unknown

    @property
    def label(self) -> str:
        return LIMIT_LABELS.get(self.name, self.name)


@dataclass(frozen=True)
class RaplZone:
    path: str                   # /sys/class/powercap/intel-rapl:0
    control: str                # "intel-rapl" (MSR) or "intel-rapl-mmio"
    name: str | None            # "package-0", "psys", ...
    enabled: bool | None
    constraints: tuple[RaplConstraint, ...] = ()

    @property
    def is_package(self) -> bool:
        return bool(self.name and self.name.startswith("package"))

    @property
    def kind(self) -> str:
        return "MMIO" if self.control == "intel-rapl-mmio" else "MSR"

    def constraint(self, name: str) -> RaplConstraint | None:
        return next((c for c in self.constraints if c.name == name), None)

    def evidence(self) -> dict[str, str]:
        out: dict[str, str] = {f"{self.path}/name": self.name or "(absent)"}
        if self.enabled is not None:
            out[f"{self.path}/enabled"] = "1" if self.enabled else "0"
        for c in self.constraints:
            base = f"{self.path}/constraint_{c.index}"
            out[f"{base}_name"] = c.name
            out[f"{base}_power_limit_uw"] = "(absent)" if c.limit_uw is None else str(c.limit_uw)
            if c.max_uw is not None:
                out[f"{base}_max_power_uw"] = str(c.max_uw)
        return out


@dataclass(frozen=True)
class PowerLimitFacts:
    platform_profile: str | None = None
    profile_choices: tuple[str, ...] = ()
    profile_problem: str | None = None      # platform_profile present but not one readable word
    zones: tuple[RaplZone, ...] = ()
    on_battery: bool | None = None          # None: no adapter reported (desktops often have none)
    evidence: Mapping[str, str] = field(default_factory=dict)  # platform_profile and power-supply files as read

    @classmethod
    def gather(cls, host: "Host") -> "PowerLimitFacts":
        files = host.files
        evidence: dict[str, str] = {}
        profile = problem = None
        raw = files.read_value(PLATFORM_PROFILE)
        if raw is not None:
            if PROFILE_WORD.fullmatch(raw):
                profile = raw
                evidence[PLATFORM_PROFILE] = raw
            else:
                problem = f"{PLATFORM_PROFILE} holds no profile name"
        choices_raw = files.read_value(PLATFORM_PROFILE_CHOICES) or ""
        choices = tuple(w for w in choices_raw.split() if PROFILE_WORD.fullmatch(w))[:16]
        if choices:
            evidence[PLATFORM_PROFILE_CHOICES] = " ".join(choices)
        zones = tuple(z for z in (_zone(host, name) for name in files.listdir(POWERCAP) if ZONE_DIR.fullmatch(name))
                      if z is not None)
        on_battery = _on_battery(host, evidence)
        return cls(profile, choices, problem, zones, on_battery, evidence)

    def package_zones(self) -> list[RaplZone]:
        return [z for z in self.zones if z.is_package]

    def ruling_limit(self, name: str = LONG_TERM) -> tuple[RaplZone, RaplConstraint] | None:
        """The lowest enabled package limit of that name over MSR and MMIO zones: the one the CPU obeys."""
        found = [(z, c) for z in self.package_zones() if z.enabled is not False
                 for c in [z.constraint(name)] if c is not None and c.limit_uw]
        return min(found, key=lambda zc: zc[1].limit_uw or 0) if found else None


def _uw(text: str | None) -> int | None:
    return whole_text(text, 0, MAX_POWER_UW)


def _zone(host: "Host", dirname: str) -> RaplZone | None:
    files = host.files
    path = f"{POWERCAP}/{dirname}"
    name = files.read_value(f"{path}/name")
    name = name if name and ZONE_NAME.fullmatch(name) else None
    enabled_raw = files.read_value(f"{path}/enabled")
    enabled = {"1": True, "0": False}.get(enabled_raw or "")
    constraints = []
    for k in range(MAX_CONSTRAINTS):
        cname = files.read_value(f"{path}/constraint_{k}_name")
        if cname is None:
            break
        if not ZONE_NAME.fullmatch(cname):
            continue
        constraints.append(RaplConstraint(k, cname, _uw(files.read_value(f"{path}/constraint_{k}_power_limit_uw")),
                                          _uw(files.read_value(f"{path}/constraint_{k}_max_power_uw"))))
    if name is None and not constraints:
        return None
    control = dirname.rpartition(":")[0]  # "intel-rapl" or "intel-rapl-mmio" (the name matched ZONE_DIR)
    return RaplZone(path, control, name, enabled, tuple(constraints))


def _on_battery(host: "Host", evidence: dict[str, str]) -> bool | None:
    """False when an AC adapter (Mains, or a USB-C charger) is online, True when adapters exist and none is online
    while a battery is present, None when nothing says."""
    files = host.files
    adapters: list[tuple[str, str]] = []
    battery = False
    for name in files.listdir(POWER_SUPPLY)[:32]:
        kind = files.read_value(f"{POWER_SUPPLY}/{name}/type")
        if kind == "Battery":
            battery = True
        elif kind in ADAPTER_TYPES:
            online = files.read_value(f"{POWER_SUPPLY}/{name}/online")
            if online in ("0", "1"):
                adapters.append((f"{POWER_SUPPLY}/{name}/online", online))
    if not adapters:
        return None
    for path, online in adapters:
        evidence[path] = online
    if any(online == "1" for _, online in adapters):
        return False
    return True if battery else None
