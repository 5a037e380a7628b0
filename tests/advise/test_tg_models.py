"""Issue 33's speed models: what the CPU cores can pull and compute (CCD links, core count, ISA, quant), the iGPU
family of a unified placement, Ollama's share, and the power cap as a cause (the band at the enforced limit and at
the default one)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tunehost.advise.ceiling import (BAND_MODELS, OLLAMA_SHARE, PER_CCD_PULL_GBPS, BandContext, CpuView, band_class,
                                     ccd_links, cpu_isa, igpu_family, tg_band)
from tunehost.advise.host_view import GpuView
from tunehost.advise.plan import AdviseOptions, plan
from tunehost.facts.power_cap import tg_share_at_cap

from tests.advise.test_plan import HOSTS, MODELS, MiB

GB = 10 ** 9


@pytest.mark.parametrize(("flags", "isa"), [
    ({"fpu", "avx", "avx2", "fma"}, "avx2"), ({"avx2", "avx512f", "avx512bw"}, "avx512"),
    ({"avx2", "avx512f", "amx_tile", "amx_int8"}, "amx"), ({"fp", "asimd"}, "neon"), ({"sse2"}, None), (None, None),
    (set(), None),
])
def test_cpu_isa_from_cpuinfo_flags(flags, isa):
    assert cpu_isa(flags) == isa


@pytest.mark.parametrize(("text", "isa"), [
    (None, None), ("", None), ("processor\t: 0\nBogoMIPS\t: 108.00\n", None),  # missing: no ISA, no guess
    ("Features\t: \x1b[2J asimd\x00 \u2603 fp\n", None),  # escapes, a NUL, non-ASCII: words dropped, not read
    ("Features\t: fp asimd\x1b[31m\nFeatures\t: asimd\n", None),  # only the first processor's line counts
    ("Features\t:" + " asimd" * 100_000 + "\n", "neon"),  # huge: read once, no hang
    ("flags\t\t: avx2\nFeatures\t: asimd\n", "avx2"),  # x86's flags line wins where both are present
])
def test_cpu_isa_from_a_missing_or_hostile_cpuinfo(text, isa):
    from tunehost.host.cpuinfo import parse_cpu_features

    assert cpu_isa(parse_cpu_features(text)) == isa


@pytest.mark.parametrize(("text", "family"), [
    ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n", 23),
    ("processor\t: 0\ncpu family\t: 25\nflags\t: avx2\nprocessor\t: 1\ncpu family\t: 23\n", 25),
    ("processor\t: 0\ncpu family\t: 6x\n", None), ("processor\t: 0\ncpu family\t: 123456\n", None),
    ("processor\t: 0\nBogoMIPS\t: 48.00\n", None), ("", None), (None, None),
])
def test_cpu_family_from_cpuinfo(text, family):
    from tunehost.host.cpuinfo import parse_cpu_family

    assert parse_cpu_family(text) == family


@pytest.mark.parametrize(("groups", "vendor", "family", "links"), [
    (16, "amd", 23, 8),    # Threadripper 3970X: 16 CCXs (L3 groups) on 8 CCDs, one link each
    (2, "amd", 23, 1),     # Ryzen 5 3600: two CCXs on one CCD
    (1, "amd", 23, 1),     # Raven Ridge / Mendocino: one CCX
    (4, "amd", 25, 4),     # Zen 3/4: one CCX per CCD
    (2, "intel", 6, 2), (4, "amd", None, 4), (None, "amd", 23, None), (0, "amd", 23, None),
])
def test_ccd_links_count_zen2_ccx_pairs_once(groups, vendor, family, links):
    assert ccd_links(groups, vendor, family) == links


def test_a_zen2_threadripper_pulls_through_its_eight_ccd_links_not_sixteen_ccxs():
    cores = CpuView(32, ccd_links(16, "amd", 23), "avx2", "amd")
    assert cores.pull_gbps() == (8 * PER_CCD_PULL_GBPS, "8 CCD links")


@pytest.mark.parametrize(("name", "family"), [
    ("AMD Radeon Graphics (Cezanne)", "vega"), ("AMD Radeon Graphics (Renoir)", "vega"),
    ("AMD Radeon 680M (Rembrandt)", "rdna2"), ("AMD Radeon 780M Graphics", "rdna3"), ("Phoenix1", "rdna3"),
    ("AMD Radeon 8060S (Strix Halo)", "rdna35"), ("AMD Radeon 890M", "rdna35"),
    ("Apple M2 Max", None), ("Intel Arc Graphics", None), (None, None), ("", None),
])
def test_igpu_family_from_the_name_or_codename(name, family):
    assert igpu_family(name) == family


def test_band_classes():
    assert band_class("unified", False, "vega") == "unified-vega"
    assert band_class("unified", True, "rdna3") == band_class("unified", False, "rdna35") == "unified-rdna"
    assert band_class("unified", False) == "unified"
    assert band_class("moe", True) == band_class("split", False) == "split"
    assert band_class("cpu", True) == "cpu-moe" and band_class("cpu", False) == "cpu"
    assert band_class("gpu", True) == "gpu-moe" and band_class("gpu", False) == "gpu"


def test_sixteen_epyc_cores_on_four_ccds_cannot_pull_twelve_channels():
    epyc = CpuView(cores=16, ccds=4, isa="avx512", vendor="amd")
    pull, why = epyc.pull_gbps()
    assert pull == 4 * PER_CCD_PULL_GBPS and why == "4 CCD links"
    twelve_channels = 12 * 4800 * 8 / 1000  # 460.8 GB/s
    free = tg_band([(int(4.62 * GB), twelve_channels)], 32, "cpu")
    bound = tg_band([(int(4.62 * GB), twelve_channels)], 32, "cpu", context=BandContext(cpu=epyc, quant="Q4_K_M"))
    assert free is not None and bound is not None
    assert bound.low < free.low / 1.5 and bound.high < free.high / 1.5
    assert "what the cores can pull (4 CCD links: 240 GB/s" in bound.bound
    m = BAND_MODELS["cpu"]
    assert bound.high == pytest.approx(1 / (4.62 * GB / (240e9 * m.eff_high) + 32 * m.layer_us_low * 1e-6))
    # Intel: no CCD links, the cores alone; unknown CPU: the DIMMs alone
    assert CpuView(8, 1, "avx2", "intel").pull_gbps() == (8 * 18.0, "8 cores")
    assert CpuView().pull_gbps() == (None, "")
    unknown = tg_band([(int(4.62 * GB), twelve_channels)], 32, "cpu", context=BandContext(cpu=CpuView()))
    assert (unknown.low, unknown.high) == (free.low, free.high)


def test_two_avx2_cores_on_an_iq_quant_are_compute_bound():
    two = CpuView(cores=2, ccds=1, isa="avx2", vendor="intel")
    assert two.dot_gbps("IQ4_XS") == pytest.approx(2 * 15.0 * 0.6)
    assert two.dot_gbps("Q4_0") == pytest.approx(30.0) and two.dot_gbps("Q8_0") == pytest.approx(39.0)
    assert CpuView(cores=2).dot_gbps("Q4_0") is None
    band = tg_band([(int(4 * GB), 89.6)], 32, "cpu", context=BandContext(cpu=two, quant="IQ4_XS"))
    assert band is not None and band.bound.startswith("CPU compute (2 avx2 cores dequantising IQ4_XS at ~18 GB/s")
    assert band.high <= 18e9 / (4 * GB)


def test_the_cpu_bounds_apply_to_the_ram_part_of_a_split_only():
    weak = CpuView(cores=2, ccds=1, isa="avx2", vendor="intel")
    parts = [(int(3 * GB), 936.0), (int(2 * GB), 89.6)]
    free = tg_band(parts, 48, "split")
    bound = tg_band(parts, 48, "split", context=BandContext(cpu=weak, quant="Q4_K_M"))
    assert bound.high < free.high and "VRAM and RAM in turn" in bound.bound
    gpu_only = tg_band([(int(3 * GB), 936.0)], 48, "gpu", context=BandContext(cpu=weak, quant="Q4_K_M"))
    assert gpu_only.low == tg_band([(int(3 * GB), 936.0)], 48, "gpu").low


def test_ollama_is_a_share_of_llama_cpp_and_says_so():
    base = tg_band([(int(4.62 * GB), 256.0)], 32, "unified-rdna")
    ollama = tg_band([(int(4.62 * GB), 256.0)], 32, "unified-rdna", context=BandContext(runtime="ollama"))
    assert ollama.low == pytest.approx(base.low * OLLAMA_SHARE[0]) and ollama.high == pytest.approx(
        base.high * OLLAMA_SHARE[1])
    assert "under Ollama" in ollama.notes[0] and "published Ollama eval rates" in ollama.notes[0]


def test_the_vega_apu_band_is_below_the_rdna_one_on_the_same_ram():
    vega = tg_band([(int(4.62 * GB), 51.2)], 36, "unified-vega")
    rdna = tg_band([(int(4.62 * GB), 51.2)], 36, "unified-rdna")
    assert vega.high < rdna.high and vega.low < rdna.low


def test_plan_reads_the_igpu_family_and_the_cpu_from_the_host():
    apu = plan(MODELS["llama8b"](), HOSTS["5800u-apu"], AdviseOptions("/m.gguf", ctx=8192))
    assert apu.ceiling is not None and apu.ceiling.path == "unified"
    # no RAM figure in the view: no band; with the DIMMs' peak the Vega class is used
    from tunehost.facts.memory_layout import DimmPeak

    peak = DimmPeak(51.2, 51.2, 3200, 3200, "2 channels x 3200 MT/s x 8 bytes", "desktop", "DDR4")
    apu = plan(MODELS["llama8b"](), HOSTS["5800u-apu"], AdviseOptions("/m.gguf", ctx=8192, ram_peak=peak))
    assert apu.ceiling.band is not None and apu.ceiling.band.model == "unified-vega"
    halo = plan(MODELS["llama8b"](), HOSTS["strix-halo"], AdviseOptions("/m.gguf", ram_peak=peak))
    assert halo.ceiling.band.model == "unified-rdna"
    epyc = replace(HOSTS["epyc-2s"], threads=16, cpu_ccds=4, cpu_isa="avx512", cpu_vendor="amd")
    twelve = DimmPeak(460.8, 460.8, 4800, 4800, "12 channels x 4800 MT/s x 8 bytes", "server", "DDR5")
    cpu = plan(MODELS["llama8b"](), epyc, AdviseOptions("/m.gguf", ram_peak=twelve))
    assert cpu.path == "cpu" and "4 CCD links" in cpu.ceiling.band.bound
    ollama = plan(MODELS["llama8b"](), epyc, AdviseOptions("/m.gguf", ram_peak=twelve, runtime="ollama"))
    assert ollama.ceiling.band.low < cpu.ceiling.band.low and "under Ollama" in ollama.ceiling.band.notes[0]


def test_a_capped_3090_names_the_cap_and_the_speed_at_the_default_limit():
    capped = replace(HOSTS["12700f-3060"], gpus=(GpuView(0, "NVIDIA GeForce RTX 3090", "nvidia", 24576 * MiB,
                                                         24000 * MiB, compute_capability="8.6", power_limit_w=200.0,
                                                         power_default_limit_w=350.0),))
    free = replace(capped, gpus=(replace(capped.gpus[0], power_limit_w=350.0),))
    p_cap = plan(MODELS["qwen30b"](), capped, AdviseOptions("/m.gguf"))
    p_free = plan(MODELS["qwen30b"](), free, AdviseOptions("/m.gguf"))
    band, default = p_cap.ceiling.band, p_free.ceiling.band
    share = tg_share_at_cap(round(200 / 350, 3))  # the ratio the plan keeps (3 decimals)
    assert band.low == pytest.approx(default.low * share.low) and band.high == pytest.approx(default.high * share.high)
    assert "enforced power limit (57% of its default)" in band.notes[0]
    assert f"at the default limit expect {default.low:.0f}-{default.high:.0f} t/s" in band.notes[0]
    assert "power cap" in band.bound and not default.notes


@pytest.mark.parametrize(("family", "links"), [(23, 8), (25, 16)])
def test_the_host_view_counts_ccd_links_of_a_real_zen_topology(make_snapshot, family, links):
    # EPYC 7451 (Zen 1, x86 family 23): the corpus' `lscpu -p` rows give 16 L3 groups (CCXs) on 8 dies, one link each;
    # the same topology on a later family (one CCX per CCD) keeps its 16
    from tunehost.advise.host_view import HostView
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.parsers.lscpu import parse_lscpu_table

    from tests.conftest import corpus
    from tests.cpu.fixtures import lscpu_topology_files

    fs = lscpu_topology_files(parse_lscpu_table(corpus("lscpu/lscpu-and-lscpu-p-amd-epyc7451-2s-8numa-16ccx.txt")))
    fs["/proc/cpuinfo"] = (f"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\n"
                           "model name\t: AMD EPYC 7451 24-Core Processor\nflags\t\t: fpu avx avx2 fma\n\n")
    view = HostView.from_facts(HostFacts(open_host(make_snapshot(fs=fs))))
    assert view.cpu_vendor == "amd" and view.cpu_isa == "avx2" and view.cpu_ccds == links


def test_an_mi50_without_a_product_name_is_an_amd_hbm_card_with_its_bandwidth(make_snapshot, cli, tmp_path):
    """amdgpu gives many cards no product_name: tunehost names them "AMD GPU <PCI device id>" (facts.gpu). An
    Instinct MI50 32GB (pci.ids 1002:66a1) is still known by that id: 1024 GB/s of HBM2, band class gpu-hbm-amd."""
    import json

    from tests.advise.conftest import dense_tensors, write_gguf
    from tests.gpu.test_drm import amd_card
    from tunehost.advise.ceiling import gpu_bandwidth, hbm_kind

    assert hbm_kind("AMD GPU 0x66a1", None) == "amd" and gpu_bandwidth("AMD GPU 0x66a1") == 1024.0
    assert hbm_kind("AMD GPU 0x73df", None) is None  # an RX 6700 XT: GDDR6
    assert hbm_kind("AMD Radeon Graphics (Vega 8)", None) is None  # an iGPU named Vega is no HBM card
    snap = make_snapshot(fs=amd_card("card1", "0000:03:00.0", "0x66a1", total=32 * 1024 ** 3, used=0))
    model = write_gguf(tmp_path / "t.gguf", "llama", dense_tensors(4), n_layer=4, vocab_tokens=32)
    result = cli("advise", "--model", str(model), "--snapshot", str(snap), "--format", "json", "--no-probe")
    assert result.exit_code == 0, result.output
    ceiling = json.loads(result.stdout)["ceiling"]
    assert ceiling["gpu_gbps"] == 1024.0 and ceiling["gpu_hbm"] == "amd"
    assert ceiling["band"]["model"] == "gpu-hbm-amd" and "MI50/MI60 runs under ROCm" in ceiling["band"]["notes"][0]


@pytest.mark.parametrize(("name", "cc", "generation"), [
    ("NVIDIA Tesla P40", "6.1", "pre-volta"), ("NVIDIA Tesla P40", None, "pre-volta"),
    ("NVIDIA GeForce GTX 1080 Ti", None, "pre-volta"), ("NVIDIA TITAN Xp", None, "pre-volta"),
    ("NVIDIA Tesla K80", None, "pre-volta"), ("NVIDIA GeForce GTX 980 Ti", None, "pre-volta"),
    ("Quadro P4000", None, "pre-volta"), ("NVIDIA GeForce GTX 1070", "not a number", "pre-volta"),
    ("NVIDIA GeForce GTX 1660", None, None), ("NVIDIA Tesla T4", None, None), ("NVIDIA TITAN V", None, None),
    ("NVIDIA Tesla V100-PCIE-16GB", None, None), ("NVIDIA GeForce RTX 3090", "8.6", None),
    ("NVIDIA GeForce GTX 1080", "7.0", None),  # the compute capability wins over the name
    ("NVIDIA Tesla P40", "nan", "pre-volta"), ("NVIDIA GeForce RTX 3090", "-5", None),  # garbage: the name decides
    ("NVIDIA GeForce RTX 3090", "1e999", None), ("\x1b[2J", None, None),
    ("Intel Arc A770", None, "intel-arc"), ("Intel Arc Pro B60", None, "intel-arc"), ("AMD Radeon RX 6800 XT", None, None),
    (None, None, None),
])
def test_gpu_generation_from_the_compute_capability_else_the_name(name, cc, generation):
    from tunehost.advise.ceiling import gpu_generation

    assert gpu_generation(name, cc) == generation


def test_a_pascal_card_keeps_its_band_and_is_told_it_runs_below_it():
    """llama.cpp's CUDA scoreboard puts pre-Volta cards below the band (round 5): advise keeps the band's constants
    (nothing is fitted on that evaluation set) and says so in the band, for a card NVML gives compute capability 6.x."""
    from tunehost.advise.ceiling import GPU_CAVEATS, ceiling_from_json

    p40 = replace(HOSTS["12700f-3060"], gpus=(GpuView(0, "NVIDIA Tesla P40", "nvidia", 24576 * MiB, 24000 * MiB,
                                                      compute_capability="6.1"),))
    ampere = replace(p40, gpus=(replace(p40.gpus[0], compute_capability="8.6"),))
    band = plan(MODELS["llama8b"](), p40, AdviseOptions("/m.gguf")).ceiling.band
    same = plan(MODELS["llama8b"](), ampere, AdviseOptions("/m.gguf")).ceiling
    assert GPU_CAVEATS["pre-volta"] in band.notes and GPU_CAVEATS["pre-volta"] not in same.band.notes
    assert (band.low, band.high) == (same.band.low, same.band.high)
    ceiling = plan(MODELS["llama8b"](), p40, AdviseOptions("/m.gguf")).ceiling
    back = ceiling_from_json(ceiling.to_json())
    assert back.bandwidths.gpu_generation == "pre-volta" and back.band.notes == band.notes
    from tunehost.advise.ceiling import describe

    below, inside = describe(ceiling, band.low * 0.8), describe(ceiling, (band.low + band.high) / 2)
    assert below.endswith(f"reach ({GPU_CAVEATS['pre-volta']})") and "below the" in below  # what bench prints
    assert GPU_CAVEATS["pre-volta"] not in inside and GPU_CAVEATS["pre-volta"] not in describe(same, band.low * 0.8)
    hostile = {**ceiling.to_json(), "gpu_generation": "\x1b[2J; rm -rf /"}
    assert ceiling_from_json(hostile).bandwidths.gpu_generation is None  # a saved result's value is a known key or none


# a DGX Spark as NVML gives it (NVIDIA's DGX Spark known issues: nvmlDeviceGetMemoryInfo answers NOT_SUPPORTED, so the
# sampler records no memory; leptonai/gpud #1170 and XuehaiPan/nvitop #208 show GB10, driver 580, MemTotal 127600748 kB)
GB10_NVML = {"error": None, "driver_version": "580.126.09", "cuda_version": "13.0", "gpus": [{
    "index": 0, "name": "NVIDIA GB10", "uuid": None, "pci_bus_id": "0000000F:01:00.0", "memory_total_mib": None,
    "memory_used_mib": None, "memory_free_mib": None, "compute_capability": "12.1", "pcie": None,
    "temperature_c": 36, "power_draw_w": 3.0, "pstate": "P8", "utilization_pct": 0, "processes": []}]}
GB10_MEMINFO = "MemTotal:       127600748 kB\nMemFree:        100000000 kB\nMemAvailable:   118566368 kB\n"


def test_a_dgx_spark_is_a_unified_gpu_planned_on_its_memory_at_its_spec_bandwidth(make_snapshot, cli, tmp_path):
    """advise planned a DGX Spark's model on the CPU with -ngl 0 ("free VRAM unknown"); its GB10 is a GPU on the
    CPU's LPDDR5X (H18, round3_hypotheses.md): every layer on it, the pool its free RAM, the band at NVIDIA's 273 GB/s.
    llama.cpp's CUDA scoreboard rows of the box (57.2 and 56.7 t/s on Llama 2 7B Q4_0) sit inside that band."""
    import json

    from tests.advise.conftest import dense_tensors, write_gguf
    from tunehost.facts.gpu import GpuFacts, nvidia_unified
    from tunehost.host import open_host

    assert nvidia_unified("NVIDIA GB10") and nvidia_unified("Orin (nvgpu)") and not nvidia_unified("NVIDIA GB100")
    snap = make_snapshot(fs={"/proc/meminfo": GB10_MEMINFO}, samples={"nvml": GB10_NVML})
    gpu = GpuFacts.gather(open_host(snap)).gpus[0]
    assert gpu.unified_memory and gpu.integrated and gpu.memory_total_mib is None
    from tunehost.bench.runner import _host_bandwidths
    from tunehost.facts import HostFacts

    takes_layers, unified, bw = _host_bandwidths(HostFacts(open_host(snap)))  # bench reads it the same way
    assert takes_layers and unified and bw.dimm_gbps == 273.0 and bw.dimm_basis == "NVIDIA GB10 spec sheet"
    model = write_gguf(tmp_path / "t.gguf", "llama", dense_tensors(4), n_layer=4, vocab_tokens=32)
    result = cli("advise", "--model", str(model), "--snapshot", str(snap), "--format", "json", "--no-probe")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    flags = {f["name"]: f["value"] for f in plan["flags"]}
    assert plan["path"] == "unified" and flags["-ngl"] == "99" and plan["fits"]
    ceiling = plan["ceiling"]
    assert ceiling["ram_dimm_gbps"] == 273.0 and ceiling["ram_dimm_basis"] == "NVIDIA GB10 spec sheet"
    assert ceiling["band"]["model"] == "unified"
    human = cli("advise", "--model", str(model), "--snapshot", str(snap), "--no-probe")
    assert "the SoC's memory allows 273 GB/s" in " ".join(human.stdout.split())
    doctor = json.loads(cli("doctor", "--snapshot", str(snap), "--json").stdout)
    [memory] = [f for f in doctor["findings"] if f["check"] == "gpu-memory"]
    assert memory["severity"] == "info" and "allocates from system RAM" in memory["summary"]
    assert "GTT" not in json.dumps(memory)  # an AMD APU's remedy is not given to an NVIDIA SoC


