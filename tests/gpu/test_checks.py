"""pcie-link, gpu-memory and thermals on the real corpus files (each with its SOURCES.md diagnosis) and on the
composite snapshots.

Corpus-built snapshots: cmd/nvidia-smi_-q[_-x] hold the corpus nvidia-smi dumps unchanged; cmd/sensors holds the
corpus sensors dumps unchanged. The RTX 6000 Ada lspci sample becomes the sysfs files SOURCES.md names as its
equivalent (max_link_speed "16.0 GT/s PCIe", current_link_speed "2.5 GT/s PCIe", x16/x16). The NEC SX-Aurora sample
is a `grep -H .` listing of real sysfs files, re-rooted under fs/ with /sys/bus/pci/devices links as a kernel makes.
"""

import json
import os

import pytest

from tunehost.check import Severity
from tunehost.checks.gpu_memory import GpuMemoryCheck
from tunehost.checks.pcie_link import PcieLinkCheck
from tunehost.checks.thermals import ThermalsCheck
from tunehost.facts import HostFacts
from tunehost.facts.gpu import GpuFacts
from tunehost.facts.thermal import ThermalFacts
from tunehost.host import open_host

from tests.conftest import DATA, corpus

S = Severity


def run(check, snap):
    return list(check.run(HostFacts(open_host(snap))))


def sev(findings):
    return [f.severity for f in findings]


def nvsmi(make_snapshot, name, **extra):
    line = "nvidia-smi -q -x" if name.endswith("-q-x.txt") else "nvidia-smi -q"
    return make_snapshot(cmd={line: corpus(f"nvidia-smi/{name}")}, **extra)


# --- pcie-link: the 8 nvidia-smi diagnoses -----------------------------------------------------------------------

def test_a10g_x8_of_x16_is_flagged_gen1_at_p8_is_power_saving(make_snapshot):
    found = run(PcieLinkCheck(), nvsmi(make_snapshot, "a10g-x8-of-x16-gen1-idle-p8-q-x.txt"))
    assert sev(found) == [S.WARN, S.INFO]
    assert "x8 of x16" in found[0].summary
    assert "power saving" in found[1].summary and "pcie.link.gen.current" in found[1].fix.commands[0]


def test_tesla_t4_full_gen3_but_x8_width(make_snapshot):
    found = run(PcieLinkCheck(), nvsmi(make_snapshot, "tesla-t4-x8-of-x16-gen3-p0-q-x.txt"))
    assert sev(found) == [S.WARN] and "x8 of x16" in found[0].summary


def test_quadro_p2000_x8_flagged_gen1_idle_normal(make_snapshot):
    found = run(PcieLinkCheck(), nvsmi(make_snapshot, "quadro-p2000-x8-of-x16-gen1-idle-p8-q-x.txt"))
    assert sev(found) == [S.WARN, S.INFO]


def test_rtx3090_gen1_of_4_at_idle_is_not_flagged(make_snapshot):
    found = run(PcieLinkCheck(), nvsmi(make_snapshot, "rtx3090-x16-gen1-of-4-idle-p8-q-x.txt"))
    assert sev(found) == [S.INFO]
    assert "re-check under load" in found[0].summary and "nvidia-smi --query-gpu" in found[0].fix.commands[0]


def test_rtx3080_loaded_gen4_x16_healthy(make_snapshot):
    assert sev(run(PcieLinkCheck(), nvsmi(make_snapshot, "rtx3080-x16-gen4-loaded-p2-q-x.txt"))) == [S.OK]


def test_a100_mig_link_healthy(make_snapshot):
    assert sev(run(PcieLinkCheck(), nvsmi(make_snapshot, "a100-sxm4-80gb-mig-enabled-x16-gen4-p0-q-x.txt"))) == [S.OK]


def test_rtx2080_x8_slot_flagged_idle_gen1_not(make_snapshot):
    found = run(PcieLinkCheck(), nvsmi(make_snapshot, "rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt"))
    assert sev(found) == [S.WARN, S.INFO]


def test_rtx4090_host_limited_gen3_slot_is_info(make_snapshot):
    found = run(PcieLinkCheck(), nvsmi(make_snapshot, "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt"))
    assert sev(found) == [S.INFO, S.INFO]
    assert "limits the link to Gen3" in found[0].summary and "Gen4" in found[0].summary
    assert "Gen1 of Gen3" in found[1].summary


