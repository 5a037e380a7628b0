"""tunehost's KV cache and recurrent state against llama.cpp's own figures.

tests/advise/data/llama_memory_table.json holds real model shapes (from each model's published config) and, per
case, what llama.cpp b11312's llama-fit-params logged for it ("llama_kv_cache: size = ...", "llama_memory_recurrent:
size = ..."), captured by scripts/llama_memory_check.py. Each shape is written here as a header-only GGUF and read
through read_model, so the metadata parsing is tested too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import load_script

CHECK = load_script("llama_memory_check")
TABLE = json.loads(CHECK.TABLE.read_text())


def _cases(keep) -> list:
    """(entry, case) parameters of the table's cases that `keep` accepts, named <model>-<case index>."""
    return [pytest.param(entry, case, id=f"{entry['name']}-{i}")
            for entry in TABLE for i, case in enumerate(entry["cases"]) if keep(case)]


CASES = _cases(lambda case: case.get("llama_cpp"))


def test_table_covers_the_architectures_the_issue_names():
    measured = {entry["arch"] for entry in TABLE if any(c.get("llama_cpp") for c in entry["cases"])}
    assert len(CASES) >= 12
    assert {"llama", "gemma3", "gpt-oss", "qwen3moe", "qwen3next", "deepseek2", "glm4moe"} <= measured


@pytest.fixture(scope="module")
def header_gguf(tmp_path_factory):
    """One header-only GGUF per model shape, written once for all its cases."""
    written: dict[str, Path] = {}

    def get(entry: dict) -> Path:
        if entry["name"] not in written:
            path = tmp_path_factory.mktemp("shapes") / f"{entry['name']}.gguf"
            written[entry["name"]] = CHECK.write_gguf(path, entry["arch"], entry["metadata"])
        return written[entry["name"]]

    return get


@pytest.mark.parametrize(("entry", "case"), CASES)
def test_kv_and_state_within_five_percent_of_llama_cpp(entry: dict, case: dict, header_gguf):
    ours = CHECK.tunehost_figures(header_gguf(entry), case)
    theirs = case["llama_cpp"]
    assert CHECK.within(ours["kv_mib"], theirs["kv_mib"]), (ours["kv_mib"], theirs["kv_mib"])
    assert CHECK.within(ours["state_mib"], theirs["state_mib"]), (ours["state_mib"], theirs["state_mib"])


def test_within_is_relative_and_tolerates_print_precision():
    assert CHECK.within(104.9, 100.0)
    assert not CHECK.within(105.6, 100.0)
    assert not CHECK.within(94.0, 100.0)
    assert CHECK.within(0.0, 0.0)
    assert not CHECK.within(3.0, 0.0)


def _discovered(name: str, llama_bench, tmp_path) -> tuple[dict, dict, list[int]]:
    """The table entry `name`, the tensor table llama-fit-params (beside llama-bench) leads discovery to, and the
    shape's recurrent layers."""
    from tunehost.model import read_model

    fit = llama_bench.with_name("llama-fit-params")
    if not fit.is_file():
        pytest.skip(f"no llama-fit-params beside {llama_bench}")
    [entry] = [e for e in TABLE if e["name"] == name]
    _, tensors = CHECK.discover(fit, entry, tmp_path, lambda text: None)
    facts = read_model(CHECK.write_gguf(tmp_path / "header.gguf", entry["arch"], entry["metadata"]))
    return entry, tensors, [il for il in range(facts.block_count) if facts.recurrent_layers[il]]


def test_the_gated_deltanet_layers_get_the_tensors_their_graph_uses(llama_bench, tmp_path):
    """llama.cpp loads Qwen3.5's attn_qkv/attn_gate as optional, so discovery never heard of them, and the shape
    loaded but crashed llama-bench (a NULL tensor in the graph: tests/data/devbox-tg/README.md). The table seeds them
    on the recurrent layers; llama.cpp's "wrong shape" complaints give their real shapes."""
    entry, tensors, recurrent = _discovered("qwen3.5-35b-a3b", llama_bench, tmp_path)
    assert entry["seed_recurrent"] == ["attn_qkv.weight", "attn_gate.weight"]
    assert len(recurrent) == 30  # 3 of every 4 of the 40 layers
    assert {n for n in tensors if n.endswith(".attn_qkv.weight")} == {f"blk.{il}.attn_qkv.weight" for il in recurrent}
    assert {tensors[f"blk.{il}.attn_qkv.weight"] for il in recurrent} == {(2048, 8192)}  # q, k (16 x 128), v (32 x 128)
    assert {tensors[f"blk.{il}.attn_gate.weight"] for il in recurrent} == {(2048, 4096)}


def test_the_mamba2_layers_of_nemotron_h_get_their_conv_bias(llama_bench, tmp_path):
    """nemotron_h (and granitehybrid) load ssm_conv1d.bias as optional; mamba-base.cpp's graph adds it to every
    Mamba-2 layer all the same, so a shape without it crashed llama-bench (tests/data/devbox-tg/README.md)."""
    _, tensors, mamba = _discovered("nemotron-nano-9b-v2", llama_bench, tmp_path)
    assert {n for n in tensors if n.endswith(".ssm_conv1d.bias")} == {f"blk.{il}.ssm_conv1d.bias" for il in mamba}
    # d_inner 10240 + 2 x 8 groups x 128 state: the conv's channels
    assert {tensors[f"blk.{il}.ssm_conv1d.bias"] for il in mamba} == {(10240 + 2 * 8 * 128,)}


COMPUTE_CASES = _cases(lambda case: (case.get("llama_cpp") or {}).get("compute_mib") is not None)


def test_the_hybrids_have_compute_figures_now():
    """The graph reserve crashed on the hybrids' shapes (optional tensors the graph uses were missing), so their
    compute buffers were never captured; with seed_recurrent they are (2026-11-27)."""
    archs = {entry["arch"] for entry, _ in (p.values for p in COMPUTE_CASES)}
    assert {"qwen3next", "qwen35moe", "nemotron_h", "granitehybrid"} <= archs and len(COMPUTE_CASES) >= 34


@pytest.mark.parametrize(("entry", "case"), COMPUTE_CASES)
def test_the_compute_buffer_estimate_never_reserves_less_than_llama_cpp(entry: dict, case: dict, header_gguf):
    """advise's fit adds compute_buffer_bytes to the plan: below llama.cpp's figure a plan could promise a fit that
    fails to load. It is above on every captured case (1.00-2.05x: Qwen3-Coder-Next at 262144 tokens 343 against
    342.01 MiB, Mixtral 262 against 128)."""
    ours = CHECK.tunehost_figures(header_gguf(entry), case)["compute_mib"]
    theirs = case["llama_cpp"]["compute_mib"]
    assert ours >= theirs - 0.005, (ours, theirs)
