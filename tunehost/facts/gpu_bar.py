"""Each discrete GPU's VRAM aperture (the BAR through which the CPU maps VRAM) against its VRAM: resizable-bar.

Sources: the PCI device's sysfs `resource` file (any vendor: the largest prefetchable memory BAR) and, for that BAR,
its `resource<N>_resize` file (kernel 6.1+: the sizes the card's Resizable BAR capability offers); for NVIDIA also
BAR1 as the driver reports it (NVML's BAR1 memory info, `nvidia-smi -q` "BAR1 Memory Usage / Total"). The host layer
reads (a snapshot replays) these files; classification is here and in checks/resizable_bar.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.facts.gpu import PCI_DEVICES, GpuFacts, GpuInfo
from tunehost.parsers.pci_bar import PciBar, parse_resize, parse_resource, vram_aperture
from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.host import Host

LEGACY_BAR_MIB = 256          # the BAR a card gets without Resizable BAR (and the 32-bit window's usual size)
FULL_SHARE = 0.95             # an aperture this share of VRAM or more maps all of it (VRAM is rarely a power of 2)

# NVIDIA generations without Resizable BAR: Pascal, Volta, Turing (BAR1 is fixed at 256 MiB on GeForce/Quadro/T4);
# Ampere (compute capability 8.x) and later support it (GeForce RTX 30 with a vBIOS update)
_NV_NO_REBAR = re.compile(r"\b(GTX|RTX 20\d\d|TITAN (RTX|V|Xp?)\b|Quadro [PKMGT]?\d|Quadro RTX|Tesla|T4\b|T[46]00\b|"
                          r"T1[02]00\b|V100|P100|P40\b|P4\b|P6\b)", re.I)
_NV_REBAR = re.compile(r"\b(RTX [345]0\d\d|RTX A\d{3,4}|RTX \d{4} Ada|RTX PRO|A\d{1,3}0?G?\b|H\d{2,3}\b|H200|"
                       r"L\d{1,2}S?\b|B\d{3}\b|GB\d{2,3})", re.I)


def nvidia_rebar_capable(name: str | None, compute_capability: str | None) -> bool | None:
    """Whether this NVIDIA GPU generation supports Resizable BAR: from the compute capability (8.0 and later: Ampere
    on), else from the product name; None when neither says."""
    try:
        if compute_capability:
            return float(compute_capability) >= 8.0
    except ValueError:
        pass
    if not name:
        return None
    if _NV_NO_REBAR.search(name):
        return False
    return True if _NV_REBAR.search(name) else None


@dataclass(frozen=True)
class GpuAperture:
    gpu: GpuInfo
    bar: PciBar | None = None               # the VRAM aperture in sysfs (None: no resource file, or none there)
    supported_mib: tuple[int, ...] = ()     # the sizes its Resizable BAR capability offers (resource<N>_resize)
    evidence: Mapping[str, str] = field(default_factory=dict)

    @property
    def aperture_mib(self) -> int | None:
        """The mapped window: the sysfs BAR, else NVIDIA's BAR1 as the driver reports it."""
        if self.bar is not None:
            return self.bar.size_mib
        bar1 = self.gpu.bar1_total_mib
        return bar1 if bar1 is not None and bar1 > 0 else None

    @property
    def vram_mib(self) -> int | None:
        vram = self.gpu.memory_total_mib
        return vram if vram is not None and vram > 0 else None

    @property
    def largest_mib(self) -> int | None:
        return max(self.supported_mib) if self.supported_mib else None

    @property
    def maps_all(self) -> bool | None:
        aperture, vram = self.aperture_mib, self.vram_mib
        if aperture is None or vram is None:
            return None
        return aperture >= vram * FULL_SHARE


def read_apertures(host: "Host", gpus: GpuFacts) -> tuple[GpuAperture, ...]:
    """One GpuAperture per discrete GPU; never raises."""
    return tuple(_aperture(host, g) for g in gpus.discrete)


def _aperture(host: "Host", g: GpuInfo) -> GpuAperture:
    evidence: dict[str, str] = {}
    if g.memory_total_mib is not None:
        evidence[f"{g.source or '?'} [{g.label}] VRAM"] = f"{g.memory_total_mib} MiB"
    if g.bar1_total_mib is not None:
        evidence[f"{g.source or '?'} [{g.label}] BAR1 total"] = f"{g.bar1_total_mib} MiB"
    if not g.pci_bus_id:
        return GpuAperture(g, evidence=evidence)
    base = f"{PCI_DEVICES}/{g.pci_bus_id}"
    raw = host.files.read(f"{base}/resource")
    if raw is None:
        return GpuAperture(g, evidence=evidence)
    bars = parse_resource(raw)
    bar = vram_aperture(bars)
    evidence[f"{base}/resource"] = ("; ".join(f"BAR {b.index}: {_size(b.size_mib)}"
                                              f"{' 64-bit' if b.is_64bit else ' 32-bit'}"
                                              f"{' prefetchable' if b.prefetchable else ''}" for b in bars)
                                    or "no memory BAR in use (or not the kernel's format)")
    supported: tuple[int, ...] = ()
    if bar is not None:
        resize = host.files.read_value(f"{base}/resource{bar.index}_resize")
        if resize is not None:
            supported = parse_resize(resize)
            evidence[f"{base}/resource{bar.index}_resize"] = (
                f"{one_line(resize.strip(), 20)} ({', '.join(_size(s) for s in supported) or 'unreadable'})")
    return GpuAperture(g, bar, supported, evidence)


def _size(mib: int) -> str:
    return f"{mib // 1024} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib} MiB"


size_text = _size
