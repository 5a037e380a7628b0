"""GPU facts: NVIDIA from NVML (samples/nvml.json) or nvidia-smi, AMD/Intel from amdgpu/i915 sysfs, and the PCIe
link of every display controller (class 0x03xxxx) and PCI accelerator from /sys/bus/pci/devices.

Sources, best first. NVIDIA: the `nvml` sample (live NVML, or a snapshot's samples/nvml.json), then
`nvidia-smi -q -x`, then `nvidia-smi -q`; nvidia-smi runs only when NVML gave nothing. AMD/Intel:
/sys/class/drm/card*/device. Unknown is None, never a guess; gather() never raises.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping

from tunehost.bounds import number, whole, whole_text
from tunehost.facts.drm_clients import DrmFacts
from tunehost.facts.processes import client_kind
from tunehost.parsers.amdgpu_ids import AMDGPU_IDS, amdgpu_product_name, parse_amdgpu_ids
from tunehost.parsers.nvidia_smi import (
    GpuInfo, GpuProcess, MigDevice, NvidiaSmiReport, PcieLink, integer, normalise_bus_id, parse_nvidia_smi_text,
    parse_nvidia_smi_xml,
)

if TYPE_CHECKING:
    from tunehost.host import Host

__all__ = ["GpuFacts", "GpuInfo", "GpuProcess", "MigDevice", "PcieLink", "link_gen", "parse_pp_dpm_pcie",
           "AMD_APU_DEVICE_IDS", "INTEL_DGPU_DEVICE_IDS", "NVIDIA_UNIFIED", "nvidia_unified", "held_impact",
           "free_impact"]

PCI_DEVICES = "/sys/bus/pci/devices"
DRM = "/sys/class/drm"
NVSMI_XML = ("nvidia-smi", "-q", "-x")
NVSMI_TEXT = ("nvidia-smi", "-q")
MIB = 1024 * 1024

VENDORS = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}
# display controllers that are not GPUs: server BMC video (ASPEED AST2x00, Matrox G200e)
BMC_VIDEO_VENDORS = {"0x1a03": "ASPEED BMC video", "0x102b": "Matrox server video"}
# PCI classes judged for their link: display controllers, co-processors, processing accelerators
ACCELERATOR_CLASSES = ("0x0b40", "0x12")

# AMD integrated GPUs (APUs): their "VRAM" is a BIOS carve-out of system RAM, their PCIe link is on-die
AMD_APU_DEVICE_IDS: dict[str, str] = {
    "0x15dd": "Raven Ridge", "0x15d8": "Picasso", "0x1636": "Renoir", "0x1638": "Cezanne", "0x164c": "Lucienne",
    "0x15e7": "Barcelo", "0x163f": "Van Gogh", "0x1681": "Rembrandt", "0x1506": "Mendocino", "0x164e": "Raphael",
    "0x13c0": "Granite Ridge", "0x15bf": "Phoenix1", "0x15c8": "Phoenix2", "0x164f": "Phoenix",
    "0x1900": "Hawk Point", "0x1901": "Hawk Point", "0x150e": "Strix Point", "0x1114": "Krackan Point",
    "0x1902": "Krackan Point", "0x1586": "Strix Halo",
}

# Intel discrete cards: i915 and xe give them no product name, so they are named from their PCI device id as pci.ids
# names them (Debian's pci.ids 0.0~2026.10.24-1: "DG2 [Arc A750]", "Battlemage G21 [Arc Pro B60]", "Battlemage G31
# [Arc Pro B70]"; ids it calls only "Intel Graphics" are left out), which is what advise's spec table is read with
INTEL_DGPU_DEVICE_IDS: dict[str, str] = {
    "0x56a0": "Intel Arc A770", "0x56a1": "Intel Arc A750", "0x56a2": "Intel Arc A580", "0x56a5": "Intel Arc A380",
    "0x56a6": "Intel Arc A310", "0x5690": "Intel Arc A770M", "0x5691": "Intel Arc A730M", "0x5692": "Intel Arc A550M",
    "0x5693": "Intel Arc A370M", "0x5694": "Intel Arc A350M", "0x5696": "Intel Arc A570M", "0x5697": "Intel Arc A530M",
    "0x56b0": "Intel Arc Pro A30M", "0x56b1": "Intel Arc Pro A40/A50", "0x56b2": "Intel Arc Pro A60M",
    "0x56b3": "Intel Arc Pro A60", "0xe20b": "Intel Arc B580", "0xe20c": "Intel Arc B570",
    "0xe211": "Intel Arc Pro B60", "0xe212": "Intel Arc Pro B50", "0xe222": "Intel Arc Pro B65",
    "0xe223": "Intel Arc Pro B70",
}

# NVIDIA GPUs on the CPU's memory: the GB10 of a DGX Spark (and its OEM twins), Jetson Orin and Thor. NVML gives them
# no framebuffer (nvmlDeviceGetMemoryInfo: NOT_SUPPORTED, NVIDIA's DGX Spark known issues): like AMD's APUs, what they
# can use is the host's RAM
NVIDIA_UNIFIED = re.compile(r"\b(GB10|Orin|Thor)\b", re.IGNORECASE)


def nvidia_unified(name: str | None) -> bool:
    """Whether an NVIDIA GPU of this name shares the CPU's memory (NVIDIA_UNIFIED)."""
    return bool(name) and NVIDIA_UNIFIED.search(name) is not None


