"""The advise planner: for each host (hand-built HostViews of the composite snapshots) x model, the exact flags.

Model sizes: the shape fixtures in tests/data/models with weight bytes spread over the tensors by parameter count
so the total equals the real GGUF file (see `quantized`):
    Llama-3.1-8B Q4_K_M 4,920,739,232 B (4.58 GiB) · Qwen3-30B-A3B Q4_K_M 18,556,686,272 B (17.28 GiB)
    gpt-oss-20b MXFP4 12,109,566,560 B (11.28 GiB) · Gemma-3-12B Q4_K_M 7,300,574,976 B (6.80 GiB, tied output)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tunehost.advise.host_view import GpuView, HostView
from tunehost.advise.memory import MiB, ServerSettings, compute_buffer_bytes, kv_cache_bytes
from tunehost.advise.plan import AdviseOptions, apply_caps, gpu_bandwidth, plan
from tunehost.errors import TunehostError
from tunehost.model import ModelFacts, WeightBytes

from .conftest import shape_fixture

GiB = 1024 * MiB


def quantized(m: ModelFacts, file_bytes: int, *, tied: bool = False) -> ModelFacts:
    """The shape with `file_bytes` of weights spread over token_embd, output and each block by parameter count."""
    e, v = m.embedding_length, m.vocab_size or 0
    per, routed = [], []
    for il in range(m.block_count):
        kv = m.head_count_kv[il]
        attn = e * m.head_count * m.key_length + 2 * e * kv * m.key_length + m.head_count * m.value_length * e
        if m.is_moe:
            r = 3 * e * (m.expert_feed_forward_length or 0) * m.expert_count
            per.append(attn + r + e * m.expert_count)
        else:
            r = 0
            per.append(attn + 3 * e * (m.feed_forward_length or 0))
        routed.append(r)
    emb, out = v * e, (0 if tied else v * e)
    k = file_bytes / (emb + out + sum(per))
    per_b = tuple(int(x * k) for x in per)
    routed_b = tuple(int(x * k) for x in routed)
    weights = WeightBytes(routed_experts=sum(routed_b), other=sum(per_b) - sum(routed_b) + int(emb * k) + int(out * k),
                          token_embd=int(emb * k), output=int(out * k), output_tied=tied, per_layer=per_b,
                          routed_experts_per_layer=routed_b, largest_routed_expert_layer=max(routed_b))
    return replace(m, weights=weights)


MODELS = {
    "llama8b": lambda: quantized(shape_fixture("llama-3.1-8b"), 4_920_739_232),
    "qwen30b": lambda: quantized(shape_fixture("qwen3-30b-a3b"), 18_556_686_272),
    "gptoss20b": lambda: quantized(shape_fixture("gpt-oss-20b"), 12_109_566_560),
    "gemma12b": lambda: quantized(shape_fixture("gemma-3-12b"), 7_300_574_976, tied=True),
}
GEMMA_MMPROJ = 854_200_224  # mmproj-model-f16.gguf of gemma-3-12b-it


def _smt_cores(n: int) -> tuple[tuple[int, ...], ...]:
    return tuple((c, c + n) for c in range(n))


# The composite snapshot machines as HostViews (what HostView.from_facts makes of them)
HOSTS = {
    # i7-12700F: 8 P-cores with SMT (CPUs 0-15, siblings 0/1, 2/3, ...) + 4 E-cores (16-19); RTX 3060 12 GB with
    # a desktop holding 488 MiB; 32 GB DDR4; Ubuntu's 64 KiB memlock limit
    "12700f-3060": HostView(
        online_cpus=tuple(range(20)), cores=tuple((2 * c, 2 * c + 1) for c in range(8)) + tuple((c,) for c in range(16, 20)),
        pin_cpus=(0, 2, 4, 6, 8, 10, 12, 14), performance_cores=8, threads=8, smt=True, hybrid=True,
        gpus=(GpuView(0, "NVIDIA GeForce RTX 3060", "nvidia", 12288 * MiB, 11800 * MiB, compute_capability="8.6"),),
        ram_total=31 * GiB + 300 * MiB, ram_available=27 * GiB, memlock_limit=65536, numa_nodes=1),
    # Ryzen 9 9950X3D: 16 cores with SMT (0-15 + siblings 16-31), not hybrid; RTX 5090 32 GB; 64 GB DDR5
    "9950x3d-5090": HostView(
        online_cpus=tuple(range(32)), cores=_smt_cores(16), pin_cpus=tuple(range(16)), performance_cores=16,
        threads=16, smt=True, hybrid=False,
        gpus=(GpuView(0, "NVIDIA GeForce RTX 5090", "nvidia", 32607 * MiB, 31900 * MiB, compute_capability="12.0"),),
        ram_total=62 * GiB, ram_available=58 * GiB, memlock_limit=8 * MiB, numa_nodes=1),
    # Ryzen 7 5800U laptop: 8 cores with SMT; Vega 8 iGPU with a 512 MiB carve-out and a 7.5 GiB GTT; 16 GB
    "5800u-apu": HostView(
        online_cpus=tuple(range(16)), cores=_smt_cores(8), pin_cpus=tuple(range(8)), performance_cores=8, threads=8,
        smt=True, hybrid=False,
        gpus=(GpuView(0, "AMD Radeon Graphics (Cezanne)", "amd", 512 * MiB, 400 * MiB, unified=True,
                      gtt_free_bytes=7 * GiB),),
        ram_total=14 * GiB + 800 * MiB, ram_available=11 * GiB, memlock_limit=8 * MiB, numa_nodes=1),
    # Ryzen AI Max+ 395 (Strix Halo): 16 cores with SMT; Radeon 8060S, 512 MiB carve-out, GTT over 120 GB; 128 GB
    "strix-halo": HostView(
        online_cpus=tuple(range(32)), cores=_smt_cores(16), pin_cpus=tuple(range(16)), performance_cores=16,
        threads=16, smt=True, hybrid=False,
        gpus=(GpuView(0, "AMD Radeon 8060S (Strix Halo)", "amd", 512 * MiB, 500 * MiB, unified=True,
                      gtt_free_bytes=115 * GiB),),
        ram_total=124 * GiB, ram_available=118 * GiB, memlock_unlimited=True, numa_nodes=1),
    # 2 x EPYC 9654: 192 cores with SMT, 2 NUMA nodes, no GPU, 768 GB
    "epyc-2s": HostView(
        online_cpus=tuple(range(384)), cores=_smt_cores(192), pin_cpus=tuple(range(192)), performance_cores=192,
        threads=192, smt=True, hybrid=False, ram_total=750 * GiB, ram_available=700 * GiB, memlock_unlimited=True,
        numa_nodes=2),
}


def _plan(host: str, model: str, **kw):
    m = MODELS[model]()
    return plan(m, HOSTS[host], AdviseOptions(f"/models/{model}.gguf", **kw))


# host, model, options -> path, -t, taskset, -ngl, --n-cpu-moe, KV type
EXPECTED = [
    ("12700f-3060", "llama8b", {}, "gpu", "8", "0,2,4,6,8,10,12,14", "99", None, "q8_0"),
    ("12700f-3060", "qwen30b", {}, "moe", "8", "0,2,4,6,8,10,12,14", "99", "25", "q8_0"),
    ("12700f-3060", "gptoss20b", {}, "moe", "8", "0,2,4,6,8,10,12,14", "99", "3", "q8_0"),
    ("12700f-3060", "gemma12b", {"mmproj": "/models/mmproj.gguf", "mmproj_bytes": GEMMA_MMPROJ},
     "gpu", "8", "0,2,4,6,8,10,12,14", "99", None, "q8_0"),
    ("9950x3d-5090", "qwen30b", {}, "gpu", "16", "0-15", "99", None, "q8_0"),
    ("9950x3d-5090", "llama8b", {"spec": "mtp"}, "gpu", "16", "0-15", "99", None, "f16"),
    ("9950x3d-5090", "gptoss20b", {"ctx": 131072}, "gpu", "16", "0-15", "99", None, "q8_0"),
    ("5800u-apu", "llama8b", {"ctx": 8192}, "unified", "8", "0-7", "99", None, "q8_0"),
    ("strix-halo", "qwen30b", {}, "unified", "16", "0-15", "99", None, "q8_0"),
    ("strix-halo", "gemma12b", {"mmproj": "/models/mmproj.gguf", "mmproj_bytes": GEMMA_MMPROJ},
     "unified", "16", "0-15", "99", None, "q8_0"),
    ("epyc-2s", "qwen30b", {}, "cpu", "192", "0-191", None, None, "q8_0"),
]


@pytest.mark.parametrize(("host", "model", "opts", "path", "threads", "cpus", "ngl", "ncmoe", "kv"), EXPECTED,
                         ids=[f"{h}-{m}" for h, m, *_ in EXPECTED])
def test_host_model_table(host, model, opts, path, threads, cpus, ngl, ncmoe, kv) -> None:
    from tunehost.cpulist import format_cpu_list

    p = _plan(host, model, **opts)
    assert p.path == path
    assert p.fits
    assert p.value("-t") == threads and p.value("-tb") == threads
    assert format_cpu_list(p.pin_cpus) == cpus
    assert p.value("-ngl") == ngl
    assert p.value("--n-cpu-moe") == ncmoe
    assert (p.value("-ctk"), p.value("-ctv")) == (kv, kv)
    assert p.value("-fa") == "on" and p.value("--host") == "127.0.0.1" and p.value("-np") == "1"
    assert p.source == "estimate"


def test_qwen30b_on_the_3060_hand_computed_budget() -> None:
    # Qwen3-30B-A3B, -c 32768, q8_0 KV, one slot, 11800 MiB free:
    #   KV  = 48 layers * 32768 cells * (4 kv heads * 128) * 2 (K+V) * 34/32 bytes = 1,711,276,032 B (1632 MiB)
    #   compute = 4 * 512 * (151936 + 4*2048 + 3*(8*768)) + largest expert layer uploaded (N > 0)
    #   GPU = blocks - experts of the first N layers + output + KV + compute + 512 MiB headroom <= 11800 MiB
    m = MODELS["qwen30b"]()
    s = ServerSettings(n_ctx=32768, type_k="q8_0", type_v="q8_0")
    assert kv_cache_bytes(m, s) == 48 * 32768 * 512 * 2 * 34 // 32 == 1_711_276_032
    expert_layer = m.weights.routed_experts_per_layer[0]
    compute = 4 * 512 * (151936 + 4 * 2048 + 3 * 8 * 768) + expert_layer
    assert compute_buffer_bytes(m, s, weight_upload=expert_layer) == compute
    blocks = sum(m.weights.per_layer)
    p = _plan("12700f-3060", "qwen30b")
    n = int(p.value("--n-cpu-moe"))
    gpu = blocks - n * expert_layer + m.weights.output + 1_711_276_032 + compute + 512 * MiB
    assert p.budget.gpu_total == gpu <= 11800 * MiB
    assert gpu + expert_layer > 11800 * MiB  # N - 1 would not fit: N is the smallest
    # RAM: token_embd + the N layers' experts + the CPU compute buffer; no --mlock under a 64 KiB limit
    assert p.budget.ram_total == m.weights.token_embd + n * expert_layer + compute - expert_layer
    assert p.flag("--no-mmap") is not None and p.flag("--mlock") is None
    assert p.mlock_wanted and "ulimit -l unlimited" in p.mlock_fix and "LimitMEMLOCK=infinity" in p.mlock_fix


def test_llama8b_on_the_3060_hand_computed_budget() -> None:
    # Llama-3.1-8B Q4_K_M, -c 32768 q8_0: KV = 32 * 32768 * 1024 * 2 * 34/32 = 2,281,701,376 B (2176 MiB)
    # compute = 4 * 512 * (128256 + 4*4096 + 3*14336) = 384,303,104 B; weights on the GPU: all but token_embd
    # GPU = 4,920,739,232 - token_embd + 2,281,701,376 + 384,303,104 + 536,870,912 = 7.45 GiB of 11.52 free
    m = MODELS["llama8b"]()
    p = _plan("12700f-3060", "llama8b")
    assert p.budget.gpu_total == m.weights.total - m.weights.token_embd + 2_281_701_376 + 384_303_104 + 536_870_912
    assert p.budget.ram_total == m.weights.token_embd
    # 11800 MiB free - 7.45 GiB leaves > 512 MiB: CUDA graph optimization is advised, single GPU
    assert [e.name for e in p.env] == ["GGML_CUDA_GRAPH_OPT"]
    assert p.flag("--prio") is None and p.nice is None  # only where measured: `tunehost tune`
    assert p.ceiling is not None and p.ceiling.tokens_per_s == pytest.approx(
        360e9 / (m.weights.total - m.weights.token_embd))


def test_moe_keeps_shared_experts_and_never_plans_more_ram_than_available() -> None:
    tight = replace(HOSTS["12700f-3060"], ram_available=4 * GiB)
    p = plan(MODELS["qwen30b"](), tight, AdviseOptions("/m.gguf"))
    assert p.path == "moe" and not p.fits
    assert any("only 4.0 GiB is available" in w for w in p.warnings)
    assert p.flag("--no-mmap") is None


def test_dense_that_does_not_fit_shows_the_split_and_what_would_fit() -> None:
    # Gemma-3-12B on a 6 GiB card: -ngl split, ceiling of the split, the context and the file size that fit
    small = replace(HOSTS["12700f-3060"], gpus=(GpuView(0, "NVIDIA GeForce RTX 3060", "nvidia", 6 * GiB, 6 * GiB),),
                    ram_available=27 * GiB)
    p = plan(MODELS["gemma12b"](), small, AdviseOptions("/m.gguf", ram_bandwidth_gbps=50.0))
    assert p.path == "split" and p.fits
    k = int(p.value("-ngl"))
    assert 0 < k < 49
    assert any("does not fit" in w and f"-ngl {k}" in w for w in p.warnings)
    assert any("would fit at this context" in s for s in p.suggestions)
    assert p.ceiling is not None and p.ceiling.tokens_per_s is not None
    assert [m for m, _, _ in p.ceiling.parts] == ["VRAM", "RAM"]
    assert not p.env  # no graph optimization on a split


def test_cpu_only_host_has_no_gpu_flags() -> None:
    p = _plan("epyc-2s", "llama8b", ram_bandwidth_gbps=400.0)
    assert p.flag("-ngl") is None and p.value("--numa") == "distribute"
    # memlock unlimited, RAM plenty: locked; THP unknown: the weights stay mapped (--no-mmap measured slower there)
    assert p.flag("--mlock") is not None and p.flag("--no-mmap") is None
    assert any("mmap kept" in n for n in p.notes)
    with_thp = plan(MODELS["llama8b"](), replace(HOSTS["epyc-2s"], thp="always"),
                    AdviseOptions("/models/llama8b.gguf", ram_bandwidth_gbps=400.0))
    assert with_thp.flag("--no-mmap") is not None and "huge pages" in with_thp.flag("--no-mmap").reason
    split = _plan("12700f-3060", "qwen30b")  # a GPU plan with CPU-side weights: pinned host memory
    assert split.path in ("moe", "split") and "pinned host memory" in split.flag("--no-mmap").reason
    assert p.ceiling.tokens_per_s == pytest.approx(400e9 / (MODELS["llama8b"]().weights.total
                                                            - MODELS["llama8b"]().weights.token_embd))


def test_unified_memory_that_does_not_fit() -> None:
    # 16 GB laptop: the GPU may map 7 GiB of GTT + 400 MiB carve-out; Llama-8B at 32k needs 7.6 GiB
    p = _plan("5800u-apu", "llama8b")
    assert p.path == "unified" and not p.fits
    assert any("unified memory" in w for w in p.warnings)
    assert not _plan("5800u-apu", "qwen30b").fits


def test_draft_model_is_budgeted_and_flagged() -> None:
    draft = quantized(shape_fixture("llama-3.1-8b"), 1 * GiB)
    p = plan(MODELS["llama8b"](), HOSTS["9950x3d-5090"],
             AdviseOptions("/m.gguf", draft="/d.gguf", draft_model=draft))
    assert p.value("-md") == "/d.gguf" and p.value("-ngld") == "99" and p.value("-cd") == "32768"
    assert p.kv_type == "f16"
    assert any(r.label == "draft model" for r in p.budget.rows)


def test_parallel_slots_multiply_the_context() -> None:
    p = _plan("9950x3d-5090", "llama8b", ctx=8192, parallel=4)
    assert p.value("-c") == "32768" and p.value("-np") == "4"


def test_ctx_beyond_training_warns() -> None:
    p = _plan("9950x3d-5090", "qwen30b", ctx=65536)
    assert any("larger than the context" in w for w in p.warnings)


@pytest.mark.parametrize("kw", [{"ctx": 0}, {"ctx": -5}, {"parallel": 0}, {"spec": "eagle"}, {"spec": "draft"}])
def test_bad_values_are_one_clear_error(kw) -> None:
    with pytest.raises(TunehostError):
        _plan("9950x3d-5090", "llama8b", **kw)


def test_cpus_override_and_invalid_lists() -> None:
    view = HOSTS["12700f-3060"].with_cpus("0-7")
    assert view.pin_cpus == tuple(range(8)) and view.threads == 4  # 4 physical cores
    with pytest.raises(TunehostError, match="does not exist"):
        HOSTS["12700f-3060"].with_cpus("0-31")
    with pytest.raises(TunehostError, match="invalid CPU list"):
        HOSTS["12700f-3060"].with_cpus("zero")


def test_mtp_warns_when_the_gguf_has_no_mtp_heads(tmp_path) -> None:
    from tunehost.model import read_model

    from .conftest import dense_tensors, write_gguf

    m = read_model(write_gguf(tmp_path / "d.gguf", "llama", dense_tensors(2), n_layer=2))
    p = plan(m, HOSTS["9950x3d-5090"], AdviseOptions("/d.gguf", spec="mtp"))
    assert p.value("--spec-type") == "draft-mtp"
    assert any("no MTP" in w for w in p.warnings)


def test_gpu_bandwidth_table_longest_match() -> None:
    assert gpu_bandwidth("NVIDIA GeForce RTX 3060 Ti") == 448.0
    assert gpu_bandwidth("NVIDIA GeForce RTX 3060") == 360.0
    assert gpu_bandwidth("Mystery GPU") is None


def test_apply_caps_adapts_to_an_old_build() -> None:
    from tunehost.advise.flags import parse_help

    old = parse_help("-t N, --threads N   threads\n-c N  ctx\n-np N  par\n-ngl N, --n-gpu-layers N  layers\n"
                     "-fa, --flash-attn   enable flash attention\n-ctk TYPE  k\n-ctv TYPE  v\n-b N  b\n-ub N  ub\n"
                     "-tb N  tb\n--prio N  prio\n-ot, --override-tensor <pattern>=<buffer type>  ot\n"
                     "--no-mmap  x\n--mlock  y\n--host HOST  h\n-m FNAME  model\n")
    p = apply_caps(_plan("12700f-3060", "qwen30b"), old)
    assert p.flag("-fa").value is None
    assert p.flag("--n-cpu-moe") is None
    ot = p.value("-ot")
    assert ot.startswith(r"blk\.(0|1|2|") and ot.endswith(r")\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU")


def test_a_probe_is_followed_and_tunehost_s_own_estimate_is_said_beside_it() -> None:
    from tunehost.advise.plan import FitPlacement

    own = _plan("12700f-3060", "qwen30b")
    n_own = int(own.value("--n-cpu-moe"))
    # recent llama-fit-params send the experts of the LAST layers to the CPU: blk.K..blk.47
    trailing = tuple(range(48 - (n_own - 2), 48))
    probed = _plan("12700f-3060", "qwen30b", fit=FitPlacement(-1, trailing, ("x",) * len(trailing), "llama-fit-params"))
    assert probed.source == "probe"
    assert probed.value("--n-cpu-moe") == str(n_own - 2)
    assert any(f"--n-cpu-moe {n_own - 2}, tunehost's own estimate is -ngl all --n-cpu-moe {n_own}" in n
               and "2 more layers of experts in RAM" in n for n in probed.notes)
    assert any("written as --n-cpu-moe" in n for n in probed.notes)
    same = _plan("12700f-3060", "qwen30b", fit=FitPlacement(-1, tuple(range(n_own)), (), "llama-fit-params"))
    assert not any("own estimate" in n for n in same.notes)


def test_a_plan_that_does_not_fit_says_which_memory_in_typed_shortfalls() -> None:
    """`tunehost tune` refuses a plan by its shortfalls, never by matching warning text (issue 31)."""
    tight = replace(HOSTS["12700f-3060"], ram_available=4 * GiB)
    p = plan(MODELS["qwen30b"](), tight, AdviseOptions("/m.gguf"))
    assert not p.fits and [s.memory for s in p.shortfalls] == ["RAM"]
    (short,) = p.shortfalls
    assert short.free == 4 * GiB and short.needed > short.free and short.text in p.warnings
    small = replace(HOSTS["12700f-3060"], gpus=(GpuView(0, "NVIDIA GeForce RTX 3060", "nvidia", 6 * GiB, 6 * GiB),),
                    ram_available=27 * GiB)
    split = plan(MODELS["gemma12b"](), small, AdviseOptions("/m.gguf", ram_bandwidth_gbps=50.0))
    # a split that fits: its warning says the full offload "does not fit", and still no shortfall
    assert split.fits and split.shortfalls == () and any("does not fit" in w for w in split.warnings)


def test_the_host_band_is_the_one_fitted_at_the_plans_thread_count() -> None:
    """advise's band from this host's runs (host_calibration) uses runs at the plan's -t where the CPU reads weights
    (here Qwen3-30B-A3B's experts in RAM at -t 8); runs at other thread counts leave the published band, with a note
    that says how to calibrate it."""
    from tunehost.advise.host_calibration import HostPoint, fit_host

    def run(i: int, threads: int, ram_gb: float, tg: float) -> HostPoint:
        return HostPoint(i, "2026-11-27T10:00:00Z", "bench", f"m{i}", f"h{i}", "moe", True, 48,
                         int(ram_gb * 1e9), 1_000_000_000, 40.0, 360.0, "measured", tg, False, threads)

    published = _plan("12700f-3060", "qwen30b", ram_bandwidth_gbps=40.0)
    assert published.path == "moe" and published.ceiling.band.source == ""
    at_8 = _plan("12700f-3060", "qwen30b", ram_bandwidth_gbps=40.0,
                 host_calibration=fit_host([run(1, 8, 1.0, 20.0), run(2, 8, 2.0, 12.0)]))
    assert at_8.ceiling.band.source.startswith("from 2 runs of 2 models on this host")
    at_2 = _plan("12700f-3060", "qwen30b", ram_bandwidth_gbps=40.0,
                 host_calibration=fit_host([run(1, 2, 1.0, 9.0), run(2, 4, 2.0, 7.0)]))
    band = at_2.ceiling.band
    assert band.source == "" and (band.low, band.high) == (published.ceiling.band.low, published.ceiling.band.high)
    assert band.notes[-1] == ("this host's runs of this kind were at 2, 4 threads, this plan uses 8: `tunehost "
                              "bench` with -t 8 calibrates the band for it")
