"""gpu-memory: VRAM held by other processes before llama.cpp loads, on real nvidia-smi captures and snapshots."""

import json

import pytest

from tunehost.check import Severity as S
from tunehost.checks.gpu_memory import GpuMemoryCheck
from tunehost.facts import HostFacts
from tunehost.facts.gpu import GpuFacts
from tunehost.host import open_host

from tests.conftest import DATA, corpus
from tests.gpu.test_checks import CORPUS_VERDICTS, nvsmi, rtx4090_with, run, sev
from tests.gpu.test_drm import AMDGPU_TOP_87, ROOT, RX6700XT, USER, amd_card, connectors


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


def test_desktop_12700f_rtx3060_display_on_the_only_gpu_no_igpu():
    facts = HostFacts(open_host(DATA / "snapshots/desktop-12700f-rtx3060"))
    [mem] = GpuMemoryCheck().run(facts)
    assert "599 MiB" in mem.summary and "Xorg" in mem.summary and "gnome-shell" in mem.summary
    assert "no integrated GPU" in mem.fix.text and "multi-user.target" in mem.fix.commands[0]


def test_desktop_holding_300_mib_on_a_12gb_card_is_info_not_warn(make_snapshot):
    # issue 11: judged by what the desktop takes; the desktop-12700f-rtx3060 NVML sample with Xorg + gnome-shell at 300
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    nvml["gpus"][0]["processes"] = [{"pid": 1342, "used_mib": 200, "type": "G"}, {"pid": 1688, "used_mib": 100,
                                                                                  "type": "G"}]
    procs = [{"pid": 1342, "name": "Xorg"}, {"pid": 1688, "name": "gnome-shell"}]
    [found] = run(GpuMemoryCheck(), make_snapshot(samples={"nvml": nvml, "processes": procs}))
    assert found.severity is S.INFO and "the desktop holds 300 MiB" in found.summary


def test_desktop_holding_12_percent_of_a_2gb_card_warns(make_snapshot):
    # the desktop-12700f-rtx3060 NVML sample (Xorg + gnome-shell on the only GPU) on a 2 GB card: 245 MiB is 12 % of it
    nvml = json.loads((DATA / "snapshots/desktop-12700f-rtx3060/samples/nvml.json").read_text())
    gpu = nvml["gpus"][0]
    gpu.update(memory_total_mib=2048, memory_used_mib=250, memory_free_mib=1798)
    gpu["processes"] = [{"pid": 1342, "used_mib": 180, "type": "G"}, {"pid": 1688, "used_mib": 65, "type": "G"}]
    procs = [{"pid": 1342, "name": "Xorg"}, {"pid": 1688, "name": "gnome-shell"}]
    [found] = run(GpuMemoryCheck(), make_snapshot(samples={"nvml": nvml, "processes": procs}))
    assert found.severity is S.WARN and "the desktop holds 245 MiB (12%) of its 2048 MiB" in found.summary


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


@pytest.mark.parametrize("name", sorted(CORPUS_VERDICTS))
def test_gpu_memory_on_every_corpus_capture(make_snapshot, name):
    assert sorted(p.name for p in (DATA / "corpus" / "nvidia-smi").iterdir()) == sorted(CORPUS_VERDICTS)
    assert [f.severity.value for f in run(GpuMemoryCheck(), nvsmi(make_snapshot, name))] == CORPUS_VERDICTS[name]


def test_vram_held_by_no_listed_process_is_reported_beside_the_display_finding(make_snapshot):
    found = run(GpuMemoryCheck(), rtx4090_with(make_snapshot, 16000, 8208))   # the desktop explains 524 MiB of it
    assert sev(found) == [S.WARN, S.WARN]
    assert "only 8208 MiB of 24.0 GiB free at rest, and 15476 MiB of it is held by no listed process" in found[1].summary


def test_amd_holders_unknown_never_read_as_nothing_else_holds_vram(make_snapshot):
    [found] = run(GpuMemoryCheck(), make_snapshot(fs=RX6700XT, manifest=USER))
    assert found.severity is S.OK
    assert "nothing else holds VRAM" not in found.summary and "unknown" in found.summary
    # a user's run sees only its own processes: the text says root is needed
    fs = {**RX6700XT, "/proc/4242/comm": "bash\n"}
    [found] = run(GpuMemoryCheck(), make_snapshot(fs=fs, manifest=USER))
    assert "unknown" in found.summary and "root" in found.summary


def test_amd_card_mostly_used_by_unseen_processes_warns(make_snapshot):
    # the RX 6700 XT's total with ollama's 9179 MiB model+KV+compute buffers (its log in the same capture) resident
    fs = amd_card("card1", "0000:07:00.0", "0x73df", total=12868124672, used=1091891200 + 9179 * 1024 * 1024)
    [found] = run(GpuMemoryCheck(), make_snapshot(fs=fs, manifest=USER))
    assert found.severity is S.WARN and "unknown" in found.summary
    assert found.fix.commands == ("sudo tunehost doctor",)


def test_connected_monitor_marks_the_amd_card_as_driving_the_display(make_snapshot):
    fs = {**RX6700XT, **connectors("card1", "connected", "disconnected")}
    gpu = GpuFacts.gather(open_host(make_snapshot(fs=fs, manifest=USER))).gpus[0]
    assert gpu.display_active is True and gpu.connectors == ("HDMI-A-1",)
    [found] = run(GpuMemoryCheck(), make_snapshot(fs=fs, manifest=USER))
    assert found.severity is S.INFO and "drives the display" in found.summary and "HDMI-A-1" in found.summary
    assert "unknown" in found.summary


def test_desktop_holders_on_an_amd_card_are_judged_by_what_they_hold(make_snapshot):
    fs = {**amd_card("card0", "0000:08:00.0", "0x73df", total=12868124672, used=1091891200),
          **connectors("card0", "connected", "disconnected"),
          "/proc/2217/fdinfo/99": AMDGPU_TOP_87, "/proc/2217/comm": "Xorg\n"}
    [found] = run(GpuMemoryCheck(), make_snapshot(fs=fs, manifest=ROOT))
    assert found.severity is S.INFO and "Xorg (pid 2217, 2 MiB)" in found.summary
