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
CASES = [
    pytest.param(entry, case, id=f"{entry['name']}-{i}")
    for entry in TABLE
    for i, case in enumerate(entry["cases"])
    if case.get("llama_cpp")
]


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
