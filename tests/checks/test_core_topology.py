"""core-topology and the CpuTopology helpers on real corpus data and the composite snapshots.

Where the data comes from:
- topology/intel-i7-1370p-hybrid-6p8e-...-topology-sysfs.txt and cpufreq/intel-i7-1370p-...-sysfs.txt (`grep -H` of
  a real hwloc dump; no cpu_core/cpu_atom files, no cache/index3).
- topology/nvidia-dgx-spark-gb10-arm-big-little-cpu_capacity-sysfs.txt (cpu_capacity, no topology siblings).
- topology/lscpu-e-threadripper-pro-7965wx-24c-4ccd-l3-ids.txt, lscpu/lscpu-and-lscpu-p-amd-epyc7451-...txt:
  `lscpu -e` / `lscpu -p` rows turned into topology files (tests/cpu/fixtures.lscpu_topology_files).
- lscpu/lscpu-i9-9900k-8c16t-...txt and lscpu/lscpu-threadripper-pro-7965wx-...txt: summaries, parsed; the 9900K's
  sysfs is built from its counts with Intel's enumeration (CPU n and n+8 are siblings), which the summary implies.
"""

from __future__ import annotations

import pytest

from tunehost.check import Severity
from tunehost.checks.core_topology import CoreTopologyCheck
from tunehost.facts import HostFacts
from tunehost.facts.topology import (
    CpuTopology, LogicalCpu, l3_groups, performance_cpus, physical_cores, recommended_threads, taskset_command,
    taskset_list,
)
from tunehost.host import open_host
from tunehost.parsers.lscpu import parse_lscpu, parse_lscpu_table

from tests.conftest import SNAPSHOTS, corpus
from tests.cpu.fixtures import grep_h_files, lscpu_topology_files

CPU = "/sys/devices/system/cpu"
I7_1370P = "cpufreq/intel-i7-1370p-hybrid-elitebook-840-g10-cpufreq-intel_pstate-sysfs.txt"
I7_1370P_TOPO = "topology/intel-i7-1370p-hybrid-6p8e-elitebook-840-g10-topology-sysfs.txt"
DGX = "topology/nvidia-dgx-spark-gb10-arm-big-little-cpu_capacity-sysfs.txt"
TR_E = "topology/lscpu-e-threadripper-pro-7965wx-24c-4ccd-l3-ids.txt"
TR_SUMMARY = "lscpu/lscpu-threadripper-pro-7965wx-24c-smt-off-4ccd.txt"
EPYC7451 = "lscpu/lscpu-and-lscpu-p-amd-epyc7451-2s-8numa-16ccx.txt"
I9_9900K = "lscpu/lscpu-i9-9900k-8c16t-desktop-rtx2080-host.txt"
INTEL_CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: 13th Gen Intel(R) Core(TM) i7-1370P\n\n"


def topo_of(snap) -> CpuTopology:
    return CpuTopology.gather(open_host(snap))


def check(snap):
    return list(CoreTopologyCheck().run(HostFacts(open_host(snap))))


# ---- Intel hybrid i7-1370P (6P + 8E): every fallback ----

def test_i7_1370p_hybrid_without_cpu_core_files_uses_base_frequency(make_snapshot):
    # SOURCES: "No /sys/devices/cpu_core|cpu_atom in this dump -> fall back to cpuinfo_max_freq/base_frequency
    # split ... Recommend -t 6 (physical P-cores) / pin to P-cores."
    snap = make_snapshot(fs={**grep_h_files(corpus(I7_1370P_TOPO)), **grep_h_files(corpus(I7_1370P))})
    topo = topo_of(snap)
    assert topo.hybrid and topo.hybrid_source == "base_frequency"
    assert performance_cpus(topo) == [0, 2, 4, 6, 8, 10]
    assert performance_cpus(topo, smt=True) == list(range(12))
    assert recommended_threads(topo) == 6
    assert taskset_list(topo) == "0,2,4,6,8,10"
    [finding] = check(snap)
    assert finding.severity is Severity.WARN
    assert "6 performance cores (CPUs 0-11) + 8 efficiency cores (CPUs 12-19)" in finding.summary
    assert finding.fix.commands == ("taskset -c 0,2,4,6,8,10 llama-server -t 6 -m MODEL.gguf",)


