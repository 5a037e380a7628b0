"""KV cache, compute buffer and placement arithmetic, checked against hand-computed numbers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tunehost.advise.memory import (
    HEADROOM_MMPROJ,
    HEADROOM_TEXT,
    MiB,
    ServerSettings,
    compute_buffer_bytes,
    fit_layers,
    fit_moe,
    kv_cache_bytes,
    kv_layout,
    kv_row_bytes,
    layer_budget,
    moe_budget,
)
from tunehost.model import ModelFacts, WeightBytes, read_model

from .conftest import dense_tensors, shape_fixture, write_gguf
from .test_model import (
    ATTN_LAYER,
    DENSE_FFN_LAYER,
    OUTPUT_NORM,
    OUTPUT_Q8_0,
    ROUTED_LAYER,
    TOKEN_EMBD,
)

GiB = 1024 * MiB


# ---- KV cache -------------------------------------------------------------------------------------------------


def test_llama_8b_ctx_8192_f16_is_one_gib() -> None:
    # 32 layers * 8192 cells * 8 kv heads * 128 dims * 2 (K+V) * 2 bytes
    assert kv_cache_bytes(shape_fixture("llama-3.1-8b"), ServerSettings(n_ctx=8192)) == 1 * GiB


@pytest.mark.parametrize(
    ("cache_type", "expected"),
    [
        ("f16", 32 * 8192 * 2 * 1024 * 2),
        ("bf16", 32 * 8192 * 2 * 1024 * 2),
        ("f32", 32 * 8192 * 2 * 1024 * 4),
        ("q8_0", 32 * 8192 * 2 * (1024 // 32 * 34)),  # 570,425,344
        ("q4_0", 32 * 8192 * 2 * (1024 // 32 * 18)),  # 301,989,888
        ("q5_1", 32 * 8192 * 2 * (1024 // 32 * 24)),
        ("iq4_nl", 32 * 8192 * 2 * (1024 // 32 * 18)),
    ],
)
def test_kv_cache_types(cache_type: str, expected: int) -> None:
    s = ServerSettings(n_ctx=8192, type_k=cache_type, type_v=cache_type)
    assert kv_cache_bytes(shape_fixture("llama-3.1-8b"), s) == expected


def test_mixed_k_and_v_types() -> None:
    s = ServerSettings(n_ctx=8192, type_k="q8_0", type_v="f16")
    assert kv_cache_bytes(shape_fixture("llama-3.1-8b"), s) == 32 * 8192 * (1088 + 2048)


def test_kv_row_bytes_rules() -> None:
    assert kv_row_bytes("Q8_0", 64) == 68
    with pytest.raises(ValueError, match="multiple of 32"):
        kv_row_bytes("q4_0", 48)
    with pytest.raises(ValueError, match="unknown KV cache type"):
        kv_row_bytes("q3_k", 256)


def test_ctx_zero_means_trained_context() -> None:
    assert kv_cache_bytes(shape_fixture("llama-3.1-8b"), ServerSettings(n_ctx=0)) == 16 * GiB


def test_ctx_is_padded_to_256() -> None:
    layout = kv_layout(shape_fixture("llama-3.1-8b"), ServerSettings(n_ctx=5000))
    assert layout.n_ctx == 5120
    assert layout.total == 32 * 5120 * 4096


def test_slots_split_the_total_context() -> None:
    llama = shape_fixture("llama-3.1-8b")
    split = kv_layout(llama, ServerSettings(n_ctx=8192, n_parallel=4))
    assert (split.n_ctx_seq, split.n_stream, split.total) == (2048, 4, 1 * GiB)
    unified = kv_layout(llama, ServerSettings(n_ctx=8192, n_parallel=4, kv_unified=True))
    assert (unified.n_ctx_seq, unified.n_stream, unified.total) == (8192, 1, 1 * GiB)


def test_uneven_slot_split_rounds_each_slot_up() -> None:
    # 8192 / 3 = 2730 -> padded to 2816 per slot; 3 streams * 2816 = 8448 cells
    layout = kv_layout(shape_fixture("llama-3.1-8b"), ServerSettings(n_ctx=8192, n_parallel=3))
    assert (layout.n_ctx_seq, layout.n_ctx) == (2816, 8448)
    assert layout.total == 32 * 8448 * 4096


def test_server_auto_slots_is_four_unified() -> None:
    assert ServerSettings(n_parallel=-1).slots() == (4, True)
    with pytest.raises(ValueError):
        ServerSettings(n_parallel=0).slots()


def test_qwen3_30b_trained_context() -> None:
    # 48 layers * 40960 cells * 4 kv heads * 128 * 2 (K+V) * 2 bytes = 3.75 GiB
    assert kv_cache_bytes(shape_fixture("qwen3-30b-a3b"), ServerSettings()) == 48 * 40960 * 2048 == 3840 * MiB


def test_gpt_oss_swa_layers_keep_only_the_window() -> None:
    oss = shape_fixture("gpt-oss-20b")
    per_cell = 8 * 64 * 2 * 2  # one layer, one cell, K+V f16
    full = 12 * 131072 * per_cell  # 3 GiB over the 12 full-attention layers
    # SWA cells: pad(min(131072, 128 + 512 ubatch), 256) = 768
    assert kv_cache_bytes(oss, ServerSettings(n_ctx=131072)) == full + 12 * 768 * per_cell == 3_240_099_840
    # -np auto (4 slots, unified): the window counts once per sequence: pad(128 * 4 + 512) = 1024
    assert kv_cache_bytes(oss, ServerSettings(n_ctx=131072, n_parallel=-1)) == full + 12 * 1024 * per_cell
    # 4 separate slots: 4 streams of 32768 cells, SWA pad(128 + 512) = 768 per stream
    split = kv_layout(oss, ServerSettings(n_ctx=131072, n_parallel=4))
    assert (split.cells_full, split.cells_swa, split.n_stream) == (32768, 768, 4)
    assert split.total == full + 12 * 4 * 768 * per_cell
    # --swa-full: every layer keeps the whole context
    assert kv_cache_bytes(oss, ServerSettings(n_ctx=131072, swa_full=True)) == 6 * GiB


def test_gemma3_12b_swa() -> None:
    g = shape_fixture("gemma-3-12b")
    per_cell = 8 * 256 * 2 * 2  # 8 KiB per layer per cell
    # 8 global layers at 32768 cells = 2 GiB; 40 local layers at pad(1024 + 512) = 1536 cells
    assert kv_cache_bytes(g, ServerSettings(n_ctx=32768)) == 8 * 32768 * per_cell + 40 * 1536 * per_cell
    assert kv_cache_bytes(g, ServerSettings(n_ctx=32768)) == 2_650_800_128
    # a small context caps the SWA cache at the context itself
    assert kv_layout(g, ServerSettings(n_ctx=1024)).cells_swa == 1024
    # a bigger ubatch grows the SWA cache: pad(1024 + 2048) = 3072
    assert kv_layout(g, ServerSettings(n_ctx=32768, n_ubatch=2048)).cells_swa == 3072


def test_layers_without_kv_heads_cost_nothing() -> None:
    m = ModelFacts.from_shape(architecture="hybrid", block_count=3, embedding_length=1024, head_count=8,
                              head_count_kv=[2, 0, 2], key_length=128, value_length=128)
    layout = kv_layout(m, ServerSettings(n_ctx=1024))
    assert layout.bytes_per_layer == (1024 * 2 * 128 * 2 * 2, 0, 1024 * 2 * 128 * 2 * 2)


def test_mla_style_key_and_value_dims_differ() -> None:
    # deepseek2 MLA GGUFs store 1 kv head with key 576 (512 latent + 64 rope), value 512
    m = ModelFacts.from_shape(architecture="deepseek2", block_count=2, embedding_length=7168, head_count=128,
                              head_count_kv=1, key_length=576, value_length=512)
    assert kv_cache_bytes(m, ServerSettings(n_ctx=4096)) == 2 * 4096 * (576 + 512) * 2


# ---- compute buffer and headroom ------------------------------------------------------------------------------


def test_compute_buffer_formula_llama() -> None:
    llama = shape_fixture("llama-3.1-8b")
    # 4 bytes * 512 ubatch * (128256 vocab + 4 * 4096 + 3 * 14336) = 366.5 MiB
    assert compute_buffer_bytes(llama, ServerSettings(n_ctx=8192)) == 384_303_104
    # without flash attention add the f32 KQ scores: 4 * 512 * 8192 * 32 heads
    no_fa = compute_buffer_bytes(llama, ServerSettings(n_ctx=8192, flash_attn=False))
    assert no_fa == 384_303_104 + 4 * 512 * 8192 * 32


def test_compute_buffer_formula_moe_uses_active_experts() -> None:
    qwen = shape_fixture("qwen3-30b-a3b")
    # 4 * 512 * (151936 + 4 * 2048 + 3 * 8 used * 768) = 348.75 MiB
    assert compute_buffer_bytes(qwen, ServerSettings(n_ctx=32768)) == 4 * 512 * (151936 + 8192 + 3 * 8 * 768)


def test_headroom() -> None:
    llama = _llama_8b_weights()
    assert layer_budget(llama, ServerSettings(n_ctx=8192), 33).headroom == HEADROOM_TEXT == 512 * MiB
    assert layer_budget(llama, ServerSettings(n_ctx=8192, mmproj=True), 33).headroom == HEADROOM_MMPROJ == 2048 * MiB


# ---- -ngl placement -------------------------------------------------------------------------------------------


def test_ngl_offloads_the_output_layer_first(dense_gguf: Path) -> None:
    m = read_model(dense_gguf)
    s = ServerSettings(n_ctx=256)
    layer = ATTN_LAYER + DENSE_FFN_LAYER
    kv_layer = 256 * 2 * 16 * 2 * 2  # 256 cells, 2 kv heads * 16 dims, K+V, f16
    one = layer_budget(m, s, 1)
    assert (one.weights_gpu, one.kv_gpu) == (OUTPUT_Q8_0 + OUTPUT_NORM, 0)
    assert one.weights_cpu == 2 * layer + TOKEN_EMBD
    two = layer_budget(m, s, 2)
    assert (two.weights_gpu, two.kv_gpu, two.kv_cpu) == (OUTPUT_Q8_0 + OUTPUT_NORM + layer, kv_layer, kv_layer)
    full = layer_budget(m, s, 3)
    assert (full.weights_gpu, full.weights_cpu) == (OUTPUT_Q8_0 + OUTPUT_NORM + 2 * layer, TOKEN_EMBD)
    assert (full.kv_gpu, full.kv_cpu, full.compute_cpu) == (2 * kv_layer, 0, 0)
    assert layer_budget(m, s, 99) == full
    cpu = layer_budget(m, s, 0)
    assert (cpu.gpu_total, cpu.weights_cpu, cpu.kv_cpu) == (0, m.weights.total, 2 * kv_layer)


def test_tied_output_puts_a_copy_of_token_embd_on_the_gpu(tmp_path: Path) -> None:
    m = read_model(write_gguf(tmp_path / "tied.gguf", "llama", dense_tensors(2, tied=True), n_layer=2))
    b = layer_budget(m, ServerSettings(n_ctx=256), 3)
    assert b.weights_gpu == 2 * (ATTN_LAYER + DENSE_FFN_LAYER) + OUTPUT_NORM + TOKEN_EMBD
    assert b.weights_cpu == TOKEN_EMBD


def _llama_8b_weights() -> ModelFacts:
    """Llama-3.1-8B's shape with round weights: 200 MiB per block, 500 MiB embeddings, 500 MiB output."""
    weights = WeightBytes(other=32 * 200 * MiB + 1000 * MiB, token_embd=500 * MiB, output=500 * MiB,
                          per_layer=(200 * MiB,) * 32, routed_experts_per_layer=(0,) * 32)
    base = shape_fixture("llama-3.1-8b")
    return replace(base, weights=weights)


