"""Honest comparisons of benchmark rounds: per-round log ratios, an anytime-valid interval, verdicts.

Inputs are throughputs (tokens per second, higher is better) grouped by llama-bench invocation: one invocation
gives REPS repetitions, and a *round* runs the baseline and the candidate once each, back to back.

**The round is the unit.** Repetitions inside one invocation share its thread placement, memory layout and clock
state, so they vary far less than invocations do (measured by ``scripts/bench_noise.py``; the figures are in
docs/bench.md and tests/bench/test_bench_simulation.py). Pooling every repetition as independent
(pseudo-replication) gave intervals several times too narrow and 11 % false verdicts in A/A runs. So each round
gives ONE paired observation per test, ``log(centre(candidate reps) / centre(baseline reps))``, the repetitions
only steadying that round's own value, and the interval is over rounds.

**Stopping early stays honest.** The engine looks after every round and stops once the answer is clear. A plain
95 % t interval looked at again and again would be wrong far more than 5 % of the time (optional stopping), so
the interval is a *confidence sequence*: it holds at every round at once, whatever rule decides when to stop
(budget, max rounds, "decided"). It is the t-mixture sequence of Lai (1976, "On confidence sequences", Ann.
Statist. 4:265) in the mixture-martingale framework of Howard, Ramdas, McAuliffe & Sekhon (2021, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49:1055): the Bayes factor of the one-sample t
test with a normal prior on the effect (in noise units) and the scale-invariant prior on the noise is a
nonnegative martingale under the null, so by Ville's inequality it exceeds 1/alpha at ANY round with probability
at most alpha. Inverting it gives a t interval whose critical value depends on the round count instead of a t
quantile (about 5.4 at 5 rounds, 4.0 at 10, 3.6 at 20, vs 2.78 / 2.26 / 2.09 for a one-look t interval): the
price of being allowed to look every round. We chose it over planned looks with alpha spending (Lan & DeMets
1983, Biometrika 70:659) because the engine's stopping time is set by a wall-clock budget, not by a plan, and
because converting z spending boundaries to t with 4-10 degrees of freedom is only approximate; the sequence is
exact for normal per-round noise at every round count.

A verdict ("faster"/"slower") needs the whole interval beyond a practical threshold (:data:`PRACTICAL_THRESHOLD`,
2 %) and at least :data:`MIN_ROUNDS` rounds. Everything is pure and deterministic; nothing here measures or prints.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Literal

import numpy as np

Verdict = Literal["faster", "slower", "no clear difference"]
Method = Literal["paired rounds, t-mixture confidence sequence", "unpaired rounds, Welch t interval"]

# A ratio inside [1 - 2 %, 1 + 2 %] is "no clear difference" however narrow its interval.
PRACTICAL_THRESHOLD = 0.02
CONFIDENCE = 0.95
# No verdict from fewer rounds: below 5 paired observations the spread of the log ratios itself is unknown.
MIN_ROUNDS = 5
# Prior variance g of the standardized effect (mean log ratio / per-round noise) in the t-mixture. g = 4 (effects
# of about 2 noise SDs per round: 10 % against runs 3-5 % apart) keeps the multiplier finite from 4 rounds (7.2) and
# near its floor from 10 (4.0; 3.6 at 20, 3.5 at 40); g = 1 would be 6 % narrower at 40 rounds but 8.4 at 5.
MIXTURE_PRIOR_VARIANCE = 4.0
PAIRED: Method = "paired rounds, t-mixture confidence sequence"
UNPAIRED: Method = "unpaired rounds, Welch t interval"


@dataclass(frozen=True)
class VerdictRule:
    """When an interval is a verdict: at the ``confidence`` level, beyond 1 ± ``threshold``, from ``min_rounds``
    rounds on (:func:`compare_rounds`; the tune race raises the confidence for its many pairs)."""

    threshold: float = PRACTICAL_THRESHOLD
    confidence: float = CONFIDENCE
    min_rounds: int = MIN_ROUNDS


DEFAULT_RULE = VerdictRule()


@dataclass(frozen=True)
class SampleSummary:
    """Centre and spread of one set of repetitions."""

    n: int
    median: float
    mean: float
    iqr: float
    mad: float

    @property
    def relative_mad(self) -> float:
        """MAD / median: the noise as a fraction of the typical value (0 when the median is 0)."""
        return self.mad / self.median if self.median else 0.0


@dataclass(frozen=True)
class RoundsComparison:
    """Candidate against baseline over rounds: the ratio, its interval, the verdict and what it rests on."""

    ratio: float  # exp(mean per-round log ratio); > 1 means the candidate is faster
    low: float  # interval on the ratio (0 / inf while too few rounds bound it)
    high: float
    verdict: Verdict
    rounds: int  # observations behind the interval: paired rounds, or the smaller side's rounds (unpaired)
    effective_samples: float | None  # what the pooled repetitions are worth as independent samples (Kish), smaller
    repetitions: int  # side; None when not asked for. repetitions: pooled on the smaller side (the old engine's n)
    method: Method
    confidence: float = CONFIDENCE
    threshold: float = PRACTICAL_THRESHOLD
    min_rounds: int = MIN_ROUNDS

    @property
    def change_percent(self) -> float:
        """(ratio - 1) in percent: +20.0 means 20 % more tokens per second."""
        return (self.ratio - 1.0) * 100.0

    @property
    def interval_within_threshold(self) -> bool:
        """True when the whole interval lies inside 1 ± threshold: any real difference is too small to matter."""
        return self.low >= 1.0 - self.threshold and self.high <= 1.0 + self.threshold

    @property
    def too_few_rounds(self) -> bool:
        return self.rounds < self.min_rounds


# ---------------------------------------------------------------- descriptive


def median(values: Sequence[float]) -> float:
    """The median; raises ValueError on an empty sequence."""
    return float(np.median(_as_array(values)))


def iqr(values: Sequence[float]) -> float:
    """Interquartile range (75th minus 25th percentile, linear interpolation)."""
    q75, q25 = np.percentile(_as_array(values), [75, 25])
    return float(q75 - q25)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled; multiply by 1.4826 to estimate a normal σ)."""
    data = _as_array(values)
    return float(np.median(np.abs(data - np.median(data))))


