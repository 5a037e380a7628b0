"""Every fix fits the machine it is shown on: no dmidecode, modprobe or firmware advice in a guest or a container,
no systemctl targets where systemd is not PID 1 (tests/data/snapshots/ci-vm: a 2-vCPU KVM guest with no DMI, no
hwmon and no systemd as init)."""

import json
from pathlib import Path

import pytest

from tunehost.check import Severity
from tunehost.doctor import run_check, select_checks
from tunehost.facts import HostFacts
from tunehost.facts.chassis import MachineFacts, VM_FIRMWARE, machine_kind, systemd_is_init
from tunehost.host import open_host
from tunehost.doctor.registry import load_checks

SNAPS = Path(__file__).parents[1] / "data" / "snapshots"
CPUINFO = Path(__file__).parents[1] / "data" / "cpuinfo"


def findings(snap, *checks):
    facts = HostFacts(open_host(snap))
    return [f for c in select_checks(load_checks().checks, checks) for f in run_check(c, facts)]


def text(finding) -> str:
    return json.dumps([finding.summary, finding.detail, finding.fix and finding.fix.text,
                       finding.fix and finding.fix.commands])


def test_ci_vm_is_a_virtual_machine_without_systemd_as_init():
    host = open_host(SNAPS / "ci-vm")
    assert machine_kind(host) == "virtual machine" and systemd_is_init(host) is False
    assert MachineFacts.gather(open_host(SNAPS / "desktop-12700f-rtx3060")) == MachineFacts(None, True)


def test_ci_vm_fixes_speak_of_the_vm_not_of_hardware_it_cannot_touch():
    by_check = {f.check: f for f in findings(SNAPS / "ci-vm", "ram-speed", "thermals", "headless", "memory-bandwidth")}
    assert VM_FIRMWARE in by_check["ram-speed"].summary and "apt install" not in text(by_check["ram-speed"])
    assert VM_FIRMWARE in by_check["thermals"].summary and "modprobe" not in text(by_check["thermals"])
    assert "graphical.target" not in text(by_check["headless"]) and "systemctl" not in text(by_check["headless"])
    assert "apt install" not in text(by_check["memory-bandwidth"])


def test_bare_metal_keeps_its_hardware_remedies(make_snapshot):
    snap = make_snapshot(fs={"/proc/cpuinfo": (CPUINFO / "epyc-9654-genoa-avx512.txt").read_text()})
    by_check = {f.check: f for f in findings(snap, "ram-speed", "thermals")}
    assert "apt install dmidecode" in by_check["ram-speed"].summary
    assert "modprobe k10temp" in by_check["thermals"].summary


def test_container_says_the_host_decides(make_snapshot):
    snap = make_snapshot(fs={"/.dockerenv": "", "/proc/cpuinfo": (CPUINFO / "epyc-9654-genoa-avx512.txt").read_text()})
    by_check = {f.check: f for f in findings(snap, "ram-speed", "thermals")}
    assert "container" in by_check["ram-speed"].summary and "apt install" not in text(by_check["ram-speed"])
    assert "container" in by_check["thermals"].summary and "modprobe" not in by_check["thermals"].summary


def test_graphical_session_without_systemd_gets_no_systemctl_fix(make_snapshot):
    processes = [{"name": "tini", "pid": 1, "ppid": 0, "username": "root"},
                 {"name": "Xorg", "pid": 40, "ppid": 1, "username": "root", "rss_bytes": 100 << 20}]
    snap = make_snapshot(cmd={"systemctl get-default": "graphical.target\n"}, samples={"processes": processes})
    [finding] = findings(snap, "headless")
    assert finding.severity is Severity.INFO and "Xorg" in finding.summary
    assert "graphical.target" not in text(finding) and not finding.fix.commands


def test_ollama_in_a_container_is_stopped_by_pid_not_by_systemctl(make_snapshot):
    processes = [{"name": "tini", "pid": 1, "ppid": 0, "username": "root"},
                 {"name": "ollama", "pid": 7, "ppid": 1, "username": "root", "rss_bytes": 6 << 30,
                  "server": "ollama"}]
    snap = make_snapshot(fs={"/.dockerenv": ""}, samples={"processes": processes})
    fixes = [f.fix.commands for f in findings(snap, "cpu-hogs") if f.fix]
    assert fixes and all("systemctl" not in " ".join(c) for c in fixes) and ("kill 7",) in fixes


def test_container_in_a_kvm_guest_names_both_layers(make_snapshot):
    # a Docker container (/.dockerenv) on a KVM guest: the guest's /proc/cpuinfo (hypervisor flag) shows through
    guest = (CPUINFO / "epyc-kvm-guest-avx2.txt").read_text()
    assert " hypervisor" in guest
    snap = make_snapshot(fs={"/.dockerenv": "", "/proc/cpuinfo": guest})
    machine = MachineFacts.gather(open_host(snap))
    assert machine.kind == "container" and machine.layers == ("virtual machine", "container")
    assert machine.label == "container in a virtual machine"
    by_check = {f.check: f for f in findings(snap, "ram-speed", "thermals")}
    for check in ("ram-speed", "thermals"):
        summary = by_check[check].summary
        assert "container in a virtual machine" in summary and "physical host" in summary, summary
        assert "modprobe" not in text(by_check[check]) and "apt install" not in text(by_check[check])
    # the old wording sent the user to load k10temp "there": in the VM, which has no sensor either
    assert "neither this container nor the virtual machine" in by_check["thermals"].summary


def test_a_plain_kvm_guest_and_a_plain_container_keep_one_layer(make_snapshot):
    guest = (CPUINFO / "epyc-kvm-guest-avx2.txt").read_text()
    vm = MachineFacts.gather(open_host(make_snapshot(fs={"/proc/cpuinfo": guest})))
    assert (vm.kind, vm.layers, vm.label) == ("virtual machine", ("virtual machine",), "virtual machine")
    box = MachineFacts.gather(open_host(make_snapshot(fs={"/run/.containerenv": ""})))
    assert (box.kind, box.layers, box.label) == ("container", ("container",), "container")
    assert box.decides == "container: the host decides" and vm.decides == VM_FIRMWARE