def test_gen_below_max_under_load_is_a_warning(make_snapshot):
    text = corpus("nvidia-smi/rtx3080-x16-gen4-loaded-p2-q-x.txt").replace(
        "<current_link_gen>4</current_link_gen>", "<current_link_gen>2</current_link_gen>", 1)
    found = run(PcieLinkCheck(), make_snapshot(cmd={"nvidia-smi -q -x": text}))
    assert sev(found) == [S.WARN] and "while busy (P2)" in found[0].summary


def test_x4_link_fails(make_snapshot):
    text = corpus("nvidia-smi/tesla-t4-x8-of-x16-gen3-p0-q-x.txt").replace(
        "<current_link_width>8x</current_link_width>", "<current_link_width>4x</current_link_width>")
    assert sev(run(PcieLinkCheck(), make_snapshot(cmd={"nvidia-smi -q -x": text}))) == [S.FAIL]


# --- pcie-link: the 2 pcie corpus files --------------------------------------------------------------------------

def test_rtx6000ada_lspci_2_5gt_downgraded_idle_is_not_a_fault(make_snapshot):
    # corpus lspci: LnkCap 16GT/s x16, LnkSta 2.5GT/s (downgraded) x16 -> the sysfs equivalents (no driver data)
    text = corpus("pcie/lspci-vvv-rtx6000ada-gen4x16-idle-2.5gt-downgraded-wrx90.txt")
    assert "LnkSta: Speed 2.5GT/s (downgraded), Width x16" in text and "Speed 16GT/s, Width x16" in text
    dev = "/sys/devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0"
    snap = make_snapshot(fs={f"{dev}/class": "0x030000\n", f"{dev}/vendor": "0x10de\n", f"{dev}/device": "0x26b1\n",
                             f"{dev}/max_link_speed": "16.0 GT/s PCIe\n", f"{dev}/current_link_speed": "2.5 GT/s PCIe\n",
                             f"{dev}/max_link_width": "16\n", f"{dev}/current_link_width": "16\n"})
    os.makedirs(snap / "fs/sys/bus/pci/devices")
    os.symlink("../../../devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0", snap / "fs/sys/bus/pci/devices/0000:c1:00.0")
    [found] = run(PcieLinkCheck(), snap)
    assert found.severity is S.INFO and "Gen1 of Gen4" in found.summary and "re-check under load" in found.summary
    assert any("2.5 GT/s PCIe" in v for v in found.evidence.values())


def nec_snapshot(make_snapshot):
    fs, links = {}, {}
    for line in corpus("pcie/nec-sx-aurora-8ve-plx-switch-xeon-silver-4108-pcie-link-sysfs.txt").splitlines():
        if not line.startswith("/sys/"):
            continue
        path, _, value = line.rpartition(":")  # "<path>:<value>" (grep -H); bus ids in the path hold colons too
        fs[path] = value + "\n"
        dev = path.rsplit("/", 1)[0]
        links[dev.rsplit("/", 1)[1]] = dev
    snap = make_snapshot(fs=fs)
    os.makedirs(snap / "fs/sys/bus/pci/devices")
    for bus, dev in links.items():
        os.symlink("../../.." + dev[len("/sys"):], snap / f"fs/sys/bus/pci/devices/{bus}")
    return snap


def test_nec_sx_aurora_old_kernel_8_gt_s_format_healthy_gen3_x16(make_snapshot):
    found = run(PcieLinkCheck(), nec_snapshot(make_snapshot))
    assert found and all(f.severity is S.OK for f in found)
    assert all("0x1bcf" in f.summary and "Gen3 of Gen3" in f.summary and "x16 of x16" in f.summary for f in found)
    # the X722 NIC at 2.5 GT/s x1 behind a 2.5 GT/s bridge is no GPU: not judged here
    assert not any("0x37d2" in f.summary for f in found)


