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


# --- pcie-link: the 2 pcie corpus files --------------------------------------------------------------------------


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


# --- composite snapshots -----------------------------------------------------------------------------------------

SNAPSHOTS = sorted(p.name for p in (DATA / "expectations").iterdir() if (p / "gpu.json").is_file())


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_composite_snapshot_expectations(name):
    expected = json.loads((DATA / "expectations" / name / "gpu.json").read_text())
    facts = HostFacts(open_host(DATA / "snapshots" / name))
    for check in (PcieLinkCheck(), GpuMemoryCheck(), ThermalsCheck()):
        assert [f.severity.value for f in check.run(facts)] == expected[check.id], (name, check.id)


def test_strix_halo_unified_memory_is_not_low_vram():
    facts = HostFacts(open_host(DATA / "snapshots/strix-halo-395"))
    [g] = facts.get(GpuFacts).gpus
    assert g.device_id == "0x1586" and g.unified_memory and g.gtt_total_mib == 64206


def test_epyc_bmc_aspeed_vga_is_not_a_gpu():
    facts = GpuFacts.gather(open_host(DATA / "snapshots/server-epyc9654-2s"))
    assert facts.gpus == () and facts.accelerators == ()


# --- placeholder readings (issue 11) -------------------------------------------------------------------------------


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


def test_placeholder_fields_parse_as_unknown():
    from tunehost.parsers.nvidia_smi import integer

    for text in ("N/A", "[N/A]", "Unknown Error", "[Unknown Error]", "Not Supported", ""):
        assert integer(text) is None, text


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


def rtx4090_with(make_snapshot, used: int, free: int):
    """The real RTX 4090 desktop capture (display active, Xorg + gnome-shell + apps: 524 MiB, idle P8), its used and
    free VRAM replaced."""
    text = corpus("nvidia-smi/rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt")
    text = text.replace("Used                              : 609 MiB", f"Used                              : {used} MiB")
    text = text.replace("Free                              : 23599 MiB", f"Free                              : {free} MiB")
    return make_snapshot(cmd={"nvidia-smi -q": text})


CORPUS_VERDICTS = {   # every corpus nvidia-smi capture (../shared/corpus/SOURCES.md), judged by impact
    "a100-sxm4-80gb-mig-enabled-x16-gen4-p0-q-x.txt": ["info"],           # MIG, 80999 MiB free
    "a10g-x8-of-x16-gen1-idle-p8-q-x.txt": ["ok"],                         # Xorg 22 MiB of 23 GB, no display
    # tunehost's own H200 captures (scripts/gpu_proof, tests/data/gpu-proof/h200-580.159.04): nothing held at rest;
    # under the torch load a python3 holds 17514 MiB
    "h100-x16-gen5-idle-p0-q-x.txt": ["ok"],                               # tunehost's own H100 (h100-580.159.04)
    "h100-x16-gen5-idle-p0-q.txt": ["ok"],
    "h200-x16-gen5-idle-p0-q-x.txt": ["ok"],
    "h200-x16-gen5-idle-p0-q.txt": ["ok"],
    "h200-x16-gen5-loaded-p0-q-x.txt": ["warn"],
    "h200-x16-gen5-loaded-p0-q.txt": ["warn"],
    "quadro-p2000-x8-of-x16-gen1-idle-p8-q-x.txt": ["ok"],
    "rtx2080-x8-of-x16-gen1-idle-p8-i9-9900k-q.txt": ["ok"],               # Xorg 4 MiB
    "rtx3080-x16-gen4-loaded-p2-q-x.txt": ["warn"],                        # 660 MiB free, no holder listed
    "rtx3090-x16-gen1-of-4-idle-p8-q-x.txt": ["ok"],
    "rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt": ["warn"],       # desktop 524 MiB
    "tesla-t4-x8-of-x16-gen3-p0-q-x.txt": ["warn"],                        # python 1005 MiB
}
