"""Writes the gpu group's files into the composite snapshots (tests/data/snapshots/<name>/). Run it to rebuild them:

    .venv/bin/python -m tests.gpu.snapshot_files

Where each file comes from:
- cmd/nvidia-smi_-q_-x: the real RTX 3090 (driver 525) and RTX 3080 (driver 595) XML dumps of the corpus
  (corpus/nvidia-smi/rtx3090-*.txt, rtx3080-*.txt), with the product, memory, link, display, temperature, power and
  process values replaced by the composite machine's own (RTX 3060 12 GB / RTX 5090 32 GB).
- cmd/nvidia-smi_-q: the real RTX 4090 text dump (corpus/nvidia-smi/rtx4090-*.txt, a driver with Host/Device Max),
  with the same replacements.
- samples/nvml.json: what tunehost.host.nvml writes for the same GPU (hand-written in that format).
- cmd/sensors (laptop): hw-probe format of the corpus thermal files, values for a Ryzen 7 5800U laptop at rest.
- fs/sys/... hwmon, thermal zones, thermal_throttle, drm and PCI files: hand-written in the real sysfs formats
  (millidegrees, "16.0 GT/s PCIe", bus-id links); coretemp values follow the corpus Raptor Lake idle sample,
  AMD device ids and the Strix Halo bus address (0000:c5:00.0 behind 00:08.1) follow public pci.ids data.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "data"
CORPUS = ROOT / "corpus" / "nvidia-smi"
SNAPS = ROOT / "snapshots"


def put(snap: str, rel: str, text: str) -> None:
    path = SNAPS / snap / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.write_text(text)


def link(snap: str, rel: str, target: str) -> None:
    path = SNAPS / snap / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    os.symlink(target, path)


def tag(xml: str, name: str, value: str, count: int = 1) -> str:
    return re.sub(rf"<{name}>[^<]*</{name}>", f"<{name}>{value}</{name}>", xml, count=count)


def text_line(text: str, label: str, value: str, count: int = 1) -> str:
    return re.sub(rf"^(\s*{re.escape(label)}\s*:).*$", lambda m: f"{m.group(1)} {value}", text, count=count,
                  flags=re.M)


def pci_function(snap: str, path: str, cls: str, vendor: str, device: str, cur: str, top: str, width: int,
                 max_width: int, boot_vga: str | None = None) -> None:
    """A PCI function under /sys/devices, with its /sys/bus/pci/devices link."""
    for name, value in (("class", cls), ("vendor", vendor), ("device", device), ("current_link_speed", cur),
                        ("max_link_speed", top), ("current_link_width", str(width)),
                        ("max_link_width", str(max_width))):
        put(snap, f"fs{path}/{name}", value + "\n")
    if boot_vga is not None:
        put(snap, f"fs{path}/boot_vga", boot_vga + "\n")
    bus = path.rsplit("/", 1)[-1]
    link(snap, f"fs/sys/bus/pci/devices/{bus}", "../../.." + path[len("/sys"):])


def drm_card(snap: str, card: str, dev_path: str) -> None:
    link(snap, f"fs/sys/class/drm/{card}", "../../" + dev_path[len("/sys/"):] + f"/drm/{card}")
    link(snap, f"fs{dev_path}/drm/{card}/device", "../../../" + dev_path.rsplit("/", 1)[-1])


def hwmon(snap: str, n: int, name: str, temps: list[tuple[str, int, int | None, int | None]],
          device: str | None = None) -> None:
    """/sys/class/hwmon/hwmonN (a directory here; on a host it is a link to the device's hwmon)."""
    base = f"fs/sys/class/hwmon/hwmon{n}"
    put(snap, f"{base}/name", name + "\n")
    for i, (label, milli, high, crit) in enumerate(temps, 1):
        put(snap, f"{base}/temp{i}_input", f"{milli}\n")
        put(snap, f"{base}/temp{i}_label", label + "\n")
        if high is not None:
            put(snap, f"{base}/temp{i}_max", f"{high}\n")
        if crit is not None:
            put(snap, f"{base}/temp{i}_crit", f"{crit}\n")
    if device:
        for i, (label, milli, _h, _c) in enumerate(temps, 1):
            put(snap, f"fs{device}/hwmon/hwmon{n}/name", name + "\n")
            put(snap, f"fs{device}/hwmon/hwmon{n}/temp{i}_input", f"{milli}\n")
            put(snap, f"fs{device}/hwmon/hwmon{n}/temp{i}_label", label + "\n")


def amd_card(snap: str, dev: str, device: str, vram: int, vram_used: int, gtt: int, gtt_used: int, busy: int) -> None:
    for name, value in (("mem_info_vram_total", vram), ("mem_info_vram_used", vram_used),
                        ("mem_info_gtt_total", gtt), ("mem_info_gtt_used", gtt_used), ("gpu_busy_percent", busy)):
        put(snap, f"fs{dev}/{name}", f"{value}\n")


MIB = 1024 * 1024


# --- desktop-12700f-rtx3060 --------------------------------------------------------------------------------------

def desktop_12700f_rtx3060() -> None:
    snap = "desktop-12700f-rtx3060"
    bus = "00000000:01:00.0"
    procs = [(1342, "G", "/usr/lib/xorg/Xorg", 412), (1688, "G", "/usr/bin/gnome-shell", 187)]
    xml = (CORPUS / "rtx3090-x16-gen1-of-4-idle-p8-q-x.txt").read_text()
    xml = xml.replace('<gpu id="00000000:00:10.0">', f'<gpu id="{bus}">')
    for name, value in (("product_name", "NVIDIA GeForce RTX 3060"), ("display_mode", "Enabled"),
                        ("display_active", "Enabled"), ("uuid", "GPU-5f0c1a2e-8d3b-4c61-9e2a-7b1d0c3f4a55"),
                        ("pci_bus", "01"), ("pci_device", "00"), ("pci_device_id", "250410DE"),
                        ("pci_bus_id", bus), ("pci_sub_system_id", "397D1462"),
                        ("max_host_link_gen", "4"), ("gpu_temp", "38 C"), ("power_draw", "14.61 W"),
                        ("power_limit", "170.00 W"), ("default_power_limit", "170.00 W"),
                        ("enforced_power_limit", "170.00 W"), ("max_power_limit", "170.00 W")):
        xml = tag(xml, name, value)
    fb = ("<fb_memory_usage>\n\t\t\t<total>12288 MiB</total>\n\t\t\t<reserved>250 MiB</reserved>\n"
          "\t\t\t<used>605 MiB</used>\n\t\t\t<free>11432 MiB</free>\n\t\t</fb_memory_usage>")
    xml = re.sub(r"<fb_memory_usage>.*?</fb_memory_usage>", fb, xml, count=1, flags=re.S)
    rows = "".join(f"\n\t\t\t<process_info>\n\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>\n"
                   f"\t\t\t\t<compute_instance_id>N/A</compute_instance_id>\n\t\t\t\t<pid>{pid}</pid>\n"
                   f"\t\t\t\t<type>{kind}</type>\n\t\t\t\t<process_name>{name}</process_name>\n"
                   f"\t\t\t\t<used_memory>{mib} MiB</used_memory>\n\t\t\t</process_info>"
                   for pid, kind, name, mib in procs)
    xml = re.sub(r"<processes>\s*</processes>", f"<processes>{rows}\n\t\t</processes>", xml, count=1)
    put(snap, "cmd/nvidia-smi_-q_-x", xml)

    text = (CORPUS / "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt").read_text()
    text = text.replace("GPU 00000000:01:00.0", f"GPU {bus}")
    text = text_line(text, "Product Name", "NVIDIA GeForce RTX 3060")
    text = text_line(text, "Product Architecture", "Ampere")
    text = text_line(text, "GPU UUID", "GPU-5f0c1a2e-8d3b-4c61-9e2a-7b1d0c3f4a55")
    text = text_line(text, "Device Id", "0x250410DE")
    text = re.sub(r"(PCIe Generation\n\s+Max\s+:) 3\n(\s+Current\s+:) 1\n(\s+Device Current\s+:) 1\n"
                  r"(\s+Device Max\s+:) 4\n(\s+Host Max\s+:) 3",
                  r"\1 4\n\2 1\n\3 1\n\4 4\n\5 4", text)
    text = re.sub(r"(FB Memory Usage\n\s+Total\s+:) \d+ MiB\n(\s+Reserved\s+:) \d+ MiB\n(\s+Used\s+:) \d+ MiB\n"
                  r"(\s+Free\s+:) \d+ MiB", r"\1 12288 MiB\n\2 250 MiB\n\3 605 MiB\n\4 11432 MiB", text)
    text = text_line(text, "Gpu", "0 %")
    text = text_line(text, "GPU Current Temp", "38 C")
    text = text_line(text, "Power Draw", "14.61 W")
    for label in ("Current Power Limit", "Requested Power Limit", "Default Power Limit", "Max Power Limit"):
        text = text_line(text, label, "170.00 W")
    head, _, _ = text.partition("    Processes\n")
    text = head + "    Processes\n" + "".join(
        f"        GPU instance ID                   : N/A\n        Compute instance ID               : N/A\n"
        f"        Process ID                        : {pid}\n            Type                          : {kind}\n"
        f"            Name                          : {name}\n            Used GPU Memory               : {mib} MiB\n"
        for pid, kind, name, mib in procs)
    put(snap, "cmd/nvidia-smi_-q", "\n==============NVSMI LOG==============\n\n"
        "Timestamp                                 : Tue Mar  4 09:12:44 2025\n"
        "Driver Version                            : 550.120\nCUDA Version                              : 12.4\n\n"
        "Attached GPUs                             : 1\n" + text.lstrip("\n"))

    put(snap, "samples/nvml.json", json.dumps({
        "error": None, "driver_version": "550.120", "cuda_version": "12.4",
        "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3060", "uuid": "GPU-5f0c1a2e-8d3b-4c61-9e2a-7b1d0c3f4a55",
                  "pci_bus_id": bus, "memory_total_mib": 12288, "memory_used_mib": 605, "memory_free_mib": 11432,
                  "compute_capability": "8.6",
                  "pcie": {"gen_current": 1, "gen_max": 4, "gen_device_max": 4, "width_current": 16, "width_max": 16},
                  "temperature_c": 38, "temperature_slowdown_c": 98, "clocks_event_reasons": 1,
                  "clocks_event_reasons_active": ["gpu_idle"], "power_draw_w": 14.61, "power_limit_w": 170.0,
                  "power_default_limit_w": 170.0, "pstate": "P8", "utilization_pct": 0, "display_active": True,
                  "display_mode": True, "mig_enabled": None, "mig_devices": [],
                  "processes": [{"pid": pid, "used_mib": mib, "type": kind} for pid, kind, _n, mib in procs]}],
    }, indent=1) + "\n")

    root = "/sys/devices/pci0000:00/0000:00:01.0"
    pci_function(snap, root, "0x060400", "0x8086", "0x460d", "2.5 GT/s PCIe", "16.0 GT/s PCIe", 16, 16)
    gpu = f"{root}/0000:01:00.0"
    pci_function(snap, gpu, "0x030000", "0x10de", "0x2504", "2.5 GT/s PCIe", "16.0 GT/s PCIe", 16, 16, "1")
    drm_card(snap, "card0", gpu)

    # i7-12700F: 8 P-cores (Core 0..28 step 4) + 4 E-cores (Core 32..35), numbering as in the corpus Raptor Lake file
    cores = [("Package id 0", 41000)] + [(f"Core {n}", t) for n, t in zip(
        [0, 4, 8, 12, 16, 20, 24, 28, 32, 33, 34, 35], [40000, 35000, 38000, 34000, 36000, 35000, 37000, 34000,
                                                         36000, 36000, 36000, 36000])]
    hwmon(snap, 0, "acpitz", [("temp1", 27800, None, 105000)])
    hwmon(snap, 1, "nvme", [("Composite", 35850, 80850, 84850)])
    hwmon(snap, 2, "coretemp", [(lab, t, 80000, 100000) for lab, t in cores])
    for i, (kind, milli) in enumerate((("acpitz", 27800), ("x86_pkg_temp", 41000))):
        put(snap, f"fs/sys/class/thermal/thermal_zone{i}/type", kind + "\n")
        put(snap, f"fs/sys/class/thermal/thermal_zone{i}/temp", f"{milli}\n")
    for cpu in range(20):
        put(snap, f"fs/sys/devices/system/cpu/cpu{cpu}/thermal_throttle/core_throttle_count", "0\n")
        put(snap, f"fs/sys/devices/system/cpu/cpu{cpu}/thermal_throttle/package_throttle_count", "0\n")