# What VRAM taken by others costs llama.cpp (docs/checks.md, gpu-memory): gpu-memory and headless judge by these alone.
HELD_NOTABLE_MIB = 128     # less, held by a display server (Xorg for a monitor on another GPU), is no news
HELD_WARN_MIB = 512        # layers or context lost on any card size
HELD_WARN_SHARE = 0.10     # ... or this share of the card: 12 % of a 2 GB card is a fifth of what a 1B model needs
# llama.cpp's backend context and compute buffers take ~300-500 MiB before the first layer (CUDA, ROCm, Vulkan)
FULL_FREE_MIB = 512        # free below this: not one layer can be offloaded, the GPU is full
TIGHT_FREE_SHARE = 0.5     # free below half the card while nothing listed explains it: another container or user


def held_impact(held_mib: float, total_mib: float | None) -> str | None:
    """"warn" when VRAM held by others costs layers (>= HELD_WARN_MIB or >= HELD_WARN_SHARE of the card), "info" when
    notable (>= HELD_NOTABLE_MIB), None when it is no news."""
    if held_mib >= HELD_WARN_MIB or (total_mib and held_mib >= HELD_WARN_SHARE * total_mib):
        return "warn"
    return "info" if held_mib >= HELD_NOTABLE_MIB else None


def free_impact(free_mib: int | None, total_mib: int | None) -> str | None:
    """"full" when free VRAM cannot hold llama.cpp's buffers plus one layer, "tight" below half the card, else None
    (None too when unknown)."""
    if free_mib is None:
        return None
    if free_mib < FULL_FREE_MIB:
        return "full"
    return "tight" if total_mib and free_mib < TIGHT_FREE_SHARE * total_mib else None


# the kernel's longest link speed text is "64.0 GT/s PCIe" (drivers/pci/pci-sysfs.c); anything much longer is garbage
MAX_LINK_SPEED_CHARS = 64
MAX_DRM_CARDS = 64  # /sys/class/drm/card* read: a 16-GPU server has 16 or 17
_LINK_SPEED = re.compile(r"(?<![\d.])(\d{1,4}(?:\.\d{1,4})?)\s{0,8}GT/s")
# GT/s per lane -> PCIe generation
_GEN_BY_SPEED = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def link_gen(speed: str | None) -> int | None:
    """"8 GT/s" (kernel 3.10) / "8.0 GT/s PCIe" / "16GT/s" -> 3 / 3 / 4; None for "Unknown" or garbage."""
    if not speed or len(speed) > MAX_LINK_SPEED_CHARS:  # bounded before matching: the regex never sees 200 KB
        return None
    match = _LINK_SPEED.search(speed)
    if not match:
        return None
    return _GEN_BY_SPEED.get(float(match.group(1)))