def summarize(values: Sequence[float]) -> SampleSummary:
    """Centre and spread of ``values``; raises ValueError on an empty sequence."""
    data = _as_array(values)
    return SampleSummary(n=len(data), median=median(data), mean=fmean(data), iqr=iqr(data), mad=mad(data))


def round_value(samples: Sequence[float]) -> float:
    """One invocation's throughput: the median of its repetitions (one preempted repetition must not move it).

    Pure Python: it runs for every round of every test after every round (numpy's overhead dominates at n = 3)."""
    if not samples or not all(math.isfinite(v) for v in samples):
        raise ValueError("need finite repetitions")
    value = statistics.median(samples)
    if value <= 0.0:
        raise ValueError("throughput must be positive")
    return float(value)


def variance_components(rounds: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(sigma_between, sigma_within) of log throughput by one-way ANOVA over invocations.

    sigma_within: the spread of repetitions inside one invocation; sigma_between: the spread of the invocations'
    own levels beyond what sigma_within explains (0 when the data show none)."""
    groups = [[math.log(v) for v in r] for r in rounds if len(r) > 0]
    if any(not math.isfinite(v) for g in groups for v in g):
        raise ValueError("samples must be positive finite numbers")
    if len(groups) < 2:
        raise ValueError("need at least two invocations")
    sizes = [len(g) for g in groups]
    total = float(sum(sizes))
    if total - len(groups) < 1:
        raise ValueError("need repeated samples inside invocations")
    means = [math.fsum(g) / len(g) for g in groups]
    grand = math.fsum(v for g in groups for v in g) / total
    ss_within = math.fsum((v - m) ** 2 for g, m in zip(groups, means) for v in g)
    ss_between = math.fsum(len(g) * (m - grand) ** 2 for g, m in zip(groups, means))
    ms_within = ss_within / (total - len(groups))
    ms_between = ss_between / (len(groups) - 1)
    size0 = (total - sum(k * k for k in sizes) / total) / (len(groups) - 1)  # mean group size, unbalanced ANOVA
    between = max(0.0, (ms_between - ms_within) / size0)
    return math.sqrt(between), math.sqrt(ms_within)


def effective_sample_size(rounds: Sequence[Sequence[float]]) -> float:
    """What the pooled repetitions are worth as independent samples: N / (1 + (m - 1) ICC) (Kish's design effect).

    ICC is the share of the variance that invocations do not share with their own repetitions; with one
    repetition per invocation, or one invocation, every sample counts once / the invocations count."""
    total = sum(len(r) for r in rounds)
    if len(rounds) < 2 or total <= len(rounds):
        return float(len(rounds)) if len(rounds) < 2 else float(total)
    try:
        between, within = variance_components(rounds)
    except ValueError:
        return float(len(rounds))
    spread = between ** 2 + within ** 2
    icc = between ** 2 / spread if spread > 0 else 0.0
    size = total / len(rounds)
    return float(total / (1.0 + (size - 1.0) * icc))


# ---------------------------------------------------------------- the interval


def mixture_radius(n: int, confidence: float = CONFIDENCE, prior_variance: float = MIXTURE_PRIOR_VARIANCE) -> float:
    """Critical value c_n of the t-mixture confidence sequence: |mean - mu| <= c_n * s / sqrt(n) at every n at once.

    The Bayes factor (1 + n g)^(-1/2) * ((1 + t²/ν) / (1 + t²/(ν (1 + n g))))^(n/2), ν = n - 1 (Rouder et al. 2009,
    Psychon. Bull. Rev. 16:225, eq. 1 at a fixed g) is a test martingale under mu (Lai 1976); the interval is the
    set of mu it has not yet rejected at 1/alpha. Solved in closed form; inf while n is too small to reject
    anything (its largest possible value, (1 + n g)^((n-1)/2), is still below 1/alpha)."""
    if n < 2:
        return math.inf
    alpha = 1.0 - confidence
    grow = 1.0 + n * prior_variance
    bound = (math.sqrt(grow) / alpha) ** (2.0 / n)  # (1 + u) / (1 + u / grow) must reach this, u = t² / ν
    if bound >= grow:
        return math.inf
    u = (bound - 1.0) / (1.0 - bound / grow)
    return math.sqrt((n - 1) * u)


def student_t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom (regularized incomplete beta)."""
    if df <= 0:
        raise ValueError("df must be positive")
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + x * x))
    return 1.0 - tail if x > 0 else tail


