"""The `measure` sampler: what the hardware delivers under a short load (samples/measure.json, docs/snapshot.md).

    take_measurement(host)   # {"format": 1, "memory_read_gbps": 31.4, "cpu_mhz_single": {...}, ...}

It records raw figures only (memory-bandwidth and cpu-clocks judge them), and it refuses to run on a busy host: an
inference server at work or a CPU hog would be measured instead of the hardware, and disturbed. The probes clean up
after themselves (threads joined, memory freed, child processes killed), Ctrl-C included.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from tunehost.facts.measure import MEASURE_FORMAT, MEASURE_SAMPLE
from tunehost.host.samples import sampler

if TYPE_CHECKING:
    from tunehost.host import Host

MEMORY_PROBE_BYTES = 512 * 1024 * 1024   # raised to 4x the last-level cache; ~0.3 s to fill, 50-100 ms per pass
MEMORY_PROBE_PASSES = 4
CLOCK_BUDGET_S = 1.5


def _status(host: "Host", message: str) -> None:
    if host.on_status is not None:
        host.on_status(message)


def probe_memory(host: "Host") -> dict[str, Any]:
    """Best-of-passes read bandwidth, one pinned thread per physical core on disjoint slices."""
    from tunehost.probes.bandwidth import measure_read_bandwidth, probe_size
    from tunehost.facts.memory import MemInfo
    from tunehost.facts.topology import CpuTopology, physical_cores

    topo = CpuTopology.gather(host)
    allowed = os.sched_getaffinity(0)
    cpus = [core[0] for core in physical_cores(topo) if core[0] in allowed] or sorted(allowed)
    llc = max((c.l3_size_kb or 0 for c in topo.cpus), default=0) * 1024 or None
    available = MemInfo.gather(host).available_kb
    started = time.perf_counter()
    size = probe_size(available * 1024 if available else None, MEMORY_PROBE_BYTES, llc_bytes=llc)
    bw = measure_read_bandwidth(size, cpus=cpus, repeats=MEMORY_PROBE_PASSES)
    return {"memory_read_gbps": round(bw.gbps, 2), "memory_read_threads": bw.threads,
            "memory_read_samples": [round(s, 2) for s in bw.samples], "memory_probe_bytes": bw.n_bytes,
            "memory_probe_cpus": cpus, "memory_probe_s": round(time.perf_counter() - started, 2)}


def take_measurement(host: "Host") -> dict[str, Any]:
    """Measure memory bandwidth and CPU clocks under load, unless the host is busy (then say why)."""
    from tunehost.facts.processes import ProcessFacts, busy_reason

    out: dict[str, Any] = {"format": MEASURE_FORMAT,
                           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _status(host, "checking that the host is idle")
    reason = busy_reason(ProcessFacts.gather(host))
    if reason:
        out["skipped"] = reason
        return out
    _status(host, "measuring memory read bandwidth (one thread per core)")
    try:
        out.update(probe_memory(host))
    except (MemoryError, OSError, ImportError) as exc:
        out["memory_skipped"] = f"the bandwidth probe could not run: {exc.__class__.__name__}: {exc}"
    _status(host, "measuring CPU clocks under load (single-core, then all-core)")
    try:
        from tunehost.probes.clock_probe import probe_clocks
    except ImportError:
        out["clocks_skipped"] = "this tunehost has no clock probe"
    else:
        try:
            out.update(probe_clocks(host, budget_s=CLOCK_BUDGET_S))
        except OSError as exc:
            out["clocks_skipped"] = f"the clock probe could not run: {exc}"
    return out


@sampler(MEASURE_SAMPLE)
def sample_measure(host: "Host") -> dict[str, Any]:
    return take_measurement(host)
