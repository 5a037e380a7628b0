"""Thermal facts: CPU package/core temperatures (coretemp, k10temp, zenpower), other sensors, thermal zones and the
per-CPU thermal_throttle counters. GPU temperatures and clock-event reasons live in GpuFacts.

Sources: /sys/class/hwmon/hwmon*/{name,temp*_input,temp*_label,temp*_max,temp*_crit} first; when hwmon shows no CPU
sensor, the `sensors` command (lm-sensors); /sys/class/thermal/thermal_zone*/{type,temp};
/sys/devices/system/cpu/cpu*/thermal_throttle/{core,package}_throttle_count. gather() never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from tunehost.parsers.sensors import parse_sensors

if TYPE_CHECKING:
    from tunehost.host import Host

HWMON = "/sys/class/hwmon"
THERMAL = "/sys/class/thermal"
CPU_DIR = "/sys/devices/system/cpu"
CPU_DRIVERS = ("coretemp", "k10temp", "zenpower", "cpu_thermal")
SENSORS = ("sensors",)


@dataclass(frozen=True)
class TempReading:
    chip: str                  # the driver: coretemp, k10temp, acpitz, nvme, amdgpu, ...
    label: str                 # "Package id 0", "Core 4", "Tctl", "Tccd1", "temp1"
    value_c: float | None
    high_c: float | None = None
    crit_c: float | None = None
    source: str = ""           # the sysfs file or "sensors"
    raw: str = ""              # the raw value as read (millidegrees, or the sensors line)


@dataclass(frozen=True)
class ThrottleCount:
    cpu: int
    core: int | None
    package: int | None


@dataclass(frozen=True)
class ThermalFacts:
    cpu: tuple[TempReading, ...] = ()          # CPU package/core/Tctl/Tccd readings
    other: tuple[TempReading, ...] = ()        # everything else worth showing (nvme, wifi, super-I/O, ...)
    bogus: tuple[TempReading, ...] = ()        # ignored: ACPI zones reporting nonsense (crit 20.8 C, 0 C, 127 C)
    zones: tuple[TempReading, ...] = ()        # /sys/class/thermal zones
    throttle: tuple[ThrottleCount, ...] = ()   # Intel per-CPU counters since boot
    source: str | None = None                  # "hwmon" | "sensors" | None
    note: str | None = None                    # why something is unknown

    @property
    def cpu_driver(self) -> str | None:
        return self.cpu[0].chip if self.cpu else None

    @classmethod
    def gather(cls, host: "Host") -> "ThermalFacts":
        try:
            return _gather(host)
        except Exception as exc:  # facts never raise
            return cls(note=f"thermal facts could not be gathered: {exc.__class__.__name__}: {exc}")


def is_bogus(reading: TempReading) -> bool:
    """ACPI zones that cannot be a real temperature: a critical trip below 50 C, or a reading outside 5..125 C."""
    if reading.chip != "acpitz" and not reading.chip.startswith("acpi"):
        return False
    if reading.crit_c is not None and reading.crit_c < 50:
        return True
    return reading.value_c is not None and not 5 <= reading.value_c <= 125


def _gather(host: "Host") -> ThermalFacts:
    readings = hwmon_readings(host)
    source = "hwmon" if readings else None
    note = None
    if not any(r.chip in CPU_DRIVERS for r in readings):
        result = host.run(list(SENSORS))
        if result is not None and result.stdout.strip():
            parsed = _from_sensors(result.stdout)
            if parsed:
                readings, source = parsed, "sensors"
        elif result is None:
            note = "the sensors command (lm-sensors) is not available"
    cpu = tuple(r for r in readings if r.chip in CPU_DRIVERS)
    bogus = tuple(r for r in readings if is_bogus(r))
    other = tuple(r for r in readings if r.chip not in CPU_DRIVERS and r not in bogus)
    return ThermalFacts(cpu, other, bogus, _zones(host), throttle_counts(host), source, note)


def _milli(value: int | None) -> float | None:
    return value / 1000 if value is not None else None


def hwmon_readings(host: "Host", directory: str = HWMON) -> list[TempReading]:
    """Every hwmon temperature under `directory` (sysfs reads, no command): /sys/class/hwmon for the thermal facts
    and the bench watcher, a GPU's own <device>/hwmon for the GPU facts."""
    found: list[TempReading] = []
    for hw in host.files.listdir(directory):
        base = f"{directory}/{hw}"
        chip = host.files.read_value(f"{base}/name")
        if not chip:
            continue
        inputs = sorted((int(m.group(1)), n) for n in host.files.listdir(base)
                        if (m := re.fullmatch(r"temp(\d+)_input", n)))
        for num, name in inputs:
            raw = host.files.read_value(f"{base}/{name}")
            try:
                value = int(raw) / 1000 if raw is not None else None
            except ValueError:
                value = None
            if value is None:
                continue
            label = host.files.read_value(f"{base}/temp{num}_label") or f"temp{num}"
            found.append(TempReading(chip, label, value, _milli(host.files.read_int(f"{base}/temp{num}_max")),
                                     _milli(host.files.read_int(f"{base}/temp{num}_crit")), f"{base}/{name}", raw))
    return found


def _from_sensors(text: str) -> list[TempReading]:
    found = []
    for chip in parse_sensors(text):
        for r in chip.readings:
            if r.value_c is None:
                continue
            found.append(TempReading(chip.driver, r.label, r.value_c, r.high_c, r.crit_c, "sensors",
                                     f"{chip.name}: {r.raw}"))
    return found


def _zones(host: "Host") -> tuple[TempReading, ...]:
    zones = []
    for zone in host.files.listdir(THERMAL):
        if not zone.startswith("thermal_zone"):
            continue
        base = f"{THERMAL}/{zone}"
        kind = host.files.read_value(f"{base}/type") or zone
        raw = host.files.read_value(f"{base}/temp")
        try:
            value = int(raw) / 1000 if raw is not None else None
        except ValueError:
            value = None
        zones.append(TempReading(kind, zone, value, source=f"{base}/temp", raw=raw or ""))
    return tuple(zones)


def throttle_counts(host: "Host") -> tuple[ThrottleCount, ...]:
    """Per-CPU thermal_throttle counters since boot (Intel); () when the kernel exposes none."""
    counts = []
    cpus = sorted(int(n[3:]) for n in host.files.listdir(CPU_DIR) if re.fullmatch(r"cpu\d+", n))
    if not cpus or not host.files.is_dir(f"{CPU_DIR}/cpu{cpus[0]}/thermal_throttle"):
        return ()
    for cpu in cpus:
        base = f"{CPU_DIR}/cpu{cpu}/thermal_throttle"
        core = host.files.read_int(f"{base}/core_throttle_count")
        package = host.files.read_int(f"{base}/package_throttle_count")
        if core is not None or package is not None:
            counts.append(ThrottleCount(cpu, core, package))
    return tuple(counts)


def throttle_evidence(counts: tuple[ThrottleCount, ...]) -> Mapping[str, str]:
    """Non-zero counters as {path: value}."""
    out: dict[str, str] = {}
    for c in counts:
        for kind, value in (("core", c.core), ("package", c.package)):
            if value:
                out[f"{CPU_DIR}/cpu{c.cpu}/thermal_throttle/{kind}_throttle_count"] = str(value)
    return out


__all__ = ["ThermalFacts", "TempReading", "ThrottleCount", "is_bogus", "throttle_evidence"]
