"""The CPU's ISA flags from /proc/cpuinfo: live, or through a Host (a snapshot replays them).

Only the first processor block's `flags` line is read: the kernel reports the ISA the CPUs share there, and a
hostile file cannot make tunehost read more than the bounded read allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tunehost.host.files import Refused, open_regular

if TYPE_CHECKING:
    from tunehost.host import Host

CPUINFO = "/proc/cpuinfo"
MAX_CPUINFO_BYTES = 4 << 20  # a 512-CPU machine's cpuinfo is about 1 MiB


def parse_cpu_flags(text: str | None) -> frozenset[str] | None:
    """The flags of the first `flags` line (x86), or None when there is none (another architecture, no file)."""
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(word for word in value.split() if word.isascii() and word.isprintable())
    return None


def cpu_flags(host: "Host") -> frozenset[str] | None:
    """This host's CPU flags (a snapshot's recorded /proc/cpuinfo), None when unknown."""
    return parse_cpu_flags(host.files.read(CPUINFO))


def live_cpu_flags() -> frozenset[str] | None:
    """The flags of the machine tunehost runs on (for code that runs llama.cpp live, outside a Host)."""
    try:
        data = open_regular(CPUINFO, MAX_CPUINFO_BYTES)
    except Refused:
        return None
    return None if data is None else parse_cpu_flags(data.decode("utf-8", "replace"))
