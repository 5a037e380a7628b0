"""`nvidia-smi -q` (text) and `nvidia-smi -q -x` (XML) -> the same GpuInfo dataclasses.

Both forms vary by driver: "Clocks Throttle Reasons" (<= 530) became "Clocks Event Reasons"; "Host Max" /
"Device Max" PCIe generations exist only on newer drivers (and may read N/A); "Display Mode" was deprecated in
favour of "Display Attached" (595); power readings moved from <power_readings> to <gpu_power_readings> with
average/instant draws. Garbage in -> an empty report with `error` set, never an exception.

The dataclasses here (GpuInfo, PcieLink, GpuProcess, MigDevice) are also what tunehost.facts.gpu builds from NVML
and from amdgpu sysfs, so every source yields the same shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from tunehost.bounds import number_text, whole_text

# canonical clock-event (throttle) reason names, as NVML's bitmask and nvidia-smi's XML tags name them
CLOCK_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}
# nvidia-smi -q text labels -> canonical names
_TEXT_REASONS = {
    "idle": "gpu_idle",
    "gpu idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clocks_setting",
    "display clocks setting": "display_clocks_setting",
}


def decode_clock_reasons(mask: int | None) -> tuple[str, ...]:
    """NVML's clocks-event-reasons bitmask -> canonical names, in bit order."""
    if mask is None:
        return ()
    return tuple(name for name, bit in CLOCK_REASON_BITS.items() if mask & bit)


@dataclass(frozen=True)
class PcieLink:
    """A PCIe link as a driver or sysfs reports it. Generations are 1..6; widths are lanes."""

    gen_current: int | None = None
    gen_max: int | None = None          # what the link can reach here (min of device and host)
    gen_device_max: int | None = None   # what the card can do (newer drivers, NVML)
    gen_host_max: int | None = None     # what the slot/CPU can do (newer drivers)
    width_current: int | None = None
    width_max: int | None = None
    speed_current: str | None = None    # raw sysfs strings ("8.0 GT/s PCIe", "8 GT/s")
    speed_max: str | None = None
    source: str = ""                    # where it was read: a command line or a sysfs directory


@dataclass(frozen=True)
class GpuProcess:
    pid: int | None
    used_mib: int | None
    name: str | None = None             # executable base name only (never the command line)
    type: str | None = None             # C (compute), G (graphics), C+G


@dataclass(frozen=True)
class MigDevice:
    index: int | None
    memory_total_mib: int | None
    memory_used_mib: int | None


# NVIDIA performance states, P0 (fastest) .. P15: one reading of the level and its thresholds for doctor and bench
IDLE_PSTATE = 5   # P5 and above are idle states: a display's load there is not a run's
LOW_PSTATE = 3    # P3 and above while in use: a low performance state (llama.cpp#17880: RTX 3060 in P3)
IN_USE_PCT = 5    # a GPU counts as in use from this utilisation: partial offload keeps it mostly idle


@dataclass(frozen=True)
class GpuInfo:
    """One GPU, whatever the source (NVML, nvidia-smi, amdgpu sysfs)."""

    vendor: str                          # nvidia | amd | intel | other
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None        # normalised "0000:01:00.0"
    device_id: str | None = None         # "0x2504"
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    memory_free_mib: int | None = None
    memory_reserved_mib: int | None = None
    gtt_total_mib: int | None = None     # amdgpu: system memory the GPU can map
    gtt_used_mib: int | None = None
    unified_memory: bool = False         # an APU / iGPU sharing system RAM
    integrated: bool = False
    compute_capability: str | None = None
    pcie: PcieLink | None = None
    temperature_c: float | None = None
    temperature_slowdown_c: float | None = None
    hotspot_c: float | None = None
    hotspot_crit_c: float | None = None  # amdgpu hwmon junction temp2_crit: where the card throttles hard
    clock_reasons: tuple[str, ...] | None = None   # active reasons; None = unknown
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    pstate: str | None = None
    utilization_pct: int | None = None
    display_active: bool | None = None
    display_attached: bool | None = None
    boot_vga: bool | None = None
    mig_enabled: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    processes: tuple[GpuProcess, ...] | None = None   # None = not reported by the source
    source: str = ""
    processes_source: str | None = None  # where the process list came from when not the driver ("/proc/<pid>/fdinfo")
    connectors: tuple[str, ...] | None = None   # DRM connectors with a monitor plugged in; None = unknown
    memory_bus_width_bits: int | None = None    # NVML: for the VRAM bandwidth of the TG ceiling
    memory_clock_max_mhz: int | None = None
    bar1_total_mib: int | None = None           # NVIDIA BAR1: the CPU's window into VRAM (resizable-bar)

    @property
    def label(self) -> str:
        where = self.pci_bus_id or (f"#{self.index}" if self.index is not None else "?")
        return f"{self.name or self.vendor + ' GPU'} ({where})"

    @property
    def idle(self) -> bool | None:
        """Whether the GPU was idle when read: P8 and lower-power states, or the idle clock reason."""
        if self.clock_reasons is not None and "gpu_idle" in self.clock_reasons:
            return True
        level = self.pstate_level
        if level is not None:
            return level >= IDLE_PSTATE
        if self.utilization_pct is not None:
            return self.utilization_pct < IN_USE_PCT
        return None

    @property
    def pstate_level(self) -> int | None:
        """"P3" -> 3 (P0..P15); None for anything else."""
        return whole_text(self.pstate[1:], 0, 15) if self.pstate and self.pstate.startswith("P") else None


