"""headless: a desktop session holding the inference GPU (compositor VRAM, displays)."""

import json

from tunehost.check import Severity
from tunehost.checks.headless import HeadlessCheck
from tunehost.facts import HostFacts
from tunehost.facts.processes import ProcessFacts
from tunehost.host import open_host

from tests.conftest import DATA, corpus
from tests.gpu.test_checks import S, run
from tests.system.test_processes import SNAPS, findings, sev


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


def test_headless_12700f_compositor_holds_vram_of_the_inference_gpu():
    [finding] = findings(HeadlessCheck, SNAPS / "desktop-12700f-rtx3060")
    assert finding.severity is Severity.WARN and "599 MiB of VRAM" in finding.summary
    assert finding.fix.commands == ("sudo systemctl set-default multi-user.target",
                                    "sudo systemctl isolate multi-user.target")
    assert "graphical.target" in finding.fix.text


def test_headless_laptop_apu_is_info():
    [finding] = findings(HeadlessCheck, SNAPS / "laptop-5800u-apu")
    assert finding.severity is Severity.INFO and "plasmashell" in finding.summary


def test_headless_server_is_ok():
    [finding] = findings(HeadlessCheck, SNAPS / "server-epyc9654-2s")
    assert finding.severity is Severity.OK and "multi-user.target" in finding.summary


def test_headless_without_gpu_facts(make_snapshot):
    snap = make_snapshot(cmd={"systemctl get-default": "graphical.target\n"},
                         samples={"processes": [{"pid": 40, "name": "Xorg", "rss_bytes": 90 * 2**20}]})
    facts = HostFacts.of(ProcessFacts.gather(open_host(snap)))  # no GpuFacts given: the view says why
    [finding] = HeadlessCheck().run(facts)
    assert finding.severity is Severity.INFO and "GPU facts" in finding.evidence


def test_headless_missing_and_garbage(make_snapshot):
    assert sev(findings(HeadlessCheck, make_snapshot())) == ["skip"]
    snap = make_snapshot(cmd={"systemctl get-default": ("", 1, "Failed to connect to bus\n")},
                         samples={"processes": [{"pid": None}, 3, {"pid": 4, "name": None}]})
    assert sev(findings(HeadlessCheck, snap)) == ["ok"]
