"""Which layers keep KV and which a recurrent state, as llama.cpp's create_memory decides it; hand-computed bytes."""

from __future__ import annotations

from tunehost.advise.memory import ServerSettings, context_detail, kv_layout, kv_type_fits
from tunehost.advise.plan import fit_disagreement
from tunehost.model import LayoutInputs, ModelFacts, RecurrentShape, memory_layout

# Qwen3-Next / Qwen3-Coder-Next: 48 layers, attention on every 4th, gated-delta-net state elsewhere
QWEN3NEXT = dict(
    architecture="qwen3next", block_count=48, embedding_length=2048, head_count=16, head_count_kv=2,
    key_length=256, value_length=256, context_length=262144, full_attention_interval=4,
    recurrent=dict(conv_kernel=4, inner_size=4096, state_size=128, group_count=16),
)


def qwen3next(**changes) -> ModelFacts:
    return ModelFacts.from_shape(**{**QWEN3NEXT, **changes})


def test_hybrid_keeps_kv_on_every_full_attention_interval_th_layer_only():
    model = qwen3next()
    assert [il for il in range(48) if model.has_kv(il)] == list(range(3, 48, 4))
    assert sum(model.recurrent_layers) == 36
    layout = kv_layout(model, ServerSettings(n_ctx=65536, type_k="q8_0", type_v="q8_0"))
    # 12 layers x (2 heads x 256) x 2 (K and V) x 65536 cells x 34/32 bytes: 0.797 GiB (the issue: 0.80)
    assert layout.kv_total == 12 * 2 * 512 * 65536 * 34 // 32


def test_recurrent_state_is_f32_conv_plus_ssm_per_sequence_and_ignores_context():
    model = qwen3next()
    n_embd_r = 3 * (4096 + 2 * 16 * 128)  # (d_conv - 1) * (d_inner + 2 * n_group * d_state)
    n_embd_s = 128 * 4096  # d_state * d_inner
    one = kv_layout(model, ServerSettings(n_ctx=4096))
    assert one.state_total == 36 * 4 * (n_embd_r + n_embd_s)
    assert kv_layout(model, ServerSettings(n_ctx=262144)).state_total == one.state_total
    four = kv_layout(model, ServerSettings(n_ctx=4096, n_parallel=4, kv_unified=True))
    assert four.state_total == 4 * one.state_total  # one state per sequence, unified or not
    assert one.total == one.kv_total + one.state_total


def test_recurrent_layers_array_wins_over_the_interval():
    flags = [il % 2 == 0 for il in range(48)]
    model = qwen3next(recurrent_layers=flags)
    assert [model.has_kv(il) for il in range(48)] == [not f for f in flags]


def test_nextn_layers_keep_no_kv_in_the_main_context():
    model = ModelFacts.from_shape(architecture="glm4moe", block_count=47, embedding_length=4096, head_count=96,
                                  head_count_kv=8, key_length=128, nextn_layers=1)
    assert not model.has_kv(46) and model.has_kv(45)
    layout = kv_layout(model, ServerSettings(n_ctx=4096))
    assert layout.kv_total == 46 * 4096 * 2 * 8 * 128 * 2


def test_granite_and_nemotron_rules():
    kv = [8 if il in (5, 15) else 0 for il in range(20)]
    granite = ModelFacts.from_shape(architecture="granitehybrid", block_count=20, embedding_length=1024,
                                    head_count=8, head_count_kv=kv, recurrent=dict(conv_kernel=4, inner_size=2048,
                                                                                     state_size=128, group_count=1))
    assert [il for il in range(20) if granite.has_kv(il)] == [5, 15]
    assert sum(granite.recurrent_layers) == 18
    pattern = "M-M*-"
    layout = memory_layout(LayoutInputs(
        "nemotron_h", 5, tuple(8 if c == "*" else 0 for c in pattern), tuple(100 if c == "-" else 0 for c in pattern),
        recurrent=RecurrentShape(conv_kernel=4, inner_size=64, state_size=16, group_count=1)))
    assert layout.kv_layers == (False, False, False, True, False)  # attention: heads and no FFN
    assert layout.recurrent_layers == (True, False, True, False, False)  # MLP-only layers keep neither


def test_pure_recurrent_model_has_no_kv_at_all():
    model = ModelFacts.from_shape(architecture="mamba2", block_count=4, embedding_length=256, head_count=1,
                                  head_count_kv=0, recurrent=dict(conv_kernel=4, inner_size=512, state_size=16,
                                                                  group_count=1))
    layout = kv_layout(model, ServerSettings(n_ctx=8192, n_parallel=2))
    assert layout.kv_total == 0
    assert layout.state_total == 4 * 2 * 4 * (3 * (512 + 2 * 16) + 16 * 512)


def test_unsized_recurrent_architecture_is_said():
    model = ModelFacts.from_shape(architecture="rwkv7", block_count=2, embedding_length=64, head_count=1,
                                  head_count_kv=1)
    assert "does not size" in (model.memory_note or "")


def test_mla_keeps_compressed_k_and_no_v():
    model = ModelFacts.from_shape(architecture="deepseek2", block_count=27, embedding_length=2048, head_count=16,
                                  head_count_kv=1, key_length=576, value_length=512, mla=True)
    layout = kv_layout(model, ServerSettings(n_ctx=32768))
    assert layout.kv_total == 27 * 32768 * 576 * 2
    assert kv_type_fits(model, "q8_0")
    assert "MLA" in context_detail(model, ServerSettings(n_ctx=32768))


