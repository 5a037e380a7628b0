"""A sixth lease of an H200 (driver 580.159.04, 16 vCPUs of a Xeon with AMX, a Firecracker VM; a fifth board: its
own GPU PDI), lent on 2026-11-27 (session 7):

- ``sixth/``: scripts/gpu_proof at commit 2af8307, the first call, every step ok in 363 s (CUDA build 273 s). Its
  snapshot is the first a lent machine wrote with the identifier scrubbing (tunehost/host/identifiers.py).
- ``tg7/``: the same call and one more (tg7/README.md): gpu_proof's CUDA build on real-shape GGUFs, the Llama 3.1 8B
  Q4_K shape split by ``-ngl`` (dense layers in RAM) and the gpt-oss-20b shape by ``--n-cpu-moe`` (Q8_0 experts in
  RAM), then tunehost's memory probe. They are rows dk09-dk16 of tests/advise/data/published_tg.csv, judged against
  hypothesis H19, written before the call (round3_hypotheses.md); ``tg7/repeat/`` ran the splits again a minute later.

The expectations below were written from the raw files (nvidia-smi dumps, samples, llama-bench JSON).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.gpu.proof import (assert_places_what_fit_fits, assert_replays_with_probes, by_check, idle_bench_energy,
                             line, reader, smi_field, snapshot_without_board_ids)

ROOT = DATA / "gpu-proof" / "h200-580.159.04"
CSV = Path(__file__).resolve().parents[1] / "advise" / "data" / "published_tg.csv"
RAM_AFTER = 102.26  # tg7/measure.json: the probe right after the runs

load = reader(ROOT)


def rows() -> dict:
    from tunehost.advise.calibration import load as load_rows

    return {r.id: r for r in load_rows(CSV) if r.id in {f"dk{i:02d}" for i in range(9, 17)}}


def test_every_step_of_the_sixth_proof_ran_on_another_board() -> None:
    steps = {s["step"]: s for s in load("sixth/steps.json")}
    assert len(steps) == 15 and all(s["status"] == "ok" for s in steps.values())
    assert steps["build"]["rc"] == 0 and 250 < steps["build"]["seconds"] < 300  # 273 s (283 and 285 before)
    built = load("sixth/built.json")
    assert built["backend"] == "cuda" and built["backend_detail"] == "CUDA architectures 90 (from nvidia-smi)"
    # the CPU part of every split below ran AVX-512 kernels: the portable build turns AMX off (the band's figures for
    # amx and avx512 cores are the same)
    assert "-DGGML_AMX_INT8=OFF" in built["cmake"] and "-DGGML_AVX512=ON" in built["cmake"]
    pdis = {d: smi_field((ROOT / d / "nvidia-smi-q.txt").read_text(), "GPU PDI")[0]
            for d in ("first", "busy", "third", "fifth", "sixth")}
    assert len(set(pdis.values())) == 5


def test_the_sixth_snapshot_replays_to_what_doctor_judged(cli) -> None:
    recorded = assert_replays_with_probes(cli, ROOT / "sixth", 86.79, "90.7")
    [memory] = by_check(recorded, "gpu-memory")
    assert memory["severity"] == "ok" and "nothing else holds VRAM" in memory["summary"]


def test_the_snapshot_of_a_real_card_carries_none_of_its_identifiers() -> None:
    """gpu_proof's own dumps (taken beside the snapshot, kept raw as corpus material) hold the board's serial, PDI and
    UUID; the snapshot's copies of the same commands and its NVML sample hold none of them: the serial and PDI
    redacted, the UUID one pseudonym wherever it appears, so the GPU is still one GPU across the files."""
    texts, (serial, pdi, uuid) = snapshot_without_board_ids(ROOT / "sixth")
    assert re.fullmatch(r"\d{13}", serial) and re.fullmatch(r"0x[0-9a-f]{16}", pdi) and uuid.startswith("GPU-")
    dump = texts["cmd/nvidia-smi_-q"]
    assert smi_field(dump, "Serial Number") == ["<redacted>"] and smi_field(dump, "GPU PDI") == ["<redacted>"]
    [pseudonym] = smi_field(dump, "GPU UUID")
    assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", pseudonym) and pseudonym != uuid
    assert f"<uuid>{pseudonym}</uuid>" in texts["cmd/nvidia-smi_-q_-x"]
    [nvml] = load("sixth/snapshot/samples/nvml.json")["gpus"]
    assert nvml["uuid"] == pseudonym


def test_advise_on_the_sixth_card_places_what_llama_fit_params_fits() -> None:
    ceiling = assert_places_what_fit_fits(ROOT / "sixth")["ceiling"]
    # the band dk09 was judged in: the same file, the same card
    assert (round(ceiling["band"]["low_tokens_per_s"], 1), round(ceiling["band"]["high_tokens_per_s"], 1)) == \
        (145.5, 331.5)


def test_the_sixth_bench_measured_the_gpu_alone_at_idle_power() -> None:
    energy = idle_bench_energy(ROOT / "sixth")
    assert energy["gpu_j"] == pytest.approx(5618.709)
    assert 120 < energy["gpu_j"] / energy["wall_s"] < 135  # 127 W in P0 over the 44 s (fifth: 124)


def bench(name: str) -> list[dict]:
    return load(f"tg7/{name}.json")


def test_the_rows_are_the_benches_as_measured() -> None:
    got = rows()
    dense = {r["n_gpu_layers"]: r for r in bench("d8")}
    experts = {r["n_cpu_moe"]: r for r in bench("moss")}
    assert sorted(dense) == [8, 16, 24, 99] and sorted(experts) == [0, 8, 16, 24]
    pairs = [("dk09", dense[99]), ("dk10", dense[24]), ("dk11", dense[16]), ("dk12", dense[8]),
             ("dk13", experts[0]), ("dk14", experts[8]), ("dk15", experts[16]), ("dk16", experts[24])]
    for row_id, run in pairs:
        assert got[row_id].tps == round(run["avg_ts"], 2), row_id
        assert run["build_commit"] == "0c1e570" and run["n_prompt"] == 0 and run["n_gen"] == 64, row_id
        assert run["gpu_info"] == "NVIDIA H200" and run["n_threads"] == 16, row_id
    assert all(r["n_gpu_layers"] == 99 for r in experts.values())
    measured = load("tg7/measure.json")
    assert measured["memory_read_gbps"] == RAM_AFTER and measured["memory_read_threads"] == 16
    splits = [f"dk{i}" for i in (10, 11, 12, 14, 15, 16)]
    assert all(got[i].kind == "split" and got[i].cpu_gbps == 102.3 and got[i].ram_measured for i in splits)
    # each sweep reads one file: its rows' bytes add up to the file's bytes a token
    assert all(abs(got[i].bytes_gb + got[i].cpu_bytes_gb - 4.222) < 0.0015 for i in ("dk09", "dk10", "dk11", "dk12"))
    assert all(abs(got[i].bytes_gb + got[i].cpu_bytes_gb - 3.695) < 0.0015 for i in ("dk13", "dk14", "dk15", "dk16"))
    # the cpu_layers column (H12's; the loader does not read it): what each row's own flags leave to the CPU
    with CSV.open(newline="") as f:
        layers = {r["id"]: r["cpu_layers"] for r in csv.DictReader(text for text in f if not text.startswith("#"))}
    assert [layers[i] for i in splits] == ["9", "17", "25", "8", "16", "24"]


def test_the_split_rows_ram_bytes_grow_by_whole_layers() -> None:
    """The cpu_bytes of each split are tunehost's ceiling for that placement on the shape (the bench's path): the 8B's
    32 blocks read the same bytes each, so 9, 17 and 25 blocks in RAM are 9, 17 and 25 times one; gpt-oss's 24 expert
    layers the same for 8, 16 and 24 of them."""
    got = rows()
    per_layer = got["dk10"].cpu_bytes_gb / 9
    assert 0.12 < per_layer < 0.125  # 4.222 GB less the output matrix, over 32 blocks
    assert got["dk11"].cpu_bytes_gb == pytest.approx(17 * per_layer, abs=0.002)
    assert got["dk12"].cpu_bytes_gb == pytest.approx(25 * per_layer, abs=0.002)
    per_moe = got["dk14"].cpu_bytes_gb / 8
    assert got["dk15"].cpu_bytes_gb == pytest.approx(16 * per_moe, abs=0.002)
    assert got["dk16"].cpu_bytes_gb == pytest.approx(24 * per_moe, abs=0.002)


def test_h19_as_judged_every_split_inside_in_its_lower_third() -> None:
    """H19a-c held: the three dense splits, the three expert splits and both GPU-only runs inside the bands of 2af8307
    (the constants now: the rows calibrate nothing they are judged by, being measured-path splits, and the two GPU
    runs moved no fit). Every split sits at 1.04-1.13 of its low edge."""
    from tunehost.advise.calibration import judge

    verdicts = {v.m.id: v for v in judge(list(rows().values()))}
    assert all(v.inside for v in verdicts.values())
    expected = {"dk09": (145.5, 331.5), "dk10": (44.2, 80.6), "dk11": (26.9, 47.8), "dk12": (19.4, 34.0),
                "dk13": (254.1, 573.6), "dk14": (57.4, 104.3), "dk15": (33.4, 59.1), "dk16": (23.6, 41.2)}
    assert {i: (round(v.low, 1), round(v.high, 1)) for i, v in verdicts.items()} == expected
    assert {i: v.m.band_class() for i, v in verdicts.items()} == {
        "dk09": "gpu-hbm", "dk13": "gpu-moe", **{f"dk{i}": "split" for i in (10, 11, 12, 14, 15, 16)}}
    for i in ("dk10", "dk11", "dk12", "dk14", "dk15", "dk16"):
        assert 1.0 < verdicts[i].m.tps / verdicts[i].low < 1.15, i


def test_h19d_a_dense_layer_in_ram_costs_its_bytes_as_an_expert_does() -> None:
    """ms a token is a line in the GB read from RAM for both sweeps (R^2 >= 0.98) and the slopes, in GB/s, are within
    25 % of each other: 71.8 (dense 8B) and 74.5 (gpt-oss's Q8_0 experts), 0.70-0.73 of the probe's 102.26 (the
    fifth lease's Qwen3 sweep read 0.53 of its 66.53: tests/gpu/test_gpu_proof_h200_fifth.py)."""
    got = rows()
    dense = line([(got[i].cpu_bytes_gb, 1000 / got[i].tps) for i in ("dk09", "dk10", "dk11", "dk12")])
    moe = line([(got[i].cpu_bytes_gb, 1000 / got[i].tps) for i in ("dk13", "dk14", "dk15", "dk16")])
    assert dense[2] > 0.998 and moe[2] > 0.994
    dense_gbps, moe_gbps = 1000 / dense[1], 1000 / moe[1]
    assert 71 < dense_gbps < 73 and 74 < moe_gbps < 75.5 and abs(dense_gbps / moe_gbps - 1) < 0.25
    assert 0.69 < dense_gbps / RAM_AFTER < 0.74 and 0.69 < moe_gbps / RAM_AFTER < 0.74
    assert 3.5 < dense[0] < 4.5 and 3.8 < moe[0] < 4.6  # ~4 ms of GPU work and hand-over with nothing in RAM


def test_a_minute_later_the_same_splits_ran_faster_and_still_inside() -> None:
    """tg7/repeat/: the same splits seconds after the call, between two probes (103.13 and 99.81 GB/s): 1.04-1.25x
    the first figures. A shared VM's RAM moves that much from one minute to the next, which is why a row's RAM figure
    is the probe right after its runs and why the split band is wide; every repeat is inside its band at either
    probe."""
    from dataclasses import replace

    from tunehost.advise.calibration import judge

    got = rows()
    first = {"d8b": {24: "dk10", 16: "dk11", 8: "dk12"}, "mossb": {8: "dk14", 16: "dk15", 24: "dk16"}}
    probes = [load(f"tg7/repeat/measure{k}.json")["memory_read_gbps"] for k in "AB"]
    assert probes == [103.13, 99.81]
    ratios = []
    for name, ids in first.items():
        for run in bench(f"repeat/{name}"):
            row = got[ids[run["n_cpu_moe"] or run["n_gpu_layers"]]]
            ratios.append(run["avg_ts"] / row.tps)
            for gbps in probes:
                [verdict] = judge([replace(row, tps=round(run["avg_ts"], 2), cpu_gbps=gbps)])
                assert verdict.inside, (row.id, gbps)
    assert len(ratios) == 6 and 1.03 < min(ratios) and max(ratios) < 1.26


def test_h22_a_token_32768_deep_is_judged_with_the_kv_cache_it_reads() -> None:
    """depth/ (a second lease of session 7, llama-bench without flash-attention kernels, -fa 0): the Llama 3.1 8B
    shape at d0 252.03 t/s and d32768 134.49. At 32768 deep a token reads 4 GiB of f16 KV (32 layers x 32768 cells x
    4096 bytes) beside its 4.22 GB of weights: inside the band with that KV (115.5-242.0), below the d0 band the bench
    judged every depth by before (145.5-331.5). The KV was read at 0.26 of the card's bandwidth without flash
    attention: 3.47 ms more a token for 4.29 GB."""
    from tunehost.advise.calibration import Measurement, judge

    runs = {r["n_depth"]: r for r in load("depth/call3/depth.json")}
    assert sorted(runs) == [0, 32768] and {r["flash_attn"] for r in runs.values()} == {0}
    assert {r["type_k"] for r in runs.values()} == {"f16"} and {r["model_size"] for r in runs.values()} == {4222435328}
    kv = 32 * 32768 * 4096
    assert kv == 4 << 30
    shallow, deep = (Measurement(f"d{d}", "NVIDIA H200", "gpu", 4814.3, "Llama 3.1 8B (real-shape GGUF)", "Q4_K",
                                 False, 32, 4.222, 0.0, 0.0, round(runs[d]["avg_ts"], 2), "depth/",
                                 kv_gb=kv / 1e9 if d else 0.0) for d in (0, 32768))
    v0, v32 = judge([shallow, deep])
    # the bands H22 named, from the file's exact bytes (4.2224 GB; 4.222 here)
    assert v0.inside and v32.inside
    assert v32.low == pytest.approx(115.5, abs=0.2) and v32.high == pytest.approx(242.0, abs=0.2)
    assert deep.tps < v0.low  # judged without its KV, the deep run would have been "below the band"
    added_ms = 1000 / deep.tps - 1000 / shallow.tps
    assert 3.4 < added_ms < 3.55 and 0.25 < kv / (added_ms / 1000) / 4814.3e9 < 0.27
    assert deep.tps / shallow.tps < 0.85  # H22c: at least 15 % below