def parse_pp_dpm_pcie(text: str | None) -> tuple[tuple[int | None, int | None, bool], ...]:
    """amdgpu pp_dpm_pcie ("0: 2.5GT/s, x8 \\n1: 16.0GT/s, x16 *") -> ((gen, width, current), ...)."""
    levels = []
    for line in (text or "").splitlines():
        match = re.match(r"\s*\d+:\s*([\d.]+\s*GT/s)\s*,?\s*x(\d{1,3})\b", line)
        if match:
            levels.append((link_gen(match.group(1)), int(match.group(2)), line.rstrip().endswith("*")))
    return tuple(levels)


@dataclass(frozen=True)
class PciFunction:
    """A display controller or accelerator as /sys/bus/pci/devices shows it."""

    bus_id: str
    vendor: str | None
    device: str | None
    pci_class: str | None
    link: PcieLink
    boot_vga: bool | None = None
    upstream: PcieLink | None = None   # the bridge/switch port above it, when it has a link


@dataclass(frozen=True)
class GpuFacts:
    gpus: tuple[GpuInfo, ...] = ()
    accelerators: tuple[PciFunction, ...] = ()   # non-GPU PCI accelerators (class 0x0b40, 0x12xxxx)
    driver_version: str | None = None
    cuda_version: str | None = None
    nvidia_source: str | None = None     # "NVML" | "nvidia-smi -q -x" | "nvidia-smi -q" | None
    nvidia_error: str | None = None      # why no NVIDIA driver data, when it was sought
    evidence: Mapping[str, str] = field(default_factory=dict)
    drm_note: str | None = None          # why DRM (fdinfo) holders of GPU memory may be missing

    @property
    def discrete(self) -> tuple[GpuInfo, ...]:
        return tuple(g for g in self.gpus if not g.integrated)

    @classmethod
    def gather(cls, host: "Host") -> "GpuFacts":
        try:
            return _gather(host)
        except Exception as exc:  # facts never raise: a surprise becomes "unknown" with the reason
            return cls(nvidia_error=f"GPU facts could not be gathered: {exc.__class__.__name__}: {exc}")


# --- gathering ---------------------------------------------------------------------------------------------------


def _gather(host: "Host") -> GpuFacts:
    evidence: dict[str, str] = {}
    pci = _pci_functions(host)
    nvidia, nv_source, nv_error, driver, cuda = _nvidia(host, evidence)
    nvidia = tuple(replace(g, unified_memory=True, integrated=True) if nvidia_unified(g.name) else g for g in nvidia)
    by_bus = {g.pci_bus_id: g for g in nvidia if g.pci_bus_id}
    gpus: list[GpuInfo] = []
    for g in nvidia:
        fn = pci.get(g.pci_bus_id or "")
        if fn is not None and g.pcie is not None:
            g = replace(g, pcie=replace(g.pcie, speed_current=fn.link.speed_current, speed_max=fn.link.speed_max),
                        boot_vga=fn.boot_vga)
        elif fn is not None:
            g = replace(g, pcie=fn.link, boot_vga=fn.boot_vga)
        gpus.append(g)
    for g in _drm_cards(host, pci):
        if g.pci_bus_id in by_bus or (g.vendor == "nvidia" and nvidia and g.pci_bus_id is None):
            continue
        gpus.append(g)
        if g.pci_bus_id:
            by_bus[g.pci_bus_id] = g
    accelerators = []
    for bus_id, fn in sorted(pci.items()):
        if bus_id in by_bus:
            continue
        if (fn.pci_class or "").startswith("0x03"):
            vendor = VENDORS.get(fn.vendor or "", "other")
            gpus.append(GpuInfo(vendor=vendor, pci_bus_id=bus_id, device_id=fn.device, pcie=fn.link,
                                boot_vga=fn.boot_vga, integrated=_intel_integrated(vendor, bus_id)
                                or (fn.device or "") in AMD_APU_DEVICE_IDS and vendor == "amd",
                                source=f"{PCI_DEVICES}/{bus_id}"))
        else:
            accelerators.append(fn)
    has_nvidia_device = any(fn.vendor == "0x10de" and (fn.pci_class or "").startswith("0x03") for fn in pci.values())
    if not nvidia and not has_nvidia_device:
        nv_error = None  # no NVIDIA device: NVML's "library not found" is no news
    drm = DrmFacts.gather(host) if gpus else DrmFacts()
    cards = _cards_by_bus(host) if gpus else {}
    gpus = [_with_drm(host, g, drm, cards) for g in gpus]
    return GpuFacts(tuple(gpus), tuple(accelerators), driver, cuda, nv_source if nvidia else None, nv_error,
                    evidence, drm.note if any(g.vendor != "nvidia" for g in gpus) else None)