def test_i7_1370p_favoured_cores_5200_vs_5000_are_not_a_hybrid_split(make_snapshot):
    # without base_frequency only cpuinfo_max_freq is left: 5.2/5.0 GHz P-cores (favoured cores) vs 3.9 GHz E-cores
    files = {k: v for k, v in grep_h_files(corpus(I7_1370P)).items() if not k.endswith("base_frequency")}
    topo = topo_of(make_snapshot(fs={**grep_h_files(corpus(I7_1370P_TOPO)), **files}))
    assert topo.hybrid_source == "cpuinfo_max_freq"
    assert performance_cpus(topo, smt=True) == list(range(12))


def test_i7_1370p_coretemp_style_core_id_numbering_fallback(make_snapshot):
    # no cpufreq at all: P-core core_ids 0,4,...,20 (what coretemp labels "Core N") then E-cores 24-31
    topo = topo_of(make_snapshot(fs={**grep_h_files(corpus(I7_1370P_TOPO)), "/proc/cpuinfo": INTEL_CPUINFO}))
    assert topo.hybrid_source == "core_id numbering"
    assert performance_cpus(topo) == [0, 2, 4, 6, 8, 10] and recommended_threads(topo) == 6


def test_core_id_numbering_is_not_used_for_amd(make_snapshot):
    snap = make_snapshot(fs={**grep_h_files(corpus(I7_1370P_TOPO)),
                             "/proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\n\n"})
    assert not topo_of(snap).hybrid


# ---- arm64 big.LITTLE: DGX Spark ----

def test_dgx_spark_big_little_cpu_capacity(make_snapshot):
    # SOURCES: "cpu_capacity 1024/1017/997 (big X925) vs 718/731 (little A725) ... Threads should target the 10 big"
    snap = make_snapshot(fs=grep_h_files(corpus(DGX)))
    topo = topo_of(snap)
    assert topo.hybrid_source == "cpu_capacity"
    assert performance_cpus(topo) == [5, 6, 7, 8, 9, 15, 16, 17, 18, 19]
    assert recommended_threads(topo) == 10
    [finding] = check(snap)
    assert finding.severity is Severity.WARN and "taskset -c 5-9,15-19" in finding.summary
    assert finding.evidence[f"{CPU}/cpu*/cpu_capacity"] == "5-9,15-19: 997-1024; 0-4,10-14: 718-731"


# ---- AMD multi-CCD and multi-socket from lscpu ----

def test_threadripper_7965wx_lscpu_e_four_ccds(make_snapshot):
    # SOURCES: "L3 ids 0/2/4/6 = 4 CCDs of 6 cores ... All MAXMHZ equal (no hybrid)"
    rows = parse_lscpu_table(corpus(TR_E))
    assert len(rows) == 24 and {r.l3 for r in rows} == {0, 2, 4, 6} and rows[4].max_mhz == 5362.0
    snap = make_snapshot(fs=lscpu_topology_files(rows))
    topo = topo_of(snap)
    assert not topo.hybrid and not topo.smt
    assert [g.cpus for g in l3_groups(topo)] == [tuple(range(i, i + 6)) for i in (0, 6, 12, 18)]
    # 24 cores, no SMT sibling or E-core left for the OS: one core kept free (thread count <= 24)
    assert recommended_threads(topo) == 23
    [finding] = check(snap)
    assert finding.severity is Severity.INFO
    assert "4 L3 groups" in finding.summary and "--threads 23" in finding.summary
    assert "L3 is split in 4 groups (CCDs/CCXs) of 6 cores" in finding.summary


