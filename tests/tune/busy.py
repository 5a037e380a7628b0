"""A simulated background load for the tune tests: a 2-CPU host whose other processes hold ``load(t)`` cores at
simulated time t (the fake llama-bench's clock), read through the real HostWatcher, and a llama-bench whose speed
depends on that load: a configuration whose threads and the load together want more CPUs than the host has slows
down badly (llama.cpp's threads wait for each other at every barrier), so while the load holds a core, fewer
threads "win"."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tests.tune.test_race import BETWEEN, WITHIN
from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.watch import CallWatcher, CpuTimes, HostReading, HostWatcher

OVERSUBSCRIBED = 0.25  # speed of a configuration that competes with the load for its CPUs
STEP_S = 0.05


def quiet(t: float) -> float:
    return 0.0


def one_core(t: float) -> float:
    return 1.0


def bursty(t: float) -> float:
    """A core busy 2 s, idle 3 s."""
    return 1.0 if t % 5.0 < 2.0 else 0.0


class LoadedBench:
    """llama-bench on a host with ``cpus`` CPUs and a background ``load``; ``speed``: (option, value) -> factor;
    ``threads_speed``: threads -> speed on the quiet host (more threads faster)."""

    def __init__(self, load: Callable[[float], float] = quiet, *, cpus: int = 2, seed: int = 0,
                 threads_speed: dict[int, float] | None = None, level: float = 50.0):
        self.load, self.cpus, self.seed, self.level = load, cpus, seed, level
        self.threads_speed = threads_speed or {1: 0.64, 2: 1.0}
        self.now = 0.0
        self.calls = 0
        self.busy_cpu_s = 0.0  # other processes' CPU seconds so far
        self.invocations: list[list[str]] = []
        self.loaded_calls = 0

    def clock(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        steps = max(1, int(round(seconds / STEP_S)))
        for _ in range(steps):
            self.busy_cpu_s += self.load(self.now) * seconds / steps
            self.now += seconds / steps

    def __call__(self, args: Sequence[str]) -> list[BenchResult]:
        self.invocations.append(list(args))
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        reps = int(args[args.index("-r") + 1])
        test = "tg16"
        threads = args[args.index("-t") + 1].split(",") if "-t" in args else [str(self.cpus)]
        out = []
        for value in threads:
            t = int(value)
            began = self.now
            self.advance(1.0 + 0.5 * reps)
            load = (self.busy_cpu_s_at(began))
            scale = self.threads_speed.get(t, 1.0)
            if t + load > self.cpus + 1e-9:
                scale *= OVERSUBSCRIBED
                self.loaded_calls += 1
            offset = rng.standard_normal() * BETWEEN
            samples = tuple(self.level * scale * math.exp(offset + z * WITHIN) for z in rng.standard_normal(reps))
            out.append(BenchResult(test=test, n_prompt=0, n_gen=16, n_depth=0, avg_ts=sum(samples) / reps,
                                   stddev_ts=0.0, samples_ts=samples))
        return out

    def busy_cpu_s_at(self, began: float) -> float:
        """The average load over the call that began at ``began``."""
        wall = max(self.now - began, 1e-9)
        n = max(1, int(wall / STEP_S))
        return sum(self.load(began + (i + 0.5) * wall / n) for i in range(n)) / n

    def reading(self, host: object = None) -> HostReading:
        return HostReading(at_s=self.now, cpu=CpuTimes(self.busy_cpu_s, 0.0, self.now * self.cpus), own_cpu_s=0.0,
                           swap_in=0, swap_out=0, throttle_count=0, temperature=None)

    def watch(self) -> CallWatcher:
        """The real HostWatcher, reading this simulated host and waiting on its clock."""
        return CallWatcher(HostWatcher(None, cpu_count=self.cpus, read=self.reading, gpu=False,  # type: ignore[arg-type]
                                       clock=self.clock, sleep=self.advance))


def quiet_watch(fake: object, cpus: int = 4) -> CallWatcher:
    """A quiet host on ``fake``'s clock (any fake llama-bench with a ``now``)."""

    def read(host: object = None) -> HostReading:
        now = fake.now  # type: ignore[attr-defined]
        return HostReading(at_s=now, cpu=CpuTimes(0.0, 0.0, now * cpus), own_cpu_s=0.0, swap_in=0, swap_out=0,
                           throttle_count=0, temperature=None)

    def sleep(seconds: float) -> None:
        fake.now += seconds  # type: ignore[attr-defined]

    return CallWatcher(HostWatcher(None, cpu_count=cpus, read=read, gpu=False,  # type: ignore[arg-type]
                                   clock=lambda: fake.now, sleep=sleep))  # type: ignore[attr-defined]
