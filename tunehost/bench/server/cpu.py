"""The CPU time of the servers a server bench measures, counted as the measurement's own work (not "other").

A server is a process tree (a router starts one child per model). Its total CPU time is not monotonic: when a child
exits its seconds leave the sum, while /proc/stat keeps them as busy time, so a watch that subtracts the total
would see that drop as other processes' work. :class:`ServingCpu` adds up each process's own increase since it was
last seen instead: a process that vanished keeps what it had added up to its last sighting (its last delta), one
born during the watch adds all its time, a reused pid whose time went backwards starts again from zero.
"""

from __future__ import annotations

from typing import Callable, Mapping


class ServingCpu:
    """Monotonic CPU seconds of a set of server processes and their children, from per-process readings.

    ``read(pids) -> {pid: cpu seconds}`` reads the live trees (tunehost.host.samples.tree_cpu_seconds). The first
    call with processes is the baseline (0 s): what they used before the watch is not the watch's."""

    def __init__(self, read: Callable[[set[int]], Mapping[int, float]] | None = None):
        if read is None:
            from tunehost.host.samples import tree_cpu_seconds

            read = tree_cpu_seconds
        self._read = read
        self._last: dict[int, float] | None = None
        self.total_s = 0.0
        self.seen: set[int] = set()  # every process of the trees seen so far (kept out of "other processes")

    def update(self, pids: set[int]) -> float | None:
        """The servers' CPU seconds used since the baseline; None while no server process is known."""
        if not pids:
            return None if self._last is None else self.total_s
        now = dict(self._read(set(pids)))
        self.seen.update(now)
        if self._last is None:
            self._last = now
            return 0.0
        for gone in set(self._last) - set(now):  # it keeps what it added; a later process with its pid is new
            del self._last[gone]
        for pid, cpu in now.items():
            before = self._last.get(pid)
            delta = cpu if before is None or cpu < before else cpu - before  # born during the watch, or reused
            self.total_s += max(0.0, delta)
            self._last[pid] = cpu
        return self.total_s


__all__ = ["ServingCpu"]
