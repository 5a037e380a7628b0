"""The SMBIOS chassis type (/sys/class/dmi/id/chassis_type): desktop, laptop or server.

One table for everything that judges by the kind of machine (ram-speed's remedies, `tunehost recommend`).
"""

from __future__ import annotations

CHASSIS_TYPE = "/sys/class/dmi/id/chassis_type"

# SMBIOS 3.x chassis types (DMTF DSP0134, 7.4.1)
DESKTOP_CHASSIS = {3, 4, 5, 6, 7, 13, 15, 16, 24, 34, 35, 36}
LAPTOP_CHASSIS = {8, 9, 10, 11, 12, 14, 30, 31, 32}
SERVER_CHASSIS = {17, 22, 23, 25, 28, 29}
CHASSIS_NAMES = {
    1: "Other", 2: "Unknown", 3: "Desktop", 4: "Low Profile Desktop", 5: "Pizza Box", 6: "Mini Tower", 7: "Tower",
    8: "Portable", 9: "Laptop", 10: "Notebook", 11: "Hand Held", 12: "Docking Station", 13: "All in One",
    14: "Sub Notebook", 15: "Space-saving", 16: "Lunch Box", 17: "Main Server Chassis", 22: "RAID Chassis",
    23: "Rack Mount Chassis", 24: "Sealed-case PC", 25: "Multi-system chassis", 28: "Blade", 29: "Blade Enclosure",
    30: "Tablet", 31: "Convertible", 32: "Detachable", 34: "Embedded PC", 35: "Mini PC", 36: "Stick PC",
}


def chassis_kind(chassis_type: int | None) -> str | None:
    """"desktop", "laptop" or "server"; None for other or unknown types."""
    if chassis_type in DESKTOP_CHASSIS:
        return "desktop"
    if chassis_type in LAPTOP_CHASSIS:
        return "laptop"
    if chassis_type in SERVER_CHASSIS:
        return "server"
    return None


def chassis_label(chassis_type: int | None) -> str | None:
    """The type's name for a sentence: "rack mount chassis", "mini PC"; None when unknown."""
    name = CHASSIS_NAMES.get(chassis_type) if chassis_type is not None else None
    if name is None:
        return None
    return " ".join(word if word.isupper() else word.lower() for word in name.split())