def test_riser_or_bridge_caps_generation_sysfs(make_snapshot):
    port, dev = "/sys/devices/pci0000:00/0000:00:1c.0", "/sys/devices/pci0000:00/0000:00:1c.0/0000:03:00.0"
    fs = {f"{port}/max_link_speed": "8.0 GT/s PCIe\n", f"{port}/max_link_width": "16\n",
          f"{dev}/class": "0x030000\n", f"{dev}/vendor": "0x10de\n", f"{dev}/device": "0x2684\n",
          f"{dev}/max_link_speed": "16.0 GT/s PCIe\n", f"{dev}/current_link_speed": "8.0 GT/s PCIe\n",
          f"{dev}/max_link_width": "16\n", f"{dev}/current_link_width": "16\n"}
    snap = make_snapshot(fs=fs)
    os.makedirs(snap / "fs/sys/bus/pci/devices")
    os.symlink("../../../devices/pci0000:00/0000:00:1c.0", snap / "fs/sys/bus/pci/devices/0000:00:1c.0")
    os.symlink("../../../devices/pci0000:00/0000:00:1c.0/0000:03:00.0", snap / "fs/sys/bus/pci/devices/0000:03:00.0")
    found = run(PcieLinkCheck(), snap)
    assert sev(found) == [S.INFO] and "limits the link to Gen3" in found[0].summary


def test_no_gpu_is_skip(make_snapshot):
    snap = make_snapshot()
    for check in (PcieLinkCheck(), GpuMemoryCheck()):
        [found] = run(check, snap)
        assert found.severity is S.SKIP and found.summary.startswith("no GPU found")


def test_nvidia_smi_driver_failure_is_explained(make_snapshot):
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    snap = make_snapshot(cmd={"nvidia-smi -q -x": (msg, 9), "nvidia-smi -q": (msg, 9)},
                         fs={"/sys/bus/pci/devices/0000:01:00.0/class": "0x030000\n",
                             "/sys/bus/pci/devices/0000:01:00.0/vendor": "0x10de\n"})
    facts = GpuFacts.gather(open_host(snap))
    assert "exit status 9" in facts.nvidia_error and "couldn't communicate" in facts.nvidia_error
    [mem] = run(GpuMemoryCheck(), snap)
    assert mem.severity is S.SKIP and "exit status 9" in mem.summary
    [link] = run(PcieLinkCheck(), snap)
    assert link.severity is S.SKIP  # no link files either


def test_garbage_sysfs_and_garbage_nvidia_smi_never_break(make_snapshot):
    snap = make_snapshot(cmd={"nvidia-smi -q -x": "<<<", "nvidia-smi -q": "\x00garbage"},
                         fs={"/sys/bus/pci/devices/0000:01:00.0/class": "0x030000\n",
                             "/sys/bus/pci/devices/0000:01:00.0/vendor": "banana",
                             "/sys/bus/pci/devices/0000:01:00.0/current_link_speed": "fast",
                             "/sys/bus/pci/devices/0000:01:00.0/current_link_width": "wide",
                             "/sys/class/drm/card0/device/vendor": "0x1002\n",
                             "/sys/class/drm/card0/device/mem_info_vram_total": "lots",
                             "/sys/class/hwmon/hwmon0/name": "k10temp\n",
                             "/sys/class/hwmon/hwmon0/temp1_input": "hot\n"},
                         samples={"nvml": {"gpus": "nope", "error": None}})
    for check in (PcieLinkCheck(), GpuMemoryCheck(), ThermalsCheck()):
        for f in run(check, snap):
            assert f.severity is not S.ERROR


def test_nvml_sample_is_preferred_and_names_come_from_processes_sample(make_snapshot):
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    snap = make_snapshot(samples={"nvml": nvml, "processes": [{"pid": 1342, "name": "Xorg"},
                                                              {"pid": 1688, "name": "gnome-shell"}]},
                         cmd={"nvidia-smi -q -x": "garbage that must not be read"})
    facts = GpuFacts.gather(open_host(snap))
    [g] = facts.gpus
    assert facts.nvidia_source == "NVML" and g.compute_capability == "8.6"
    assert [p.name for p in g.processes] == ["Xorg", "gnome-shell"]