def test_a_garbled_lscpu_maxmhz_is_no_reading():
    # the real Threadripper table with one MAXMHZ turned into "nan" (found by the fuzz suite): unknown, not NaN
    lines = corpus(TR_E).splitlines()
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["12"])
    lines[row] = lines[row].replace("5362.0000", "nan", 1)
    rows = parse_lscpu_table("\n".join(lines))
    assert rows[12].max_mhz is None and rows[13].max_mhz == 5362.0


def test_threadripper_isolcpus_0_3_are_left_out(make_snapshot):
    # SOURCES: "machine boots with isolcpus=0-3 (CPUs 0-3 isolated: llama.cpp threads pinned there get no balancing)"
    fs = lscpu_topology_files(parse_lscpu_table(corpus(TR_E)))
    fs[f"{CPU}/isolated"] = "0-3\n"
    topo = topo_of(make_snapshot(fs=fs))
    assert topo.isolated == (0, 1, 2, 3)
    assert performance_cpus(topo)[0] == 4 and recommended_threads(topo) == 19
    [finding] = check(make_snapshot(fs=fs))
    assert "isolated" in finding.detail and f"{CPU}/isolated" in finding.evidence


def test_threadripper_lscpu_summary_smt_off():
    summary = parse_lscpu(corpus(TR_SUMMARY))
    assert (summary.cpus, summary.threads_per_core, summary.cores_per_socket, summary.sockets) == (24, 1, 24, 1)
    assert summary.l3_instances == 4 and summary.max_mhz == 5362.0
    assert summary.model_name == "AMD Ryzen Threadripper PRO 7965WX 24-Cores"


def test_epyc7451_lscpu_p_two_sockets_sixteen_ccx(make_snapshot):
    # SOURCES: "8 NUMA nodes and 16 distinct L3 ids (3 cores per L3)"; two `lscpu -p` tables pasted: the first is used
    text = corpus(EPYC7451)
    summary = parse_lscpu(text)
    assert summary.l3_instances == 16 and summary.sockets == 2 and summary.get("Frequency boost") == "enabled"
    rows = parse_lscpu_table(text)
    assert len(rows) == 96 and rows[48].core == 0 and rows[48].socket == 0
    topo = topo_of(make_snapshot(fs=lscpu_topology_files(rows)))
    assert len(physical_cores(topo)) == 48 and topo.smt and topo.packages == [0, 1]
    assert len(l3_groups(topo)) == 16 and {len(g.cpus) for g in l3_groups(topo)} == {6}
    assert recommended_threads(topo) == 48  # llama.cpp's own default here: 48 physical cores
    [finding] = check(make_snapshot(fs=lscpu_topology_files(rows)))
    assert "2 sockets" in finding.summary and "numa" in (finding.detail or "")


def test_i9_9900k_lscpu_summary_threads_8(make_snapshot):
    # SOURCES: "Non-hybrid 8C/16T, 1 NUMA node, single L3 16 MiB: no topology issue; -t 8 (physical cores)"
    summary = parse_lscpu(corpus(I9_9900K))  # the indented util-linux >= 2.38 layout
    cores, threads = summary.cores_per_socket, summary.threads_per_core
    assert (summary.cpus, cores, threads, summary.l3_instances) == (16, 8, 2, 1)
    fs = {f"{CPU}/online": f"0-{summary.cpus - 1}\n"}
    for n in range(summary.cpus):
        fs[f"{CPU}/cpu{n}/topology/thread_siblings_list"] = f"{n % cores},{n % cores + cores}\n"
        fs[f"{CPU}/cpu{n}/cache/index3/shared_cpu_list"] = "0-15\n"
    snap = make_snapshot(fs=fs)
    topo = topo_of(snap)
    assert recommended_threads(topo) == 8 and taskset_list(topo) == "0-7"
    [finding] = check(snap)
    assert finding.severity is Severity.INFO and "--threads 8" in finding.summary


