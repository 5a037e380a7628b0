"""The per-placement TG ceiling shared by advise and bench (issues 9 and 11): VRAM for GPU layers, measured RAM and
the configured DIMMs' peak for CPU layers, split by -ngl / --n-cpu-moe the way advise computes it."""

from __future__ import annotations

import re

import pytest

from tests.advise.test_plan import HOSTS, MODELS
from tests.conftest import DATA
from tunehost.advise.ceiling import (Bandwidths, Placement, ceiling_from_json, describe, placement_from_flags,
                                     tg_ceiling_for, vram_bandwidth)
from tunehost.advise.plan import AdviseOptions, plan
from tunehost.facts.memory_layout import dimm_peak
from tunehost.facts.ram import RamFacts

DMI = DATA / "corpus" / "dmidecode"
NVSMI = DATA / "corpus" / "nvidia-smi"


def test_placement_follows_the_flags_like_advise():
    gemma, qwen = MODELS["gemma12b"](), MODELS["qwen30b"]()
    assert placement_from_flags(gemma, ["-ngl", "0"], gpu=True).path == "cpu"
    assert placement_from_flags(gemma, ["-ngl", "20"], gpu=True) == Placement("split", 20)
    assert placement_from_flags(gemma, [], gpu=True).path == "gpu"            # llama-bench's default: all layers
    assert placement_from_flags(gemma, ["-ngl", "99"], gpu=False).path == "cpu"   # no GPU: everything in RAM
    assert placement_from_flags(qwen, ["--n-cpu-moe", "25"], gpu=True) == Placement("moe", 99, 25)
    assert placement_from_flags(gemma, ["-ngl", "12,99"], gpu=True) == Placement("split", 12)
    assert placement_from_flags(gemma, ["-ngl", "$(x)"], gpu=True).path == "gpu"


def test_bench_and_advise_compute_the_same_ceiling_for_the_same_placement():
    # Gemma-3-12B split on a 6 GiB RTX 3060 (the test_plan case): advise's plan and bench's flags agree
    from dataclasses import replace

    from tunehost.advise.host_view import GpuView

    small = replace(HOSTS["12700f-3060"], gpus=(GpuView(0, "NVIDIA GeForce RTX 3060", "nvidia", 6 << 30, 6 << 30),))
    model = MODELS["gemma12b"]()
    p = plan(model, small, AdviseOptions("/m.gguf", ram_bandwidth_gbps=50.0))
    k = int(p.value("-ngl"))
    bench = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", str(k)], gpu=True),
                           Bandwidths(gpu_gbps=360.0, ram_gbps=50.0))
    assert bench is not None and bench.tokens_per_s == pytest.approx(p.ceiling.tokens_per_s)
    assert bench.parts == p.ceiling.parts


def test_fully_offloaded_model_is_bounded_by_vram_not_host_ram():
    # the "140 % of ceiling" bug: -ngl 99 on an RTX 3060 reads its weights from VRAM, not from 31 GB/s of RAM
    model = MODELS["llama8b"]()
    c = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "99"], gpu=True),
                       Bandwidths(gpu_gbps=360.0, gpu_basis="(spec sheet)", ram_gbps=31.0))
    assert [m for m, _, _ in c.parts] == ["VRAM"] and c.dimm_tokens_per_s is None
    assert c.tokens_per_s == pytest.approx(360e9 / (model.weights.total - model.weights.token_embd))
    assert "VRAM ceiling" in describe(c, 50.0) and "DIMMs" not in describe(c, 50.0)


