"""The second kind of real NVIDIA machine tunehost ran on: an H100 80GB HBM3 (driver 580.159.04, 16 vCPUs of a Xeon
with AMX, a Firecracker VM), lent on 2026-11-27. Its scripts/gpu_proof output is the fixture
(tests/data/gpu-proof/h100-580.159.04, tests/data/README.md):

- ``first/``: the whole proof at commit e91ae87, every step ok in 377 s (CUDA build 288 s): doctor.json and a
  replayable snapshot, advise vs llama-fit-params on the Llama 3.1 8B Q4_K shape, a CUDA bench with the GPU watch and
  the energy.
- ``tg/``: a second lease of the same kind (``run5.sh``): a CUDA build without flash-attention kernels, then
  llama-bench on two real-shape GGUFs (Llama 3.1 8B and Qwen3-30B-A3B, Q4_K, sparse weights): all on the GPU, the MoE
  with every expert in RAM (``-ncmoe 99``), the 8B on the CPU. They are rows dh01-dh04 of
  tests/advise/data/published_tg.csv, judged before they were added (round3_hypotheses.md, H4).

The expectations below were written from the raw files (nvidia-smi dumps, samples, llama-bench JSON), not from
doctor's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.gpu.proof import assert_replays, by_check, reader

ROOT = DATA / "gpu-proof" / "h100-580.159.04"
CSV = Path(__file__).resolve().parents[1] / "advise" / "data" / "published_tg.csv"


load = reader(ROOT)


def bench_run(name: str) -> dict:
    [run] = load(f"tg/{name}.json")
    return run


def test_every_step_of_the_proof_ran_on_the_h100() -> None:
    steps = {s["step"]: s for s in load("first/steps.json")}
    assert all(s["status"] == "ok" for s in steps.values()) and len(steps) == 15
    assert steps["build"]["rc"] == 0 and 250 < steps["build"]["seconds"] < 300  # 288 s on 16 vCPUs, sm_90
    assert all(s.get("cwd") == "/tmp/gpu-proof-work" for s in steps.values() if "cwd" in s)
    built = load("first/built.json")
    assert built["backend"] == "cuda" and built["backend_detail"] == "CUDA architectures 90 (from nvidia-smi)"
    # the guest's Xeon has AMX (amx_tile in the bench's cpu_flags): the portable build, straight away
    assert built["variant"] == "portable" and "without AMX" in built["variant_why"]
    assert "amx_tile" in load("first/bench.json")["host"]["cpu_flags"]


def test_the_snapshot_replays_to_what_doctor_judged_on_the_machine(cli) -> None:
    # the snapshot's memory probe (72.7 GB/s) and doctor's own a minute later (79.3) are two samples of a shared
    # VM's RAM; every severity agrees, and every judgement that rests on settings agrees word for word
    _, replay = assert_replays(cli, ROOT / "first")
    measured = json.loads((ROOT / "first" / "snapshot" / "samples" / "measure.json").read_text())
    assert measured["memory_read_gbps"] == 72.71 and measured["memory_read_threads"] == 16
    [bandwidth] = by_check(replay, "memory-bandwidth")
    assert bandwidth["severity"] == "info" and "72.7 GB/s" in bandwidth["summary"]


def test_what_a_vm_with_an_h100_can_and_cannot_tell() -> None:
    doc = load("first/doctor.json")
    [pcie] = by_check(doc, "pcie-link")  # nvidia-smi -q: Gen 5 of 5, x16 of x16
    assert pcie["severity"] == "ok" and "Gen5 of Gen5" in pcie["summary"] and "x16 of x16" in pcie["summary"]
    [bar] = by_check(doc, "resizable-bar")  # BAR1 131072 MiB over 81559 MiB of VRAM
    assert bar["severity"] == "ok" and "128 GiB BAR maps all 81559 MiB" in bar["summary"]
    [cap] = by_check(doc, "gpu-power-cap")  # Current Power Limit 700.00 W, Default 700.00 W
    assert cap["severity"] == "ok" and "700 W" in cap["summary"]
    for check in ("ram-speed", "cpu-governor", "cpu-epp", "cpu-frequency", "cpu-clocks"):
        [found] = by_check(doc, check)
        assert found["severity"] == "skip" and ("virtual machine" in found["summary"] or "VM" in found["summary"])
    [memory] = by_check(doc, "gpu-memory")  # NVML v2: used 0, reserved 480 MiB
    assert memory["severity"] == "ok" and "nothing else holds VRAM" in memory["summary"]
    [nvml] = json.loads((ROOT / "first" / "snapshot" / "samples" / "nvml.json").read_text())["gpus"]
    assert (nvml["memory_used_mib"], nvml["memory_reserved_mib"], nvml["memory_free_mib"]) == (0, 480, 81079)
    assert (nvml["memory_bus_width_bits"], nvml["memory_clock_max_mhz"]) == (5120, 2619)


def test_advise_places_what_llama_fit_params_fits_on_the_h100() -> None:
    both = load("first/advise-vs-fit.json")
    assert both["advise"]["-c"] == both["llama_fit_params"]["-c"] == "32768"
    assert both["advise"]["-ngl"] == "99" and both["llama_fit_params"]["-ngl"] == "-1"  # -1: every layer
    assert (ROOT / "first" / "llama-fit-params.txt").read_text().split() == ["-c", "32768", "-ngl", "-1"]
    advise = load("first/advise.json")
    assert advise["fits"] is True and advise["path"] == "gpu" and advise["placement_source"] == "probe"
    assert advise["budget"]["gpu_free_bytes"] == 81079 * 2**20  # NVML's free MiB, the reservation left out
    assert advise["cpu_affinity"] == "0-14"
    # 5120 bits x 2619 MHz x 2 (HBM3: double data rate) = 3352.3 GB/s; the card is HBM: its own band class
    ceiling = advise["ceiling"]
    assert ceiling["gpu_gbps"] == 3352.3 and ceiling["gpu_hbm"] == "nvidia" and ceiling["band"]["model"] == "gpu-hbm"


def test_the_cuda_bench_result_loads_with_its_gpu_watch_and_energy() -> None:
    from tunehost.bench.results import load as load_result

    saved = load_result(ROOT / "first" / "bench.json")
    [config] = saved.configs
    assert config.params["n_gpu_layers"] == -1 and config.params["backend"] == "CUDA"
    tests = {t.test: t for t in config.tests}
    assert set(tests) == {"pp64", "tg32"} and all(len(t.samples_ts) == 231 for t in tests.values())  # 77 rounds
    watch = load("first/bench.json")["watch"]
    assert watch["disturbed"] is False and watch["other_cpu_cores"] < 0.05
    card = watch["gpu"]["summary"]["NVIDIA GPU 0"]
    assert card["pstate_in_use"] == ["P0", "P0"] and card["power_limit_w"] == 700.0
    assert card["pcie_gen"] == [5, 5] and card["pcie_width"] == [16, 16]
    assert card["busy_samples"] == 0 and watch["gpu"]["findings"] == []  # a tiny model never keeps it busy
    assert any("never busy during the run" in u for u in watch["unknown"])
    energy = watch["energy"]
    assert energy["measured"] == "GPU only" and energy["gpu_j"] == pytest.approx(5552.914)
    assert any("no RAPL zone" in m for m in energy["missing"])
    assert 110 < energy["gpu_j"] / energy["wall_s"] < 140  # the H100 idles at 73-124 W in P0 (nvidia-smi -q, smi.csv)


def test_the_corpus_copies_are_the_captures_unchanged_and_text_and_xml_agree() -> None:
    from tunehost.parsers.nvidia_smi import parse_nvidia_smi_text, parse_nvidia_smi_xml

    corpus = DATA / "corpus" / "nvidia-smi"
    text = (corpus / "h100-x16-gen5-idle-p0-q.txt").read_bytes()
    xml = (corpus / "h100-x16-gen5-idle-p0-q-x.txt").read_bytes()
    assert text == (ROOT / "first" / "nvidia-smi-q.txt").read_bytes()
    assert xml == (ROOT / "first" / "nvidia-smi-q-x.xml").read_bytes()
    [from_xml] = parse_nvidia_smi_xml(xml.decode()).gpus
    [from_text] = parse_nvidia_smi_text(text.decode()).gpus
    for field in ("name", "pci_bus_id", "memory_total_mib", "pstate", "power_limit_w"):
        assert getattr(from_xml, field) == getattr(from_text, field), field
    assert from_xml.name == "NVIDIA H100 80GB HBM3" and from_xml.memory_total_mib == 81559
    assert from_xml.power_limit_w == 700.0 and (from_xml.pcie.gen_max, from_xml.pcie.width_current) == (5, 16)
    assert list(from_text.processes or ()) == []


def test_the_four_real_shape_runs_fall_inside_advises_bands() -> None:
    """H4 (round3_hypotheses.md, written before the split and CPU bands were computed): the constants of e91ae87
    place all four inside. The two GPU runs' bands are the ones advise printed on the machine."""
    gpu8, gpuq = bench_run("b8-gpu"), bench_run("bq-gpu")
    for run, name, key in ((gpu8, "llama-3.1-8b", "gpu-hbm"), (gpuq, "qwen3-30b-a3b", "gpu-moe")):
        assert run["gpu_info"] == "NVIDIA H100 80GB HBM3" and run["n_gpu_layers"] == 99 and run["n_gen"] == 128
        band = load(f"tg/advise-{name}.json")["ceiling"]["band"]
        assert band["model"] == key and band["low_tokens_per_s"] <= run["avg_ts"] <= band["high_tokens_per_s"]
    split, cpu = bench_run("bq-split"), bench_run("b8-cpu")
    assert (split["n_cpu_moe"], split["n_threads"], cpu["n_gpu_layers"], cpu["n_threads"]) == (99, 16, 0, 16)
    from tunehost.advise.calibration import judge, load as load_rows

    rows = {r.id: r for r in load_rows(CSV) if r.id.startswith("dh")}
    for row_id, run in (("dh01", gpu8), ("dh02", gpuq), ("dh03", split), ("dh04", cpu)):
        assert rows[row_id].tps == round(run["avg_ts"], 2)
    measured = load("tg/measure.json")["memory_read_gbps"]
    assert measured == 93.19 and rows["dh03"].cpu_gbps == rows["dh04"].gbps == round(measured, 1)
    verdicts = {v.m.id: v for v in judge(list(rows.values()))}
    assert all(v.inside for v in verdicts.values())
    assert {i: v.m.band_class() for i, v in verdicts.items()} == {"dh01": "gpu-hbm", "dh02": "gpu-moe",
                                                                  "dh03": "split", "dh04": "cpu"}


