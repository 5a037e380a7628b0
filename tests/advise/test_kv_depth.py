"""A token generated deep in a context reads the KV cache too: the ceiling and band at a depth (llama-bench -d, tunehost
bench --depth) add it, each layer's where llama.cpp keeps it (memory.kv_read_per_layer, ceiling.KvRead)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.advise.conftest import shape_fixture
from tunehost.advise.calibration import Measurement, judge
from tunehost.advise.ceiling import (Bandwidths, KvRead, ceiling_from_json, describe, flag_value,
                                     placement_from_flags, tg_ceiling_for)
from tunehost.advise.memory import ServerSettings, kv_read_per_layer
from tunehost.model import WeightBytes

F16 = ServerSettings()
LAYER = 100_000_000  # weight bytes a block in the shapes below (the shape fixtures carry no tensor table)


def weighted(name: str, *, experts: int = 0):
    """A real model's shape with round weight bytes: LAYER a block (of which `experts` routed), 300 MB of token_embd
    and 300 MB of output."""
    model = shape_fixture(name)
    n = model.block_count
    weights = WeightBytes(routed_experts=experts * n, other=(LAYER - experts) * n + 600_000_000,
                          token_embd=300_000_000, output=300_000_000, per_layer=(LAYER,) * n,
                          routed_experts_per_layer=(experts,) * n)
    moe = {"expert_count": 128, "expert_used_count": 8} if experts else {}
    return replace(model, weights=weights, **moe)


def test_a_full_attention_layer_reads_every_cell_up_to_the_depth():
    """Llama 3.1 8B: 8 KV heads x 128 = 1024 values a row, f16 K and V: 4096 bytes a cell and layer; 8192 deep, 32
    layers read 1 GiB a token (8 MiB a layer at q8_0's 34 bytes per 32 values: 1088 a row)."""
    model = shape_fixture("llama-3.1-8b")
    f16 = kv_read_per_layer(model, F16, 8192)
    assert f16 == (8192 * 4096,) * 32 and sum(f16) == 1 << 30
    q8 = kv_read_per_layer(model, ServerSettings(type_k="q8_0", type_v="q8_0"), 8192)
    assert set(q8) == {8192 * 2 * 1088}
    assert kv_read_per_layer(model, F16, 0) == (0,) * 32


def test_a_sliding_window_layer_reads_only_its_window():
    """Gemma 3 12B: 40 of 48 layers slide over 1024 tokens; 8 K/V heads x 256 values, f16: 8192 bytes a cell. At 8192
    deep the 8 global layers read 8192 cells, the others 1024: 872,415,232 bytes. gpt-oss-20b: half its 24 layers slide
    over 128 tokens (64-value heads: 2048 bytes a cell)."""
    gemma = kv_read_per_layer(shape_fixture("gemma-3-12b"), F16, 8192)
    assert sorted(set(gemma)) == [1024 * 8192, 8192 * 8192] and gemma.count(8192 * 8192) == 8
    assert sum(gemma) == 8 * 8192 * 8192 + 40 * 1024 * 8192 == 872_415_232
    oss = kv_read_per_layer(shape_fixture("gpt-oss-20b"), F16, 8192)
    assert sum(oss) == 12 * 128 * 2048 + 12 * 8192 * 2048
    shallow = kv_read_per_layer(shape_fixture("gemma-3-12b"), F16, 100)  # under the window every layer reads it all
    assert set(shallow) == {100 * 8192}


def test_the_kv_lives_with_its_layer_or_in_host_ram_under_nkvo():
    model = weighted("llama-3.1-8b")
    bw = Bandwidths(gpu_gbps=360.0, ram_gbps=60.0)
    kv = KvRead(8192, kv_read_per_layer(model, F16, 8192))
    flat = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "99"], gpu=True), bw)
    deep = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "99"], gpu=True), bw, kv=kv)
    assert deep.parts[0][1] == flat.parts[0][1] + (1 << 30) and deep.depth == 8192 and deep.kv_bytes == 1 << 30
    assert deep.tokens_per_s < flat.tokens_per_s and deep.band.high < flat.band.high
    # -ngl 16 of 32 (+ output): the first 17 blocks run on the CPU, their KV in host RAM
    split = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "16"], gpu=True), bw, kv=kv)
    flat_split = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "16"], gpu=True), bw)
    assert split.parts[1][1] - flat_split.parts[1][1] == 17 * (8192 * 4096)
    assert split.parts[0][1] - flat_split.parts[0][1] == 15 * (8192 * 4096)
    # -nkvo 1: every layer's KV in host RAM, read by the CPU
    nkvo = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "99"], gpu=True), bw,
                          kv=replace(kv, on_cpu=True))
    assert [m for m, _, _ in nkvo.parts] == ["VRAM", "RAM"] and nkvo.parts[1][1] == 1 << 30
    # --n-cpu-moe: attention (and its KV) stays on the GPU
    moe = weighted("qwen3-30b-a3b", experts=80_000_000)
    kv_moe = KvRead(4096, kv_read_per_layer(moe, F16, 4096))
    flat_moe = tg_ceiling_for(moe, placement_from_flags(moe, ["-ngl", "99", "-ncmoe", "24"], gpu=True), bw)
    deep_moe = tg_ceiling_for(moe, placement_from_flags(moe, ["-ngl", "99", "-ncmoe", "24"], gpu=True), bw, kv=kv_moe)
    assert deep_moe.parts[1][1] == flat_moe.parts[1][1]
    assert deep_moe.parts[0][1] - flat_moe.parts[0][1] == sum(kv_moe.per_layer)