def _drm_card_names(host: "Host") -> list[str]:
    """The DRM cards (card0, card1, ...), at most MAX_DRM_CARDS: a snapshot listing 20,000 is not a machine."""
    return [c for c in host.files.listdir(DRM) if re.fullmatch(r"card\d+", c)][:MAX_DRM_CARDS]


def _cards_by_bus(host: "Host") -> dict[str, str]:
    """PCI address -> DRM card name (the first card of an address), read once for every GPU."""
    found: dict[str, str] = {}
    for card in _drm_card_names(host):
        bus_id = _drm_bus_id(host, f"{DRM}/{card}/device")
        if bus_id is not None:
            found.setdefault(bus_id, card)
    return found


def _with_drm(host: "Host", g: GpuInfo, drm: DrmFacts, cards: Mapping[str, str]) -> GpuInfo:
    """Display connectors for every vendor; per-process VRAM from fdinfo where the driver gave no process list."""
    changes: dict[str, Any] = {}
    card = cards.get(g.pci_bus_id) if g.pci_bus_id else None
    if card is not None and card in drm.connected:
        connectors = drm.connected[card]
        changes["connectors"] = connectors
        if g.display_active is None:
            changes["display_active"] = bool(connectors)
    if g.processes is None and g.vendor != "nvidia":
        clients = drm.on(g.pci_bus_id)
        if any(c.vram_mib is not None for c in clients):
            changes["processes"] = tuple(GpuProcess(c.pid, c.vram_mib, c.name, client_kind(c.name))
                                         for c in clients if c.vram_mib)
            changes["processes_source"] = "/proc/<pid>/fdinfo"
            if g.memory_used_mib is None and g.memory_total_mib is not None and drm.note is None:
                # no used-VRAM file (Intel xe): with every process seen, the holders add up to what is used
                used = min(sum(c.vram_mib or 0 for c in clients), g.memory_total_mib)
                changes.update(memory_used_mib=used, memory_free_mib=g.memory_total_mib - used)
        elif not clients and drm.scanned and drm.note is None:
            changes["processes"] = ()   # root saw every process: none holds this GPU
            changes["processes_source"] = "/proc/<pid>/fdinfo"
    return replace(g, **changes) if changes else g


