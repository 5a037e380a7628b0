"""Bytes read per token, the TG ceiling it implies, and the read-bandwidth probe."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tunehost.advise.bandwidth import GB, bytes_per_token, cpu_moe_bytes_per_token, split_tg_ceiling, tg_ceiling
from tunehost.probes.bandwidth import MIN_PROBE_BYTES, measure_read_bandwidth, probe_size
from tunehost.advise.memory import MiB
from tunehost.model import read_model

from .conftest import dense_tensors, write_gguf
from .test_memory import _llama_8b_weights, _qwen3_30b_weights
from .test_model import ATTN_LAYER, OUTPUT_F16, OUTPUT_NORM, ROUTED_LAYER, ROUTER, SHARED_LAYER


def test_dense_reads_every_weight_but_the_embedding_table() -> None:
    m = _llama_8b_weights()  # 32 * 200 MiB blocks + 500 MiB output; the 500 MiB token_embd is a row lookup
    assert bytes_per_token(m) == 32 * 200 * MiB + 500 * MiB


def test_tied_output_reads_the_embedding_table(tmp_path: Path) -> None:
    m = read_model(write_gguf(tmp_path / "tied.gguf", "llama", dense_tensors(2, tied=True), n_layer=2))
    assert bytes_per_token(m) == m.weights.total


def test_moe_reads_the_used_share_of_routed_experts() -> None:
    m = _qwen3_30b_weights()
    # non-routed 48 * 40 + 600 - 300 token_embd = 2220 MiB, plus 8/128 of 17280 MiB routed = 1080 MiB
    assert bytes_per_token(m) == 3300 * MiB


def test_moe_with_shared_experts_real_file(shexp_gguf: Path) -> None:
    m = read_model(shexp_gguf)
    # 2 layers: attention + router + shared expert read fully; 2 of 4 routed experts; output; no token_embd
    expected = 2 * (ATTN_LAYER + ROUTER + SHARED_LAYER) + OUTPUT_F16 + OUTPUT_NORM + 2 * ROUTED_LAYER * 2 // 4
    assert bytes_per_token(m) == expected


def test_tg_ceiling_exact() -> None:
    assert tg_ceiling(100.0, 3300 * MiB) == 100.0 * GB / (3300 * MiB)
    assert tg_ceiling(50.0, 5 * GB) == 10.0
    with pytest.raises(ValueError):
        tg_ceiling(50.0, 0)


def test_split_ceiling_for_n_cpu_moe() -> None:
    m = _qwen3_30b_weights()
    cpu = cpu_moe_bytes_per_token(m, 20)  # 8/128 of 20 layers * 360 MiB = 450 MiB from host RAM
    assert cpu == 450 * MiB
    gpu = bytes_per_token(m) - cpu  # 2850 MiB from VRAM
    ceiling = split_tg_ceiling([(gpu, 1000.0), (cpu, 60.0)])
    assert ceiling == 1.0 / (gpu / (1000.0 * GB) + cpu / (60.0 * GB))
    assert split_tg_ceiling([(10 * GB, 100.0), (0, 1.0)]) == 10.0


def test_probe_size_bounded_by_ram() -> None:
    assert probe_size(None) == 1024 * MiB
    assert probe_size(2048 * MiB) == 512 * MiB
    assert probe_size(1 * MiB) == MIN_PROBE_BYTES


def test_probe_returns_a_positive_finite_bandwidth() -> None:
    result = measure_read_bandwidth(16 * MiB, threads=2, repeats=3)
    assert result.gbps > 0 and math.isfinite(result.gbps)
    assert len(result.samples) == 3 and result.gbps == max(result.samples)
    assert result.threads == 2 and result.n_bytes == 16 * MiB
    assert 0.0 <= result.spread < 1.0
