"""The TG band against 93 published llama.cpp and Ollama measurements (tests/advise/data/published_tg.csv), each read off a source
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
    s = summary([v for v in judge(load(DATA)) if v.m.counted])
    assert s["inside_share"] >= 0.80
    assert s["median_width"] <= 2.1  # a band that says anything: high / low


def test_rows_their_source_sets_apart_say_why_and_are_left_out_of_fits_and_figures():
    from tunehost.advise.calibration import by_class, fit

    rows = load(DATA)
    apart = {m.id: m for m in rows if m.excluded}
    # c01: the 'CPU only' row of an NPU-backend post prompt-processes at 4.6 t/s (no CPU backend does);
    # u03: the 780M laptop of u02 with its UMA carve-out changed (pp512 53 vs 253 in the same JSON)
    assert set(apart) == {"c01", "u03"} and all("pp512" in m.excluded for m in apart.values())
    assert not any(m.counted for m in apart.values()) and all(m.counted for m in rows if m.fits and not m.excluded)
    n = sum(s["n"] for s in by_class(judge(rows)).values())
    assert n == sum(m.counted for m in rows) == len(rows) - 3  # and s02, whose model did not fit its RAM
    rdna = [m for m in rows if m.band_class() == "unified-rdna"]
    assert fit(rdna, "unified-rdna") == fit([m for m in rdna if m.id != "u03"], "unified-rdna")


def test_a_row_measured_deep_in_a_context_is_judged_with_the_kv_cache_it_reads():
    rows = {m.id: m for m in load(DATA)}
    deep = rows["u05"]  # Qwen3-Coder-30B-A3B after a 7,624-token prompt: 98,304 B of f16 K/V per context token
    assert abs(deep.kv_gb - 98304 * 7624 / 1e9) < 0.01 and rows["x01"].kv_gb == 0
    from dataclasses import replace

    shallow = judge([replace(deep, kv_gb=0.0)])[0]
    at_depth = judge([deep])[0]
    assert at_depth.high < shallow.high and at_depth.low < shallow.low


def test_small_active_moe_on_a_fast_gpu_is_bound_by_per_token_overheads_not_bandwidth():
    # Qwen3.5-35B-A3B on an RTX 5090: 207 t/s under a 694 t/s bandwidth ceiling, a figure quoted in issue 21 without
    # a public source (so it is in unverified_tg.csv, not in the calibration data): an example of the shape, not data
    band = tg_band([(int(2.58e9), 1792.0)], 40, "gpu-moe")
    assert band is not None and band.low <= 207 <= band.high < 694
    assert "overheads" in band.bound


def test_a_power_capped_gpu_lowers_the_band_and_names_the_cap_and_the_speed_at_the_default_limit():
    from tunehost.facts.power_cap import tg_share_at_cap

    free = tg_band([(int(4.62e9), 936.0)], 32, "gpu")
    capped = tg_band([(int(4.62e9), 936.0)], 32, "gpu", power_ratio=200 / 350)
    assert free is not None and capped is not None
    share = tg_share_at_cap(200 / 350)
    assert abs(capped.low - free.low * share.low) < 1e-6 and abs(capped.high - free.high * share.high) < 1e-6
    assert "power limit (57% of its default)" in capped.notes[0] and "power cap" in capped.bound
    assert f"at the default limit expect {free.low:.0f}-{free.high:.0f} t/s" in capped.notes[0]
    near = tg_band([(int(4.62e9), 936.0)], 32, "gpu", power_ratio=0.95)
    assert near is not None and (near.low, near.high) == (free.low, free.high) and not near.notes


def test_the_dimm_efficiency_is_the_median_of_the_published_cpu_runs():
    import statistics

    cpu = [m for m in load(DATA) if m.kind == "cpu" and m.counted]
    effs = [m.tps * m.bytes_gb / m.gbps for m in cpu]
    assert abs(statistics.median(effs) - CPU_DIMM_EFFICIENCY) <= 0.01


def test_out_of_sample_the_band_still_holds_85_percent_of_the_measurements():
    from tunehost.advise.calibration import leave_one_source_out

    # each row judged by a band fitted without its own source; rows their source sets apart (and s02) left out
    cv = summary([v for v in leave_one_source_out(load(DATA)) if v.m.counted])
    # 2026-11-26 (i33-models2): 78 of 90 (86.7 %), median width 1.76x (i33-models: 65 of 86, 1.77x)
    assert cv["inside_share"] >= 0.86 and cv["median_width"] <= 1.77


def test_out_of_sample_per_class_as_measured_2026_11_26():
    from tunehost.advise.calibration import by_class, leave_one_source_out

    cv = by_class(leave_one_source_out(load(DATA)))
    inside = {k: (s["inside"], s["n"]) for k, s in cv.items()}
    # issue 33's targets (>= 85 % per class, median width <= 1.7x, no miss below 0.8) are not all met: docs/advise.md
    # 2026-11-26 (i33-models2): cpu 7/10, gpu 29/33, ollama 8/10, power-capped 6/6, split 9/10, unified 19/21
    assert inside == {"cpu": (7, 10), "gpu": (29, 33), "ollama": (8, 10), "power-capped": (6, 6), "split": (9, 10),
                      "unified": (19, 21)}
    assert cv["cpu"]["median_width"] <= 1.45 and cv["unified"]["median_width"] <= 1.5
    assert cv["gpu"]["median_width"] <= 1.77 and cv["split"]["median_width"] <= 1.95
    assert cv["power-capped"]["median_width"] <= 2.0  # below 0.7 of the default the cap share is wide
    assert cv["ollama"]["median_width"] <= 3.75
    # unified: an M1 Max on a 70B model at 0.76; ollama: a CMP 30HX mining card at 0.72
    assert min(s["worst_low"] for k, s in cv.items() if k not in ("unified", "ollama")) >= 0.8


def test_band_models_are_the_fit_of_each_class_with_rows():
    from tunehost.advise.calibration import fit, fit_ollama_share
    from tunehost.advise.ceiling import BAND_MODELS, OLLAMA_SHARE, BandModel

    rows = load(DATA)
    for key in BAND_MODELS:
        mine = [m for m in rows if m.band_class() == key]
        # unified-vega's rows all ran under Ollama (they calibrate its share): set from issue 33's ~0.45 of peak
        if any(m.runtime != "ollama" for m in mine):
            assert BAND_MODELS[key] == fit(mine, key), key
        else:
            assert BAND_MODELS[key] == fit(mine, key) == BandModel(0.38, 0.55, 30.0, 250.0), key
    assert fit_ollama_share(rows) == OLLAMA_SHARE


def test_cpu_moe_reads_ram_at_the_dense_cpu_shares_and_fits_only_its_per_layer_costs():
    from tunehost.advise.calibration import fit_class
    from tunehost.advise.ceiling import BAND_MODELS

    cpu, moe = BAND_MODELS["cpu"], BAND_MODELS["cpu-moe"]
    assert (moe.eff_low, moe.eff_high) == (cpu.eff_low, cpu.eff_high)
    assert moe.layer_us_high >= cpu.layer_us_high  # routing, gathers, many small matrices per layer
    fitted = fit_class(load(DATA), "cpu-moe")
    assert set(fitted) == {"cpu", "cpu-moe"} and fitted["cpu"] == cpu and fitted["cpu-moe"] == moe


def test_the_vram_part_of_a_split_is_read_at_the_gpu_shares_the_ram_part_at_the_split_ones():
    from tunehost.advise.ceiling import BAND_MODELS, BandModel

    parts = [(int(6e9), 448.0), (int(1.5e9), 102.0)]
    band = tg_band(parts, 48, "split")
    gpu, split = BAND_MODELS["gpu"], BAND_MODELS["split"]
    slow = 6e9 / (448e9 * gpu.eff_low) + 1.5e9 / (102e9 * split.eff_low) + 48 * split.layer_us_high * 1e-6
    fast = 6e9 / (448e9 * gpu.eff_high) + 1.5e9 / (102e9 * split.eff_high) + 48 * split.layer_us_low * 1e-6
    assert band is not None and abs(band.low - 1 / slow) < 1e-9 and abs(band.high - 1 / fast) < 1e-9
    # a table given for experiments replaces the gpu row too
    other = tg_band(parts, 48, "split", table={"split": split, "gpu": BandModel(0.5, 0.7, 10.0, 60.0)})
    assert other is not None and other.low < band.low
