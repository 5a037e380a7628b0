"""The engine against a simulated llama-bench with the noise structure of real runs: A/A false verdicts and power.

The fake llama-bench draws each invocation's log throughput as level + offset (shared by all its repetitions:
thread placement, memory layout, clock state) + per-repetition noise. The two sigmas are fitted from real
llama-bench output (``scripts/bench_noise.py``, 20 invocations x 5 repetitions of ``-p 16 -n 8 -t 2`` on the
tunehost test models, 2-vCPU VM shared with other jobs, 2026-11-22; the captured samples are in
tests/bench/data/noise-*.json). Every comparison runs the real engine (:func:`tunehost.bench.runner.run_rounds`,
the same stopping rule) and the real result (:func:`tunehost.bench.runner.build_result`, the same verdicts a user
sees), with a fake clock, seeded: the counts below are exact and reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from tunehost.bench import runner
from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.runner import BenchConfig, BenchSettings, run_rounds

TESTS = (("pp512", 512, 0, 400.0), ("tg128", 0, 128, 60.0))


@dataclass(frozen=True)
class Noise:
    """Per-invocation offset and per-repetition noise, both as sigmas of log(tokens/s)."""

    between: float
    within: float
    burst_share: float = 0.0  # share of invocations hit by another job: throughput divided by burst_factor
    burst_factor: float = 3.0


class SimulatedBench:
    """A llama-bench whose candidate (-t 1 here) is ``effect`` times the baseline's throughput."""

    def __init__(self, noise: Noise, effect: float, rng: np.random.Generator, seconds: float):
        self.noise, self.effect, self.rng, self.seconds = noise, effect, rng, seconds
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, args: Sequence[str], on_line) -> list[BenchResult]:
        self.now += self.seconds
        reps = int(args[args.index("-r") + 1])
        scale = self.effect if args[args.index("-t") + 1] == "1" else 1.0
        out = []
        for test, n_prompt, n_gen, level in TESTS:
            offset = self.rng.normal(0.0, self.noise.between)
            if self.noise.burst_share and self.rng.random() < self.noise.burst_share:
                offset -= np.log(self.noise.burst_factor)
            samples = tuple(float(v) for v in level * scale * np.exp(offset + self.rng.normal(0.0, self.noise.within, reps)))
            out.append(BenchResult(test=test, n_prompt=n_prompt, n_gen=n_gen, n_depth=0, avg_ts=sum(samples) / reps,
                                   stddev_ts=0.0, samples_ts=samples, model_type="llama ?B Q8_0",
                                   build_commit="0c1e570", build_number=11312, backend="CPU"))
        return out


def simulate(noise: Noise, effect: float, runs: int, seed: int, *, seconds: float = 1.5) -> dict[str, int]:
    """Run ``runs`` full comparisons (default settings: budget, rounds, reps); count verdicts over all rows."""
    rng = np.random.default_rng(seed)
    settings = BenchSettings(model="m.gguf", n_prompt=512, n_gen=128)
    configs = [BenchConfig("baseline", ("-t", "2")), BenchConfig("candidate", ("-t", "1"))]
    counts = {"faster": 0, "slower": 0, "no clear difference": 0, "rows": 0, "rounds": 0}
    for _ in range(runs):
        fake = SimulatedBench(noise, effect, rng, seconds)
        outcome = run_rounds(configs, settings, fake, clock=fake.clock)
        result = runner.build_result(outcome, settings, binary="llama-bench", model_id={"name": "m.gguf"})
        assert result.comparison is not None
        for row in result.comparison.rows:
            counts[row.verdict] += 1
            counts["rows"] += 1
        counts["rounds"] += outcome.rounds
    return counts
