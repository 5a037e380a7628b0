"""llama.cpp's Apple Silicon scoreboard (discussion #4167: Llama 2 7B F16/Q8_0/Q4_0 tg128 per M-series chip and GPU-core
count) as an evaluation set for the unified band: nothing is fitted on it (tests/advise/data/scoreboard_apple_tg.csv,
round6_collection.md; H20 and its amendment in round3_hypotheses.md, written before any figure was read)."""

from __future__ import annotations

import math
import statistics
from collections import Counter

from tests.conftest import DATA
from tunehost.advise.calibration import (LLAMA2_7B_BYTES_GB, SCOREBOARD_MODEL, csv_rows, judge, load_apple_scoreboard,
                                         scoreboard_of, summary, width_floor)

APPLE = DATA.parent / "advise" / "data" / "scoreboard_apple_tg.csv"


def test_every_row_has_a_copy_and_the_amendments_reason_if_left_out():
    rows = csv_rows(APPLE)
    assert len(rows) == 167 and all(r["copy"] and r["source"].endswith("/discussions/4167") for r in rows)
    reasons = Counter(r["excluded"].split(" (")[0] for r in rows if r["excluded"])
    assert reasons == {"willitrun's scrape": 38,
                       "a chip of the table copy, no core count in this copy": 40,
                       "no core count and no bandwidth in this copy": 2,
                       "no core count in this copy, and the chip is counted from a copy that gives one": 2}
    counted = [r for r in rows if not r["excluded"]]
    assert len(counted) == 85 and all(float(r["gbps"]) > 0 and float(r["tps"]) > 0 and r["gpu_cores"] for r in counted)
    # the table copy's rows, then the M5 Pro / M5 Max of the one copy that gives their core counts
    assert Counter(r["copy"].split(":")[0] for r in counted) == {"Himalpok1/local-ai-advisor": 79,
                                                                 "TaewoooPark/mumax3-ultrafast": 6}
    assert Counter(r["quant"] for r in counted) == {"F16": 23, "Q8_0": 31, "Q4_0": 31}


def test_the_rows_are_llama_2_7b_at_the_bytes_llama_bench_gives_each_quant():
    """12.55, 6.67 and 3.56 GiB (llama-bench's size of Llama 2 7B at F16, Q8_0, Q4_0) less token_embd, a 32000 x 4096
    table at 2, 34/32 and 18/32 bytes a weight: the bytes a token reads."""
    embd = 32000 * 4096
    for quant, gib, per_weight in (("F16", 12.55, 2), ("Q8_0", 6.67, 34 / 32), ("Q4_0", 3.56, 18 / 32)):
        assert round((gib * 2**30 - embd * per_weight) / 1e9, 2) == LLAMA2_7B_BYTES_GB[quant]
    assert LLAMA2_7B_BYTES_GB["Q4_0"] == SCOREBOARD_MODEL["bytes_gb"]
    measurements = load_apple_scoreboard(APPLE)
    assert len(measurements) == 85 and {m.kind for m in measurements} == {"apple"}
    assert {m.band_class() for m in measurements} == {"unified"}
    assert {scoreboard_of(m) for m in measurements} == {"apple"}
    assert all(m.bytes_gb == LLAMA2_7B_BYTES_GB[m.quant] and m.layers == 32 and not m.moe for m in measurements)


def test_h20_held_every_apple_row_inside_the_unified_band():
    """H20a (>= 85 % inside) and H20b (no row below 0.8 of its low edge) held: 85 of 85, F16 23/23, Q8_0 31/31, Q4_0
    31/31, median width 2.15x; at the constants since round 8 (the unified row's per-layer costs 60-400 us, for the M1
    Max's K-quant runs) still 85 of 85, 2.39x."""
    verdicts = judge(load_apple_scoreboard(APPLE))
    s = summary(verdicts)
    assert (s["inside"], s["n"]) == (85, 85) and s["worst_low"] == 1.0 and 2.35 < s["median_width"] < 2.45
    for quant in ("F16", "Q8_0", "Q4_0"):
        part = [v for v in verdicts if v.m.quant == quant]
        assert all(v.inside for v in part) and len(part) in (23, 31)


def test_the_apple_rows_sit_high_in_the_band_the_ultra_chips_lowest():
    """The band is wider than Apple's own scoreboard needs: a row sits a median 0.82 of the way up (log scale), the
    rows read a median 0.74 of the chip's bandwidth (0.35-0.89), and a band of the model's shape centred with
    hindsight would hold 85 % at 1.36x. The Ultra chips (two dies) sit lowest: a median 0.49 of the way up. Since
    round 8 widened the unified row's slow end the rows sit higher still: 0.88 of the way up, the Ultras 0.67
    (1.28x)."""
    verdicts = judge(load_apple_scoreboard(APPLE))
    position = {v.m.id: math.log(v.m.tps / v.low) / math.log(v.high / v.low) for v in verdicts}
    assert 0.85 < statistics.median(position.values()) < 0.9
    ultra = [position[v.m.id] for v in verdicts if "Ultra" in v.m.hardware]
    assert len(ultra) == 18 and statistics.median(ultra) < 0.7 < statistics.median(position.values())
    share = [v.m.tps * v.m.bytes_gb / v.m.gbps for v in verdicts]
    assert 0.72 < statistics.median(share) < 0.76 and 0.34 < min(share) and max(share) < 0.9
    assert 1.25 < width_floor(verdicts) < 1.4