@dataclass(frozen=True)
class NvidiaSmiReport:
    gpus: tuple[GpuInfo, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    error: str | None = None             # why nothing could be parsed


# --- value helpers -----------------------------------------------------------------------------------------------

MAX_VALUE = 1e15  # no nvidia-smi figure (MiB, MHz, W, %) comes near this
_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NOT_DONE = re.compile(r"[eE][-+]?\d|[xX][0-9a-fA-F]|[.,]\d")  # a number that goes on past what _NUM read


def num(text: Any) -> float | None:
    """The first number in a value ("24576 MiB", "16x", "37 C", "27.98 W"); None for N/A, garbage or absent."""
    if text is None:
        return None
    value = str(text)
    match = _NUM.search(value)
    if match is None or _NOT_DONE.match(value, match.end()):  # "1e999", "0x10", "12,288": not the number shown
        return None
    return number_text(match.group(), -MAX_VALUE, MAX_VALUE)  # 10^400 is garbage, not inf


def integer(text: Any) -> int | None:
    value = num(text)
    return int(value) if value is not None else None


def enabled(text: Any) -> bool | None:
    if text is None:
        return None
    value = str(text).strip().lower()
    if value in ("enabled", "yes", "active", "on", "1", "true"):
        return True
    if value in ("disabled", "no", "not active", "off", "0", "false"):
        return False
    return None


def normalise_bus_id(text: Any) -> str | None:
    """"00000000:01:00.0" / "0000:01:00.0" / "00:1E.0" -> "0000:01:00.0" (lower case, 4-digit domain)."""
    if not text:
        return None
    match = re.search(r"(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])", str(text))
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def process_base_name(text: Any) -> str | None:
    """"/snap/code/148/.../code --type=gpu-process ..." -> "code". Only the executable's base name is kept."""
    if not text:
        return None
    value = str(text).strip()
    if not value or value.upper() in ("N/A", "NONE"):
        return None
    exe = re.split(r"\s+-", value, maxsplit=1)[0].strip()
    base = exe.rstrip("/").rsplit("/", 1)[-1]
    return base or None


# --- XML ---------------------------------------------------------------------------------------------------------


def parse_nvidia_smi_xml(text: str | None) -> NvidiaSmiReport:
    """`nvidia-smi -q -x` -> NvidiaSmiReport. Never raises."""
    if not text or not text.strip():
        return NvidiaSmiReport(error="empty output")
    import xml.etree.ElementTree as ET

    body = re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)  # the DTD is never fetched or needed
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        return NvidiaSmiReport(error=f"not nvidia-smi XML ({exc})")
    if root.tag != "nvidia_smi_log":
        return NvidiaSmiReport(error=f"not nvidia-smi XML (root <{root.tag}>)")
    try:
        gpus = tuple(_xml_gpu(i, g) for i, g in enumerate(root.findall("gpu")))
    except Exception as exc:  # an unexpected layout must not break the run
        return NvidiaSmiReport(error=f"unexpected nvidia-smi XML layout ({exc.__class__.__name__}: {exc})")
    return NvidiaSmiReport(gpus, _text(root.find("driver_version")), _text(root.find("cuda_version")))


def _text(el: Any) -> str | None:
    if el is None or el.text is None:
        return None
    value = el.text.strip()
    return None if not value or value.upper() == "N/A" else value


def _first(el: Any, *paths: str) -> str | None:
    for path in paths:
        value = _text(el.find(path))
        if value is not None:
            return value
    return None