def test_h18_the_dgx_spark_and_jetson_rows_of_the_scoreboard_fall_inside_the_unified_band():
    import csv

    from tests.conftest import DATA
    from tunehost.advise.calibration import Measurement, judge
    from tunehost.advise.ceiling import gpu_bandwidth

    lines = [line for line in (DATA.parent / "advise" / "data" / "scoreboard_tg.csv").read_text().splitlines()
             if not line.startswith("#")]
    rows = [r for r in csv.DictReader(lines) if r["id"] in ("sb039", "sb133", "sb175")]
    soc = {"sb039": gpu_bandwidth("NVIDIA Jetson AGX Orin"), "sb133": gpu_bandwidth("NVIDIA GB10"),
           "sb175": gpu_bandwidth("NVIDIA GB10")}
    verdicts = judge([Measurement(r["id"], r["gpu"], "apu", soc[r["id"]], "Llama 2 7B", "Q4_0", False, 32, 3.75, 0.0,
                                  0.0, float(r["tps"]), r["source"]) for r in rows])
    assert [(v.m.id, v.m.band_class(), v.inside) for v in verdicts] == [
        ("sb039", "unified", True), ("sb133", "unified", True), ("sb175", "unified", True)]
    assert all(v.m.tps / v.high > 0.9 for v in verdicts if v.m.id != "sb039")  # the top of a wide band


