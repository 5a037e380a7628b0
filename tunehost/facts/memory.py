"""Memory facts: /proc/meminfo, transparent huge pages."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.bounds import MAX_COUNT, number, whole, whole_text
from tunehost.host.samples import VMSTAT_COUNTERS

if TYPE_CHECKING:
    from tunehost.host import Host

THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
THP_DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"


def selected_mode(text: str | None) -> str | None:
    """The bracketed choice of a sysfs selector file: "always [madvise] never" -> "madvise"."""
    if not text:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else None


def selector_options(text: str | None) -> list[str]:
    """Every choice a sysfs selector file offers: "always [madvise] never" -> ["always", "madvise", "never"]."""
    return (text or "").replace("[", "").replace("]", "").split()


@dataclass(frozen=True)
class ThpFacts:
    enabled: str | None  # always | madvise | never | None (unknown)
    defrag: str | None
    evidence: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def gather(cls, host: "Host") -> "ThpFacts":
        raw_enabled = host.files.read_value(THP_ENABLED)
        raw_defrag = host.files.read_value(THP_DEFRAG)
        evidence = {p: v for p, v in ((THP_ENABLED, raw_enabled), (THP_DEFRAG, raw_defrag)) if v is not None}
        return cls(selected_mode(raw_enabled), selected_mode(raw_defrag), evidence)


# ---- RAM and swap: /proc/meminfo, /proc/swaps, vm.swappiness, zram, swap activity ----

MEMINFO = "/proc/meminfo"
SWAPS = "/proc/swaps"
SWAPPINESS = "/proc/sys/vm/swappiness"
BLOCK = "/sys/block"
KiB = 1024
# vm.swappiness accepts 0..200 since Linux 5.8 (Documentation/admin-guide/sysctl/vm.rst); outside it is garbage
SWAPPINESS_RANGE = (0, 200)
MAX_SAMPLE_S = 3600.0  # the activity sample is a window of about half a second; an hour is already absurd


def parse_meminfo(text: str | None) -> dict[str, int]:
    """/proc/meminfo -> {"MemTotal": kB, ..., "HugePages_Total": count}; lines that are not "Key: number [kB]" are
    skipped (a garbled file gives {})."""
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts or not key.strip() or " " in key.strip():
            continue
        value = whole_text(parts[0])
        if value is not None:
            values[key.strip()] = value
    return values


@dataclass(frozen=True)
class SwapArea:
    """One line of /proc/swaps (sizes in KiB)."""

    name: str
    kind: str  # partition | file
    size_kb: int
    used_kb: int
    priority: int | None = None

    @property
    def zram(self) -> bool:
        return self.name.startswith("/dev/zram")


def parse_swaps(text: str | None) -> list[SwapArea]:
    """/proc/swaps -> its swap areas; the header and lines that do not parse are skipped."""
    areas = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[0].startswith("/"):
            continue
        size, used = whole_text(parts[2]), whole_text(parts[3])
        priority = whole_text(parts[4], -MAX_COUNT) if len(parts) > 4 else None
        if size is None or used is None:
            continue
        areas.append(SwapArea(parts[0].replace("\\040", " "), parts[1], size, used, priority))
    return areas


@dataclass(frozen=True)
class ZramDevice:
    name: str  # zram0
    disksize: int | None = None  # bytes (the most it can hold, uncompressed)
    orig_data_size: int | None = None  # bytes stored (uncompressed), from mm_stat
    mem_used_total: int | None = None  # RAM it really uses, from mm_stat
    algorithm: str | None = None  # the bracketed choice of comp_algorithm


def parse_mm_stat(text: str | None) -> tuple[int | None, int | None]:
    """/sys/block/zramN/mm_stat -> (orig_data_size, mem_used_total) in bytes; (None, None) when garbled."""
    parts = (text or "").split()
    if len(parts) < 3:
        return None, None
    return whole_text(parts[0]), whole_text(parts[2])


@dataclass(frozen=True)
class MemInfo:
    """/proc/meminfo, in kB as the kernel writes it. Empty `values` means unreadable."""

    values: Mapping[str, int] = field(default_factory=dict)
    evidence: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def gather(cls, host: "Host") -> "MemInfo":
        values = parse_meminfo(host.files.read(MEMINFO))
        return cls(values, {f"{MEMINFO} {k}": f"{v} kB" for k, v in values.items()
                            if k in ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree", "SwapCached")})

    def kb(self, key: str) -> int | None:
        return self.values.get(key)

    @property
    def total_kb(self) -> int | None:
        return self.values.get("MemTotal")

    @property
    def available_kb(self) -> int | None:
        return self.values.get("MemAvailable")

    @property
    def swap_used_kb(self) -> int | None:
        total, free = self.values.get("SwapTotal"), self.values.get("SwapFree")
        if total is None or free is None:
            return None
        return max(total - free, 0)


@dataclass(frozen=True)
class SwapFacts:
    mem: MemInfo
    areas: tuple[SwapArea, ...] | None  # None: /proc/swaps unreadable
    swappiness: int | None
    zram: tuple[ZramDevice, ...] = ()
    vmstat_delta: Mapping[str, int] | None = None  # the activity sample: pswpin/pswpout/pgmajfault over interval_s
    interval_s: float | None = None
    sample_reason: str | None = None  # why there is no activity sample
    evidence: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def gather(cls, host: "Host") -> "SwapFacts":
        files = host.files
        mem = MemInfo.gather(host)
        evidence = dict(mem.evidence)
        raw_swaps = files.read(SWAPS)
        areas = tuple(parse_swaps(raw_swaps)) if raw_swaps is not None else None
        if raw_swaps is not None:
            evidence[SWAPS] = "; ".join(f"{a.name} {a.kind} size {a.size_kb} kB used {a.used_kb} kB"
                                        for a in areas or ()) or "(no swap areas)"
        raw_swappiness = files.read_value(SWAPPINESS)
        swappiness = None
        if raw_swappiness is not None:
            evidence[SWAPPINESS] = raw_swappiness
            swappiness = whole_text(raw_swappiness, *SWAPPINESS_RANGE)
        zram = []
        for name in files.listdir(BLOCK):
            if not re.fullmatch(r"zram[0-9]+", name):
                continue
            base = f"{BLOCK}/{name}"
            orig, used = parse_mm_stat(files.read_value(f"{base}/mm_stat"))
            zram.append(ZramDevice(name, files.read_int(f"{base}/disksize"), orig, used,
                                   selected_mode(files.read_value(f"{base}/comp_algorithm"))))
        delta, interval, reason = _activity(host)
        return cls(mem, areas, swappiness, tuple(zram), delta, interval, reason, evidence)

    @property
    def total_kb(self) -> int | None:
        if self.mem.kb("SwapTotal") is not None:
            return self.mem.kb("SwapTotal")
        return sum(a.size_kb for a in self.areas) if self.areas is not None else None

    @property
    def used_kb(self) -> int | None:
        if self.areas:
            return sum(a.used_kb for a in self.areas)
        return self.mem.swap_used_kb

    @property
    def zram_only(self) -> bool:
        return bool(self.areas) and all(a.zram for a in self.areas)  # type: ignore[union-attr]

    @property
    def disk_used_kb(self) -> int | None:
        """Swap in use on disk (partitions and files, not zram)."""
        if self.areas:
            return sum(a.used_kb for a in self.areas if not a.zram)
        return self.mem.swap_used_kb


def _activity(host: "Host") -> tuple[dict[str, int] | None, float | None, str | None]:
    sample = host.sample("activity")
    if not isinstance(sample, dict):
        return None, None, host.sample_errors.get("activity") or "no activity sample"
    delta = sample.get("vmstat_delta")
    if not isinstance(delta, dict):
        return None, None, "the activity sample has no vmstat_delta"
    clean = {str(k): whole(v) for k, v in delta.items() if k in VMSTAT_COUNTERS}
    bad = sorted(k for k, v in clean.items() if v is None)
    if bad:
        return None, None, f"the activity sample's vmstat_delta holds impossible counts ({', '.join(bad)})"
    raw_interval = sample.get("interval_s")
    interval = number(raw_interval, 0.0, MAX_SAMPLE_S, above_low=True)
    if raw_interval is not None and interval is None:
        return None, None, f"the activity sample's interval_s is impossible ({str(raw_interval)[:20]})"
    return {k: v for k, v in clean.items() if v is not None}, interval, None