def _xml_gpu(index: int, g: Any) -> GpuInfo:
    pci = g.find("pci")
    link = pci.find("pci_gpu_link_info") if pci is not None else None
    pcie = None
    if link is not None:
        pcie = PcieLink(
            gen_current=integer(_first(link, "pcie_gen/current_link_gen")),
            gen_max=integer(_first(link, "pcie_gen/max_link_gen")),
            gen_device_max=integer(_first(link, "pcie_gen/max_device_link_gen")),
            gen_host_max=integer(_first(link, "pcie_gen/max_host_link_gen")),
            width_current=integer(_first(link, "link_widths/current_link_width")),
            width_max=integer(_first(link, "link_widths/max_link_width")),
            source="nvidia-smi -q -x",
        )
    reasons_el = g.find("clocks_event_reasons")
    if reasons_el is None:
        reasons_el = g.find("clocks_throttle_reasons")
    reasons = None
    if reasons_el is not None:
        active = []
        for child in reasons_el:
            name = re.sub(r"^clocks_(event|throttle)_reason_", "", child.tag)
            if enabled(_text(child)) and name in CLOCK_REASON_BITS:
                active.append(name)
        reasons = tuple(active)
    power = g.find("gpu_power_readings")
    if power is None:
        power = g.find("power_readings")
    draw = limit = default_limit = None
    if power is not None:
        draw = num(_first(power, "power_draw", "average_power_draw", "instant_power_draw"))
        limit = num(_first(power, "enforced_power_limit", "current_power_limit", "power_limit"))
        default_limit = num(_first(power, "default_power_limit"))
    processes = []
    for proc in g.findall("processes/process_info"):
        processes.append(GpuProcess(integer(_first(proc, "pid")), integer(_first(proc, "used_memory")),
                                    process_base_name(_first(proc, "process_name")), _first(proc, "type")))
    mig = []
    for dev in g.findall("mig_devices/mig_device"):
        mig.append(MigDevice(integer(_first(dev, "index")), integer(_first(dev, "fb_memory_usage/total")),
                             integer(_first(dev, "fb_memory_usage/used"))))
    display_attached = enabled(_first(g, "display_attached"))
    if display_attached is None:
        display_attached = enabled(_first(g, "display_mode"))
    return GpuInfo(
        vendor="nvidia",
        index=index,
        name=_first(g, "product_name"),
        uuid=_first(g, "uuid"),
        pci_bus_id=normalise_bus_id(_first(g, "pci/pci_bus_id") or g.get("id")),
        device_id=_device_id(_first(g, "pci/pci_device_id")),
        memory_total_mib=integer(_first(g, "fb_memory_usage/total")),
        memory_used_mib=integer(_first(g, "fb_memory_usage/used")),
        memory_free_mib=integer(_first(g, "fb_memory_usage/free")),
        memory_reserved_mib=integer(_first(g, "fb_memory_usage/reserved")),
        bar1_total_mib=integer(_first(g, "bar1_memory_usage/total")),
        pcie=pcie,
        temperature_c=num(_first(g, "temperature/gpu_temp")),
        temperature_slowdown_c=num(_first(g, "temperature/gpu_temp_slow_threshold")),
        clock_reasons=reasons,
        power_draw_w=draw,
        power_limit_w=limit,
        power_default_limit_w=default_limit,
        pstate=_first(g, "performance_state"),
        utilization_pct=integer(_first(g, "utilization/gpu_util")),
        display_active=enabled(_first(g, "display_active")),
        display_attached=display_attached,
        mig_enabled=enabled(_first(g, "mig_mode/current_mig")),
        mig_devices=tuple(mig),
        processes=tuple(processes),
        source="nvidia-smi -q -x",
    )


def _device_id(text: str | None) -> str | None:
    """nvidia-smi's "0x268410DE" (device<<16 | vendor) -> "0x2684"."""
    if not text:
        return None
    match = re.fullmatch(r"(?:0x)?([0-9A-Fa-f]{4})([0-9A-Fa-f]{4})", text.strip())
    if match and match.group(2).lower() == "10de":
        return "0x" + match.group(1).lower()
    return None


# --- text --------------------------------------------------------------------------------------------------------


@dataclass
class _Node:
    key: str
    value: str
    indent: int
    children: list["_Node"] = field(default_factory=list)

    def find(self, *path: str) -> "_Node | None":
        node: _Node | None = self
        for part in path:
            if node is None:
                return None
            node = next((c for c in node.children if c.key.lower() == part.lower()), None)
        return node

    def get(self, *path: str) -> str | None:
        node = self.find(*path)
        if node is None:
            return None
        value = node.value.strip()
        return None if not value or value.upper() == "N/A" else value

    def walk(self) -> Iterable["_Node"]:
        for child in self.children:
            yield child
            yield from child.walk()


_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def parse_nvidia_smi_text(text: str | None) -> NvidiaSmiReport:
    """`nvidia-smi -q` -> NvidiaSmiReport. Never raises."""
    if not text or not text.strip():
        return NvidiaSmiReport(error="empty output")
    try:
        top, sections = _text_tree(text)
        gpus = tuple(_text_gpu(i, bus, node) for i, (bus, node) in enumerate(sections))
    except Exception as exc:  # garbage must not break the run
        return NvidiaSmiReport(error=f"unexpected nvidia-smi -q layout ({exc.__class__.__name__}: {exc})")
    if not gpus:
        return NvidiaSmiReport(error="no \"GPU <bus id>\" section in the output",
                               driver_version=top.get("Driver Version"), cuda_version=top.get("CUDA Version"))
    return NvidiaSmiReport(gpus, top.get("Driver Version"), top.get("CUDA Version"))


