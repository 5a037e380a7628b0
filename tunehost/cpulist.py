"""CPU lists in the kernel's notation ("0-3,8,10-11"): parsing and formatting (tunehost.facts.cpu.online_cpus reads
a host's online CPUs)."""

from __future__ import annotations

import re
from typing import Iterable

from tunehost.errors import TunehostError

ONLINE = "/sys/devices/system/cpu/online"
# The most CPUs a Linux kernel can have: x86-64's NR_CPUS_RANGE_END is 8192 (arch/x86/Kconfig, "default 8192 if SMP"),
# the largest of any architecture's NR_CPUS range, so a CPU number is 0..8191; anything beyond is garbage, not a host.
MAX_CPUS = 8192
_NUMBER = re.compile(r"[0-9]+")


def parse_cpu_list(text: str) -> list[int]:
    """"0-3,8" -> [0, 1, 2, 3, 8]. Raises TunehostError for anything that is not a CPU list, including a CPU
    number no kernel can have (MAX_CPUS), so a hostile list never costs more than MAX_CPUS steps."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        raise TunehostError("empty CPU list")
    shown = text if len(text) <= 60 else text[:57] + "..."
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        lo, hi = lo.strip(), hi.strip()
        if not _NUMBER.fullmatch(lo) or (sep and not _NUMBER.fullmatch(hi)):
            raise TunehostError(f"invalid CPU list {shown!r}: {part[:20]!r} is not a number or a range")
        start = _cpu_number(lo, shown)
        end = _cpu_number(hi, shown) if sep else start
        if end < start:
            raise TunehostError(f"invalid CPU list {shown!r}: bad range {part!r}")
        cpus.update(range(start, end + 1))
    return sorted(cpus)


def _cpu_number(digits: str, shown: str) -> int:
    number = int(digits) if len(digits) <= 9 else MAX_CPUS  # never convert a 4,000-digit number
    if number >= MAX_CPUS:
        raise TunehostError(f"invalid CPU list {shown!r}: CPU {digits[:12]}{'...' if len(digits) > 12 else ''} "
                            f"is beyond the {MAX_CPUS} CPUs a Linux kernel can have")
    return number


def format_cpu_list(cpus: Iterable[int]) -> str:
    """[0, 1, 2, 3, 8] -> "0-3,8" (the form taskset -c and CPUAffinity= accept)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
