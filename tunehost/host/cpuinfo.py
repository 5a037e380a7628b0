"""The CPU's ISA flags from /proc/cpuinfo: live, or through a Host (a snapshot replays them).

Only the first processor block's `flags` line is read: the kernel reports the ISA the CPUs share there, and a
hostile file cannot make tunehost read more than the bounded read allows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tunehost.host.files import Refused, open_regular

if TYPE_CHECKING:
    from tunehost.host import Host

CPUINFO = "/proc/cpuinfo"
OSRELEASE = "/proc/sys/kernel/osrelease"
MAX_CPUINFO_BYTES = 4 << 20  # a 512-CPU machine's cpuinfo is about 1 MiB


def _first_value(text: str | None, name: str) -> str | None:
    """The value of the first `name : value` line of a cpuinfo text (the first processor's), None when there is none."""
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value
    return None


def _words(value: str | None) -> frozenset[str] | None:
    """The printable ASCII words of a flags or Features value (None stays None)."""
    return None if value is None else frozenset(w for w in value.split() if w.isascii() and w.isprintable())


def parse_cpu_flags(text: str | None) -> frozenset[str] | None:
    """The flags of the first `flags` line (x86), or None when there is none (another architecture, no file)."""
    return _words(_first_value(text, "flags"))


def parse_cpu_features(text: str | None) -> frozenset[str] | None:
    """The ISA words of the first `flags` line (x86) or, where there is none, of the first `Features` line (ARM:
    "fp asimd ... asimddp"); None when there is neither. For what the cores can compute (ceiling.cpu_isa), not for
    the x86 checks that read parse_cpu_flags: an ARM CPU has no AVX to be missing."""
    flags = parse_cpu_flags(text)
    return flags if flags is not None else _words(_first_value(text, "Features"))


def parse_cpu_family(text: str | None) -> int | None:
    """The first `cpu family` line (x86: 23 = AMD Zen to Zen 2, 25 = Zen 3/4, 26 = Zen 5; 6 = most Intel cores), or
    None when there is none or it is not a small decimal number."""
    value = _first_value(text, "cpu family")
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 4 else None


def cpu_family(host: "Host") -> int | None:
    """This host's x86 CPU family (a snapshot's recorded /proc/cpuinfo), None when unknown."""
    return parse_cpu_family(host.files.read(CPUINFO))


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


def cpu_info(host: "Host") -> Mapping[str, Any]:
    """What describes the CPU next to a bench result (``brand_raw``, ``arch_string_raw``, ``flags``): py-cpuinfo's
    answer on the live host; on a snapshot, its recorded /proc/cpuinfo (the first block's model name and flags; no
    architecture). Raises what py-cpuinfo raises (the caller records it as the summary's error)."""
    if host.live:
        import cpuinfo

        return cpuinfo.get_cpu_info()
    text = host.files.read(CPUINFO) or ""
    brand = _first_value(text, "model name")
    brand = brand.strip() if brand is not None else None
    return {"brand_raw": brand, "flags": sorted(parse_cpu_flags(text) or ())}


def cpu_count(host: "Host") -> int | None:
    """The CPUs the system has (os.cpu_count on the live host; a snapshot: the processor blocks of its cpuinfo)."""
    if host.live:
        return os.cpu_count()
    text = host.files.read(CPUINFO) or ""
    return sum(1 for line in text.splitlines() if line.partition(":")[0].strip() == "processor") or None


def kernel_release(host: "Host") -> str | None:
    """The running kernel's release (`uname -r`): /proc/sys/kernel/osrelease, live or as a snapshot recorded it."""
    text = host.files.read(OSRELEASE)
    return text.strip() or None if text else None