# --- desktop-9950x3d-rtx5090 -------------------------------------------------------------------------------------

def desktop_9950x3d_rtx5090() -> None:
    snap = "desktop-9950x3d-rtx5090"
    bus = "00000000:01:00.0"
    xml = (CORPUS / "rtx3080-x16-gen4-loaded-p2-q-x.txt").read_text()
    xml = xml.replace('<gpu id="00000000:0C:00.0">', f'<gpu id="{bus}">')
    for name, value in (("driver_version", "570.133.07"), ("cuda_version", "12.8"),
                        ("product_name", "NVIDIA GeForce RTX 5090"), ("product_architecture", "Blackwell"),
                        ("display_attached", "No"), ("uuid", "GPU-a3c59e1d-2b7f-4d08-8c6e-91f0e2d4b7a3"),
                        ("pci_bus", "01"), ("pci_device", "00"), ("pci_device_id", "2B8510DE"),
                        ("pci_bus_id", bus), ("max_link_gen", "5"), ("current_link_gen", "1"),
                        ("device_current_link_gen", "1"), ("max_device_link_gen", "5"), ("max_host_link_gen", "5"),
                        ("performance_state", "P8"), ("clocks_event_reason_gpu_idle", "Active"),
                        ("gpu_util", "0 %"), ("gpu_temp", "31 C"), ("average_power_draw", "21.35 W"),
                        ("instant_power_draw", "21.80 W"), ("current_power_limit", "575.00 W"),
                        ("requested_power_limit", "575.00 W"), ("default_power_limit", "575.00 W"),
                        ("max_power_limit", "600.00 W")):
        xml = tag(xml, name, value)
    fb = ("<fb_memory_usage>\n\t\t\t<total>32607 MiB</total>\n\t\t\t<reserved>491 MiB</reserved>\n"
          "\t\t\t<used>2 MiB</used>\n\t\t\t<free>32114 MiB</free>\n\t\t</fb_memory_usage>")
    xml = re.sub(r"<fb_memory_usage>.*?</fb_memory_usage>", fb, xml, count=1, flags=re.S)
    put(snap, "cmd/nvidia-smi_-q_-x", xml)

    text = (CORPUS / "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt").read_text()
    text = text_line(text, "Product Name", "NVIDIA GeForce RTX 5090")
    text = text_line(text, "Product Architecture", "Blackwell")
    text = text_line(text, "Display Mode", "Disabled")
    text = text_line(text, "Display Active", "Disabled")
    text = text_line(text, "GPU UUID", "GPU-a3c59e1d-2b7f-4d08-8c6e-91f0e2d4b7a3")
    text = text_line(text, "Device Id", "0x2B8510DE")
    text = re.sub(r"(PCIe Generation\n\s+Max\s+:) 3\n(\s+Current\s+:) 1\n(\s+Device Current\s+:) 1\n"
                  r"(\s+Device Max\s+:) 4\n(\s+Host Max\s+:) 3", r"\1 5\n\2 1\n\3 1\n\4 5\n\5 5", text)
    text = re.sub(r"(FB Memory Usage\n\s+Total\s+:) \d+ MiB\n(\s+Reserved\s+:) \d+ MiB\n(\s+Used\s+:) \d+ MiB\n"
                  r"(\s+Free\s+:) \d+ MiB", r"\1 32607 MiB\n\2 491 MiB\n\3 2 MiB\n\4 32114 MiB", text)
    text = text_line(text, "Gpu", "0 %")
    text = text_line(text, "GPU Current Temp", "31 C")
    text = text_line(text, "Power Draw", "21.35 W")
    for label in ("Current Power Limit", "Requested Power Limit", "Default Power Limit"):
        text = text_line(text, label, "575.00 W")
    head, _, _ = text.partition("    Processes\n")
    put(snap, "cmd/nvidia-smi_-q", "\n==============NVSMI LOG==============\n\n"
        "Timestamp                                 : Sat Jun 14 18:02:10 2025\n"
        "Driver Version                            : 570.133.07\nCUDA Version                              : 12.8\n\n"
        "Attached GPUs                             : 1\n" + head.lstrip("\n")
        + "    Processes                             : None\n")

    put(snap, "samples/nvml.json", json.dumps({
        "error": None, "driver_version": "570.133.07", "cuda_version": "12.8",
        "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "uuid": "GPU-a3c59e1d-2b7f-4d08-8c6e-91f0e2d4b7a3",
                  "pci_bus_id": bus, "memory_total_mib": 32607, "memory_used_mib": 2, "memory_free_mib": 32114,
                  "compute_capability": "12.0",
                  "pcie": {"gen_current": 1, "gen_max": 5, "gen_device_max": 5, "width_current": 16, "width_max": 16},
                  "temperature_c": 31, "temperature_slowdown_c": 90, "clocks_event_reasons": 1,
                  "clocks_event_reasons_active": ["gpu_idle"], "power_draw_w": 21.35, "power_limit_w": 575.0,
                  "power_default_limit_w": 575.0, "pstate": "P8", "utilization_pct": 0, "display_active": False,
                  "display_mode": False, "mig_enabled": None, "mig_devices": [], "processes": []}],
    }, indent=1) + "\n")

    root = "/sys/devices/pci0000:00/0000:00:01.1"
    pci_function(snap, root, "0x060400", "0x1022", "0x14ab", "2.5 GT/s PCIe", "32.0 GT/s PCIe", 16, 16)
    gpu = f"{root}/0000:01:00.0"
    pci_function(snap, gpu, "0x030000", "0x10de", "0x2b85", "2.5 GT/s PCIe", "32.0 GT/s PCIe", 16, 16, "0")
    drm_card(snap, "card0", gpu)
    # the Granite Ridge iGPU (2 CUs) stays enabled: it is not an inference target beside the 5090
    igpu_root = "/sys/devices/pci0000:00/0000:00:08.1"
    pci_function(snap, igpu_root, "0x060400", "0x1022", "0x14eb", "16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16)
    igpu = f"{igpu_root}/0000:7c:00.0"
    pci_function(snap, igpu, "0x030000", "0x1002", "0x13c0", "16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16, "1")
    drm_card(snap, "card1", igpu)
    amd_card(snap, igpu, "0x13c0", 512 * MIB, 31 * MIB, 31 * 1024 * MIB, 12 * MIB, 0)
    hwmon(snap, 0, "nvme", [("Composite", 38850, 81850, 84850)])
    hwmon(snap, 1, "k10temp", [("Tctl", 44625, None, None), ("Tccd1", 41250, None, None),
                               ("Tccd2", 38875, None, None)])
    hwmon(snap, 2, "amdgpu", [("edge", 37000, None, None)], device=igpu)


# --- laptop-5800u-apu --------------------------------------------------------------------------------------------

LAPTOP_SENSORS = """amdgpu-pci-0400
Adapter: PCI adapter
vddgfx:      856.00 mV 
vddnb:       743.00 mV 
edge:         +46.0 C  
PPT:           4.11 W  

BAT0-acpi-0
Adapter: ACPI interface
in0:          12.62 V  

nvme-pci-0100
Adapter: PCI adapter
Composite:    +35.9 C  (low  = -273.1 C, high = +80.8 C)
                       (crit = +84.8 C)

k10temp-pci-00c3
Adapter: PCI adapter
Tctl:         +47.6 C  

acpitz-acpi-0
Adapter: ACPI interface
temp1:        +45.0 C  (crit = +105.0 C)

"""


def laptop_5800u_apu() -> None:
    snap = "laptop-5800u-apu"
    root = "/sys/devices/pci0000:00/0000:00:08.1"
    pci_function(snap, root, "0x060400", "0x1022", "0x1635", "8.0 GT/s PCIe", "8.0 GT/s PCIe", 16, 16)
    igpu = f"{root}/0000:04:00.0"
    pci_function(snap, igpu, "0x030000", "0x1002", "0x1638", "8.0 GT/s PCIe", "8.0 GT/s PCIe", 16, 16, "1")
    drm_card(snap, "card0", igpu)
    amd_card(snap, igpu, "0x1638", 512 * MIB, 301 * MIB, 7680 * MIB, 95 * MIB, 3)
    for name, value in (("name", "amdgpu"), ("temp1_input", "46000"), ("temp1_label", "edge")):
        put(snap, f"fs{igpu}/hwmon/hwmon3/{name}", value + "\n")
    put(snap, "cmd/sensors", LAPTOP_SENSORS)


# --- strix-halo-395 ----------------------------------------------------------------------------------------------

def strix_halo_395() -> None:
    snap = "strix-halo-395"
    root = "/sys/devices/pci0000:00/0000:00:08.1"
    pci_function(snap, root, "0x060400", "0x1022", "0x150c", "16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16)
    igpu = f"{root}/0000:c5:00.0"
    pci_function(snap, igpu, "0x030000", "0x1002", "0x1586", "16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16, "1")
    drm_card(snap, "card1", igpu)
    amd_card(snap, igpu, "0x1586", 512 * MIB, 187 * MIB, 64206 * MIB, 412 * MIB, 0)
    hwmon(snap, 0, "nvme", [("Composite", 36850, 81850, 84850)])
    hwmon(snap, 1, "k10temp", [("Tctl", 47500, None, None), ("Tccd1", 44125, None, None),
                               ("Tccd2", 43750, None, None)])
    hwmon(snap, 2, "amdgpu", [("edge", 41000, None, None)], device=igpu)
    hwmon(snap, 3, "acpitz", [("temp1", 46000, None, 120000)])


# --- server-epyc9654-2s ------------------------------------------------------------------------------------------

def server_epyc9654_2s() -> None:
    snap = "server-epyc9654-2s"
    # the BMC's ASPEED AST2600 VGA is a display controller (class 0x0300) but not a GPU
    root = "/sys/devices/pci0000:00/0000:00:07.1/0000:01:00.0"
    pci_function(snap, "/sys/devices/pci0000:00/0000:00:07.1", "0x060400", "0x1022", "0x14a5", "2.5 GT/s PCIe",
                 "8.0 GT/s PCIe", 1, 1)
    pci_function(snap, f"{root}", "0x060400", "0x1a03", "0x1150", "2.5 GT/s PCIe", "2.5 GT/s PCIe", 1, 1)
    vga = f"{root}/0000:02:00.0"
    pci_function(snap, vga, "0x030000", "0x1a03", "0x2000", "2.5 GT/s PCIe", "2.5 GT/s PCIe", 1, 1, "1")
    drm_card(snap, "card0", vga)
    for sock, (tctl, ccds) in enumerate(((52125, [48500, 47250, 49750, 46875, 48125, 47625, 49000, 46500, 48875,
                                                   47375, 48250, 47000]),
                                         (50875, [47125, 46750, 48375, 45875, 47500, 46625, 47875, 45750, 47250,
                                                  46875, 47625, 46250]))):
        hwmon(snap, sock, "k10temp", [("Tctl", tctl, None, None)]
              + [(f"Tccd{i + 1}", t, None, None) for i, t in enumerate(ccds)])


def main() -> None:
    desktop_12700f_rtx3060()
    desktop_9950x3d_rtx5090()
    laptop_5800u_apu()
    strix_halo_395()
    server_epyc9654_2s()


if __name__ == "__main__":
    main()