def test_nvml_error_in_snapshot_falls_back_to_xml(make_snapshot):
    snap = make_snapshot(samples={"nvml": {"error": "NVML init failed: NVMLError_DriverNotLoaded", "gpus": []}},
                         cmd={"nvidia-smi -q -x": corpus("nvidia-smi/a10g-x8-of-x16-gen1-idle-p8-q-x.txt")})
    facts = GpuFacts.gather(open_host(snap))
    assert facts.nvidia_source == "nvidia-smi -q -x" and facts.gpus[0].name == "NVIDIA A10G"


# --- gpu-memory --------------------------------------------------------------------------------------------------

def test_a100_mig_enabled_is_reported(make_snapshot):
    found = run(GpuMemoryCheck(), nvsmi(make_snapshot, "a100-sxm4-80gb-mig-enabled-x16-gen4-p0-q-x.txt"))
    assert sev(found) == [S.INFO] and "MIG" in found[0].summary and "-mig 0" in found[0].fix.commands[0]


def test_rtx4090_desktop_holding_524_mib_warns_whatever_the_24gb_card_size(make_snapshot):
    # judged by the VRAM the desktop takes (issue 11): half a GB is layers or context on any card
    found = run(GpuMemoryCheck(), nvsmi(make_snapshot, "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt"))
    assert sev(found) == [S.WARN]
    assert "Xorg (pid 1180, 290 MiB)" in found[0].summary and "524 MiB" in found[0].summary


def test_tesla_t4_python_holding_a_gigabyte_is_a_warning(make_snapshot):
    found = run(GpuMemoryCheck(), nvsmi(make_snapshot, "tesla-t4-x8-of-x16-gen3-p0-q-x.txt"))
    assert sev(found) == [S.WARN] and "python (pid 5762, 1005 MiB)" in found[0].summary
    assert found[0].fix.commands == ("kill 5762   # python",)


def test_xorg_with_a_few_mib_and_no_display_is_no_news(make_snapshot):
    found = run(GpuMemoryCheck(), nvsmi(make_snapshot, "rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt"))
    assert sev(found) == [S.OK] and "4 MiB" in found[0].summary


def test_another_llama_server_or_ollama_is_named(make_snapshot):
    nvml = json.loads((DATA / "snapshots/desktop-9950x3d-rtx5090/samples/nvml.json").read_text())
    nvml["gpus"][0]["processes"] = [{"pid": 900, "used_mib": 20480, "type": "C"}]
    snap = make_snapshot(samples={"nvml": nvml, "processes": [{"pid": 900, "name": "ollama"}]})
    [found] = run(GpuMemoryCheck(), snap)
    assert found.severity is S.WARN and "ollama (pid 900, 20480 MiB)" in found.summary
    assert "sudo systemctl stop ollama" in found.fix.commands


def test_vram_used_but_no_process_visible_is_a_warning(make_snapshot):
    found = run(GpuMemoryCheck(), nvsmi(make_snapshot, "rtx3080-x16-gen4-loaded-p2-q-x.txt"))
    assert sev(found) == [S.WARN] and "660 MiB" in found[0].summary


def test_unified_apu_by_carve_out_and_gtt_without_known_id(make_snapshot):
    dev = "/sys/class/drm/card0/device"
    snap = make_snapshot(fs={f"{dev}/vendor": "0x1002\n", f"{dev}/device": "0x9999\n",
                             f"{dev}/mem_info_vram_total": f"{512 << 20}\n", f"{dev}/mem_info_gtt_total": f"{15 << 30}\n"})
    [g] = GpuFacts.gather(open_host(snap)).gpus
    assert g.unified_memory and g.integrated


def test_amd_discrete_card_is_not_unified(make_snapshot):
    dev = "/sys/class/drm/card0/device"
    snap = make_snapshot(fs={f"{dev}/vendor": "0x1002\n", f"{dev}/device": "0x744c\n",
                             f"{dev}/mem_info_vram_total": f"{24 << 30}\n", f"{dev}/mem_info_vram_used": f"{1 << 30}\n",
                             f"{dev}/mem_info_gtt_total": f"{31 << 30}\n",
                             f"{dev}/pp_dpm_pcie": "0: 2.5GT/s, x1 \n1: 16.0GT/s, x16 *\n"})
    [g] = GpuFacts.gather(open_host(snap)).gpus
    assert not g.unified_memory and g.memory_free_mib == 23 * 1024
    assert (g.pcie.gen_current, g.pcie.gen_max, g.pcie.width_current) == (4, 4, 16)
    assert sev(run(GpuMemoryCheck(), snap)) == [S.OK] and sev(run(PcieLinkCheck(), snap)) == [S.OK]


