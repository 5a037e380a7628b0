"""Builders for tiny but real GGUF files (written with gguf.GGUFWriter) and the real-model shape fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import gguf
import numpy as np
import pytest

from tunehost.model import ModelFacts

MODELS_DIR = Path(__file__).resolve().parents[1] / "data" / "models"

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
N_VOCAB = 32
N_EXPERT = 4
N_EXPERT_USED = 2
N_FF_EXP = 32


def shape_fixture(name: str) -> ModelFacts:
    """A real model's shape from tests/data/models/<name>.json."""
    return ModelFacts.from_json(MODELS_DIR / f"{name}.json")


def _f16(*numpy_shape: int) -> np.ndarray:
    return np.zeros(numpy_shape, dtype=np.float16)


def _f32(*numpy_shape: int) -> np.ndarray:
    return np.zeros(numpy_shape, dtype=np.float32)


def _q8_0(rows: int, cols: int) -> np.ndarray:
    # raw Q8_0 bytes: 34 bytes per 32 values; GGUFWriter turns the byte shape back into (cols, rows)
    return np.zeros((rows, cols // 32 * 34), dtype=np.uint8)


def attention_tensors(il: int) -> dict[str, np.ndarray]:
    head_dim = N_EMBD // N_HEAD
    return {
        f"blk.{il}.attn_norm.weight": _f32(N_EMBD),
        f"blk.{il}.attn_q.weight": _f16(N_EMBD, N_EMBD),
        f"blk.{il}.attn_k.weight": _f16(N_HEAD_KV * head_dim, N_EMBD),
        f"blk.{il}.attn_v.weight": _f16(N_HEAD_KV * head_dim, N_EMBD),
        f"blk.{il}.attn_output.weight": _f16(N_EMBD, N_EMBD),
        f"blk.{il}.ffn_norm.weight": _f32(N_EMBD),
    }


def dense_ffn(il: int) -> dict[str, np.ndarray]:
    return {
        f"blk.{il}.ffn_gate.weight": _f16(N_FF, N_EMBD),
        f"blk.{il}.ffn_up.weight": _f16(N_FF, N_EMBD),
        f"blk.{il}.ffn_down.weight": _f16(N_EMBD, N_FF),
    }


def routed_experts(il: int, *, biases: bool = False) -> dict[str, np.ndarray]:
    out = {
        f"blk.{il}.ffn_gate_inp.weight": _f32(N_EXPERT, N_EMBD),
        f"blk.{il}.ffn_gate_exps.weight": _f16(N_EXPERT, N_FF_EXP, N_EMBD),
        f"blk.{il}.ffn_up_exps.weight": _f16(N_EXPERT, N_FF_EXP, N_EMBD),
        f"blk.{il}.ffn_down_exps.weight": _f16(N_EXPERT, N_EMBD, N_FF_EXP),
    }
    if biases:  # gpt-oss carries per-expert biases; llama.cpp's regex moves them with the experts
        out[f"blk.{il}.ffn_gate_exps.bias"] = _f32(N_EXPERT, N_FF_EXP)
        out[f"blk.{il}.ffn_up_exps.bias"] = _f32(N_EXPERT, N_FF_EXP)
        out[f"blk.{il}.ffn_down_exps.bias"] = _f32(N_EXPERT, N_EMBD)
    return out


def shared_expert(il: int) -> dict[str, np.ndarray]:
    return {
        f"blk.{il}.ffn_gate_inp_shexp.weight": _f32(N_EMBD),
        f"blk.{il}.ffn_gate_shexp.weight": _f16(N_FF_EXP, N_EMBD),
        f"blk.{il}.ffn_up_shexp.weight": _f16(N_FF_EXP, N_EMBD),
        f"blk.{il}.ffn_down_shexp.weight": _f16(N_EMBD, N_FF_EXP),
    }


def write_gguf(
    path: Path,
    arch: str,
    tensors: dict[str, np.ndarray],
    *,
    n_layer: int,
    moe: bool = False,
    shared: bool = False,
    sliding_window: int | None = None,
    split_max_tensors: int = 0,
    vocab_tokens: int = 0,
    extra: Callable[[gguf.GGUFWriter], None] | None = None,
    name: str | None = None,
) -> Path:
    writer = gguf.GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    writer.add_name(f"tiny-{arch}" if name is None else name)
    writer.add_block_count(n_layer)
    writer.add_context_length(4096)
    writer.add_embedding_length(N_EMBD)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    if moe:
        writer.add_expert_count(N_EXPERT)
        writer.add_expert_used_count(N_EXPERT_USED)
        writer.add_expert_feed_forward_length(N_FF_EXP)
    if shared:
        writer.add_expert_shared_count(1)
        writer.add_expert_shared_feed_forward_length(N_FF_EXP)
    if sliding_window:
        writer.add_sliding_window(sliding_window)
    if vocab_tokens:
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list([f"t{i}" for i in range(vocab_tokens)])
        writer.add_token_merges([f"t{i} t{i + 1}" for i in range(vocab_tokens)])
        writer.add_token_types([1] * vocab_tokens)
    if extra:
        extra(writer)
    for name, array in tensors.items():
        if array.dtype == np.uint8:
            writer.add_tensor(name, array, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def dense_tensors(n_layer: int, *, tied: bool = False) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {"token_embd.weight": _f16(N_VOCAB, N_EMBD)}
    for il in range(n_layer):
        tensors |= attention_tensors(il) | dense_ffn(il)
    tensors["output_norm.weight"] = _f32(N_EMBD)
    if not tied:
        tensors["output.weight"] = _q8_0(N_VOCAB, N_EMBD)
    return tensors


def moe_tensors(n_layer: int, *, shared: bool = False, biases: bool = False) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {"token_embd.weight": _f16(N_VOCAB, N_EMBD)}
    for il in range(n_layer):
        tensors |= attention_tensors(il) | routed_experts(il, biases=biases)
        if shared:
            tensors |= shared_expert(il)
    tensors["output_norm.weight"] = _f32(N_EMBD)
    tensors["output.weight"] = _f16(N_VOCAB, N_EMBD)
    return tensors


@pytest.fixture
def dense_gguf(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "dense.gguf", "llama", dense_tensors(2), n_layer=2)


@pytest.fixture
def moe_gguf(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "moe.gguf", "qwen3moe", moe_tensors(3), n_layer=3, moe=True)


@pytest.fixture
def shexp_gguf(tmp_path: Path) -> Path:
    return write_gguf(
        tmp_path / "shexp.gguf", "qwen2moe", moe_tensors(2, shared=True), n_layer=2, moe=True, shared=True
    )