def test_the_band_at_a_depth_is_the_one_the_calibration_judges_published_deep_runs_by():
    """The calibration judges a row measured deep in a context with its kv_gb added to the weights it reads
    (calibration.judge); the bench's band at that depth is the same band."""
    model = weighted("llama-3.1-8b")
    kv = KvRead(8192, kv_read_per_layer(model, F16, 8192))
    c = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "99"], gpu=True), Bandwidths(gpu_gbps=936.0), kv=kv)
    weights = (c.parts[0][1] - c.kv_bytes) / 1e9
    row = Measurement("x", "NVIDIA RTX 3090", "gpu", 936.0, "Llama 3.1 8B", "Q4_K", False, 32, weights, 0.0, 0.0,
                      50.0, "test", kv_gb=c.kv_bytes / 1e9)
    [verdict] = judge([row])
    assert verdict.low == pytest.approx(c.band.low, rel=1e-6) and verdict.high == pytest.approx(c.band.high, rel=1e-6)


def test_a_saved_ceiling_keeps_its_depth_and_says_it():
    model = weighted("llama-3.1-8b")
    kv = KvRead(8192, kv_read_per_layer(model, F16, 8192))
    c = tg_ceiling_for(model, placement_from_flags(model, ["-ngl", "99"], gpu=True), Bandwidths(gpu_gbps=360.0), kv=kv)
    back = ceiling_from_json(c.to_json())
    assert back == c and back.depth == 8192 and back.kv_bytes == 1 << 30
    text = describe(back, 30.0)
    assert "VRAM ceiling at depth 8192" in text and "1.07 GB of it the KV cache" in text
    # hostile or older saved data: no depth, never an exception
    for bad in ({"depth": "8192"}, {"depth": -1}, {"depth": True}, {"kv_bytes_per_token": 1e300}, {}):
        data = {**c.to_json(), "depth": None, "kv_bytes_per_token": None, **bad}
        again = ceiling_from_json(data)
        assert again is not None and again.depth == 0 and again.kv_bytes == 0


def test_flag_value_reads_llama_bench_options_as_llama_cpp_does():
    flags = ["-ngl", "99", "-ctk", "q8_0", "--cache-type-v=q4_0", "-nkvo", "1", "-ctk", "q4_0"]
    assert flag_value(flags, ("-ctk", "--cache-type-k")) == "q4_0"  # the last one wins
    assert flag_value(flags, ("-ctv", "--cache-type-v")) == "q4_0"
    assert flag_value(flags, ("-nkvo", "--no-kv-offload")) == "1"
    assert flag_value(["-ctk"], ("-ctk",)) is None and flag_value([], ("-d",)) is None


@pytest.mark.parametrize("name", ["llama-3.1-8b", "gemma-3-12b", "gpt-oss-20b"])
def test_at_a_full_context_a_token_reads_the_cache_llama_cpp_allocates(name):
    """At a depth equal to the context (a multiple of llama.cpp's 256-cell padding, one slot) a token reads every cell
    kv_layout allocates on a full-attention layer and a sliding-window layer's window: the cache sizes that
    tests/advise's memory table checks against llama.cpp's own to 0.01 MiB."""
    from tunehost.advise.memory import kv_layout

    model = shape_fixture(name)
    read = kv_read_per_layer(model, F16, 8192)
    layout = kv_layout(model, ServerSettings(n_ctx=8192))
    for il, (r, allocated) in enumerate(zip(read, layout.kv_per_layer)):
        if model.has_swa and model.swa_layers[il]:
            assert r * layout.cells_swa == allocated * model.sliding_window  # the window of the padded SWA cells
        else:
            assert r == allocated


@pytest.mark.parametrize(("flags", "on_cpu"), [
    ((), False), (("-ngl", "99"), False), (("-nkvo", "1"), True), (("-nkvo", "0"), False),
    (("--no-kv-offload=1",), True), (("--no-kv-offload=0",), False),
    (("-nkvo",), True), (("-nkvo", "-c", "4096"), True),  # llama-server's switch: last, or before the next option
    (("-nkvo", "1", "-nkvo", "0"), False)])  # the last one wins, as flag_value reads every option
def test_no_kv_offload_reads_llama_bench_and_llama_server_alike(flags, on_cpu):
    from tunehost.bench.runner import _no_kv_offload

    assert _no_kv_offload(flags) is on_cpu


@pytest.mark.parametrize("ctk", ["bogus", "q8_0\n\x1b[31m", "q4_0;rm -rf /"])
def test_a_cache_type_llama_cpp_would_refuse_is_read_as_f16(ctk):
    """-ctk/-ctv come from the user's flags: a type llama.cpp does not know (or one with a newline, an escape, a shell
    word) is never passed on; the ceiling reads the default f16 cache (llama-bench itself fails on it)."""
    from tunehost.bench.runner import _kv_read

    model = shape_fixture("llama-3.1-8b")
    kv = _kv_read(model, ("-ctk", ctk, "-ctv", "q8_0"), 8192)
    assert kv is not None and kv.per_layer == kv_read_per_layer(model, F16, 8192) and not kv.on_cpu
    assert _kv_read(model, ("-ctk", ctk), 0) is None  # no depth: no KV term at all
