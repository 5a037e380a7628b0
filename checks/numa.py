"""numa — NUMA nodes: one node needs nothing; several need llama.cpp's --numa and no automatic NUMA balancing."""

from __future__ import annotations

from tunehost.check import Check, Fix
from tunehost.cpulist import format_cpu_list
from tunehost.facts.ram import NODE_DIR, NUMA_BALANCING, NumaFacts, NumaNode

BALANCING_OFF = f"echo 0 | sudo tee {NUMA_BALANCING}"
BALANCING_PERSIST = "echo 'kernel.numa_balancing = 0' | sudo tee /etc/sysctl.d/60-tunehost-numa.conf"
DROP_CACHES = "echo 3 | sudo tee /proc/sys/vm/drop_caches"
WHY = ("On several NUMA nodes a thread reading weights from another node's memory gets a fraction of the bandwidth; "
       "llama.cpp's --numa distribute spreads threads over all nodes (memory follows first touch), and the kernel's "
       "automatic NUMA balancing, which migrates pages behind llama.cpp's back, is what llama.cpp itself warns about: "
       "\"/proc/sys/kernel/numa_balancing is enabled, this has been observed to impair performance\".")
LLAMA_FLAGS = ("Run llama.cpp with `--numa distribute` (threads spread over all nodes), or interleave the weights with "
               "`numactl --interleave=all llama-server ... --numa numactl`; when the model fits in one node's RAM, "
               "`numactl --cpunodebind=0 --membind=0 llama-server ... --numa numactl` with -t set to that node's "
               "physical cores is often fastest. llama.cpp recommends dropping the page cache before the first run "
               "with --numa (the model file may already sit on one node).")


def _gb(kb: int | None) -> str:
    return f"{kb / 1024 / 1024:.0f} GB" if kb else "no memory"


def _node_text(node: NumaNode) -> str:
    cpus = format_cpu_list(node.cpus) if node.cpus else "no CPUs"
    return f"node{node.node}: CPUs {cpus}, {_gb(node.mem_total_kb)}"


class NumaCheck(Check):
    id = "numa"
    title = "NUMA"
    judges = "NUMA nodes (single node: nothing to do; several: llama.cpp --numa and automatic NUMA balancing)"

    def run(self, facts):
        numa = facts.get(NumaFacts)
        if numa.nodes is None:
            yield self.skip(f"{NODE_DIR} is absent (kernel without NUMA support, or not exposed here): cannot tell "
                            f"the NUMA layout", numa.evidence)
            return
        cpu_nodes = numa.cpu_nodes
        memory_only = numa.memory_only_nodes
        if len(cpu_nodes) <= 1:
            extra = ""
            if memory_only:
                extra = (f" ({len(memory_only)} memory-only node{'s' if len(memory_only) > 1 else ''}: "
                         f"{', '.join(f'node{n.node} {_gb(n.mem_total_kb)}' for n in memory_only)}, e.g. CXL or HBM)")
            yield self.ok(f"single NUMA node: nothing to do{extra}", numa.evidence)
            return

        starved = [n for n in cpu_nodes if n.mem_total_kb is not None and n.mem_total_kb < 1024 * 1024]
        for node in starved:
            yield self.warn(
                f"NUMA node{node.node} has CPUs ({format_cpu_list(node.cpus or ())}) but {_gb(node.mem_total_kb)}: "
                f"every memory access from those CPUs crosses the socket interconnect", numa.evidence,
                fix=Fix("Populate that socket's memory channels like the other socket's, or keep llama.cpp on the "
                        "nodes with memory (numactl --cpunodebind=<node> --membind=<node> ... --numa numactl)."),
                detail=WHY)

        distance = ""
        first = cpu_nodes[0]
        if first.distances and len(first.distances) > 1:
            remote = max(first.distances)
            local = first.distances[first.node] if first.node < len(first.distances) else min(first.distances)
            distance = f", remote distance {remote} vs local {local}"
        layout = "; ".join(_node_text(n) for n in cpu_nodes)
        head = f"{len(cpu_nodes)} NUMA nodes with CPUs ({layout}{distance})"
        if numa.numa_balancing:
            yield self.warn(
                f"{head}, and automatic NUMA balancing is on ({NUMA_BALANCING} = {numa.numa_balancing}): llama.cpp "
                f"warns that it impairs performance; run llama.cpp with --numa distribute", numa.evidence,
                fix=Fix("Turn automatic NUMA balancing off (now, and at every boot) and drop the page cache once. "
                        + LLAMA_FLAGS, (BALANCING_OFF, BALANCING_PERSIST, DROP_CACHES)),
                detail=WHY)
            return
        state = ("automatic NUMA balancing is off" if numa.numa_balancing == 0
                 else f"{NUMA_BALANCING} could not be read")
        yield self.info(
            f"{head}; {state}: run llama.cpp with --numa distribute (or numactl --interleave=all)", numa.evidence,
            fix=Fix(LLAMA_FLAGS, (DROP_CACHES,) if numa.numa_balancing == 0 else (BALANCING_OFF, DROP_CACHES)),
            detail=WHY)