def test_fit_layers_best_split() -> None:
    m = _llama_8b_weights()
    s = ServerSettings(n_ctx=8192)  # KV 1 GiB = 32 MiB per layer; compute 366.5 MiB (+200 MiB upload when split)
    # full offload: 500 + 32 * (200 + 32) + 366.5 + 512 = 8802.5 MiB
    assert layer_budget(m, s, 33).gpu_total == int(8802.5 * MiB)
    assert fit_layers(m, s, 9000 * MiB).gpu_layers == 33
    # split: 500 output + (k - 1) * 232 + 566.5 compute + 512 headroom <= 4096  ->  k = 11
    placement = fit_layers(m, s, 4096 * MiB)
    assert (placement.gpu_layers, placement.fits) == (11, True)
    assert placement.budget.gpu_total == int((1578.5 + 10 * 232) * MiB)
    assert layer_budget(m, s, 12).gpu_total > 4096 * MiB
    # too little VRAM for even the output layer: run on the CPU
    assert fit_layers(m, s, 1000 * MiB).gpu_layers == 0


# ---- --n-cpu-moe placement ------------------------------------------------------------------------------------


def _qwen3_30b_weights() -> ModelFacts:
    """Qwen3-30B-A3B's shape; 400 MiB per block of which 360 MiB routed experts; 300 MiB embeddings and output."""
    weights = WeightBytes(routed_experts=48 * 360 * MiB, other=48 * 40 * MiB + 600 * MiB, token_embd=300 * MiB,
                          output=300 * MiB, per_layer=(400 * MiB,) * 48, routed_experts_per_layer=(360 * MiB,) * 48,
                          largest_routed_expert_layer=360 * MiB)
    base = shape_fixture("qwen3-30b-a3b")
    return replace(base, weights=weights)


