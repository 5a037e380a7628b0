"""pcie-link: the GPU's PCIe link generation and width, on real nvidia-smi/lspci/sysfs captures (SOURCES.md)."""

import os

from tunehost.checks.pcie_link import PcieLinkCheck

from tests.conftest import corpus
from tests.gpu.test_checks import S, _serving_3060, nec_snapshot, nvsmi, run, sev


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
