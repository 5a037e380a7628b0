"""read_model on tiny real GGUF files, split files, bad inputs, and the shape fixtures of real models."""

from __future__ import annotations

import time
from pathlib import Path

import gguf
import pytest

from tunehost.errors import TunehostError
from tunehost.model import ModelFacts, read_model, split_parts, swa_layout

from .conftest import (
    dense_tensors,
    moe_tensors,
    shape_fixture,
    write_gguf,
)

# Hand-computed byte sizes of the tiny models in conftest (n_embd 64, 4 heads, 2 KV heads, n_ff 128).
ATTN_LAYER = 256 + 64 * 64 * 2 + 32 * 64 * 2 + 32 * 64 * 2 + 64 * 64 * 2 + 256  # norms f32, q/k/v/o f16 = 25088
DENSE_FFN_LAYER = 3 * 128 * 64 * 2  # 49152
TOKEN_EMBD = 32 * 64 * 2  # 4096
OUTPUT_Q8_0 = 32 * (64 // 32) * 34  # 2176: 34 bytes per 32 values
OUTPUT_F16 = 32 * 64 * 2
OUTPUT_NORM = 64 * 4
ROUTER = 4 * 64 * 4  # ffn_gate_inp f32, 4 experts
ROUTED_LAYER = 3 * 4 * 32 * 64 * 2  # gate/up/down exps, 4 experts of 32x64 f16 = 49152
SHARED_LAYER = 64 * 4 + 3 * 32 * 64 * 2  # gate_inp_shexp f32 + gate/up/down shexp f16 = 12544


def test_dense_llama_shape_and_exact_bytes(dense_gguf: Path) -> None:
    m = read_model(dense_gguf)
    assert m.architecture == "llama"
    assert m.name == "tiny-llama"
    assert (m.block_count, m.embedding_length, m.head_count) == (2, 64, 4)
    assert m.head_count_kv == (2, 2)
    assert (m.key_length, m.value_length) == (16, 16)  # embedding_length / head_count when not declared
    assert m.context_length == 4096
    assert m.vocab_size == 32  # from token_embd's shape
    assert m.feed_forward_length == 128
    assert not m.is_moe and not m.has_swa
    assert m.file_type == "MOSTLY_F16"
    w = m.weights
    assert w.routed_experts == 0 and w.shared_experts == 0
    assert w.per_layer == (ATTN_LAYER + DENSE_FFN_LAYER,) * 2
    assert w.token_embd == TOKEN_EMBD
    assert w.output == OUTPUT_Q8_0 + OUTPUT_NORM
    assert not w.output_tied
    assert w.total == 2 * (ATTN_LAYER + DENSE_FFN_LAYER) + TOKEN_EMBD + OUTPUT_Q8_0 + OUTPUT_NORM
    assert m.file_size == dense_gguf.stat().st_size
    assert m.parts == (str(dense_gguf),)


def test_dense_param_count_and_quant_histogram(dense_gguf: Path) -> None:
    m = read_model(dense_gguf)
    per_layer_params = 64 + 64 * 64 + 32 * 64 * 2 + 64 * 64 + 64 + 3 * 128 * 64
    assert m.n_params == 2 * per_layer_params + 32 * 64 + 64 + 32 * 64
    hist = {q.ggml_type: (q.n_tensors, q.n_bytes) for q in m.quant_histogram}
    assert hist["Q8_0"] == (1, OUTPUT_Q8_0)
    assert hist["F32"] == (5, 5 * 256)  # 2 x (attn_norm, ffn_norm) + output_norm
    assert hist["F16"][0] == 1 + 2 * 7
    assert m.quant_histogram[0].ggml_type == "F16"  # largest share first


def test_matches_stock_gguf_reader(moe_gguf: Path) -> None:
    # the fast header reader must agree with llama.cpp's GGUFReader tensor for tensor
    stock = gguf.GGUFReader(moe_gguf)
    m = read_model(moe_gguf)
    assert [(t.name, t.tensor_type.name, int(t.n_bytes)) for t in stock.tensors] == [
        (t.name, t.ggml_type, t.n_bytes) for t in m.tensors
    ]


def test_moe_qwen3_expert_bytes_are_exact(moe_gguf: Path) -> None:
    m = read_model(moe_gguf)
    assert m.is_moe
    assert (m.expert_count, m.expert_used_count, m.expert_shared_count) == (4, 2, 0)
    assert m.expert_feed_forward_length == 32
    w = m.weights
    assert w.routed_experts == 3 * ROUTED_LAYER
    assert w.routed_experts_per_layer == (ROUTED_LAYER,) * 3
    assert w.largest_routed_expert_layer == ROUTED_LAYER
    assert w.shared_experts == 0
    assert w.other == 3 * (ATTN_LAYER + ROUTER) + TOKEN_EMBD + OUTPUT_F16 + OUTPUT_NORM
    assert w.non_routed == w.other


def test_shared_experts_counted_apart(shexp_gguf: Path) -> None:
    m = read_model(shexp_gguf)
    assert m.expert_shared_count == 1
    assert m.expert_shared_feed_forward_length == 32
    w = m.weights
    assert w.shared_experts == 2 * SHARED_LAYER
    assert w.routed_experts == 2 * ROUTED_LAYER
    assert w.other == 2 * (ATTN_LAYER + ROUTER) + TOKEN_EMBD + OUTPUT_F16 + OUTPUT_NORM
    assert w.per_layer == (ATTN_LAYER + ROUTER + ROUTED_LAYER + SHARED_LAYER,) * 2


def test_expert_biases_move_with_the_experts(tmp_path: Path) -> None:
    # gpt-oss: blk.N.ffn_*_exps.bias match llama.cpp's LLM_FFN_EXPS_REGEX, so --n-cpu-moe moves them too
    path = write_gguf(tmp_path / "oss.gguf", "gpt-oss", moe_tensors(2, biases=True), n_layer=2, moe=True,
                      sliding_window=128)
    m = read_model(path)
    assert m.weights.routed_experts_per_layer == (ROUTED_LAYER + 512 + 512 + 1024,) * 2
    assert m.sliding_window == 128
    assert m.swa_layers == (True, False)  # gpt-oss default period 2: even layers SWA


def test_tied_output_is_flagged(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "tied.gguf", "llama", dense_tensors(2, tied=True), n_layer=2)
    w = read_model(path).weights
    assert w.output_tied
    assert w.output == OUTPUT_NORM
    assert w.output_device_bytes == OUTPUT_NORM + TOKEN_EMBD


def test_per_layer_head_count_kv_array(tmp_path: Path) -> None:
    def per_layer_kv(writer: gguf.GGUFWriter) -> None:
        writer.add_key_length(16)
        writer.add_value_length(16)
        writer.add_array("llama.attention.head_count_kv", [2, 0, 1])  # hybrid models: 0 = no attention

    path = write_gguf(tmp_path / "varkv.gguf", "llama", dense_tensors(3), n_layer=3, extra=per_layer_kv)
    m = read_model(path)
    assert m.head_count_kv == (2, 0, 1)
    assert (m.key_length, m.value_length) == (16, 16)


def test_sliding_window_pattern_key_wins(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "g3.gguf", "gemma3", dense_tensors(4), n_layer=4, sliding_window=512,
                      extra=lambda w: w.add_sliding_window_pattern([True, False, True, True]))
    m = read_model(path)
    assert m.swa_layers == (True, False, True, True)
    assert m.swa_note is None


def test_unknown_swa_arch_counts_full_with_a_note(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "q2.gguf", "qwen2", dense_tensors(2), n_layer=2, sliding_window=4096)
    m = read_model(path)
    assert m.swa_layers == (False, False)
    assert m.swa_note and "full attention" in m.swa_note


def test_big_vocabulary_reads_fast(tmp_path: Path) -> None:
    # the stock reader decodes every tokenizer entry (~10 s for 150k tokens + merges); ours steps over them
    path = write_gguf(tmp_path / "vocab.gguf", "llama", dense_tensors(1), n_layer=1, vocab_tokens=100_000)
    start = time.perf_counter()
    m = read_model(path)
    assert time.perf_counter() - start < 2.0
    assert m.vocab_size == 32  # token_embd beats the tokenizer array


# ---- split GGUFs ---------------------------------------------------------------------------------------------


def _split(tmp_path: Path) -> list[Path]:
    write_gguf(tmp_path / "big.gguf", "qwen3moe", moe_tensors(3), n_layer=3, moe=True, split_max_tensors=12)
    parts = sorted(tmp_path.glob("big-*-of-*.gguf"))
    assert len(parts) >= 3
    return parts


def test_split_from_any_part_reads_the_whole_model(tmp_path: Path) -> None:
    parts = _split(tmp_path)
    whole = write_gguf(tmp_path / "whole.gguf", "qwen3moe", moe_tensors(3), n_layer=3, moe=True)
    expected = read_model(whole)
    for part in (parts[0], parts[1], parts[-1]):
        m = read_model(part)
        assert m.parts == tuple(str(p) for p in parts)
        assert m.block_count == 3 and m.expert_count == 4  # metadata from part 1
        assert m.weights == expected.weights
        assert [t.name for t in m.tensors] == [t.name for t in expected.tensors]
        assert m.file_size == sum(p.stat().st_size for p in parts)


def test_split_missing_part_is_one_clear_error(tmp_path: Path) -> None:
    parts = _split(tmp_path)
    parts[1].unlink()
    with pytest.raises(TunehostError, match=f"split part {parts[1].name} is missing"):
        read_model(parts[0])


def test_split_parts_naming() -> None:
    assert split_parts(Path("/m/x-00002-of-00003.gguf")) == tuple(
        Path(f"/m/x-0000{i}-of-00003.gguf") for i in (1, 2, 3)
    )
    assert split_parts(Path("/m/plain.gguf")) == (Path("/m/plain.gguf"),)


# ---- bad inputs ---------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TunehostError, match="no such file"):
        read_model(tmp_path / "nope.gguf")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(TunehostError, match="is a directory"):
        read_model(tmp_path)


def test_zero_filled_download(tmp_path: Path) -> None:
    path = tmp_path / "zeros.gguf"
    path.write_bytes(bytes(4096))
    with pytest.raises(TunehostError, match=r"not a GGUF file \(magic 00000000"):
        read_model(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    with pytest.raises(TunehostError, match="not a GGUF file"):
        read_model(path)


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_text("<html>404 Not Found</html>\n")
    with pytest.raises(TunehostError, match="not a GGUF file"):
        read_model(path)


def test_wrong_magic_old_ggml(tmp_path: Path) -> None:
    path = tmp_path / "old.bin"
    path.write_bytes(b"tjgg" + bytes(64))  # GGJT, the pre-GGUF format
    with pytest.raises(TunehostError, match="magic 746a6767"):
        read_model(path)


def test_unsupported_version(tmp_path: Path) -> None:
    path = tmp_path / "v1.gguf"
    path.write_bytes(b"GGUF" + (1).to_bytes(4, "little") + bytes(64))
    with pytest.raises(TunehostError, match="unsupported GGUF version 1"):
        read_model(path)


@pytest.mark.parametrize("keep", [6, 40, 300, 0.5, 0.97])
def test_truncated_file(dense_gguf: Path, tmp_path: Path, keep: float) -> None:
    data = dense_gguf.read_bytes()
    cut = int(keep * len(data)) if isinstance(keep, float) else keep
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:cut])
    with pytest.raises(TunehostError, match="truncated"):
        read_model(path)