def student_t_quantile(p: float, df: float) -> float:
    """The x with P(T <= x) = p (bisection on :func:`student_t_cdf`, to 1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be between 0 and 1")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if student_t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-10:
            break
    return (low + high) / 2.0


def log_ratios(baseline_rounds: Sequence[Sequence[float]], candidate_rounds: Sequence[Sequence[float]]) -> list[float]:
    """One paired observation per round: log(candidate round value / baseline round value)."""
    if len(baseline_rounds) != len(candidate_rounds):
        raise ValueError("paired rounds need the same number of rounds on both sides")
    return [math.log(round_value(c) / round_value(b)) for b, c in zip(baseline_rounds, candidate_rounds)]


def compare_rounds(baseline_rounds: Sequence[Sequence[float]], candidate_rounds: Sequence[Sequence[float]], *,
                   paired: bool = True, rule: VerdictRule = DEFAULT_RULE, describe: bool = True) -> RoundsComparison:
    """Candidate against baseline, each given as its invocations' repetitions (``rounds[i]`` = one invocation).

    paired (measured interleaved, round i of each side back to back): the t-mixture confidence sequence on the
    per-round log ratios, valid however the engine decided to stop. Unpaired (before/after measured at different
    times, each side stopped on its own noise, never on the difference): a Welch t interval on the two sides'
    per-round log values. ``rule`` (:class:`VerdictRule`): "faster" only when the interval's low end exceeds
    1 + threshold, "slower" only when its high end is below 1 - threshold, never with fewer than ``min_rounds``
    rounds (on the smaller side). ``describe=False`` skips the effective sample size (the engine's check after
    every round needs only the verdict)."""
    threshold, confidence, min_rounds = rule.threshold, rule.confidence, rule.min_rounds
    if not baseline_rounds or not candidate_rounds:
        raise ValueError("need at least one round on each side")
    if paired:
        diffs = log_ratios(baseline_rounds, candidate_rounds)
        n = len(diffs)
        centre, spread = _mean_sd(diffs)
        radius = mixture_radius(n, confidence) * spread / math.sqrt(n) if n > 1 else math.inf
        method: Method = PAIRED
    else:
        base = [math.log(round_value(r)) for r in baseline_rounds]
        cand = [math.log(round_value(r)) for r in candidate_rounds]
        n = min(len(base), len(cand))
        centre = fmean(cand) - fmean(base)
        radius = _welch_radius(base, cand, confidence)
        method = UNPAIRED
    radius = 0.0 if math.isnan(radius) else radius  # 0 * inf: identical rounds leave no doubt
    low = math.exp(centre - radius) if math.isfinite(radius) else 0.0
    high = math.exp(centre + radius) if math.isfinite(radius) else math.inf
    verdict: Verdict = "no clear difference"
    if n >= min_rounds:
        if low > 1.0 + threshold:
            verdict = "faster"
        elif high < 1.0 - threshold:
            verdict = "slower"
    effective = (round(min(effective_sample_size(baseline_rounds), effective_sample_size(candidate_rounds)), 2)
                 if describe else None)
    repetitions = min(sum(len(r) for r in baseline_rounds), sum(len(r) for r in candidate_rounds))
    return RoundsComparison(ratio=math.exp(centre), low=low, high=high, verdict=verdict, rounds=n,
                            effective_samples=effective, repetitions=repetitions, method=method,
                            confidence=confidence, threshold=threshold, min_rounds=min_rounds)


def level_radius(rounds: Sequence[Sequence[float]], confidence: float = CONFIDENCE) -> float:
    """Relative half-width of the confidence sequence on ONE configuration's level (its mean log throughput):
    what a single measurement (``--save`` before a host change) knows about itself; inf below two rounds."""
    values = [math.log(round_value(r)) for r in rounds]
    if len(values) < 2:
        return math.inf
    spread = _mean_sd(values)[1]
    return mixture_radius(len(values), confidence) * spread / math.sqrt(len(values)) if spread > 0 else 0.0


def needs_more_rounds(comparison: RoundsComparison) -> bool:
    """Whether another round could still change an undecided comparison: yes below ``min_rounds``; no once a
    verdict is reached or the whole interval lies inside 1 ± threshold (too small to matter); yes otherwise.
    The engine's budget and max rounds stop it regardless; the interval stays valid at any stop."""
    if comparison.too_few_rounds:
        return True
    if comparison.verdict != "no clear difference":
        return False
    return not comparison.interval_within_threshold


def _welch_radius(base: Sequence[float], cand: Sequence[float], confidence: float) -> float:
    if len(base) < 2 or len(cand) < 2:
        return math.inf
    var_b = _mean_sd(base)[1] ** 2 / len(base)
    var_c = _mean_sd(cand)[1] ** 2 / len(cand)
    total = var_b + var_c
    if total == 0.0:
        return 0.0
    df = total ** 2 / (var_b ** 2 / (len(base) - 1) + var_c ** 2 / (len(cand) - 1))
    return student_t_quantile(1.0 - (1.0 - confidence) / 2.0, df) * math.sqrt(total)


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (inf below two values); plain floats, fast for a few dozen rounds."""
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, math.inf
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b): Lentz's continued fraction (Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return front * result / a


def _as_array(values: Sequence[float]) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    if data.ndim != 1 or data.size == 0:
        raise ValueError("need a non-empty sequence of numbers")
    if not np.all(np.isfinite(data)):
        raise ValueError("samples must be finite numbers")
    return data
