"""LocalScore (llamafile submissions of Llama 3.2 1B, Llama 3.1 8B and Qwen2.5 14B at Q4_K - Medium) as an evaluation
set for the GPU band: nothing is fitted on it (tests/advise/data/localscore_tg.csv, round7_collection.md; H21 and its
amendment in round3_hypotheses.md, written before any figure was read). H21 failed: LocalScore's figure, a mean over
nine tests at deep contexts without flash attention, is not the one the band predicts."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

from tests.conftest import DATA
from tunehost.advise.calibration import LOCALSCORE_MODELS, csv_rows, judge, load_localscore, summary

LOCALSCORE = DATA.parent / "advise" / "data" / "localscore_tg.csv"
PUBLISHED = DATA.parent / "advise" / "data" / "published_tg.csv"


def test_every_row_has_a_copy_and_the_amendments_reason_if_left_out():
    rows = csv_rows(LOCALSCORE)
    assert len(rows) == 1569 and all(r["copy"] for r in rows)
    reasons = Counter(r["excluded"].split(" (")[0] for r in rows if r["excluded"])
    assert reasons == {"cpu": 478, "willitrun's best run per card": 328, "integrated": 211,
                       "another model or quant than LocalScore's three at Q4_K - Medium": 105,
                       "not a LocalScore submission": 23, "no spec bandwidth for the card": 15}
    counted = [r for r in rows if not r["excluded"]]
    assert len(counted) == 409 and {r["kind"] for r in counted} == {"discrete"}
    assert {r["aggregation"] for r in counted} == {"single run"} and {r["quant"] for r in counted} == {"Q4_K - Medium"}
    assert Counter(r["gbps_basis"].split(" (")[0] for r in counted) == {"tunehost spec table": 358, "TechPowerUp": 51}


def test_the_models_bytes_are_those_of_the_same_files_in_the_calibration_set():
    """LocalScore's three files at Q4_K - Medium read what the set's rows of the same files read: Llama 3.2 1B 0.80 GB
    (tied embeddings, 16 layers), Llama 3.1 8B 4.62 (32), Qwen2.5 14B 8.55 (48)."""
    published = {(r["model"], r["quant"]): (int(r["layers"]), float(r["bytes_gb"])) for r in csv_rows(PUBLISHED)}
    assert published[("Llama-3.2-1B", "Q4_K_M")] == LOCALSCORE_MODELS["Llama 3.2 1B"]
    assert published[("Llama 3.1 8B", "Q4_K_M")] == LOCALSCORE_MODELS["Llama 3.1 8B"]
    assert (48, 8.55) == LOCALSCORE_MODELS["Qwen2.5 14B"] and published[("Qwen2.5-14B", "Q4_K_M")][0] == 48
    measurements = load_localscore(LOCALSCORE)
    assert len(measurements) == 409 and len({m.hardware for m in measurements}) == 88
    assert Counter(m.model for m in measurements) == {"Llama 3.2 1B": 183, "Qwen2.5 14B": 122, "Llama 3.1 8B": 104}
    assert {m.runtime for m in measurements} == {"llamafile"} and {m.kind for m in measurements} == {"gpu"}


def test_h21_as_judged_a_third_inside_every_other_row_below():
    """H21a (>= 80 % inside) failed: 153 of 409; H21b (more below than above) held: 256 below, none above; H21c (the
    1B inside as often as the 8B) failed: 19 % against 51 %."""
    verdicts = judge(load_localscore(LOCALSCORE, as_judged=True))
    s = summary(verdicts)
    assert (s["inside"], s["n"]) == (153, 409) and 1.75 < s["median_width"] < 1.85
    assert sum(v.m.tps < v.low for v in verdicts) == 256 and not any(v.m.tps > v.high for v in verdicts)
    assert s["worst_low"] < 0.05
    inside = {m: (sum(v.inside for v in verdicts if v.m.model == m), sum(v.m.model == m for v in verdicts))
              for m in LOCALSCORE_MODELS}
    assert inside == {"Llama 3.2 1B": (35, 183), "Llama 3.1 8B": (53, 104), "Qwen2.5 14B": (65, 122)}
    per_card: dict[tuple[str, str], list] = defaultdict(list)
    for v in verdicts:
        per_card[(v.m.hardware, v.m.model)].append(v)
    medians = [(statistics.median(v.m.tps for v in vs), vs[0]) for vs in per_card.values()]
    assert len(medians) == 198 and sum(v.low <= tps <= v.high for tps, v in medians) == 67


def test_the_8b_and_14b_submissions_sit_at_the_low_edge_the_1b_below_it():
    """LocalScore's figure is a mean over nine tests at contexts of 16 to 4,352 tokens without flash attention: the 8B
    and 14B submissions sit a median 1.01 and 1.03 of the band's low edge; the 1B's 0.64, its fast cards stopping at
    300-400 t/s (an RTX 3090's nineteen runs: 105-368 against a band from 354.5), a per-token cost of llamafile's loop
    that the band's per-layer cost does not reach."""
    verdicts = judge(load_localscore(LOCALSCORE))
    ratio = {m: statistics.median(v.m.tps / v.low for v in verdicts if v.m.model == m) for m in LOCALSCORE_MODELS}
    assert 0.98 < ratio["Llama 3.1 8B"] < 1.04 and 1.0 < ratio["Qwen2.5 14B"] < 1.06
    assert 0.6 < ratio["Llama 3.2 1B"] < 0.7
    rtx3090 = [v for v in verdicts if v.m.hardware == "NVIDIA GeForce RTX 3090" and v.m.model == "Llama 3.2 1B"]
    assert len(rtx3090) == 19 and max(v.m.tps for v in rtx3090) < 370 < 1.05 * rtx3090[0].low
    # one card's submissions spread as no single llama.cpp run would: an RTX 4090's six 1B runs span 18x
    rtx4090 = [v.m.tps for v in verdicts if v.m.hardware == "NVIDIA GeForce RTX 4090" and v.m.model == "Llama 3.2 1B"]
    assert len(rtx4090) == 6 and max(rtx4090) / min(rtx4090) > 17


def test_the_card_names_showed_laptop_gpus_read_at_their_desktop_cards_bandwidth():
    """Before any figure was read, the spec lookup of the counted cards' names showed tunehost's table giving a laptop
    GPU its desktop card's bandwidth (an RTX 3080 Laptop GPU 760 GB/s: it has 448) and an H100 NVL the PCIe card's; the
    table now names them (TechPowerUp's Mobile entries). At the corrected figures H21's count stands: 153 of 409."""
    judged = {m.id: m for m in load_localscore(LOCALSCORE, as_judged=True)}
    now = {m.id: m for m in load_localscore(LOCALSCORE, as_judged=False)}
    changed = {(now[i].hardware, judged[i].gbps, now[i].gbps) for i in judged if judged[i].gbps != now[i].gbps}
    assert changed == {("NVIDIA GeForce GTX 1650 Ti", 128.1, 192.0), ("NVIDIA H100 NVL", 2039.0, 3940.0),
                       ("NVIDIA GeForce RTX 3060 Laptop GPU", 360.0, 336.0),
                       ("NVIDIA GeForce RTX 3080 Laptop GPU", 760.0, 448.0),
                       ("NVIDIA RTX A2000 8GB Laptop GPU", 288.0, 224.0), ("NVIDIA RTX A2000 Laptop GPU", 288.0, 192.0),
                       ("NVIDIA RTX A5000 Laptop GPU", 768.0, 448.0)}
    s = summary(judge(list(now.values())))
    assert (s["inside"], s["n"]) == (153, 409)


def test_the_kv_cache_of_the_nine_tests_explains_little_of_the_gap():
    """Not H21's rule (written first: no KV): judged with the KV cache each of LocalScore's nine tests reads at its
    mean depth (prompt + half the generated tokens; f16, 32 KiB, 128 KiB and 192 KiB a token of depth), the band
    edges averaged over the tests as LocalScore averages their rates, 167 of 409 are inside (153 without): the KV
    bytes are not what holds the submissions below the band."""
    from dataclasses import replace

    tests = [(1024, 16), (4096, 256), (2048, 256), (2048, 768), (1024, 1024), (1280, 3072), (384, 1152), (64, 1024),
             (16, 1536)]
    kv = {"Llama 3.2 1B": 16 * 8 * 64 * 4, "Llama 3.1 8B": 32 * 8 * 128 * 4, "Qwen2.5 14B": 48 * 8 * 128 * 4}
    inside = 0
    measurements = load_localscore(LOCALSCORE, as_judged=False)
    for m in measurements:
        verdicts = judge([replace(m, kv_gb=kv[m.model] * (p + g / 2) / 1e9) for p, g in tests])
        low, high = (sum(getattr(v, edge) for v in verdicts) / len(tests) for edge in ("low", "high"))
        inside += low <= m.tps <= high
    assert (inside, len(measurements)) == (167, 409)