def test_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + bytes(5))
    with pytest.raises(TunehostError) as info:
        read_model(path)
    assert "\n" not in str(info.value)


def test_mmproj_like_file_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "mmproj.gguf"
    writer = gguf.GGUFWriter(path, "clip")
    writer.add_tensor("v.patch_embd.weight", dense_tensors(1)["token_embd.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(TunehostError, match="not a language model"):
        read_model(path)


# ---- shapes of real models ------------------------------------------------------------------------------------


def test_fixture_shapes_load() -> None:
    qwen = shape_fixture("qwen3-30b-a3b")
    assert (qwen.block_count, qwen.head_count, qwen.head_count_kv[0], qwen.key_length) == (48, 32, 4, 128)
    assert (qwen.expert_count, qwen.expert_used_count, qwen.context_length) == (128, 8, 40960)
    llama = shape_fixture("llama-3.1-8b")
    assert (llama.block_count, llama.head_count_kv, llama.context_length) == (32, (8,) * 32, 131072)


def test_gpt_oss_alternating_sliding_window() -> None:
    oss = shape_fixture("gpt-oss-20b")
    assert oss.sliding_window == 128
    assert oss.swa_layers == (True, False) * 12


def test_gemma3_five_local_one_global() -> None:
    g = shape_fixture("gemma-3-12b")
    assert g.sliding_window == 1024
    assert g.swa_layers.count(False) == 8
    assert [il for il, swa in enumerate(g.swa_layers) if not swa] == [5, 11, 17, 23, 29, 35, 41, 47]


def test_swa_layout_rules() -> None:
    assert swa_layout("gemma3", 6, None, None) == ((False,) * 6, None)
    assert swa_layout("gemma2", 4, 4096, None)[0] == (True, False, True, False)
    assert swa_layout("anything", 3, 64, 3)[0] == (True, True, False)  # explicit period
    assert swa_layout("anything", 2, 64, 0)[0] == (True, True)  # period 0: every layer SWA


def test_from_shape_defaults_head_dim() -> None:
    m = ModelFacts.from_shape(architecture="llama", block_count=2, embedding_length=4096, head_count=32,
                              head_count_kv=8)
    assert (m.key_length, m.value_length, m.head_count_kv) == (128, 128, (8, 8))


def test_renamed_split_part_is_refused(tmp_path: Path) -> None:
    parts = _split(tmp_path)
    renamed = tmp_path / "model.gguf"
    parts[0].rename(renamed)
    with pytest.raises(TunehostError, match="part 1 of a .*-part split model"):
        read_model(renamed)