# --- thermals: the 5 thermal diagnoses ---------------------------------------------------------------------------

def sensors(make_snapshot, name):
    return make_snapshot(cmd={"sensors": corpus(f"thermal/{name}")})


def test_ryzen_3700x_tctl_82c_is_hot(make_snapshot):
    [f] = run(ThermalsCheck(), sensors(make_snapshot, "sensors-k10temp-tctl-82c-tccd1-ryzen7-3700x-msi-b550-hot.txt"))
    assert f.severity is S.WARN and "82.8" in f.summary
    assert any("Tccd1" in k for k in f.evidence)


def test_gigabyte_b650_no_k10temp_bogus_acpitz_is_not_the_cpu(make_snapshot):
    snap = sensors(make_snapshot, "sensors-gigabyte-b650-am5-no-k10temp-bogus-acpitz-kernel6.0.txt")
    [f] = run(ThermalsCheck(), snap)
    assert f.severity is S.SKIP and "bogus" in f.summary and "16.8" in f.summary and "modprobe k10temp" in f.summary
    facts = ThermalFacts.gather(open_host(snap))
    assert [r.chip for r in facts.bogus] == ["acpitz"] and not facts.cpu


def test_ryzen_5900x_old_k10temp_tctl_tdie_without_tccd(make_snapshot):
    [f] = run(ThermalsCheck(), sensors(make_snapshot, "sensors-k10temp-tctl-tdie-ryzen9-5900x-msi-b550-kernel5.10.txt"))
    assert f.severity is S.OK and "33.9" in f.summary


def test_amd_laptop_tctl_98c_is_at_the_thermal_limit(make_snapshot):
    snap = sensors(make_snapshot, "sensors-amd-laptop-k10temp-tctl-98c-acpitz-98c-unresolved-repo.txt")
    [f] = run(ThermalsCheck(), snap)
    assert f.severity is S.FAIL and "98.2" in f.summary and f.fix.commands


def test_raptor_lake_8p16e_idle_is_healthy(make_snapshot):
    snap = sensors(make_snapshot, "sensors-coretemp-msi-z790-ms7d91-raptor-lake-8p16e-idle.txt")
    [f] = run(ThermalsCheck(), snap)
    assert f.severity is S.OK and "Package id 0 39.0" in f.summary
    assert len(ThermalFacts.gather(open_host(snap)).cpu) == 25


def test_throttle_counters_since_boot_are_info_with_the_recheck(make_snapshot):
    fs = {f"/sys/devices/system/cpu/cpu{c}/thermal_throttle/{k}_throttle_count": v
          for c in range(4) for k, v in (("core", "0\n" if c else "17\n"), ("package", "3\n"))}
    fs["/sys/class/hwmon/hwmon0/name"] = "coretemp\n"
    fs["/sys/class/hwmon/hwmon0/temp1_input"] = "45000\n"
    fs["/sys/class/hwmon/hwmon0/temp1_label"] = "Package id 0\n"
    found = run(ThermalsCheck(), make_snapshot(fs=fs))
    assert sev(found) == [S.OK, S.INFO] and "since boot" in found[1].summary
    assert "thermal_throttle" in found[1].fix.commands[0]


def test_sw_power_cap_at_idle_p8_is_not_flagged(make_snapshot):
    # RTX 2080 sample: SW Power Cap Active at P8
    found = run(ThermalsCheck(), nvsmi(make_snapshot, "rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt"))
    assert sev(found)[-1] is S.OK


def test_hw_thermal_slowdown_is_a_fail(make_snapshot):
    text = corpus("nvidia-smi/rtx3080-x16-gen4-loaded-p2-q-x.txt").replace(
        "<clocks_event_reason_hw_thermal_slowdown>Not Active", "<clocks_event_reason_hw_thermal_slowdown>Active")
    found = run(ThermalsCheck(), make_snapshot(cmd={"nvidia-smi -q -x": text}))
    assert found[-1].severity is S.FAIL and "HW thermal slowdown" in found[-1].summary


