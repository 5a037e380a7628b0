"""CPU lists in the kernel's notation ("0-3,8,10-11"): parsing, formatting, and the online CPUs of a host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from tunehost.errors import TunehostError

if TYPE_CHECKING:
    from tunehost.host import Host

ONLINE = "/sys/devices/system/cpu/online"


def parse_cpu_list(text: str) -> list[int]:
    """"0-3,8" -> [0, 1, 2, 3, 8]. Raises TunehostError for anything that is not a CPU list."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        raise TunehostError("empty CPU list")
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            start = int(lo)
            end = int(hi) if sep else start
        except ValueError:
            raise TunehostError(f"invalid CPU list {text!r}: {part!r} is not a number or a range") from None
        if start < 0 or end < start:
            raise TunehostError(f"invalid CPU list {text!r}: bad range {part!r}")
        cpus.update(range(start, end + 1))
    return sorted(cpus)


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


def online_cpus(host: "Host") -> list[int] | None:
    """The online CPUs from sysfs; None when the file is absent or garbled (unknown, never a guess)."""
    text = host.files.read_value(ONLINE)
    if text is None:
        return None
    try:
        return parse_cpu_list(text)
    except TunehostError:
        return None
