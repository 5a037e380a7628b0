"""Honest comparisons of benchmark samples: medians, spread, bootstrap intervals, verdicts.

Inputs are throughputs (tokens per second, higher is better), one number per repetition.
A comparison puts a confidence interval on the ratio candidate / baseline and says
"faster" or "slower" only when the whole interval lies beyond a practical threshold
(:data:`PRACTICAL_THRESHOLD`, 2 %): llama-bench's run-to-run noise on a quiet desktop is
about 1 %, so a smaller change is not worth recommending even when it is statistically real.
Everything is pure and deterministic (a fixed-seed RNG); nothing here measures or prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Literal

import numpy as np

Verdict = Literal["faster", "slower", "no clear difference"]
Statistic = Literal["median", "mean"]

# A ratio inside [1 - 2 %, 1 + 2 %] is "no clear difference" however narrow its interval.
PRACTICAL_THRESHOLD = 0.02
CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 12345
# Fewer repetitions than this per side cannot show their own noise: no verdict from them.
MIN_SAMPLES = 3


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
class Comparison:
    """Candidate against baseline: the ratio of their centres with a bootstrap interval."""

    statistic: Statistic
    ratio: float  # candidate / baseline of the chosen statistic; > 1 means the candidate is faster
    low: float
    high: float
    confidence: float
    threshold: float
    verdict: Verdict
    baseline: SampleSummary
    candidate: SampleSummary

    @property
    def change_percent(self) -> float:
        """(ratio - 1) in percent: +20.0 means 20 % more tokens per second."""
        return (self.ratio - 1.0) * 100.0

    @property
    def interval_within_threshold(self) -> bool:
        """True when the whole interval lies inside 1 ± threshold: any real difference is too small to matter."""
        return self.low >= 1.0 - self.threshold and self.high <= 1.0 + self.threshold


def median(values: Sequence[float]) -> float:
    """The median; raises ValueError on an empty sequence."""
    data = _as_array(values)
    return float(np.median(data))


def iqr(values: Sequence[float]) -> float:
    """Interquartile range (75th minus 25th percentile, linear interpolation)."""
    data = _as_array(values)
    q75, q25 = np.percentile(data, [75, 25])
    return float(q75 - q25)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled; multiply by 1.4826 to estimate a normal σ)."""
    data = _as_array(values)
    return float(np.median(np.abs(data - np.median(data))))


def summarize(values: Sequence[float]) -> SampleSummary:
    """Centre and spread of ``values``; raises ValueError on an empty sequence."""
    data = _as_array(values)
    return SampleSummary(n=len(data), median=median(data), mean=fmean(data), iqr=iqr(data), mad=mad(data))


def bootstrap_ratio_interval(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    statistic: Statistic = "median",
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """(ratio, low, high): statistic(candidate) / statistic(baseline) and its percentile-bootstrap interval.

    Each side is resampled with replacement independently; the same seed gives the same interval.
    """
    base = _as_array(baseline)
    cand = _as_array(candidate)
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    centre = np.median if statistic == "median" else np.mean
    base_centre = float(centre(base))
    if base_centre <= 0.0:
        raise ValueError("the baseline's centre must be positive to form a ratio")
    rng = np.random.default_rng(seed)
    base_draws = centre(base[rng.integers(0, len(base), size=(resamples, len(base)))], axis=1)
    cand_draws = centre(cand[rng.integers(0, len(cand), size=(resamples, len(cand)))], axis=1)
    # A zero baseline resample would divide by zero; a positive-throughput sample never has one.
    ratios = cand_draws / np.where(base_draws > 0, base_draws, np.nan)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.nanpercentile(ratios, [tail, 100.0 - tail])
    return float(centre(cand)) / base_centre, float(low), float(high)


def compare(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    statistic: Statistic = "median",
    threshold: float = PRACTICAL_THRESHOLD,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    min_samples: int = MIN_SAMPLES,
) -> Comparison:
    """Compare candidate throughputs with baseline throughputs (higher is better).

    The verdict is "faster" only when the interval's low end exceeds 1 + threshold, "slower"
    only when its high end is below 1 - threshold, and "no clear difference" otherwise,
    including whenever either side has fewer than ``min_samples`` values.
    """
    ratio, low, high = bootstrap_ratio_interval(
        baseline, candidate, statistic=statistic, confidence=confidence, resamples=resamples, seed=seed
    )
    verdict: Verdict = "no clear difference"
    if min(len(baseline), len(candidate)) >= min_samples:
        if low > 1.0 + threshold:
            verdict = "faster"
        elif high < 1.0 - threshold:
            verdict = "slower"
    return Comparison(
        statistic=statistic, ratio=ratio, low=low, high=high, confidence=confidence, threshold=threshold,
        verdict=verdict, baseline=summarize(baseline), candidate=summarize(candidate),
    )


def needs_more_rounds(comparison: Comparison, *, min_samples: int = MIN_SAMPLES, max_samples: int = 15) -> bool:
    """Whether another A/B round could still change an undecided comparison.

    No when either side already has ``max_samples`` values (give up: the answer is "no clear
    difference"), or when a verdict is reached, or when the whole interval already lies inside
    1 ± threshold (a difference too small to matter). Yes while either side has fewer than
    ``min_samples`` values, or the interval is too wide: it still reaches past the threshold.
    """
    sizes = (comparison.baseline.n, comparison.candidate.n)
    if max(sizes) >= max_samples:
        return False
    if min(sizes) < min_samples:
        return True
    if comparison.verdict != "no clear difference":
        return False
    return not comparison.interval_within_threshold


def _as_array(values: Sequence[float]) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    if data.ndim != 1 or data.size == 0:
        raise ValueError("need a non-empty sequence of numbers")
    if not np.all(np.isfinite(data)):
        raise ValueError("samples must be finite numbers")
    return data