def test_lowered_power_limit_rtx3090_is_info(make_snapshot):
    found = run(ThermalsCheck(), nvsmi(make_snapshot, "rtx3090-x16-gen1-of-4-idle-p8-q-x.txt"))
    assert found[-1].severity is S.INFO and "-pl 350" in found[-1].fix.commands[0]


def test_hot_idle_gpu_is_a_warning(make_snapshot):
    text = corpus("nvidia-smi/rtx3090-x16-gen1-of-4-idle-p8-q-x.txt").replace("<gpu_temp>37 C", "<gpu_temp>78 C")
    found = run(ThermalsCheck(), make_snapshot(cmd={"nvidia-smi -q -x": text}))
    assert found[-1].severity is S.WARN and "idle" in found[-1].summary


def test_no_thermal_data_is_skip(make_snapshot):
    [f] = run(ThermalsCheck(), make_snapshot())
    assert f.severity is S.SKIP


# --- composite snapshots -----------------------------------------------------------------------------------------

SNAPSHOTS = sorted(p.name for p in (DATA / "expectations").iterdir() if (p / "gpu.json").is_file())


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_composite_snapshot_expectations(name):
    expected = json.loads((DATA / "expectations" / name / "gpu.json").read_text())
    facts = HostFacts(open_host(DATA / "snapshots" / name))
    for check in (PcieLinkCheck(), GpuMemoryCheck(), ThermalsCheck()):
        assert [f.severity.value for f in check.run(facts)] == expected[check.id], (name, check.id)


def test_desktop_12700f_rtx3060_display_on_the_only_gpu_no_igpu():
    facts = HostFacts(open_host(DATA / "snapshots/desktop-12700f-rtx3060"))
    [mem] = GpuMemoryCheck().run(facts)
    assert "599 MiB" in mem.summary and "Xorg" in mem.summary and "gnome-shell" in mem.summary
    assert "no integrated GPU" in mem.fix.text and "multi-user.target" in mem.fix.commands[0]


def test_strix_halo_unified_memory_is_not_low_vram():
    facts = HostFacts(open_host(DATA / "snapshots/strix-halo-395"))
    [g] = facts.get(GpuFacts).gpus
    assert g.device_id == "0x1586" and g.unified_memory and g.gtt_total_mib == 64206


def test_epyc_bmc_aspeed_vga_is_not_a_gpu():
    facts = GpuFacts.gather(open_host(DATA / "snapshots/server-epyc9654-2s"))
    assert facts.gpus == () and facts.accelerators == ()


# --- placeholder readings (issue 11) -------------------------------------------------------------------------------

def test_vgpu_guest_reporting_zero_celsius_and_no_thresholds_is_no_reading_never_ok(make_snapshot):
    # the desktop-12700f-rtx3060 NVML sample as a vGPU guest reports it: 0 °C, no slowdown threshold, N/A power
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    nvml["gpus"][0].update(temperature_c=0, temperature_slowdown_c=None, power_draw_w=None, power_limit_w=None,
                           power_default_limit_w=None, clocks_event_reasons_active=[])
    found = [f for f in run(ThermalsCheck(), make_snapshot(samples={"nvml": nvml})) if "RTX 3060" in f.summary]
    assert sev(found) == [S.SKIP] and "no temperature reading" in found[0].summary and "placeholder" in found[0].summary


# --- pcie-link while llama-server serves (issue 11) ------------------------------------------------------------------

def _serving_3060(make_snapshot, gen: int, util: int, pstate: str):
    # the desktop-12700f-rtx3060 NVML sample, read while its llama-server (pid 2200) answered a request
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    gpu = nvml["gpus"][0]
    gpu.update(utilization_pct=util, pstate=pstate, clocks_event_reasons_active=[] if util else ["gpu_idle"])
    gpu["pcie"]["gen_current"] = gen
    gpu["processes"].append({"pid": 2200, "used_mib": 7000, "type": "C"})
    procs = [{"pid": 2200, "name": "llama-server", "server": "llama-server", "flags": {}}]
    return make_snapshot(samples={"nvml": nvml, "processes": procs})