def _text_tree(text: str) -> tuple[_Node, list[tuple[str, _Node]]]:
    top = _Node("", "", -1)
    sections: list[tuple[str, _Node]] = []
    stack: list[_Node] = [top]
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("="):
            continue
        stripped = raw.strip()
        header = _GPU_HEADER.match(stripped)
        if header and (len(raw) - len(raw.lstrip())) == 0:
            node = _Node("GPU", header.group(1), -1)
            sections.append((header.group(1), node))
            stack = [node]
            continue
        indent = len(raw.expandtabs(4)) - len(raw.expandtabs(4).lstrip())
        key, sep, value = stripped.partition(":")
        if not sep:
            key, value = stripped, ""
        node = _Node(key.strip(), value.strip(), indent)
        while len(stack) > 1 and stack[-1].indent >= indent:
            stack.pop()
        stack[-1].children.append(node)
        stack.append(node)
    return top, sections


def _text_gpu(index: int, bus: str, g: _Node) -> GpuInfo:
    link = g.find("PCI", "GPU Link Info")
    pcie = None
    if link is not None:
        pcie = PcieLink(
            gen_current=integer(link.get("PCIe Generation", "Current")),
            gen_max=integer(link.get("PCIe Generation", "Max")),
            gen_device_max=integer(link.get("PCIe Generation", "Device Max")),
            gen_host_max=integer(link.get("PCIe Generation", "Host Max")),
            width_current=integer(link.get("Link Width", "Current")),
            width_max=integer(link.get("Link Width", "Max")),
            source="nvidia-smi -q",
        )
    reasons_node = g.find("Clocks Event Reasons") or g.find("Clocks Throttle Reasons")
    reasons = None
    if reasons_node is not None:
        reasons = tuple(_TEXT_REASONS[n.key.lower()] for n in reasons_node.walk()
                        if n.key.lower() in _TEXT_REASONS and enabled(n.value))
    power = g.find("GPU Power Readings") or g.find("Power Readings")
    draw = limit = default_limit = None
    if power is not None:
        draw = num(power.get("Power Draw") or power.get("Average Power Draw") or power.get("Instant Power Draw"))
        limit = num(power.get("Enforced Power Limit") or power.get("Current Power Limit") or power.get("Power Limit"))
        default_limit = num(power.get("Default Power Limit"))
    processes = _text_processes(g.find("Processes"))
    display_attached = enabled(g.get("Display Attached"))
    if display_attached is None:
        display_attached = enabled(g.get("Display Mode"))
    return GpuInfo(
        vendor="nvidia",
        index=index,
        name=g.get("Product Name"),
        uuid=g.get("GPU UUID"),
        pci_bus_id=normalise_bus_id(g.get("PCI", "Bus Id") or bus),
        device_id=_device_id(g.get("PCI", "Device Id")),
        memory_total_mib=integer(g.get("FB Memory Usage", "Total")),
        memory_used_mib=integer(g.get("FB Memory Usage", "Used")),
        memory_free_mib=integer(g.get("FB Memory Usage", "Free")),
        memory_reserved_mib=integer(g.get("FB Memory Usage", "Reserved")),
        bar1_total_mib=integer(g.get("BAR1 Memory Usage", "Total")),
        pcie=pcie,
        temperature_c=num(g.get("Temperature", "GPU Current Temp")),
        # "GPU Slowdown T.Limit Temp" (newer drivers) is relative to T.Limit, not a temperature: not used
        temperature_slowdown_c=num(g.get("Temperature", "GPU Slowdown Temp")),
        clock_reasons=reasons,
        power_draw_w=draw,
        power_limit_w=limit,
        power_default_limit_w=default_limit,
        pstate=g.get("Performance State"),
        utilization_pct=integer(g.get("Utilization", "Gpu")),
        display_active=enabled(g.get("Display Active")),
        display_attached=display_attached,
        mig_enabled=enabled(g.get("MIG Mode", "Current")),
        processes=processes,
        source="nvidia-smi -q",
    )


def _text_processes(node: _Node | None) -> tuple[GpuProcess, ...]:
    if node is None:
        return ()
    found = []
    for child in node.children:
        if child.key.lower() == "process id":
            found.append(GpuProcess(integer(child.value), integer(child.get("Used GPU Memory")),
                                    process_base_name(child.get("Name")), child.get("Type")))
    return tuple(found)
