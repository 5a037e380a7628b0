"""Which profile fits this host, and why: chassis type and power source, read through the host layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunehost.facts.chassis import CHASSIS_TYPE, chassis_kind, chassis_label

if TYPE_CHECKING:
    from tunehost.host import Host

POWER_SUPPLY = "/sys/class/power_supply"


@dataclass(frozen=True)
class PowerState:
    has_battery: bool
    on_ac: bool | None  # None: no mains/USB supply reports whether it is online
    evidence: dict[str, str]


def power_state(host: "Host") -> PowerState:
    has_battery = False
    online: list[bool] = []
    evidence: dict[str, str] = {}
    for name in host.files.listdir(POWER_SUPPLY):
        base = f"{POWER_SUPPLY}/{name}"
        kind = host.files.read_value(f"{base}/type")
        if kind is None:
            continue
        evidence[f"{base}/type"] = kind
        # a wireless mouse's battery has scope "Device": it says nothing about the machine
        if kind == "Battery" and host.files.read_value(f"{base}/scope") != "Device":
            has_battery = True
        elif kind in ("Mains", "USB", "USB_C", "USB_PD"):
            value = host.files.read_value(f"{base}/online")
            if value is not None:
                evidence[f"{base}/online"] = value
                online.append(value == "1")
    return PowerState(has_battery, any(online) if online else None, evidence)


@dataclass(frozen=True)
class Recommendation:
    profile: str
    reasons: tuple[str, ...]
    evidence: dict[str, str]


def recommend(host: "Host") -> Recommendation:
    evidence: dict[str, str] = {}
    chassis = host.files.read_int(CHASSIS_TYPE)
    if chassis is not None:
        evidence[CHASSIS_TYPE] = str(chassis)
    power = power_state(host)
    evidence.update(power.evidence)
    kind = chassis_kind(chassis)
    kind = "portable" if kind == "laptop" else kind
    label = chassis_label(chassis) if kind else None
    portable = kind == "portable" or (kind is None and power.has_battery)
    if portable and power.has_battery and power.on_ac is False:
        return Recommendation("throughput-quiet", (
            f"a {label or 'machine with a battery'} running on battery: boost drains the battery and heats the "
            "machine for a small gain in token generation (which is memory-bound)",
            "plug in and use `throughput` for the best numbers"), evidence)
    reasons: list[str] = []
    if portable:
        reasons.append(f"a {label or 'machine with a battery'} on AC power: full speed is affordable now")
        reasons.append("on battery, or where fan noise matters, use `throughput-quiet` (throughput without boost)")
    elif kind in ("desktop", "server"):
        reasons.append(f"a {kind} ({label}, chassis type {chassis}): no battery to spare, sustained throughput wins")
    else:
        reasons.append("chassis type unknown (no DMI, a VM or a container) and no battery: assuming a desktop/server")
    reasons.append("to compare benchmark runs with each other, use `benchmark` (stable clocks, boost off)")
    return Recommendation("throughput", tuple(reasons), evidence)
