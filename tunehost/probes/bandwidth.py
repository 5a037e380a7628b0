"""The memory read-bandwidth probe: threads each sum a disjoint slice of one large array (numpy releases the GIL).

Probes measure the live machine under load and sit between facts and their users (checks, advise, bench): they may
read facts (which CPUs to pin to), and host/ never imports them. The array is raised to 4x the last-level cache so
caches cannot serve the reads, and held to a quarter of available RAM.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

GB = 1_000_000_000  # bandwidths are decimal GB/s, as vendors and STREAM report them
MiB = 1024 * 1024
DEFAULT_PROBE_BYTES = 1024 * MiB
MIN_PROBE_BYTES = 8 * MiB
# The share of this probe's figure llama.cpp's CPU reads reach (token generation, batch 1): what advise's band reads a
# measured RAM bandwidth at when no DIMM peak is known (a VM, no root, soldered memory; tunehost.advise.ceiling), and
# what doctor's memory-bandwidth check says of it. The probe sums int64 slices with numpy; llama.cpp's SIMD kernels
# can beat it. From the seven rows of tests/advise/data/published_tg.csv whose RAM bandwidth was measured (c06;
# tunehost's own runs dh03-dh04 on an H100's VM, dl01-dl04 on a 2-vCPU EPYC VM): 0.70-1.08, the probe itself moving
# by a third from sample to sample on a VM (docs/advise.md, "The measured path").
MEASURED_RAM_SHARE = (0.65, 1.10)


@dataclass(frozen=True)
class ReadBandwidth:
    """A read-bandwidth measurement: best of `samples` (GB/s) summing `n_bytes` with `threads` threads."""

    gbps: float
    samples: tuple[float, ...]
    threads: int
    n_bytes: int

    @property
    def spread(self) -> float:
        """(best - worst) / best across repetitions; small means the number is trustworthy."""
        return (max(self.samples) - min(self.samples)) / max(self.samples)


def probe_size(available_bytes: int | None, wanted: int = DEFAULT_PROBE_BYTES, *, llc_bytes: int | None = None) -> int:
    """Array size for the probe: `wanted` (raised to 4x the last-level cache, so caches cannot serve the reads), but at
    most a quarter of available RAM, at least MIN_PROBE_BYTES."""
    if llc_bytes:
        wanted = max(wanted, 4 * llc_bytes)
    if available_bytes is not None:
        wanted = min(wanted, available_bytes // 4)
    return max(MIN_PROBE_BYTES, wanted // MiB * MiB)


def _pinned_pool(cpus: list[int] | None, n_threads: int):
    """A thread pool whose thread k runs on cpus[k] alone (sched_setaffinity(0) pins the calling thread on Linux)."""
    import itertools
    import threading
    from concurrent.futures import ThreadPoolExecutor

    if not cpus:
        return ThreadPoolExecutor(max_workers=n_threads)
    counter = itertools.count()
    lock = threading.Lock()

    def pin() -> None:
        with lock:
            k = next(counter)
        try:
            os.sched_setaffinity(0, {cpus[k % len(cpus)]})
        except OSError:  # a CPU went offline or a cgroup forbids it: the thread runs unpinned
            pass

    return ThreadPoolExecutor(max_workers=n_threads, initializer=pin)


def measure_read_bandwidth(
    n_bytes: int | None = None, *, available_bytes: int | None = None, threads: int | None = None, repeats: int = 5,
    cpus: list[int] | None = None, llc_bytes: int | None = None,
) -> ReadBandwidth:
    """Measure host memory read bandwidth in ~1-2 s: threads each sum a disjoint slice of one large int64 array.

    numpy releases the GIL inside the reduction, so the threads stream memory in parallel. With `cpus` (one CPU per
    physical core, from the topology) thread k is pinned to cpus[k] and there is one thread per CPU given. The first
    pass warms the pages and is not counted; the result is the best of `repeats` timed passes. Defaults: 1 GiB (at
    least 4x `llc_bytes`) bounded by a quarter of `available_bytes` (MemAvailable, when the caller knows it), one
    thread per CPU this process may run on.
    """
    import numpy as np

    size = probe_size(available_bytes, llc_bytes=llc_bytes) if n_bytes is None else max(n_bytes // 8 * 8, 8 * 1024)
    n_threads = threads or (len(cpus) if cpus else len(os.sched_getaffinity(0)))
    data = np.empty(size // 8, dtype=np.int64)
    chunks = np.array_split(data, n_threads)
    samples: list[float] = []
    try:
        with _pinned_pool(cpus, n_threads) as pool:
            # each pinned thread writes its own slice first: the page faults run in parallel (not in the timing),
            # and on a NUMA host every slice lands on the node of the core that reads it
            list(pool.map(lambda chunk: chunk.fill(1), chunks))
            list(pool.map(np.sum, chunks))  # warm-up: caches and TLBs primed
            for _ in range(max(1, repeats)):
                start = time.perf_counter()
                list(pool.map(np.sum, chunks))
                elapsed = time.perf_counter() - start
                samples.append(data.nbytes / elapsed / GB if elapsed > 0 else math.inf)
    finally:
        del data, chunks  # an interrupted probe leaves no memory behind
    finite = tuple(s for s in samples if math.isfinite(s)) or (0.0,)
    return ReadBandwidth(gbps=max(finite), samples=finite, threads=n_threads, n_bytes=size // 8 * 8)
