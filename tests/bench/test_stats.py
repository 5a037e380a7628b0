"""Statistics for A/B benchmark comparisons: descriptive figures, the t distribution, the confidence sequence over
rounds, verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunehost.bench.stats import (
    MIN_ROUNDS,
    PAIRED,
    PRACTICAL_THRESHOLD,
    UNPAIRED,
    compare_rounds,
    effective_sample_size,
    iqr,
    level_radius,
    mad,
    median,
    mixture_radius,
    needs_more_rounds,
    round_value,
    student_t_cdf,
    student_t_quantile,
    summarize,
    variance_components,
)


def rounds(centre: float, between: float, within: float, n: int, reps: int, seed: int) -> list[list[float]]:
    """n invocations of reps repetitions: a per-invocation offset plus per-repetition noise (log scale)."""
    rng = np.random.default_rng(seed)
    return [list(centre * np.exp(rng.normal(0, between) + rng.normal(0, within, reps))) for _ in range(n)]


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
    with pytest.raises(ValueError):
        round_value(bad)


def test_a_round_is_the_median_of_its_repetitions():
    assert round_value([16000.0, 700.0, 15900.0]) == 15900.0  # one preempted repetition does not move it
    with pytest.raises(ValueError):
        round_value([0.0, 0.0, 0.0])


# Student's t quantiles from a printed table (NIST/SEMATECH e-Handbook, section 1.3.6.7.2)
@pytest.mark.parametrize("df, p, table", [
    (1, 0.975, 12.706), (2, 0.975, 4.303), (4, 0.975, 2.776), (5, 0.995, 4.032), (9, 0.975, 2.262),
    (10, 0.95, 1.812), (30, 0.975, 2.042), (100, 0.975, 1.984),
])
def test_t_quantile_matches_the_table(df, p, table):
    assert student_t_quantile(p, df) == pytest.approx(table, abs=6e-4)
    assert student_t_cdf(table, df) == pytest.approx(p, abs=1e-4)
    assert student_t_quantile(1 - p, df) == pytest.approx(-table, abs=6e-4)


def test_t_cdf_known_values():
    assert student_t_cdf(0.0, 3) == pytest.approx(0.5)
    assert student_t_cdf(-1.0, 1) == pytest.approx(0.25)  # Cauchy: 1/2 + atan(x)/pi
    assert student_t_cdf(1.0, 2) == pytest.approx(0.5 + 1 / (2 * math.sqrt(3)))  # closed form for df = 2
    assert student_t_cdf(math.inf, 4) == 1.0


def test_mixture_radius_is_infinite_early_then_wider_than_a_one_look_t_interval():
    assert mixture_radius(1) == mixture_radius(2) == math.inf
    radii = {n: mixture_radius(n) for n in (5, 10, 20, 40)}
    assert radii[10] == pytest.approx(3.97, abs=0.01)  # the figure docs/bench.md quotes
    assert radii[5] > radii[10] > radii[20] > radii[40]
    for n, radius in radii.items():
        assert radius > student_t_quantile(0.975, n - 1)  # the price of looking after every round


def _sequence_misses(data: np.ndarray, radius_of) -> float:
    """Share of sequences (rows) whose interval around the true mean 0 excludes it at ANY round 2..N."""
    n = np.arange(1, data.shape[1] + 1)
    cumsum = np.cumsum(data, axis=1)
    means = cumsum / n
    sq = np.cumsum(data ** 2, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sds = np.sqrt(np.maximum(sq - n * means ** 2, 0) / (n - 1))
    radius = np.array([radius_of(k) for k in n]) * sds / np.sqrt(n)
    missed = np.abs(means[:, 1:]) > radius[:, 1:]
    return float(missed.any(axis=1).mean())


def test_confidence_sequence_holds_at_every_round_at_once_where_repeated_t_intervals_do_not():
    # 4000 null sequences of 40 rounds, every round looked at: the optional-stopping experiment of the issue
    data = np.random.default_rng(2026).normal(0.0, 1.0, size=(4000, 40))
    assert _sequence_misses(data, mixture_radius) <= 0.05
    naive = _sequence_misses(data, lambda k: student_t_quantile(0.975, k - 1) if k > 1 else math.inf)
    assert naive > 0.15  # a 95 % t interval recomputed every round misses far more often than 5 %


def test_confidence_sequence_holds_up_to_the_runners_round_cap():
    # the engine may look at every round up to MAX_ROUNDS (a tiny model fits that many in the budget)
    from tunehost.bench.runner import MAX_ROUNDS

    data = np.random.default_rng(2027).normal(0.0, 1.0, size=(2000, MAX_ROUNDS))
    assert _sequence_misses(data, mixture_radius) <= 0.05


def test_variance_components_recover_the_two_noise_levels():
    data = rounds(100.0, between=0.05, within=0.01, n=400, reps=5, seed=1)
    between, within = variance_components(data)
    assert between == pytest.approx(0.05, rel=0.1)
    assert within == pytest.approx(0.01, rel=0.05)
    with pytest.raises(ValueError):
        variance_components([[1.0, 2.0]])


def test_effective_sample_size_counts_invocations_when_they_dominate_the_noise():
    shared = rounds(100.0, between=0.05, within=0.001, n=10, reps=5, seed=2)
    independent = rounds(100.0, between=0.0, within=0.05, n=10, reps=5, seed=3)
    assert effective_sample_size(shared) == pytest.approx(10, abs=1)  # 50 repetitions worth about 10
    assert effective_sample_size(independent) > 35
    assert effective_sample_size([[1.0, 2.0, 3.0]]) == 1.0


def test_pseudo_replication_no_longer_makes_a_difference_out_of_invocation_noise():
    # tight repetitions, invocations 5 % apart: pooling the 15 repetitions would call this; the rounds do not
    base = rounds(100.0, between=0.05, within=0.002, n=5, reps=3, seed=4)
    cand = rounds(100.0, between=0.05, within=0.002, n=5, reps=3, seed=5)
    result = compare_rounds(base, cand)
    assert result.verdict == "no clear difference"
    assert result.rounds == 5 and result.repetitions == 15 and result.method == PAIRED
    assert result.effective_samples is not None and result.effective_samples < 7
    assert needs_more_rounds(result)


def test_clear_20_percent_speedup_is_faster_after_the_minimum_rounds_only():
    base = rounds(100.0, between=0.01, within=0.005, n=MIN_ROUNDS, reps=3, seed=6)
    cand = rounds(120.0, between=0.01, within=0.005, n=MIN_ROUNDS, reps=3, seed=7)
    result = compare_rounds(base, cand)
    assert result.verdict == "faster" and result.change_percent == pytest.approx(20.0, abs=2.0)
    assert result.low > 1.0 + PRACTICAL_THRESHOLD and not needs_more_rounds(result)
    early = compare_rounds(base[:MIN_ROUNDS - 1], cand[:MIN_ROUNDS - 1])
    assert early.verdict == "no clear difference" and early.too_few_rounds and needs_more_rounds(early)


def test_clear_slowdown_is_slower():
    result = compare_rounds(rounds(120.0, 0.01, 0.005, 6, 3, seed=8), rounds(100.0, 0.01, 0.005, 6, 3, seed=9))
    assert result.verdict == "slower" and result.high < 1.0 - PRACTICAL_THRESHOLD


def test_identical_rounds_are_no_clear_difference_and_need_no_more_rounds():
    same = [[118.9, 119.2, 118.7]] * 6
    result = compare_rounds(same, same)
    assert (result.ratio, result.low, result.high) == (1.0, 1.0, 1.0)
    assert result.verdict == "no clear difference" and result.interval_within_threshold
    assert not needs_more_rounds(result)


def test_real_but_tiny_gain_below_the_practical_threshold_is_no_clear_difference():
    base = rounds(100.0, between=0.001, within=0.001, n=12, reps=3, seed=10)
    cand = [[v * 1.01 for v in r] for r in base]  # +1 % in every round, measured very precisely
    result = compare_rounds(base, cand)
    assert result.low > 1.0 and result.verdict == "no clear difference"
    assert not needs_more_rounds(result)


def test_unpaired_before_after_uses_welch_on_round_levels():
    before = rounds(100.0, between=0.01, within=0.005, n=6, reps=3, seed=11)
    after = rounds(115.0, between=0.01, within=0.005, n=8, reps=3, seed=12)
    result = compare_rounds(before, after, paired=False)
    assert result.method == UNPAIRED and result.rounds == 6 and result.verdict == "faster"
    with pytest.raises(ValueError):
        compare_rounds(before, after, paired=True)  # pairing needs round-by-round partners


def test_one_round_a_side_never_gives_a_verdict():
    result = compare_rounds([[100.0, 101.0, 99.0]], [[150.0, 151.0, 149.0]])
    assert result.verdict == "no clear difference" and result.rounds == 1
    assert result.low == 0.0 and result.high == math.inf


def test_level_radius_of_one_configuration():
    assert level_radius([[100.0, 100.0]] * 3) == 0.0
    assert level_radius([[100.0]]) == math.inf
    noisy = rounds(100.0, between=0.05, within=0.01, n=6, reps=3, seed=13)
    assert level_radius(noisy) > PRACTICAL_THRESHOLD
