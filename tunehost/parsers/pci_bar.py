"""A PCI device's BARs from sysfs: `/sys/bus/pci/devices/<addr>/resource` and `resource<N>_resize`.

Pure `str -> data` functions that never raise: garbage gives an empty result.

`resource` (drivers/pci/pci-sysfs.c, resource_show): one line per resource, "start end flags" as
`0x%016llx 0x%016llx 0x%016llx`; lines 0-5 are BARs 0-5, then the expansion ROM and bridge windows. An unused BAR
is all zeros. Flags (include/linux/ioport.h): IORESOURCE_IO 0x100, IORESOURCE_MEM 0x200, IORESOURCE_PREFETCH
0x2000, IORESOURCE_MEM_64 0x100000.

    0x0000006000000000 0x00000067ffffffff 0x000000000014220c      BAR 0: 32 GiB, 64-bit prefetchable memory

`resource<N>_resize` (kernel 6.1+, Documentation/ABI/testing/sysfs-bus-pci): the sizes BAR N can take, as a hex
bitmap where bit 0 = 1 MB, bit 1 = 2 MB, ... ("00000000000001c0": 64, 128 and 256 MB). Only BARs of a device with the
PCIe Resizable BAR capability have the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIB = 1024 * 1024
BAR_LINES = 6                 # BAR 0-5; the lines after them are the ROM and bridge windows
IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000
IORESOURCE_MEM_64 = 0x100000
MAX_BAR_BYTES = 1 << 50       # 1 PiB: a "size" above this is garbage, not a BAR
MAX_RESIZE_BITS = 31          # bit 30 = 1 PiB (MAX_BAR_BYTES); a bitmap with a bit above is garbage, not a BAR
_LINE = re.compile(r"\s*0x([0-9a-fA-F]{1,16})\s+0x([0-9a-fA-F]{1,16})\s+0x([0-9a-fA-F]{1,16})\s*")


@dataclass(frozen=True)
class PciBar:
    index: int
    size_bytes: int
    prefetchable: bool
    is_64bit: bool

    @property
    def size_mib(self) -> int:
        return self.size_bytes // MIB


def parse_resource(text: str | None) -> tuple[PciBar, ...]:
    """The memory BARs in use (size > 0) among lines 0-5 of a sysfs `resource` file; () for garbage or absent."""
    bars = []
    for index, line in enumerate((text or "").splitlines()[:BAR_LINES]):
        match = _LINE.fullmatch(line)
        if not match:
            return ()  # one malformed line: the file is not what the kernel writes, trust none of it
        start, end, flags = (int(g, 16) for g in match.groups())
        if not flags & IORESOURCE_MEM or end <= start:
            continue
        size = end - start + 1
        if size > MAX_BAR_BYTES:
            continue
        bars.append(PciBar(index, size, bool(flags & IORESOURCE_PREFETCH), bool(flags & IORESOURCE_MEM_64)))
    return tuple(bars)


def parse_resize(text: str | None) -> tuple[int, ...]:
    """`resource<N>_resize` -> the supported sizes in MiB, smallest first; () for garbage or absent."""
    value = (text or "").strip()
    if not re.fullmatch(r"(0x)?[0-9a-fA-F]{1,16}", value):
        return ()
    bits = int(value, 16)
    if bits >> MAX_RESIZE_BITS:
        return ()
    return tuple(1 << bit for bit in range(MAX_RESIZE_BITS) if bits >> bit & 1)


def vram_aperture(bars: tuple[PciBar, ...]) -> PciBar | None:
    """The BAR through which the CPU sees VRAM: the largest prefetchable memory BAR (NVIDIA BAR 1, AMD BAR 0, Intel
    Arc BAR 2); None when the device has none."""
    prefetchable = [b for b in bars if b.prefetchable]
    return max(prefetchable, key=lambda b: (b.size_bytes, -b.index)) if prefetchable else None