def test_gen1_while_llama_server_is_serving_is_judged_under_load(make_snapshot):
    [found] = run(PcieLinkCheck(), _serving_3060(make_snapshot, gen=1, util=97, pstate="P2"))
    assert found.severity is S.WARN and "Gen1 of Gen4" in found.summary
    assert "while llama-server (pid 2200) was serving" in found.summary


def test_gen4_while_llama_server_is_serving_is_ok_under_load(make_snapshot):
    [found] = run(PcieLinkCheck(), _serving_3060(make_snapshot, gen=4, util=97, pstate="P2"))
    assert found.severity is S.OK and "under load while llama-server (pid 2200) was serving" in found.summary


def test_idle_llama_server_asks_for_a_run_during_a_request(make_snapshot):
    [found] = run(PcieLinkCheck(), _serving_3060(make_snapshot, gen=1, util=0, pstate="P8"))
    assert found.severity is S.INFO and "during a request" in found.summary


def test_placeholder_fields_parse_as_unknown():
    from tunehost.parsers.nvidia_smi import integer

    for text in ("N/A", "[N/A]", "Unknown Error", "[Unknown Error]", "Not Supported", ""):
        assert integer(text) is None, text


def test_desktop_holding_300_mib_on_a_12gb_card_is_info_not_warn(make_snapshot):
    # issue 11: judged by what the desktop takes; the desktop-12700f-rtx3060 NVML sample with Xorg + gnome-shell at 300
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    nvml["gpus"][0]["processes"] = [{"pid": 1342, "used_mib": 200, "type": "G"}, {"pid": 1688, "used_mib": 100,
                                                                                  "type": "G"}]
    procs = [{"pid": 1342, "name": "Xorg"}, {"pid": 1688, "name": "gnome-shell"}]
    [found] = run(GpuMemoryCheck(), make_snapshot(samples={"nvml": nvml, "processes": procs}))
    assert found.severity is S.INFO and "the desktop holds 300 MiB" in found.summary


# --- severity by impact (issue 20): share of the card held, free VRAM against what llama.cpp needs -----------------


def test_impact_thresholds():
    from tunehost.facts.gpu import free_impact, held_impact

    assert held_impact(245, 2048) == "warn"      # 12 % of a 2 GB card
    assert held_impact(511, 24564) == "info" and held_impact(512, 24564) == "warn"
    assert held_impact(300, 12288) == "info"     # 2.4 %: worth knowing
    assert held_impact(22, 23028) is None and held_impact(127, None) is None
    assert free_impact(106, 2048) == "full" and free_impact(511, None) == "full"
    assert free_impact(660, 10240) == "tight" and free_impact(5120, 10240) is None
    assert free_impact(None, 8192) is None


def test_desktop_holding_12_percent_of_a_2gb_card_warns(make_snapshot):
    # the desktop-12700f-rtx3060 NVML sample (Xorg + gnome-shell on the only GPU) on a 2 GB card: 245 MiB is 12 % of it
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    gpu = nvml["gpus"][0]
    gpu.update(memory_total_mib=2048, memory_used_mib=250, memory_free_mib=1798)
    gpu["processes"] = [{"pid": 1342, "used_mib": 180, "type": "G"}, {"pid": 1688, "used_mib": 65, "type": "G"}]
    procs = [{"pid": 1342, "name": "Xorg"}, {"pid": 1688, "name": "gnome-shell"}]
    [found] = run(GpuMemoryCheck(), make_snapshot(samples={"nvml": nvml, "processes": procs}))
    assert found.severity is S.WARN and "the desktop holds 245 MiB (12%) of its 2048 MiB" in found.summary


def rtx4090_with(make_snapshot, used: int, free: int):
    """The real RTX 4090 desktop capture (display active, Xorg + gnome-shell + apps: 524 MiB, idle P8), its used and
    free VRAM replaced."""
    text = corpus("nvidia-smi/rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt")
    text = text.replace("Used                              : 609 MiB", f"Used                              : {used} MiB")
    text = text.replace("Free                              : 23599 MiB", f"Free                              : {free} MiB")
    return make_snapshot(cmd={"nvidia-smi -q": text})