def test_fit_moe_hand_computed() -> None:
    m = _qwen3_30b_weights()
    s = ServerSettings(n_ctx=32768)  # KV 48 * 32768 * 2048 = 3 GiB
    # GPU need = 19200 blocks + 300 output + 3072 KV + 512 headroom + compute - 360 N (MiB)
    #   compute = 348.75 MiB, plus one layer's experts (360 MiB) uploaded for prompt processing once N > 0
    assert moe_budget(m, s, 0).gpu_total == int(23432.75 * MiB)
    placement = fit_moe(m, s, 16 * GiB)  # 23792.75 - 360 N <= 16384  ->  N = 21
    assert (placement.n_cpu_moe, placement.gpu_layers, placement.fits) == (21, 49, True)
    assert placement.budget.gpu_total == int((23792.75 - 21 * 360) * MiB)
    assert placement.budget.weights_cpu == 300 * MiB + 21 * 360 * MiB
    assert not moe_budget(m, s, 20).fits_gpu(16 * GiB)
    assert fit_moe(m, s, 24 * GiB).n_cpu_moe == 0


def test_fit_moe_reports_when_nothing_fits() -> None:
    placement = fit_moe(_qwen3_30b_weights(), ServerSettings(n_ctx=32768), 4 * GiB)
    assert (placement.n_cpu_moe, placement.fits) == (48, False)


def test_fit_moe_refuses_dense_models() -> None:
    with pytest.raises(ValueError, match="no experts"):
        fit_moe(_llama_8b_weights(), ServerSettings(n_ctx=8192), 8 * GiB)


def test_n_cpu_moe_moves_exactly_the_first_layers_experts(moe_gguf: Path) -> None:
    m = read_model(moe_gguf)
    s = ServerSettings(n_ctx=256)
    none = moe_budget(m, s, 0)
    one = moe_budget(m, s, 1)
    assert none.weights_cpu == TOKEN_EMBD
    assert one.weights_cpu == TOKEN_EMBD + ROUTED_LAYER
    assert none.weights_gpu - one.weights_gpu == ROUTED_LAYER
    assert none.weights_gpu + none.weights_cpu == m.weights.total
    assert moe_budget(m, s, 3).weights_cpu == TOKEN_EMBD + 3 * ROUTED_LAYER
    assert one.kv_gpu == kv_cache_bytes(m, s) and one.kv_cpu == 0