@pytest.mark.parametrize("name", ["raspberry-pi4-cortex-a72-neon.txt", "rk3568-cortex-a55-neon-dotprod.txt"])
def test_an_arm_host_plans_in_the_arm_cpu_band(make_snapshot, name):
    """ARM's kernel prints the ISA as `Features`, not `flags`: a real Raspberry Pi 4B's and RK3568's cpuinfo
    (tests/data/cpuinfo) give the host view the neon ISA, so a CPU plan is judged by the cpu-arm band (its cores'
    pull and arithmetic), not by x86's. The x86 flag reader still sees no flags there (no AVX is "missing")."""
    from pathlib import Path

    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import AdviseOptions, plan
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.host.cpuinfo import parse_cpu_features, parse_cpu_flags
    from tunehost.parsers.lscpu import LscpuCpu

    from tests.cpu.fixtures import lscpu_topology_files

    text = (Path(__file__).parents[1] / "data" / "cpuinfo" / name).read_text()
    assert parse_cpu_flags(text) is None and "asimd" in (parse_cpu_features(text) or ())
    fs = lscpu_topology_files(LscpuCpu(cpu, core=cpu, socket=0, online=True) for cpu in range(4))  # 4 cores, no L3
    view = HostView.from_facts(HostFacts(open_host(make_snapshot(fs={**fs, "/proc/cpuinfo": text}))))
    assert view.cpu_isa == "neon"
    arm = replace(HOSTS["12700f-3060"], gpus=(), threads=view.threads, cpu_isa=view.cpu_isa,
                  cpu_vendor=view.cpu_vendor, cpu_ccds=view.cpu_ccds)
    band = plan(MODELS["llama8b"](), arm, AdviseOptions("/m.gguf", ram_bandwidth_gbps=12.8)).ceiling.band
    assert band is not None and band.model == "cpu-arm"
