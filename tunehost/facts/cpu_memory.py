"""The memory controller of a CPU: the fastest memory it officially supports per memory type, its channels per
socket, and whether the platform runs memory above that (XMP/EXPO), from tunehost/data/cpu_memory.csv (Intel ARK
and AMD product-page data, one row per family; sources named in the file).

    cpu = cpu_memory("11th Gen Intel(R) Core(TM) i5-1135G7 @ 2.40GHz")
    cpu.max_for("DDR4")        # (3200, "DDR4-3200")
    cpu.channels               # 2
    cpu_memory("Intel(R) Pentium(R) 4 CPU 3.00GHz")   # None: not in the data

The model string is matched the same way whether it comes from dmidecode's processor "Version" or from
/proc/cpuinfo's "model name" (see `normalize`).
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass
from importlib.resources import files

DATA = "data/cpu_memory.csv"
SEGMENTS = ("desktop", "mobile", "embedded", "server", "workstation")
OC_VALUES = ("yes", "no", "chipset")
_SPEED = re.compile(r"^((?:LP)?DDR\d[A-Z]?)-(\d{3,5})$")

_MARKS = re.compile(r"\((?:R|TM|C)\)|®|™", re.I)
_CLOCK = re.compile(r"@.*$")
_GEN = re.compile(r"\b\d{1,2}(?:st|nd|rd|th) Gen\b", re.I)
_GRAPHICS = re.compile(r"\s(?:w/|with)?\s*(?:AMD\s+)?Radeon\b.*$", re.I)
_NOISE = re.compile(r"\b(?:\d+-Core|CPU|Processor|APU)\b", re.I)


def normalize(model: str) -> str:
    """"12th Gen Intel(R) Core(TM) i5-1235U" -> "Intel Core i5-1235U"; "AMD Ryzen 7 5800U with Radeon Graphics" ->
    "AMD Ryzen 7 5800U"; "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz" -> "Intel Xeon E5-2680 v4"."""
    s = _MARKS.sub(" ", model[:200])
    s = _CLOCK.sub("", s)
    s = _GEN.sub(" ", s)
    s = _GRAPHICS.sub("", s)
    s = _NOISE.sub(" ", s)
    return " ".join(s.replace(",", " ").split())


@dataclass(frozen=True)
class CpuMemory:
    """One CPU family's memory controller (a row of the data file)."""

    family: str
    segment: str                       # desktop | mobile | embedded | server | workstation
    speeds: tuple[tuple[str, int], ...]  # (memory type, fastest supported MT/s), first = the main type
    channels: int                      # 64-bit memory channels per socket
    oc: str                            # yes | no | chipset (see the data file)
    source: str

    def max_for(self, mem_type: str | None) -> tuple[int, str] | None:
        """(MT/s, "DDR4-3200") for this memory type: the exact type, else the same family ("DDR3" -> a "DDR3L" row,
        "LPDDR5" -> "LPDDR5X"), else None. mem_type None: the main type."""
        if not mem_type:
            t, mts = self.speeds[0]
            return mts, f"{t}-{mts}"
        want = mem_type.upper()
        for t, mts in self.speeds:
            if t == want:
                return mts, f"{t}-{mts}"
        near = [(mts, t) for t, mts in self.speeds if t.rstrip("LX") == want.rstrip("LX")]
        if near:
            mts, t = max(near)
            return mts, f"{t}-{mts}"
        return None

    @property
    def describe(self) -> str:
        return f"{self.family}: {', '.join(f'{t}-{m}' for t, m in self.speeds)}, {self.channels} channel" \
               f"{'s' if self.channels != 1 else ''} ({self.source})"


def _row(row: dict, line: int) -> tuple["re.Pattern[str]", CpuMemory]:
    speeds = []
    for item in row["memory"].split():
        m = _SPEED.match(item)
        if not m:
            raise ValueError(f"{DATA} line {line}: bad memory speed {item!r}")
        speeds.append((m[1], int(m[2])))
    if row["segment"] not in SEGMENTS or row["oc"] not in OC_VALUES or not speeds:
        raise ValueError(f"{DATA} line {line}: bad segment, oc or memory")
    return re.compile(row["match"], re.I), CpuMemory(row["family"], row["segment"], tuple(speeds),
                                                     int(row["channels"]), row["oc"], row["source"])


@functools.lru_cache(maxsize=1)
def table() -> tuple[tuple["re.Pattern[str]", CpuMemory], ...]:
    """Every row of the data file, in order (the first match wins)."""
    text = files("tunehost").joinpath(DATA).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    return tuple(_row(row, i) for i, row in enumerate(reader, 2))


def cpu_memory(cpu_model: str | None) -> CpuMemory | None:
    """The memory controller of this CPU model, or None when the data does not know it."""
    if not cpu_model or not isinstance(cpu_model, str):
        return None
    return _lookup(normalize(cpu_model))


@functools.lru_cache(maxsize=1024)
def _lookup(name: str) -> CpuMemory | None:
    for pattern, cpu in table():
        if pattern.search(name):
            return cpu
    return None