def test_an_8b_decodes_as_fast_on_an_h100_as_on_an_h200() -> None:
    """3352 against 4814 GB/s (1.44x), and the same 8B shape decodes at 240.6 and 244.9 t/s (1.02x): batch-1 decode
    of an 8B on HBM is bound by per-layer work, which is why gpu-hbm's band is set by its per-layer costs."""
    h100 = bench_run("b8-gpu")
    [h200] = json.loads((DATA / "gpu-proof" / "h200-580.159.04" / "tg-8b" / "llama-bench-8b.json").read_text())
    assert h100["model_size"] == h200["model_size"] == 4222435328
    assert 0.95 < h100["avg_ts"] / h200["avg_ts"] < 1.0
    h100_gbps = load("tg/advise-llama-3.1-8b.json")["ceiling"]["gpu_gbps"]
    assert h100_gbps == 3352.3 and 4814.3 / h100_gbps > 1.4
    # the share of the peak each read: 0.30 of the H100's, 0.21 of the H200's
    assert 0.29 < h100["avg_ts"] * h100["model_size"] / (h100_gbps * 1e9) < 0.31
    rows = (ROOT / "tg" / "smi.csv").read_text().splitlines()[1:]
    busy = [r.split(", ") for r in rows if int(r.split(", ")[5].split()[0]) >= 90]
    assert busy and all(r[1] == "P0" and r[3] == "1980 MHz" for r in busy)  # full clocks, no cap while decoding
    assert max(float(r[2].split()[0]) for r in busy) < 400  # at most ~360 W of 700


def test_moe_experts_in_ram_read_the_vms_memory_at_half_its_measured_rate() -> None:
    """Qwen3-30B-A3B with every expert in RAM: 40.97 t/s, 1.02 GB of experts a token from RAM: 42 GB/s, 0.45 of
    the 93.2 GB/s tunehost measured on that VM; the 8B on the CPU alone reads 65 GB/s (0.70): a split pays the
    GPU's part and the hand-over on top of the RAM reads."""
    from tunehost.advise.calibration import load as load_rows

    rows = {r.id: r for r in load_rows(CSV) if r.id in ("dh02", "dh03", "dh04")}
    split, cpu = rows["dh03"], rows["dh04"]
    assert 0.4 < split.tps * split.cpu_bytes_gb / split.cpu_gbps < 0.5
    assert 0.65 < cpu.tps * cpu.bytes_gb / cpu.gbps < 0.75
    assert split.bytes_gb + split.cpu_bytes_gb == pytest.approx(rows["dh02"].bytes_gb, abs=0.01)
