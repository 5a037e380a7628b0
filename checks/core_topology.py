"""core-topology — hybrid performance/efficiency cores, SMT siblings and L3 (CCD) groups; the CPUs to pin to."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.cpulist import format_cpu_list
from tunehost.facts.topology import (
    CPU_ROOT, CpuTopology, efficiency_cpus, l3_groups, performance_cores, performance_cpus, physical_cores,
    recommended_threads,
)

VCACHE_RATIO = 2  # an L3 group with at least twice the L3 of its neighbour on the same package: 3D V-Cache


def _mib(kb: int | None) -> str:
    return "?" if kb is None else f"{kb // 1024} MiB" if kb >= 1024 else f"{kb} KiB"


def pin_command(topo: CpuTopology) -> str | None:
    """The pasteable pinning line: one thread per physical performance core."""
    threads = recommended_threads(topo)
    if threads is None:
        return None
    cpus = performance_cpus(topo)[:threads]
    return f"taskset -c {format_cpu_list(cpus)} llama-server -t {threads} -m MODEL.gguf"


class CoreTopologyCheck(Check):
    id = "core-topology"
    title = "CPU core topology"
    judges = "hybrid P/E cores, SMT siblings and L3/CCD groups; the P-core CPU list to pin to and the --threads value"

    def run(self, facts):
        topo = facts.get(CpuTopology)
        if not topo.cpus:
            yield self.skip(topo.reason or "CPU topology unknown")
            return
        if len(topo.cpus) == 1:
            yield self.skip("a single online CPU: nothing to pin or split", topo.evidence)
            return
        cores = physical_cores(topo)
        p_cores = performance_cores(topo)
        threads = recommended_threads(topo)
        if not p_cores or threads is None:
            yield self.skip("no usable performance core found (all isolated?)", topo.evidence)
            return
        evidence = dict(topo.evidence)
        evidence[f"{CPU_ROOT}/cpu*/topology/thread_siblings_list"] = ", ".join(
            format_cpu_list(core) for core in cores) if topo.smt else "one thread per core (no SMT)"
        groups = l3_groups(topo)
        if groups:
            evidence[f"{CPU_ROOT}/cpu*/cache/index3/shared_cpu_list"] = "; ".join(
                f"{format_cpu_list(g.cpus)} ({_mib(g.size_kb)})" for g in groups)
        pin_list = format_cpu_list(performance_cpus(topo)[:threads])
        command = pin_command(topo)
        notes = self._notes(topo, groups)
        smt = f", {len(topo.cpus)} threads (SMT)" if topo.smt else ""
        if topo.hybrid:
            e_cpus = efficiency_cpus(topo)
            e_cores = [c for c in cores if c[0] in set(e_cpus)]
            p_all = performance_cpus(topo, smt=True)
            summary = (f"hybrid CPU: {len(p_cores)} performance cores (CPUs {format_cpu_list(p_all)}) + "
                       f"{len(e_cores)} efficiency cores (CPUs {format_cpu_list(e_cpus)}): unpinned llama.cpp "
                       f"threads can land on the slow cores; pin with taskset -c {pin_list} and --threads {threads}")
            detail = ("llama.cpp's threads work in lockstep: each step waits for the slowest thread, so one thread "
                      "on an efficiency core slows every token. " + " ".join(notes)).strip()
            yield self.warn(summary, evidence,
                            fix=Fix(f"Run llama.cpp on the performance cores only, one thread per core "
                                    f"(known from {topo.hybrid_source}).", (command,) if command else ()),
                            detail=detail)
            return
        summary = (f"{len(cores)} cores{smt}"
                   + (f", {len(topo.packages)} sockets" if len(topo.packages) > 1 else "")
                   + (f", {len(groups)} L3 groups" if len(groups) > 1 else "")
                   + f": use --threads {threads} ({_per_core(threads, len(p_cores))}), taskset -c {pin_list}")
        if notes:
            summary += "; " + notes[0]
        yield self.info(summary, evidence,
                        fix=Fix("One llama.cpp thread per physical core; SMT siblings add nothing to the math.",
                                (command,) if command else ()),
                        detail=" ".join(notes[1:]) or None)

    def _notes(self, topo: CpuTopology, groups) -> list[str]:
        notes: list[str] = []
        by_package: dict[int | None, list] = {}
        for g in groups:
            by_package.setdefault(g.package, []).append(g)
        for package_groups in by_package.values():
            sizes = [g.size_kb for g in package_groups if g.size_kb]
            if len(sizes) == len(package_groups) > 1 and max(sizes) >= VCACHE_RATIO * min(sizes):
                big = [g for g in package_groups if g.size_kb == max(sizes)]
                notes.append("CPUs " + ", ".join(format_cpu_list(g.cpus) for g in big)
                             + f" sit on the CCD with 3D V-Cache ({_mib(max(sizes))} L3 vs {_mib(min(sizes))})")
        if len(groups) > 1 and not notes:
            siblings = {c.cpu: c.siblings or (c.cpu,) for c in topo.cpus}
            per = {len({siblings[cpu] for cpu in g.cpus}) for g in groups}
            notes.append(f"L3 is split in {len(groups)} groups (CCDs/CCXs)"
                         + (f" of {per.pop()} cores" if len(per) == 1 else "")
                         + ": threads on different groups share data through memory")
        if topo.isolated:
            notes.append(f"CPUs {format_cpu_list(topo.isolated)} are isolated (isolcpus=): the scheduler never "
                         "places unpinned threads there, so they are left out of the count")
        if len(topo.packages) > 1:
            notes.append("several sockets: see the numa check for --numa")
        return notes


def _per_core(threads: int, cores: int) -> str:
    """Why --threads is what it is (tunehost.facts.topology.recommended_threads keeps a core free when the
    threads would otherwise take every CPU)."""
    return "one per physical core" if threads >= cores else f"one per physical core, {cores - threads} left for the OS"