def _nvidia(host: "Host", evidence: dict[str, str]):
    """NVIDIA GPUs: the nvml sample first, then nvidia-smi XML, then text."""
    errors = []
    sample = host.sample("nvml")
    if isinstance(sample, dict) and not sample.get("error") and isinstance(sample.get("gpus"), list):
        gpus = tuple(_from_nvml(row) for row in sample["gpus"] if isinstance(row, dict))
        gpus = _name_processes(host, gpus)
        return gpus, "NVML", None, _s(sample.get("driver_version")), _s(sample.get("cuda_version"))
    if isinstance(sample, dict) and sample.get("error"):
        errors.append(f"NVML: {sample['error']}")
    elif host.sample_errors.get("nvml"):
        errors.append(host.sample_errors["nvml"])
    for argv, parse in ((NVSMI_XML, parse_nvidia_smi_xml), (NVSMI_TEXT, parse_nvidia_smi_text)):
        result = host.run(list(argv))
        line = " ".join(argv)
        if result is None:
            errors.append(f"{line}: not available")
            continue
        if not result.ok:
            first = (result.stdout.strip() or result.stderr.strip()).splitlines()[:1]
            errors.append(f"{line}: exit status {result.rc}" + (f" ({first[0]})" if first else ""))
            continue
        report: NvidiaSmiReport = parse(result.stdout)
        if report.error or not report.gpus:
            errors.append(f"{line}: {report.error or 'no GPU listed'}")
            continue
        gpus = _name_processes(host, report.gpus)
        return gpus, line, None, report.driver_version, report.cuda_version
    return (), None, "; ".join(errors) or None, None, None


