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

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tunehost.bench import runner
from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.runner import BenchConfig, BenchSettings, Provenance, RoundsHooks, run_rounds

DATA = Path(__file__).parent / "data"
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
        draws = self.rng.standard_normal(len(TESTS) * (reps + 1)).tolist()  # one call: the fake must be cheap
        bursts = self.rng.random(len(TESTS)).tolist()
        for i, (test, n_prompt, n_gen, level) in enumerate(TESTS):
            offset = draws[i * (reps + 1)] * self.noise.between
            if bursts[i] < self.noise.burst_share:
                offset -= math.log(self.noise.burst_factor)
            samples = tuple(level * scale * math.exp(offset + z * self.noise.within)
                            for z in draws[i * (reps + 1) + 1:(i + 1) * (reps + 1)])
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
        outcome = run_rounds(configs, settings, RoundsHooks(fake, clock=fake.clock))
        result = runner.build_result(outcome, settings, Provenance("llama-bench", {"name": "m.gguf"}))
        assert result.comparison is not None
        for row in result.comparison.rows:
            counts[row.verdict] += 1
            counts["rows"] += 1
        counts["rounds"] += outcome.rounds
    return counts


# Fitted on this project's 2-vCPU VM while other jobs ran (scripts/bench_noise.py, tiny model, -p 16 -n 8 -t 2,
# 20 invocations x 5 repetitions): one-way ANOVA of log(t/s) over the invocations no burst hit (13-14 of 20):
# tg8 between 0.114 / within 0.077, pp16 0.084 / 0.077; 6-7 of 20 invocations had repetitions at 1/3 or less of
# the usual speed (another job took a core): burst_share 0.3, factor 3. All 20 invocations pooled: between 0.38 /
# within 0.43 (tg8). A quiet host: 3 % between invocations and 1 % within (llama-bench's run-to-run noise on a quiet
# desktop is about 1 %; 3x that for margin).
BUSY_VM = Noise(between=0.114, within=0.077)
BUSY_VM_WITH_BURSTS = Noise(between=0.114, within=0.077, burst_share=0.3, burst_factor=3.0)
QUIET = Noise(between=0.03, within=0.01)
# 3 s per invocation: 19 rounds fit in the default 120 s budget (2 warm-ups + 2 x 3 s per round)
SECONDS = 3.0


@pytest.mark.parametrize("noise, runs, seed", [(QUIET, 500, 1), (BUSY_VM, 500, 2), (BUSY_VM_WITH_BURSTS, 500, 3)],
                         ids=["quiet", "busy-vm", "busy-vm-bursts"])
def test_aa_false_verdicts_stay_under_5_percent_over_1000_comparisons(noise, runs, seed):
    counts = simulate(noise, effect=1.0, runs=runs, seed=seed, seconds=SECONDS)
    assert counts["rows"] == 1000
    false = counts["faster"] + counts["slower"]
    assert false <= 50, counts


def test_a_true_10_percent_slowdown_is_called_in_90_percent_of_runs_on_a_quiet_host():
    counts = simulate(QUIET, effect=0.9, runs=150, seed=4, seconds=SECONDS)
    assert counts["slower"] >= 0.9 * counts["rows"], counts
    assert counts["faster"] == 0


def test_on_the_busy_vm_a_10_percent_slowdown_is_never_called_faster():
    # the noise there is larger than the default budget can beat for 10 % (docs/bench.md: power by host noise)
    counts = simulate(BUSY_VM, effect=0.9, runs=100, seed=5, seconds=SECONDS)
    assert counts["faster"] == 0


def test_the_simulated_noise_is_the_noise_measured_on_the_vm():
    from tunehost.bench.stats import variance_components

    data = json.loads((DATA / "noise-shared-2vcpu-vm-tiny-p16-n8-t2-20x5.json").read_text())["samples_ts"]
    figures = {}
    for test, invocations in data.items():
        typical = float(np.median(np.concatenate(invocations)))
        quiet = [inv for inv in invocations if min(inv) > 0.6 * typical]  # no repetition lost to another job
        figures[test] = (variance_components(quiet), 1 - len(quiet) / len(invocations))
    (between, within), burst = figures["tg8"]
    assert (round(between, 3), round(within, 3)) == (BUSY_VM.between, BUSY_VM.within)
    assert burst == pytest.approx(BUSY_VM_WITH_BURSTS.burst_share, abs=0.05)
    assert figures["pp16"][0][0] < BUSY_VM.between  # tg8 is the noisier test: the figures fitted are the worse