# ---- composite snapshots ----

def test_12700f_cpu_core_cpu_atom_split():
    snap = SNAPSHOTS / "desktop-12700f-rtx3060"
    topo = topo_of(snap)
    assert topo.hybrid_source == "cpu_core/cpu_atom"
    assert performance_cpus(topo) == [0, 2, 4, 6, 8, 10, 12, 14] and recommended_threads(topo) == 8
    assert taskset_command(topo) == "taskset -c 0,2,4,6,8,10,12,14 llama-server -t 8 ..."
    [finding] = check(snap)
    assert finding.severity is Severity.WARN and finding.evidence["/sys/devices/cpu_atom/cpus"] == "16-19"


def test_9950x3d_names_the_vcache_ccd():
    [finding] = check(SNAPSHOTS / "desktop-9950x3d-rtx5090")
    assert finding.severity is Severity.INFO and "--threads 16" in finding.summary
    assert "CPUs 0-7,16-23 sit on the CCD with 3D V-Cache (96 MiB L3 vs 32 MiB)" in finding.summary


def test_epyc9654_two_sockets_24_ccds():
    topo = topo_of(SNAPSHOTS / "server-epyc9654-2s")
    assert len(topo.cpus) == 384 and topo.packages == [0, 1] and len(l3_groups(topo)) == 24
    assert recommended_threads(topo) == 192


# ---- missing, single-core and garbage data ----

def test_unknown_topology_is_skip(make_snapshot):
    [finding] = check(make_snapshot())
    assert finding.severity is Severity.SKIP


def test_single_cpu_is_skip(make_snapshot):
    [finding] = check(make_snapshot(fs={f"{CPU}/online": "0\n"}))
    assert finding.severity is Severity.SKIP and "single" in finding.summary


def test_no_topology_files_counts_each_cpu_as_a_core(make_snapshot):
    topo = topo_of(make_snapshot(fs={f"{CPU}/online": "0-3\n"}))
    assert len(physical_cores(topo)) == 4 and recommended_threads(topo) == 4


def test_garbage_topology_files_never_crash(make_snapshot):
    fs = {f"{CPU}/online": "0-3\n", f"{CPU}/cpu0/topology/thread_siblings_list": "banana\n",
          f"{CPU}/cpu1/topology/thread_siblings_list": "7-9\n",  # does not even contain cpu1
          f"{CPU}/cpu0/cache/index3/size": "lots\n", f"{CPU}/cpu0/topology/core_id": "x\n",
          f"{CPU}/cpu2/cpu_capacity": "-1\n", "/sys/devices/cpu_core/cpus": "\xff\n",
          "/sys/devices/cpu_atom/cpus": "0-3\n", f"{CPU}/isolated": "a,b\n"}
    snap = make_snapshot(fs=fs)
    topo = topo_of(snap)
    assert not topo.hybrid and len(physical_cores(topo)) == 4
    [finding] = check(snap)
    assert finding.severity is Severity.INFO


@pytest.mark.parametrize("text", ["", "garbage\nmore garbage", "CPU NODE\n0 0 0 0 0", "# CPU,Core\nx,y\n1,2,3"])
def test_lscpu_parsers_survive_garbage(text):
    assert parse_lscpu_table(text) == [] or all(isinstance(r.cpu, int) for r in parse_lscpu_table(text))
    assert parse_lscpu(text).cpus is None


def test_helpers_on_hand_built_topology():
    cpus = tuple(LogicalCpu(n, siblings=(n % 4, n % 4 + 4), kind="performance" if n % 4 < 2 else "efficiency")
                 for n in range(8))
    topo = CpuTopology(cpus, hybrid_source="test")
    assert physical_cores(topo) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert performance_cpus(topo) == [0, 1] and performance_cpus(topo, smt=True) == [0, 1, 4, 5]
    assert recommended_threads(topo) == 2
    assert recommended_threads(CpuTopology()) is None
