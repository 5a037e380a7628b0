"""What the tests of a lent machine's scripts/gpu_proof output share: reading its files, and replaying its snapshot
against the doctor.json it was captured with."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

# checks whose judgement rests on settings, not on a sample of its own moment: a replay says them word for word
STATIC_CHECKS = frozenset({"ram-speed", "cpu-governor", "cpu-epp", "cpu-frequency", "power-limits", "thp", "numa",
                           "pcie-link", "resizable-bar", "gpu-power-cap", "apu-memory", "headless"})


def reader(root: Path) -> Callable[[str], Any]:
    """load(rel): the JSON file `rel` under `root`."""
    return lambda rel: json.loads((root / rel).read_text())


def by_check(doc: dict, check: str) -> list[dict]:
    return [f for f in doc["findings"] if f["check"] == check]


def assert_replays(cli: Callable[..., Any], proof: Path) -> tuple[dict, dict]:
    """Replay `proof`/snapshot with doctor: every built-in check judged, the same verdict and severities as the
    `proof`/doctor.json taken on the machine, every static judgement word for word. llama-build is left out: gpu_proof
    takes the snapshot before the build it would find. Returns (recorded, replay)."""
    from tunehost.doctor.registry import BUILTIN_ORDER

    recorded = json.loads((proof / "doctor.json").read_text())
    assert {f["check"] for f in recorded["findings"]} == set(BUILTIN_ORDER)
    result = cli("doctor", "--json", "--snapshot", str(proof / "snapshot"))
    replay = json.loads(result.stdout)
    assert replay["verdict"] == recorded["verdict"] == "ready" and result.exit_code == 0
    count = lambda doc: Counter((f["check"], f["severity"]) for f in doc["findings"] if f["check"] != "llama-build")  # noqa: E731
    assert count(replay) == count(recorded)
    said = lambda doc: [(f["check"], f["summary"]) for f in doc["findings"] if f["check"] in STATIC_CHECKS]  # noqa: E731
    assert len(said(recorded)) == len(STATIC_CHECKS) and said(replay) == said(recorded)
    return recorded, replay


def assert_places_what_fit_fits(proof: Path) -> dict:
    """advise's placement on the lent H200 equals llama-fit-params' (-c 32768, every layer: llama-fit-params' -ngl -1)
    for gpu_proof's Llama 3.1 8B Q4_K shape, with NVML's free VRAM as its budget and its bus width x memory clock
    (6016 bits x 3201 MHz x 2 / 8 = 4814.3 GB/s, HBM by its width) as its bandwidth. Returns advise.json."""
    load = reader(proof)
    both = load("advise-vs-fit.json")
    assert both["advise"]["-c"] == both["llama_fit_params"]["-c"] == "32768"
    assert both["advise"]["-ngl"] == "99" and both["llama_fit_params"]["-ngl"] == "-1"
    assert (proof / "llama-fit-params.txt").read_text().split() == ["-c", "32768", "-ngl", "-1"]
    advise = load("advise.json")
    [nvml] = load("snapshot/samples/nvml.json")["gpus"]
    assert (nvml["memory_used_mib"], nvml["memory_reserved_mib"], nvml["memory_free_mib"]) == (0, 615, 143155)
    assert advise["budget"]["gpu_free_bytes"] == 143155 * 2**20
    assert (nvml["memory_bus_width_bits"], nvml["memory_clock_max_mhz"]) == (6016, 3201)
    ceiling = advise["ceiling"]
    assert ceiling["gpu_gbps"] == round(6016 * 3201 * 2 / 8 / 1000, 1) == 4814.3 and ceiling["gpu_hbm"] == "nvidia"
    assert ceiling["band"]["model"] == "gpu-hbm"
    return advise


def idle_bench_energy(proof: Path) -> dict:
    """gpu_proof's CUDA bench of the tiny model: undisturbed, the card in P0 and never busy, at its 700 W limit, the
    GPU's energy measured alone (no RAPL in the guest). Returns the watch's energy."""
    watch = reader(proof)("bench.json")["watch"]
    assert watch["disturbed"] is False
    card = watch["gpu"]["summary"]["NVIDIA GPU 0"]
    assert card["pstate_in_use"] == ["P0", "P0"] and card["busy_samples"] == 0 and card["power_limit_w"] == 700.0
    energy = watch["energy"]
    assert energy["measured"] == "GPU only"
    return energy


def assert_replays_with_probes(cli: Callable[..., Any], proof: Path, snapshot_gbps: float, doctor_gbps: str) -> dict:
    """assert_replays, and the two memory probes of the proof: the snapshot's (measure.json, 16 threads) and doctor's
    own moments later (its memory-bandwidth summary): two samples of a shared VM's RAM. Returns doctor.json."""
    recorded, _ = assert_replays(cli, proof)
    measured = reader(proof)("snapshot/samples/measure.json")
    assert measured["memory_read_gbps"] == snapshot_gbps and measured["memory_read_threads"] == 16
    [bandwidth] = by_check(recorded, "memory-bandwidth")
    assert bandwidth["severity"] == "info" and f"{doctor_gbps} GB/s" in bandwidth["summary"]
    return recorded


def smi_field(text: str, name: str) -> list[str]:
    """The values of every `name : value` line of an `nvidia-smi -q` dump."""
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.strip().startswith(name + " ")]


def line(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares ms = a + b x GB: (a, b, R^2)."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    a = my - b * mx
    r2 = 1 - sum((y - a - b * x) ** 2 for x, y in points) / sum((y - my) ** 2 for _, y in points)
    return a, b, r2


def snapshot_without_board_ids(proof: Path) -> tuple[dict[str, str], tuple[str, str, str]]:
    """gpu_proof's own dump (taken beside the snapshot, kept raw as corpus material) holds the board's serial, PDI
    and UUID; none of them is in any file of the snapshot. Returns the snapshot's texts by relative path and the
    board's (serial, PDI, UUID)."""
    raw = (proof / "nvidia-smi-q.txt").read_text()
    [serial], [pdi], [uuid] = smi_field(raw, "Serial Number"), smi_field(raw, "GPU PDI"), smi_field(raw, "GPU UUID")
    snapshot = proof / "snapshot"
    texts = {p.relative_to(snapshot).as_posix(): p.read_bytes().decode("utf-8", "replace")
             for p in snapshot.rglob("*") if p.is_file()}
    assert len(texts) > 100
    assert not [name for name, text in texts.items() if serial in text or pdi in text or uuid[4:] in text]
    return texts, (serial, pdi, uuid)
