"""Which profile fits this host, and why: chassis type and power source, read through the host layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.host import Host

CHASSIS_TYPE = "/sys/class/dmi/id/chassis_type"
POWER_SUPPLY = "/sys/class/power_supply"
# SMBIOS chassis types (DMTF DSP0134, 7.4.1)
PORTABLE = {8: "portable", 9: "laptop", 10: "notebook", 11: "hand held", 14: "sub notebook", 30: "tablet",
            31: "convertible", 32: "detachable"}
DESKTOP = {3: "desktop", 4: "low profile desktop", 5: "pizza box", 6: "mini tower", 7: "tower", 13: "all in one",
           15: "space-saving", 16: "lunch box", 24: "sealed-case PC", 35: "mini PC", 36: "stick PC"}
SERVER = {17: "main server chassis", 23: "rack mount chassis", 25: "multi-system chassis", 28: "blade",
          29: "blade enclosure"}


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
    kind = ("portable" if chassis in PORTABLE else "desktop" if chassis in DESKTOP else
            "server" if chassis in SERVER else None)
    label = (PORTABLE.get(chassis) or DESKTOP.get(chassis) or SERVER.get(chassis)) if chassis is not None else None
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
