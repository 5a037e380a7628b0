"""What this box *is*, for the results store: the facts whose change can change llama.cpp's speed.

CPU model, the memory modules (slot, part, configured speed), the GPUs, the kernel release and the BIOS
version and date. Two runs with the same fingerprint ran on the same box as far as tunehost can tell; when a
re-measure is slower (``tunehost history --drift``), :func:`changes` names what differs ("BIOS date 2026-01-10 ->
2026-03-02", "memory DIMM_A1 configured 6000 -> 4800 MT/s": a BIOS update that reset XMP).
Pure reads through the host layer; anything unreadable is ``None``, never an error.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.facts import HostFacts

DMI_ID = "/sys/class/dmi/id"
FIELDS = ("cpu", "memory", "gpus", "kernel", "bios_version", "bios_date")


@dataclass(frozen=True)
class HostIdentity:
    cpu: str | None = None
    memory: tuple[str, ...] = ()  # one "locator: part @ configured MT/s" per installed module
    gpus: tuple[str, ...] = ()
    kernel: str | None = None
    bios_version: str | None = None
    bios_date: str | None = None

    @classmethod
    def gather(cls, facts: "HostFacts") -> "HostIdentity":
        from tunehost.facts.cpu import CpuFacts
        from tunehost.facts.gpu import GpuFacts
        from tunehost.facts.ram import RamFacts

        host = facts.host
        cpu = _safe(lambda: facts.get(CpuFacts).model_name)
        modules = _safe(lambda: facts.get(RamFacts).modules) or ()
        memory = tuple(sorted(
            one_line(f"{m.device.locator or '?'}: {m.device.part_number or '?'} @ "
                     f"{m.device.configured_mts or '?'} MT/s", 120) for m in modules if m.device.installed))
        gpus = tuple(sorted(one_line(g.name or "?", 120) for g in (_safe(lambda: facts.get(GpuFacts).gpus) or ())))

        def read(path: str) -> str | None:
            text = host.files.read(path)
            return one_line(text.strip(), 120) if text and text.strip() else None

        return cls(cpu=one_line(cpu, 120) if cpu else None, memory=memory, gpus=gpus,
                   kernel=read("/proc/sys/kernel/osrelease"), bios_version=read(f"{DMI_ID}/bios_version"),
                   bios_date=read(f"{DMI_ID}/bios_date"))

    def to_json(self) -> dict[str, Any]:
        return {"cpu": self.cpu, "memory": list(self.memory), "gpus": list(self.gpus), "kernel": self.kernel,
                "bios_version": self.bios_version, "bios_date": self.bios_date}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HostIdentity":
        def text(key: str) -> str | None:
            value = data.get(key)
            return one_line(str(value), 120) if value is not None else None

        def items(key: str) -> tuple[str, ...]:
            value = data.get(key)
            return tuple(one_line(str(v), 120) for v in value) if isinstance(value, list) else ()

        return cls(cpu=text("cpu"), memory=items("memory"), gpus=items("gpus"), kernel=text("kernel"),
                   bios_version=text("bios_version"), bios_date=text("bios_date"))

    def fingerprint(self) -> str:
        """16 hex digits of sha256 over the canonical JSON of every field."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


def changes(before: HostIdentity, after: HostIdentity) -> list[str]:
    """What differs between two identities, one line each ("kernel 6.8.0 -> 6.11.0")."""
    out: list[str] = []
    for name in FIELDS:
        old, new = getattr(before, name), getattr(after, name)
        if old == new:
            continue
        label = name.replace("_", " ")
        if isinstance(old, tuple):
            gone = [v for v in old if v not in new]
            came = [v for v in new if v not in old]
            out.append(f"{label}: " + "; ".join([f"was {v}" for v in gone] + [f"now {v}" for v in came]))
        else:
            out.append(f"{label} {old or 'unknown'} -> {new or 'unknown'}")
    return out


def _safe(read: Any) -> Any:
    try:
        return read()
    except Exception:  # an unreadable fact is unknown, never a reason not to record a measurement
        return None
