"""numa on real layouts: node CPU lists taken from the corpus (lscpu of a 2-socket EPYC 7451 with 8 NUMA nodes,
`numactl --hardware` of a 1-node Threadripper PRO 7965WX, see tests/data/corpus/SOURCES.md) re-rendered as the sysfs
files they come from (/sys/devices/system/node/node*/cpulist, meminfo), and on the composite snapshots."""

from __future__ import annotations

import re

import pytest

from tests.conftest import SNAPSHOTS, corpus
from tunehost.check import Severity
from tunehost.checks.numa import BALANCING_OFF, NumaCheck
from tunehost.facts import HostFacts
from tunehost.facts.ram import NODE_DIR, NUMA_BALANCING, NumaFacts, NumaNode
from tunehost.host import open_host


def node_fs(nodes: dict[int, tuple[str, int | None]], balancing: str | None = None) -> dict[str, str]:
    """{node: (cpulist, MemTotal kB)} -> snapshot fs files in the kernel's formats."""
    fs = {f"{NODE_DIR}/online": f"0-{max(nodes)}\n" if len(nodes) > 1 else "0\n"}
    for node, (cpus, kb) in nodes.items():
        fs[f"{NODE_DIR}/node{node}/cpulist"] = cpus + "\n"
        if kb is not None:
            fs[f"{NODE_DIR}/node{node}/meminfo"] = (f"Node {node} MemTotal:       {kb} kB\n"
                                                    f"Node {node} MemFree:        {kb // 2} kB\n")
    if balancing is not None:
        fs[NUMA_BALANCING] = balancing
    return fs


def epyc7451_nodes() -> dict[int, tuple[str, int | None]]:
    text = corpus("lscpu/lscpu-and-lscpu-p-amd-epyc7451-2s-8numa-16ccx.txt")
    found = re.findall(r"^NUMA node(\d+) CPU\(s\):\s+(\S+)$", text, re.M)
    assert len(found) == 8
    return {int(n): (cpus, 32 * 1024 * 1024) for n, cpus in found}


def run(make_snapshot, fs):
    return list(NumaCheck().run(HostFacts(open_host(make_snapshot(fs=fs)))))


def test_epyc7451_eight_nodes_with_numa_balancing_on_warns(make_snapshot):
    [f] = run(make_snapshot, node_fs(epyc7451_nodes(), "1\n"))
    assert f.severity is Severity.WARN
    assert f.summary.startswith("8 NUMA nodes with CPUs") and "node0: CPUs 0-5,48-53" in f.summary
    assert "--numa distribute" in f.summary and "numa_balancing" in f.summary
    assert BALANCING_OFF in f.fix.commands and "echo 3 | sudo tee /proc/sys/vm/drop_caches" in f.fix.commands
    assert "numactl --interleave=all" in f.fix.text
    assert f.evidence[NUMA_BALANCING] == "1" and f.evidence[f"{NODE_DIR}/node7/cpulist"] == "42-47,90-95"


def test_epyc7451_with_numa_balancing_off_is_info(make_snapshot):
    [f] = run(make_snapshot, node_fs(epyc7451_nodes(), "0\n"))
    assert f.severity is Severity.INFO and "balancing is off" in f.summary
    assert BALANCING_OFF not in f.fix.commands


def test_numa_balancing_unreadable_is_info_with_advice(make_snapshot):
    [f] = run(make_snapshot, node_fs(epyc7451_nodes()))
    assert f.severity is Severity.INFO and BALANCING_OFF in f.fix.commands


def test_threadripper_single_node_is_ok(make_snapshot):
    text = corpus("topology/numactl-hardware-threadripper-pro-7965wx-1node-128gb-1.7gb-free.txt")
    cpus = re.search(r"node 0 cpus: (.+)", text).group(1).split()
    size_mb = int(re.search(r"node 0 size: (\d+) MB", text).group(1))
    [f] = run(make_snapshot, node_fs({0: (f"{cpus[0]}-{cpus[-1]}", size_mb * 1024)}))
    assert f.severity is Severity.OK and f.summary == "single NUMA node: nothing to do"
    assert f.fix is None


def test_memory_only_cxl_node_is_mentioned(make_snapshot):
    [f] = run(make_snapshot, node_fs({0: ("0-15", 64 * 1024 * 1024), 1: ("", 256 * 1024 * 1024)}))
    assert f.severity is Severity.OK and "memory-only node: node1 256 GB" in f.summary


def test_socket_without_memory_warns(make_snapshot):
    findings = run(make_snapshot, node_fs({0: ("0-23", 256 * 1024 * 1024), 1: ("24-47", 0)}, "0\n"))
    assert [f.severity for f in findings] == [Severity.WARN, Severity.INFO]
    assert "node1 has CPUs (24-47) but no memory" in findings[0].summary


def test_no_node_directory_is_skip(make_snapshot):
    [f] = run(make_snapshot, {})
    assert f.severity is Severity.SKIP and NODE_DIR in f.summary


@pytest.mark.parametrize("cpulist", ["garbage", "5-1", "\x00\x01"])
def test_garbage_cpulist_never_raises(make_snapshot, cpulist):
    fs = node_fs({0: ("0-7", 8 * 1024 * 1024)})
    fs[f"{NODE_DIR}/node1/cpulist"] = cpulist
    fs[f"{NODE_DIR}/node1/meminfo"] = "garbage"
    facts = NumaFacts.gather(open_host(make_snapshot(fs=fs)))
    assert facts.nodes is not None and facts.nodes[1].cpus is None and facts.nodes[1].mem_total_kb is None
    [f] = NumaCheck().run(HostFacts.of(facts))
    assert f.severity is Severity.OK  # only node0 is known to have CPUs


def test_garbage_numa_balancing_is_unknown(make_snapshot):
    facts = NumaFacts.gather(open_host(make_snapshot(fs=node_fs(epyc7451_nodes(), "maybe\n"))))
    assert facts.numa_balancing is None


def test_hand_built_facts():
    two = NumaFacts((NumaNode(0, (0, 1), 1 << 24), NumaNode(1, (2, 3), 1 << 24)), numa_balancing=1)
    [f] = NumaCheck().run(HostFacts.of(two))
    assert f.severity is Severity.WARN


@pytest.mark.parametrize("snapshot, severity", [
    ("desktop-12700f-rtx3060", Severity.OK), ("desktop-9950x3d-rtx5090", Severity.OK),
    ("laptop-5800u-apu", Severity.OK), ("strix-halo-395", Severity.OK), ("server-epyc9654-2s", Severity.WARN),
])
def test_composite_snapshots(snapshot, severity):
    [f] = NumaCheck().run(HostFacts(open_host(SNAPSHOTS / snapshot)))
    assert f.severity is severity


def test_server_epyc9654_two_sockets():
    [f] = NumaCheck().run(HostFacts(open_host(SNAPSHOTS / "server-epyc9654-2s")))
    assert "2 NUMA nodes with CPUs" in f.summary and "0-95,192-287" in f.summary and "remote distance 32" in f.summary
