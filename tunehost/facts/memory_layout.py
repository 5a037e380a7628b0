"""Memory layout: what the installed modules add up to (platform class, speeds, channel population) and the
theoretical peak bandwidth they allow, as configured and as rated.

    lay = layout(ram)            # RamFacts -> Layout
    peak = dimm_peak(ram)        # DimmPeak(configured_gbps, rated_gbps, ...) or None when the modules do not say

Used by ram-speed (is the memory slower than it could be), memory-bandwidth (does the measured bandwidth reach
what the configured modules allow) and the token-generation ceilings of advise and bench.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass

from tunehost.facts.cpu_memory import CpuMemory
from tunehost.facts.chassis import DESKTOP_CHASSIS, LAPTOP_CHASSIS, SERVER_CHASSIS
from tunehost.facts.ram import Module, RamFacts, socket_of
from tunehost.facts.memory_parts import generation


@dataclass(frozen=True)
class Layout:
    """What the modules add up to: platform class, effective and rated speed, channel population."""

    platform: str                      # desktop | mobile | server | soldered
    platform_why: str
    mem_type: str                      # "DDR5", "LPDDR5", ... ("RAM" when unknown)
    modules: tuple[Module, ...]
    effective: int | None              # MT/s the memory really runs at (slowest module)
    rated: int | None                  # slowest module's rating
    rated_max: int | None
    profile: bool                      # some module's rating is an XMP/EXPO profile
    channels: dict[str, set[str]] | None       # socket -> every channel seen (installed or empty); None unknown
    populated: dict[str, Counter] | None       # socket -> Counter(channel -> modules)
    slot_count: int
    cpu: CpuMemory | None = None               # the CPU's memory controller, when the data knows the model
    sockets: int = 1                           # CPU packages
    per_socket: dict[str, int] | None = None   # socket -> installed modules, when the slot names say (servers)
    unknown: Module | None = None              # a module whose rating is unknown on purpose (a kit maker's part)

    @property
    def cpu_channels(self) -> int | None:
        """64-bit memory channels per socket of the CPU (None: CPU not in the data)."""
        return self.cpu.channels if self.cpu is not None else None

    @property
    def dimms_per_channel(self) -> int | None:
        """Most modules on one channel: from the slot names, else modules / (CPU channels x sockets)."""
        if self.populated:
            return max(n for c in self.populated.values() for n in c.values())
        if self.cpu_channels and self.per_socket:
            return math.ceil(max(self.per_socket.values()) / self.cpu_channels)
        if self.cpu_channels:
            return math.ceil(len(self.modules) / (self.cpu_channels * self.sockets))
        return None

    def channel_sizes(self) -> list[int] | None:
        """Capacity (MB) of each populated channel (every socket) when the slot names give the channels, or when
        two modules sit in a two-slot machine (one per channel); None otherwise."""
        if self.populated is not None:
            sizes: Counter = Counter()
            for m in self.modules:
                assert m.slot is not None
                sizes[m.slot] += m.device.size_mb or 0
            return list(sizes.values())
        if len(self.modules) == 2 and self.slot_count == 2 and (self.cpu_channels or 2) >= 2:
            return [m.device.size_mb or 0 for m in self.modules]
        return None

    @property
    def mixed(self) -> bool:
        return self.rated is not None and self.rated_max is not None and self.rated_max > self.rated

    @property
    def gen(self) -> str | None:
        return generation(self.mem_type)

    @property
    def populated_channels(self) -> int | None:
        return sum(len(c) for c in self.populated.values()) if self.populated is not None else None

    @property
    def total_channels(self) -> int | None:
        return sum(len(c) for c in self.channels.values()) if self.channels is not None else None

    @property
    def two_per_channel(self) -> bool:
        return self.populated is not None and any(n >= 2 for c in self.populated.values() for n in c.values())

    def peak_gbs(self, mts: int | None) -> float | None:
        """Peak bandwidth at `mts`: bus bytes per transfer x MT/s."""
        if mts is None:
            return None
        if self.platform == "soldered":
            widths = [m.device.data_width for m in self.modules]
            if not widths or any(not w for w in widths):
                return None
            return sum(widths) / 8 * mts / 1000  # type: ignore[arg-type]
        channels = self.populated_channels
        return channels * 8 * mts / 1000 if channels else None


def rating_of(m: Module, platform: str) -> int | None:
    """The module's rating; where no XMP exists (any platform but desktop) a kit maker's part without a rating in
    its name is rated by its Speed field, all it can run at there."""
    return m.rating or (m.speed_field if platform != "desktop" and m.rating_unknown else None)


def classify(ram: RamFacts) -> tuple[str, str]:
    """(platform, why): soldered memory first, then registered modules, the chassis type, and the form factor."""
    modules = ram.modules
    if modules and all(m.soldered for m in modules):
        ff = modules[0].device.form_factor or "soldered"
        chip = "" if modules[0].device.soldered else f", part {modules[0].device.part_number} is a DRAM chip"
        return "soldered", f"soldered {modules[0].mem_type or 'memory'} ({ff}{chip})"
    if any(m.device.registered for m in modules):
        return "server", "registered (buffered) modules"
    ct, name = ram.chassis_type, ram.chassis_name
    sodimm = bool(modules) and all((m.device.form_factor or "").upper() == "SODIMM" for m in modules)
    if ct in SERVER_CHASSIS:
        return "server", f"chassis type {ct} ({name})"
    if ct in LAPTOP_CHASSIS:
        return "mobile", f"chassis type {ct} ({name})"
    cpu = ram.cpu
    if ct in DESKTOP_CHASSIS:
        if sodimm:
            return "mobile", f"SODIMMs in a {name} chassis (mini PCs rarely offer XMP)"
        if cpu is not None and cpu.segment in ("mobile", "embedded"):
            return "mobile", f"a {cpu.segment} CPU ({cpu.family}) in a {name} chassis: a mini PC or NUC, no XMP"
        return "desktop", f"chassis type {ct} ({name})"
    if sodimm:
        return "mobile", "SODIMM modules (laptop or mini PC)"
    if cpu is not None and cpu.segment in ("mobile", "embedded"):
        return "mobile", f"a {cpu.segment} CPU ({cpu.family})"
    return "desktop", "DIMM modules" + (f", chassis type {ct} ({name})" if ct else ", no chassis type")


def layout(ram: RamFacts) -> Layout:
    modules = ram.modules
    platform, why = classify(ram)
    types = Counter(m.mem_type for m in modules if m.mem_type)
    mem_type = types.most_common(1)[0][0] if types else "RAM"
    fastest = max([m.rating or 0 for m in modules] + [m.effective_mts or 0 for m in modules])
    if mem_type.upper() == "LPDDR5" and fastest > 6400:
        mem_type = "LPDDR5X"  # dmidecode has no LPDDR5X type: LPDDR5 tops out at 6400, anything faster is 5X
    effective_values = [m.effective_mts for m in modules if m.effective_mts]
    ratings = [r for r in (rating_of(m, platform) for m in modules) if r]
    unknown = next((m for m in modules if m.rating_unknown and not rating_of(m, platform)), None)
    channels: dict[str, set[str]] | None = None
    populated: dict[str, Counter] | None = None
    if modules and all(m.slot for m in modules):
        channels = defaultdict(set)
        for slot in ram.slots:
            if slot:
                channels[slot[0]].add(slot[1])
        populated = defaultdict(Counter)
        for m in modules:
            assert m.slot is not None
            populated[m.slot[0]][m.slot[1]] += 1
            channels[m.slot[0]].add(m.slot[1])
        channels, populated = dict(channels), dict(populated)
    named = [socket_of(m.device.locator, m.device.bank_locator) for m in modules] if platform == "server" else []
    per_socket: dict[str, int] | None = None
    if populated is not None and len(populated) > 1:
        per_socket = {k: sum(c.values()) for k, c in populated.items()}
    elif named and all(named):
        every = {socket_of(d.locator, d.bank_locator) for d in ram.memory.devices} if ram.memory else set()
        per_socket = {k: 0 for k in every if k}
        per_socket.update(Counter(named))
    sockets = max(ram.sockets or 1, len(per_socket) if per_socket else 1, len(populated) if populated else 1)
    return Layout(platform, why, mem_type, modules, min(effective_values) if effective_values else None,
                  min(ratings) if ratings else None, max(ratings) if ratings else None,
                  any(m.profile for m in modules), channels, populated, ram.slot_count, ram.cpu, sockets, per_socket,
                  unknown)



@dataclass(frozen=True)
class DimmPeak:
    """Theoretical peak read bandwidth of the installed memory (decimal GB/s): bus bytes per transfer x MT/s.

    `configured_gbps` at the speed the memory runs now, `rated_gbps` at the slowest module's rating (None when no
    module's rating is known); `basis` says how it was computed, e.g. "2 channels x 3600 MT/s x 8 bytes".
    """

    configured_gbps: float
    rated_gbps: float | None
    configured_mts: int
    rated_mts: int | None
    basis: str
    platform: str
    mem_type: str


def dimm_peak(ram: RamFacts) -> DimmPeak | None:
    """The peak the modules allow, or None when the modules, their speed or their channels are unknown."""
    if not ram.modules:
        return None
    lay = layout(ram)
    configured = lay.peak_gbs(lay.effective)
    if configured is None or lay.effective is None:
        return None
    if lay.platform == "soldered":
        bits = sum(m.device.data_width or 0 for m in lay.modules)
        basis = f"{bits}-bit {lay.mem_type} bus x {lay.effective} MT/s"
    else:
        basis = f"{lay.populated_channels} channel{'s' if lay.populated_channels != 1 else ''} x {lay.effective} MT/s x 8 bytes"
    return DimmPeak(configured, lay.peak_gbs(lay.rated), lay.effective, lay.rated, basis, lay.platform, lay.mem_type)
