"""Statistics for A/B benchmark comparisons: centre, spread, bootstrap interval, verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from tunehost.bench.stats import (
    PRACTICAL_THRESHOLD,
    bootstrap_ratio_interval,
    compare,
    iqr,
    mad,
    median,
    needs_more_rounds,
    summarize,
)


def noisy(centre: float, relative_noise: float, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(centre * (1.0 + rng.normal(0.0, relative_noise, n)))


def test_median_iqr_mad_known_values():
    values = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert median(values) == 3.0
    assert iqr(values) == 2.0  # 4 - 2
    assert mad(values) == 1.0  # deviations 2,1,0,1,97
    summary = summarize(values)
    assert (summary.n, summary.median, summary.mean) == (5, 3.0, 22.0)
    assert summary.relative_mad == pytest.approx(1 / 3)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_empty_or_non_finite_samples_are_rejected(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_aa_identical_samples_no_clear_difference_and_no_more_rounds():
    samples = [118.9, 119.2, 118.7, 119.0, 119.1]
    result = compare(samples, list(samples))
    assert result.verdict == "no clear difference"
    assert result.ratio == 1.0
    assert result.low <= 1.0 <= result.high
    assert result.interval_within_threshold
    assert not needs_more_rounds(result)


def test_aa_same_distribution_different_draws_is_not_a_difference():
    baseline = noisy(100.0, 0.01, 7, seed=1)
    candidate = noisy(100.0, 0.01, 7, seed=2)
    assert compare(baseline, candidate).verdict == "no clear difference"


def test_clear_20_percent_speedup_is_faster():
    baseline = noisy(100.0, 0.01, 5, seed=3)
    candidate = noisy(120.0, 0.01, 5, seed=4)
    result = compare(baseline, candidate)
    assert result.verdict == "faster"
    assert result.change_percent == pytest.approx(20.0, abs=2.0)
    assert result.low > 1.0 + PRACTICAL_THRESHOLD
    assert not needs_more_rounds(result)


def test_clear_slowdown_is_slower():
    result = compare(noisy(120.0, 0.01, 5, seed=5), noisy(100.0, 0.01, 5, seed=6))
    assert result.verdict == "slower"
    assert result.high < 1.0 - PRACTICAL_THRESHOLD


def test_noise_larger_than_the_change_is_not_faster_and_asks_for_more_rounds():
    # A 3 % "gain" buried in 8 % noise.
    baseline = noisy(100.0, 0.08, 5, seed=7)
    candidate = noisy(103.0, 0.08, 5, seed=8)
    result = compare(baseline, candidate)
    assert result.verdict != "faster"
    assert result.high - result.low > 0.05  # too wide to decide
    assert needs_more_rounds(result)
    assert not needs_more_rounds(result, max_samples=5)  # give up at the cap


def test_real_but_tiny_gain_below_the_practical_threshold_is_no_clear_difference():
    baseline = [100.0, 100.1, 99.9, 100.0, 100.05, 99.95, 100.0]
    candidate = [value * 1.01 for value in baseline]  # +1 %, measured very precisely
    result = compare(baseline, candidate)
    assert result.low > 1.0  # statistically real
    assert result.verdict == "no clear difference"  # but below the 2 % threshold
    assert not needs_more_rounds(result)  # the interval already sits inside 1 ± 2 %


def test_too_few_samples_never_give_a_verdict():
    result = compare([100.0], [150.0])
    assert result.verdict == "no clear difference"
    assert needs_more_rounds(result)


def test_first_sample_page_in_outlier_moves_the_median_less_than_the_mean():
    # ik_llama.cpp fa-on pp512 samples: the first run paid for reading the model from disk.
    fa_on = [8.89501, 10.3347, 10.0806, 10.3879, 10.0488]
    fa_off = [8.08873, 8.39708, 8.27625, 8.08221, 8.177]
    by_median = compare(fa_off, fa_on, statistic="median")
    by_mean = compare(fa_off, fa_on, statistic="mean")
    assert by_median.verdict == "faster"
    assert by_median.ratio > by_mean.ratio


def test_bootstrap_is_deterministic_for_a_seed():
    baseline = noisy(100.0, 0.05, 6, seed=9)
    candidate = noisy(105.0, 0.05, 6, seed=10)
    assert bootstrap_ratio_interval(baseline, candidate) == bootstrap_ratio_interval(baseline, candidate)
    assert bootstrap_ratio_interval(baseline, candidate, seed=1) != bootstrap_ratio_interval(baseline, candidate, seed=2)


def test_interval_contains_the_point_estimate():
    ratio, low, high = bootstrap_ratio_interval(noisy(50, 0.03, 8, seed=11), noisy(55, 0.03, 8, seed=12))
    assert low <= ratio <= high


def test_zero_baseline_is_rejected():
    with pytest.raises(ValueError):
        compare([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