def _s(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _i(value: Any) -> int | None:
    # every NVML/nvidia-smi figure tunehost reads (MiB, %, MHz, W, lanes) is a count: negative is garbage
    parsed = integer(value) if isinstance(value, str) else value
    return whole(parsed)


def _f(value: Any) -> float | None:
    return number(value, 0.0, 1e15)  # NaN, infinity or a negative reading is no reading


def _b(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _from_nvml(row: Mapping[str, Any]) -> GpuInfo:
    pcie = row.get("pcie") if isinstance(row.get("pcie"), dict) else {}
    gen_max, gen_dev = _i(pcie.get("gen_max")), _i(pcie.get("gen_device_max"))
    reasons = row.get("clocks_event_reasons_active")
    procs = row.get("processes")
    mig = row.get("mig_devices") if isinstance(row.get("mig_devices"), list) else []
    return GpuInfo(
        vendor="nvidia",
        index=_i(row.get("index")),
        name=_s(row.get("name")),
        uuid=_s(row.get("uuid")),
        pci_bus_id=normalise_bus_id(row.get("pci_bus_id")),
        memory_total_mib=_i(row.get("memory_total_mib")),
        memory_used_mib=_i(row.get("memory_used_mib")),
        memory_free_mib=_i(row.get("memory_free_mib")),
        memory_reserved_mib=_i(row.get("memory_reserved_mib")),
        compute_capability=_s(row.get("compute_capability")),
        pcie=PcieLink(
            gen_current=_i(pcie.get("gen_current")), gen_max=gen_max, gen_device_max=gen_dev,
            # NVML's max generation is already capped by the host: below the card's own max means the host limits it
            gen_host_max=gen_max if gen_max is not None and gen_dev is not None and gen_max < gen_dev else None,
            width_current=_i(pcie.get("width_current")), width_max=_i(pcie.get("width_max")), source="NVML",
        ),
        temperature_c=_f(row.get("temperature_c")),
        temperature_slowdown_c=_f(row.get("temperature_slowdown_c")),
        clock_reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else None,
        power_draw_w=_f(row.get("power_draw_w")),
        power_limit_w=_f(row.get("power_limit_w")),
        power_default_limit_w=_f(row.get("power_default_limit_w")),
        pstate=_s(row.get("pstate")),
        utilization_pct=_i(row.get("utilization_pct")),
        display_active=_b(row.get("display_active")),
        display_attached=_b(row.get("display_mode")),
        mig_enabled=_b(row.get("mig_enabled")),
        mig_devices=tuple(MigDevice(_i(m.get("index")), _i(m.get("memory_total_mib")), _i(m.get("memory_used_mib")))
                          for m in mig if isinstance(m, dict)),
        processes=tuple(GpuProcess(_i(p.get("pid")), _i(p.get("used_mib")), None, _s(p.get("type")))
                        for p in procs if isinstance(p, dict)) if isinstance(procs, list) else None,
        source="NVML",
        memory_bus_width_bits=_i(row.get("memory_bus_width_bits")),
        memory_clock_max_mhz=_i(row.get("memory_clock_max_mhz")),
        bar1_total_mib=_i(row.get("bar1_total_mib")),
    )


def _name_processes(host: "Host", gpus: tuple[GpuInfo, ...]) -> tuple[GpuInfo, ...]:
    """Fill process names from the `processes` sample (NVML records only pids); nvidia-smi's own names win."""
    if not any(p.name is None for g in gpus for p in (g.processes or ())):
        return gpus
    names: dict[int, str] = {}
    rows = host.sample("processes")
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("pid"), int) and row.get("name"):
            names[row["pid"]] = str(row["name"])
    if not host.live and any(p.pid not in names for g in gpus for p in (g.processes or ()) if p.name is None):
        # a snapshot whose processes sample lacks a pid: nvidia-smi's listing, when recorded, names it
        for argv, parse in ((NVSMI_XML, parse_nvidia_smi_xml), (NVSMI_TEXT, parse_nvidia_smi_text)):
            result = host.run(list(argv))
            if result is not None and result.ok:
                for g in parse(result.stdout).gpus:
                    for p in g.processes or ():
                        if p.pid is not None and p.name:
                            names.setdefault(p.pid, p.name)
                break
    out = []
    for g in gpus:
        if g.processes:
            g = replace(g, processes=tuple(replace(p, name=p.name or names.get(p.pid or -1)) for p in g.processes))
        out.append(g)
    return tuple(out)


def _pci_functions(host: "Host") -> dict[str, PciFunction]:
    found: dict[str, PciFunction] = {}
    for name in host.files.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{name}"
        cls = host.files.read_value(f"{base}/class")
        if not cls or not (cls.startswith("0x03") or cls.startswith(ACCELERATOR_CLASSES)):
            continue
        if _lower(host.files.read_value(f"{base}/vendor")) in BMC_VIDEO_VENDORS:
            continue
        bus_id = normalise_bus_id(name) or name
        boot = host.files.read_value(f"{base}/boot_vga")
        link, upstream = _sysfs_link(host, base), _upstream_link(host, base)
        if upstream is not None and upstream.gen_max and link.gen_max and upstream.gen_max < link.gen_max:
            # the port above (root port, switch, riser retimer) caps the generation: the link can reach only that
            link = replace(link, gen_device_max=link.gen_max, gen_host_max=upstream.gen_max, gen_max=upstream.gen_max)
        found[bus_id] = PciFunction(
            bus_id, _lower(host.files.read_value(f"{base}/vendor")), _lower(host.files.read_value(f"{base}/device")),
            cls.lower(), link, boot == "1" if boot in ("0", "1") else None, upstream,
        )
    return found


def _lower(value: str | None) -> str | None:
    return value.lower() if value else None


def _sysfs_link(host: "Host", base: str) -> PcieLink:
    cur = host.files.read_value(f"{base}/current_link_speed")
    top = host.files.read_value(f"{base}/max_link_speed")
    return PcieLink(
        gen_current=link_gen(cur), gen_max=link_gen(top),
        width_current=host.files.read_int(f"{base}/current_link_width") or None,
        width_max=host.files.read_int(f"{base}/max_link_width") or None,
        speed_current=cur, speed_max=top, source=base,
    )


def _upstream_link(host: "Host", base: str) -> PcieLink | None:
    """The link of the port the device hangs off (a bridge, a switch, a riser's retimer), when sysfs shows it."""
    target = host.files.readlink(base)
    if not target:
        return None
    parent = os.path.basename(os.path.dirname(os.path.normpath(target)))
    if not normalise_bus_id(parent) or not re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d", parent):
        return None
    link = _sysfs_link(host, f"{PCI_DEVICES}/{parent}")
    return link if link.speed_max or link.width_max else None


def _intel_integrated(vendor: str, bus_id: str | None) -> bool:
    return vendor == "intel" and bus_id == "0000:00:02.0"


def _xe_vram_mib(host: "Host", dev: str) -> int | None:
    """Intel xe discrete cards (Arc B-series and later on xe): VRAM per tile in tileN/physical_vram_size_bytes."""
    sizes = [host.files.read_int(f"{dev}/{tile}/physical_vram_size_bytes")
             for tile in host.files.listdir(dev) if re.fullmatch(r"tile\d+", tile)]
    known = [size for size in sizes if size is not None and size > 0]
    return _bytes_mib(sum(known)) if known else None


def _drm_cards(host: "Host", pci: Mapping[str, PciFunction]) -> list[GpuInfo]:
    cards = []
    for card in _drm_card_names(host):
        dev = f"{DRM}/{card}/device"
        vendor_id = _lower(host.files.read_value(f"{dev}/vendor"))
        if vendor_id is None or vendor_id in BMC_VIDEO_VENDORS:
            continue
        vendor = VENDORS.get(vendor_id, "other")
        device_id = _lower(host.files.read_value(f"{dev}/device"))
        bus_id = _drm_bus_id(host, dev)
        fn = pci.get(bus_id or "")
        link = fn.link if fn is not None else _sysfs_link(host, dev)
        if vendor == "amd" and device_id not in AMD_APU_DEVICE_IDS:
            link = _amd_link(host, dev, link)
        vram = _bytes_mib(host.files.read_int(f"{dev}/mem_info_vram_total"))
        vram_used = _bytes_mib(host.files.read_int(f"{dev}/mem_info_vram_used"))
        if vendor == "intel" and vram is None:
            vram = _xe_vram_mib(host, dev)  # xe has no "used" file: that comes from the fdinfo holders
        gtt = _bytes_mib(host.files.read_int(f"{dev}/mem_info_gtt_total"))
        gtt_used = _used_mib(_bytes_mib(host.files.read_int(f"{dev}/mem_info_gtt_used")), gtt)
        vram_used = _used_mib(vram_used, vram)
        apu_name = AMD_APU_DEVICE_IDS.get(device_id or "") if vendor == "amd" else None
        # a small carve-out beside a large GTT pool is an APU even when its id is not in the table
        carve_out = vendor == "amd" and vram is not None and gtt is not None and vram <= 2048 and gtt >= 4 * vram \
            and gtt >= 4096 and not host.files.exists(f"{dev}/pp_dpm_pcie")
        integrated = apu_name is not None or carve_out or _intel_integrated(vendor, bus_id)
        temps, crits = _hwmon_temps(host, dev)
        cap, cap_default = _hwmon_power_cap(host, dev) if vendor == "amd" else (None, None)
        boot = host.files.read_value(f"{dev}/boot_vga")
        cards.append(GpuInfo(
            vendor=vendor,
            index=int(card[4:]),
            name=_card_name(host, dev, vendor, device_id, apu_name),
            pci_bus_id=bus_id,
            device_id=device_id,
            memory_total_mib=vram,
            memory_used_mib=vram_used,
            memory_free_mib=vram - vram_used if vram is not None and vram_used is not None else None,
            gtt_total_mib=gtt,
            gtt_used_mib=gtt_used,
            unified_memory=integrated,
            integrated=integrated,
            pcie=link if (link.width_max or link.speed_max) else None,
            temperature_c=temps.get("edge", temps.get("temp1", temps.get("junction"))),
            hotspot_c=temps.get("junction"),
            hotspot_crit_c=crits.get("junction"),
            utilization_pct=whole_text(host.files.read_value(f"{dev}/gpu_busy_percent"), 0, 100),
            power_limit_w=cap,
            power_default_limit_w=cap_default,
            boot_vga=boot == "1" if boot in ("0", "1") else None,
            source=dev,
        ))
    return cards


def _drm_bus_id(host: "Host", dev: str) -> str | None:
    target = host.files.readlink(dev)
    if target:
        bus = normalise_bus_id(os.path.basename(os.path.normpath(target)))
        if bus:
            return bus
    for line in (host.files.read(f"{dev}/uevent") or "").splitlines():
        if line.startswith("PCI_SLOT_NAME="):
            return normalise_bus_id(line.partition("=")[2])
    return None


def _amd_link(host: "Host", dev: str, link: PcieLink) -> PcieLink:
    """AMD dGPUs sit behind an on-board switch: the endpoint's sysfs link is internal, pp_dpm_pcie is the real slot."""
    levels = parse_pp_dpm_pcie(host.files.read(f"{dev}/pp_dpm_pcie"))
    if not levels:
        return link
    current = next((lv for lv in levels if lv[2]), None)
    gens = [lv[0] for lv in levels if lv[0]]
    widths = [lv[1] for lv in levels if lv[1]]
    return replace(link, gen_current=current[0] if current else link.gen_current,
                   width_current=current[1] if current else link.width_current,
                   gen_max=max(gens) if gens else link.gen_max, width_max=max(widths) if widths else link.width_max,
                   source=f"{dev}/pp_dpm_pcie")


MAX_MEMORY_BYTES = 1 << 50  # 1 PiB: a GPU memory size above this is garbage (a hostile snapshot), not a size


def _bytes_mib(value: int | None) -> int | None:
    return value // MIB if value is not None and 0 <= value < MAX_MEMORY_BYTES else None


def _used_mib(used: int | None, total: int | None) -> int | None:
    """A `mem_info_*_used` value that fits in its total; None when it cannot be (more used than there is)."""
    return used if used is None or total is None or used <= total else None


def _hwmon_temps(host: "Host", dev: str) -> tuple[dict[str, float], dict[str, float]]:
    """({label: °C}, {label: critical °C}) of the card's own hwmon (amdgpu: edge, junction, mem)."""
    from tunehost.facts.thermal import hwmon_readings

    temps: dict[str, float] = {}
    crits: dict[str, float] = {}
    for reading in hwmon_readings(host, f"{dev}/hwmon"):
        temps.setdefault(reading.label, reading.value_c)
        if reading.crit_c is not None and 0 < reading.crit_c < 150:
            crits.setdefault(reading.label, reading.crit_c)
    return temps, crits


def _hwmon_power_cap(host: "Host", dev: str) -> tuple[float | None, float | None]:
    """amdgpu's enforced board power cap and its default (hwmon power1_cap / power1_cap_default, microwatts) in W;
    None for a file that is absent or not a plausible wattage (1 W - 2 kW)."""
    for hw in sorted(host.files.listdir(f"{dev}/hwmon")):
        if not re.fullmatch(r"hwmon\d+", hw):
            continue
        values = []
        for name in ("power1_cap", "power1_cap_default"):
            uw = host.files.read_int(f"{dev}/hwmon/{hw}/{name}")
            values.append(round(uw / 1e6, 2) if uw is not None and 1_000_000 <= uw <= 2_000_000_000 else None)
        if values[0] is not None or values[1] is not None:
            return values[0], values[1]
    return None, None


def _card_name(host: "Host", dev: str, vendor: str, device_id: str | None, apu_name: str | None) -> str:
    product = host.files.read_value(f"{dev}/product_name")
    if product:
        return product
    if apu_name:
        return f"AMD {apu_name} iGPU"
    if vendor == "intel" and device_id in INTEL_DGPU_DEVICE_IDS:
        return INTEL_DGPU_DEVICE_IDS[device_id]
    if vendor == "amd":  # a consumer Radeon has no product_name: libdrm's table names it, as Mesa does
        name = amdgpu_product_name(parse_amdgpu_ids(host.files.read(AMDGPU_IDS)), device_id,
                                   host.files.read_value(f"{dev}/revision"))
        if name:
            return name
    return f"{vendor.upper() if vendor != 'other' else 'PCI'} GPU {device_id or ''}".strip()
