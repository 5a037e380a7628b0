"""The SMBIOS chassis type (/sys/class/dmi/id/chassis_type): desktop, laptop or server.

One table for everything that judges by the kind of machine (ram-speed's remedies, `tunehost recommend`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.facts import HostFacts
    from tunehost.host import Host

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


# ---- what kind of machine the fixes are shown on: a remedy that cannot work here is noise ----

CPUINFO = "/proc/cpuinfo"
CONTAINER_MARKERS = ("/.dockerenv", "/run/.containerenv")  # Docker, Podman
VM_FIRMWARE = "virtual machine: the host's firmware decides"


def is_virtual(host: "Host") -> bool:
    """A VM guest: the CPU reports the hypervisor flag (/proc/cpuinfo), or this is a Xen domain."""
    text = host.files.read(CPUINFO) or ""
    return " hypervisor" in text.partition("\n\n")[0] or host.files.exists("/proc/xen")


def in_container(host: "Host") -> bool:
    return any(host.files.exists(path) for path in CONTAINER_MARKERS)


def systemd_is_init(host: "Host") -> bool | None:
    """Whether systemd runs as PID 1 (from the processes sample); None when PID 1 was not seen."""
    from tunehost.facts.processes import process_list

    processes, _ = process_list(host)
    init = next((p for p in processes or () if p.pid == 1), None)
    if init is None or not init.name:
        return None
    return init.name == "systemd"


def machine_layers(host: "Host") -> tuple[str, ...]:
    """The layers between this process and the hardware, outermost first: ("virtual machine", "container") for a
    container in a KVM guest (the guest's hypervisor CPU flag shows through the container's /proc/cpuinfo); () on
    bare metal."""
    return tuple(kind for kind, present in (("virtual machine", is_virtual(host)), ("container", in_container(host)))
                 if present)


def layers_label(layers: tuple[str, ...]) -> str | None:
    """"container in a virtual machine", "virtual machine", "container"; None on bare metal."""
    if not layers:
        return None
    return " in a ".join(reversed(layers))


def machine_kind(host: "Host") -> str | None:
    """"virtual machine" or "container" when a hardware remedy (firmware setup, kernel module, dmidecode) cannot
    work from here (the innermost layer: a container, even inside a VM); None on bare metal."""
    layers = machine_layers(host)
    return layers[-1] if layers else None


def who_decides(kind: str | None, layers: tuple[str, ...] = ()) -> str:
    """The start of a sentence on a hardware setting seen from a guest: "virtual machine: the host's firmware
    decides", "container: the host decides", or, with both layers, the physical host under the VM."""
    if "virtual machine" in layers and "container" in layers:
        return "container in a virtual machine: the physical host's firmware (under the hypervisor) decides"
    return VM_FIRMWARE if kind == "virtual machine" else "container: the host decides"


@dataclass(frozen=True)
class MachineFacts:
    """Where a fix is shown: the checks word their remedies by it (no modprobe in a guest, no systemctl without
    systemd)."""

    kind: str | None = None  # "virtual machine", "container" (the innermost layer); None: bare metal
    systemd_init: bool | None = None  # systemd is PID 1; None: unknown
    layers: tuple[str, ...] = ()  # outermost first: ("virtual machine", "container") for a container in a VM

    @property
    def label(self) -> str | None:
        """"container in a virtual machine" when both are true; else the kind."""
        return layers_label(self.layers) or self.kind

    @property
    def decides(self) -> str:
        return who_decides(self.kind, self.layers)

    @classmethod
    def gather(cls, host: "Host") -> "MachineFacts":
        layers = machine_layers(host)
        return cls(layers[-1] if layers else None, systemd_is_init(host), layers)


def machine_of(facts: "HostFacts") -> MachineFacts:
    """The MachineFacts of a run; bare metal and unknown init when a test built the facts without them."""
    try:
        return facts.get(MachineFacts)
    except LookupError:
        return MachineFacts()