def test_cpu_ceiling_shows_measured_and_the_dimms_as_configured_from_real_dmidecode():
    # MSI MS-7E12 + 7950X3D, a DDR5-6000 kit with EXPO off: 2 channels x 4800 MT/s x 8 bytes = 76.8 GB/s
    ram = RamFacts.from_text((DMI / "ddr5-6000-kit-am5-7950x3d-expo-off-speed-eq-configured-4800.txt").read_text())
    peak = dimm_peak(ram)
    assert peak is not None and peak.configured_gbps == pytest.approx(76.8)
    model = MODELS["llama8b"]()
    c = tg_ceiling_for(model, Placement("cpu", 0), Bandwidths(ram_gbps=31.0, dimm_gbps=peak.configured_gbps,
                                                              dimm_basis=peak.basis))
    per_token = model.weights.total - model.weights.token_embd
    assert c.tokens_per_s == pytest.approx(31e9 / per_token)
    assert c.dimm_tokens_per_s == pytest.approx(76.8e9 / per_token)
    text = describe(c, 0.75 * c.tokens_per_s)
    assert text.startswith("TG = 75% of the") and "measured RAM ceiling" in text and "31.0 GB/s measured" in text
    assert "the DIMMs as configured allow 77 GB/s ->" in text and "4800 MT/s" in text


def test_split_ceiling_is_one_over_the_sum_and_the_dimm_peak_only_moves_the_ram_part():
    model = MODELS["qwen30b"]()
    c = tg_ceiling_for(model, Placement("moe", 99, 25), Bandwidths(gpu_gbps=360.0, ram_gbps=31.0, dimm_gbps=51.2))
    (_, vram, _), (_, ram, _) = c.parts
    assert c.tokens_per_s == pytest.approx(1 / (vram / 360e9 + ram / 31e9))
    assert c.dimm_tokens_per_s == pytest.approx(1 / (vram / 360e9 + ram / 51.2e9))


def test_snapshot_without_a_ram_probe_still_gives_the_dimm_ceiling():
    model = MODELS["llama8b"]()
    c = tg_ceiling_for(model, Placement("cpu", 0), Bandwidths(dimm_gbps=51.2, dimm_basis="2 channels x 3200 MT/s"))
    assert c.tokens_per_s is None and c.dimm_tokens_per_s is not None
    assert "not computed" in describe(c) and "DIMMs as configured allow 51 GB/s" in describe(c)


def test_ceiling_round_trips_through_a_saved_result():
    model = MODELS["qwen30b"]()
    c = tg_ceiling_for(model, Placement("moe", 99, 25), Bandwidths(gpu_gbps=360.0, ram_gbps=31.0, dimm_gbps=51.2))
    assert ceiling_from_json(c.to_json()) == c
    assert ceiling_from_json({"tg_ceiling_ts": 10.0}) is None and ceiling_from_json("garbage") is None


@pytest.mark.parametrize("dump, bus_bits, expected", [
    ("rtx3080-x16-gen4-loaded-p2-q-x.txt", 320, 760.0),   # spec sheet 760 GB/s
    ("rtx3090-x16-gen1-of-4-idle-p8-q-x.txt", 384, 936.0),  # spec sheet 936 GB/s
])
def test_vram_bandwidth_from_bus_width_and_the_real_max_memory_clock(dump, bus_bits, expected):
    text = (NVSMI / dump).read_text()
    max_clocks = text[text.index("<max_clocks>"):text.index("</max_clocks>")]
    mhz = int(re.search(r"<mem_clock>(\d+) MHz</mem_clock>", max_clocks).group(1))
    assert vram_bandwidth(bus_bits, mhz) == pytest.approx(expected, abs=0.5)
    assert vram_bandwidth(None, mhz) is None and vram_bandwidth(bus_bits, -1) is None


def test_expo_off_kit_shows_what_its_rating_would_allow():
    # G.Skill F5-6000 kit at JEDEC 4800: the rated speed is what the DIMMs could give with EXPO on
    ram = RamFacts.from_text((DMI / "ddr5-6000-kit-am5-7950x3d-expo-off-speed-eq-configured-4800.txt").read_text())
    peak = dimm_peak(ram)
    model = MODELS["llama8b"]()
    c = tg_ceiling_for(model, Placement("cpu", 0), Bandwidths.with_dimms(peak, ram_gbps=31.0))
    assert (peak.configured_gbps, peak.rated_gbps) == (76.8, 96.0)
    assert "allow 77 GB/s" in describe(c) and "96 GB/s at their rated speed" in describe(c)