def test_v_padded_to_the_widest_layer_without_flash_attention():
    model = ModelFacts.from_shape(architecture="llama", block_count=2, embedding_length=512, head_count=8,
                                  head_count_kv=[2, 4], key_length=64)
    fa = kv_layout(model, ServerSettings(n_ctx=256)).kv_total
    no_fa = kv_layout(model, ServerSettings(n_ctx=256, flash_attn=False)).kv_total
    assert no_fa - fa == 256 * (4 - 2) * 64 * 2  # layer 0's V row padded from 2 to 4 heads


def test_context_detail_names_kv_layers_and_state():
    text = context_detail(qwen3next(), ServerSettings(n_ctx=65536, type_k="q8_0", type_v="q8_0"))
    assert "KV on 12 of 48 layers" in text
    assert "recurrent state 75.4 MiB (36 layers" in text


def test_fit_disagreement_counts_expert_layers():
    assert fit_disagreement(48, (49, 40), (49, 40)) is None
    said = fit_disagreement(48, (49, 40), (49, 44))
    assert said is not None and "--n-cpu-moe 40" in said and "4 more layers of experts in RAM" in said
    assert "-ngl 30" in (fit_disagreement(48, (30, 0), (49, 0)) or "")


def test_qwen3_coder_next_64k_q8_0_on_a_12_gb_card_is_within_one_of_the_published_n_cpu_moe():
    """The issue's case: the published, llama-fit-params-derived answer is --n-cpu-moe 40 (tunehost said 44 when it
    counted KV on all 48 layers). Weights: the UD-Q4_K_XL GGUF's tensor bytes by group, spread over 48 layers."""
    from tunehost.advise.memory import fit_moe
    from tunehost.model import WeightBytes

    n, routed_total, rest = 48, 46_913_290_240, 1_864_190_976 + 163_774_464  # routed experts; attention+shared
    routed, other = routed_total // n, rest // n
    weights = WeightBytes(routed_experts=routed_total, shared_experts=163_774_464, other=1_864_190_976 + 2 * 330_612_736,
                          token_embd=330_612_736, output=330_612_736, per_layer=(routed + other,) * n,
                          routed_experts_per_layer=(routed,) * n, largest_routed_expert_layer=routed)
    model = qwen3next(weights=weights, vocab_size=151936, expert_count=512, expert_used_count=10,
                      expert_feed_forward_length=512, expert_shared_feed_forward_length=512, expert_shared_count=1)
    settings = ServerSettings(n_ctx=65536, type_k="q8_0", type_v="q8_0")
    free = int(11.5 * 1024) * 1024 * 1024  # an RTX 4070's 12282 MiB less the desktop's and driver's share
    placement = fit_moe(model, settings, free)
    assert placement.fits
    assert abs(placement.n_cpu_moe - 40) <= 1


def test_context_unset_gives_the_trained_context_to_the_unified_pool_or_to_every_slot_under_fit():
    model = ModelFacts.from_shape(architecture="llama", block_count=1, embedding_length=256, head_count=2,
                                  head_count_kv=1, key_length=128, context_length=8192)
    auto = kv_layout(model, ServerSettings(n_ctx=0, n_parallel=-1))  # llama-server's default: 4 slots, unified
    assert (auto.n_seq, auto.n_stream, auto.n_ctx, auto.n_ctx_seq) == (4, 1, 8192, 8192)
    split = kv_layout(model, ServerSettings(n_ctx=0, n_parallel=4))  # -np 4: fit gives each stream 8192 cells
    assert (split.n_stream, split.n_ctx, split.n_ctx_seq) == (4, 32768, 8192)
    no_fit = kv_layout(model, ServerSettings(n_ctx=0, n_parallel=4, fit=False))  # -fit off: slots share it
    assert (no_fit.n_ctx, no_fit.n_ctx_seq) == (8192, 2048)


def test_mtp_drafting_keeps_recurrent_state_snapshots_where_llama_cpp_rolls_back():
    qwen35 = qwen3next(architecture="qwen35moe", block_count=40)
    plain = kv_layout(qwen35, ServerSettings(n_ctx=4096)).state_total
    assert kv_layout(qwen35, ServerSettings(n_ctx=4096, n_rs_seq=3)).state_total == 4 * plain
    next_ = qwen3next()  # qwen3next has no rollback: llama_context clamps n_rs_seq to 0
    assert kv_layout(next_, ServerSettings(n_ctx=4096, n_rs_seq=3)).state_total == \
        kv_layout(next_, ServerSettings(n_ctx=4096)).state_total


def test_mtp_context_holds_kv_for_the_nextn_blocks_only():
    from tunehost.advise.memory import mtp_kv_bytes

    glm = ModelFacts.from_shape(architecture="glm4moe", block_count=47, embedding_length=4096, head_count=96,
                                head_count_kv=8, key_length=128, nextn_layers=1)
    settings = ServerSettings(n_ctx=32768)
    assert mtp_kv_bytes(glm, settings) == 32768 * 2 * 8 * 128 * 2  # one layer, K and V, f16
    assert mtp_kv_bytes(qwen3next(), settings) == 0  # no NextN blocks declared