def test_full_gpu_is_reported_beside_the_display_finding(make_snapshot):
    found = run(GpuMemoryCheck(), rtx4090_with(make_snapshot, 24102, 106))
    assert sev(found) == [S.WARN, S.FAIL]
    assert "also drives the display" in found[0].summary
    assert "is full: only 106 MiB of 24.0 GiB free" in found[1].summary
    assert "tunehost doctor --check gpu-memory" in found[1].fix.commands


def test_full_gpu_while_busy_is_a_warning_not_a_fail(make_snapshot):
    # the real RTX 3080 capture at work (P2, no process visible from the container) with 300 MiB free
    text = corpus("nvidia-smi/rtx3080-x16-gen4-loaded-p2-q-x.txt").replace("<free>660 MiB</free>",
                                                                           "<free>300 MiB</free>", 1)
    [found] = run(GpuMemoryCheck(), make_snapshot(cmd={"nvidia-smi -q -x": text}))
    assert found.severity is S.WARN and "is full: only 300 MiB" in found.summary and "while busy (P2" in found.summary


def test_headless_follows_the_share_of_the_card(make_snapshot):
    from tunehost.checks.headless import HeadlessCheck

    # the real RTX 2080 capture: Xorg holds 4 MiB of 8 GB and drives no display -> worth a line, not a warning
    snap = make_snapshot(cmd={"nvidia-smi -q": corpus("nvidia-smi/rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt"),
                              "systemctl get-default": "graphical.target\n"},
                         samples={"processes": [{"pid": 1505, "name": "Xorg", "rss_bytes": 90 * 2**20}]})
    [found] = run(HeadlessCheck(), snap)
    assert found.severity is S.INFO and "4 MiB of VRAM" in found.summary and "little" in found.summary
    # 12 % of a 2 GB card -> warn
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    nvml["gpus"][0].update(memory_total_mib=2048, memory_used_mib=250, memory_free_mib=1798, display_active=False)
    nvml["gpus"][0]["processes"] = [{"pid": 1342, "used_mib": 245, "type": "G"}]
    snap = make_snapshot(cmd={"systemctl get-default": "graphical.target\n"},
                         samples={"nvml": nvml, "processes": [{"pid": 1342, "name": "Xorg", "rss_bytes": 2**28}]})
    [found] = run(HeadlessCheck(), snap)
    assert found.severity is S.WARN and "245 MiB of VRAM" in found.summary and "12% of" in found.summary


CORPUS_VERDICTS = {   # every corpus nvidia-smi capture (../shared/corpus/SOURCES.md), judged by impact
    "a100-sxm4-80gb-mig-enabled-x16-gen4-p0-q-x.txt": ["info"],           # MIG, 80999 MiB free
    "a10g-x8-of-x16-gen1-idle-p8-q-x.txt": ["ok"],                         # Xorg 22 MiB of 23 GB, no display
    "quadro-p2000-x8-of-x16-gen1-idle-p8-q-x.txt": ["ok"],
    "rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt": ["ok"],               # Xorg 4 MiB
    "rtx3080-x16-gen4-loaded-p2-q-x.txt": ["warn"],                        # 660 MiB free, no holder listed
    "rtx3090-x16-gen1-of-4-idle-p8-q-x.txt": ["ok"],
    "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt": ["warn"],       # desktop 524 MiB
    "tesla-t4-x8-of-x16-gen3-p0-q-x.txt": ["warn"],                        # python 1005 MiB
}


@pytest.mark.parametrize("name", sorted(CORPUS_VERDICTS))
def test_gpu_memory_on_every_corpus_capture(make_snapshot, name):
    assert sorted(p.name for p in (DATA / "corpus" / "nvidia-smi").iterdir()) == sorted(CORPUS_VERDICTS)
    assert [f.severity.value for f in run(GpuMemoryCheck(), nvsmi(make_snapshot, name))] == CORPUS_VERDICTS[name]


def test_vram_held_by_no_listed_process_is_reported_beside_the_display_finding(make_snapshot):
    found = run(GpuMemoryCheck(), rtx4090_with(make_snapshot, 16000, 8208))   # the desktop explains 524 MiB of it
    assert sev(found) == [S.WARN, S.WARN]
    assert "only 8208 MiB of 24.0 GiB free at rest, and 15476 MiB of it is held by no listed process" in found[1].summary
