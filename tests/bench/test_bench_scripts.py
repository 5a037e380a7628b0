"""scripts/build_llama_cpp.py (cache logic, no build) and scripts/make_test_model.py (a real tiny model)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import load_script

build = load_script("build_llama_cpp")
model = load_script("make_test_model")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TUNEHOST_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_build(cache: Path, *, cpu: str | None = None) -> Path:
    root = cache / "llama.cpp" / build.LLAMA_CPP_PYTHON_VERSION
    (root / "bin").mkdir(parents=True)
    for target in build.TARGETS:
        (root / "bin" / target).write_text("#!/bin/sh\n")
        (root / "bin" / target).chmod(0o755)
    native = build.variants(build.cpu_flags())[0]
    record = {"cpu": cpu or build.cpu_fingerprint(), "variant": native.name,
              "key": build.cache_key(build.LLAMA_CPP_PYTHON_VERSION, native, cpu)}
    (root / build.MARKER_NAME).write_text(json.dumps(record))
    return root


def test_cache_root_follows_tunehost_cache_dir(cache: Path):
    assert build.bin_dir() == cache / "llama.cpp" / build.LLAMA_CPP_PYTHON_VERSION / "bin"
    assert model.default_model_path("tiny").parent == cache / "models"


def test_cached_build_is_reused_without_building(cache: Path):
    root = _fake_build(cache)
    assert build.cached_bin_dir() == root / "bin"
    assert build.ensure_built() == root / "bin"  # would take minutes if it built


def test_no_marker_means_no_cached_build(cache: Path):
    root = _fake_build(cache)
    (root / build.MARKER_NAME).unlink()  # an interrupted build leaves binaries but no marker
    assert build.cached_bin_dir() is None


def test_build_for_another_cpu_is_not_reused(cache: Path):
    _fake_build(cache, cpu="0000000000000000")
    assert build.cached_bin_dir() is None


def test_configure_pins_build_info_and_cpu_only_release():
    argv = build.cmake_configure_args(Path("src"), Path("out"), build.VENDORED[build.LLAMA_CPP_PYTHON_VERSION])
    assert "-DCMAKE_BUILD_TYPE=Release" in argv and "-DBUILD_SHARED_LIBS=OFF" in argv
    assert "-DLLAMA_BUILD_NUMBER=11312" in argv and "-DLLAMA_BUILD_COMMIT=0c1e570" in argv
    assert not any("CUDA" in arg or "VULKAN" in arg for arg in argv)


def test_vocabulary_is_llama_spm_with_all_byte_tokens_and_distinct():
    tokens, scores, types = model.sentencepiece_vocab(1024)
    assert len(tokens) == len(scores) == len(types) == 1024
    assert len(set(tokens)) == 1024  # llama.cpp asserts id_to_token and token_to_id have the same size
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert {f"<0x{byte:02X}>" for byte in range(256)} <= set(tokens)


def test_tiny_model_is_deterministic_and_valid(cache: Path, tmp_path: Path):
    first = model.ensure_model("tiny")
    second = model.ensure_model("tiny", tmp_path / "again.gguf")
    assert first == model.default_model_path("tiny")
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    assert model.is_valid_model(first, model.SIZES["tiny"])
    assert not model.is_valid_model(first, model.SIZES["medium"])
    assert 1_000_000 < first.stat().st_size < 10_000_000


def test_truncated_model_is_rewritten(cache: Path):
    path = model.ensure_model("tiny")
    intact = path.read_bytes()
    path.write_bytes(intact[: len(intact) // 2])
    assert not model.is_valid_model(path, model.SIZES["tiny"])
    assert model.ensure_model("tiny").read_bytes() == intact


def test_bench_aa_wilson_interval_and_summary_of_a_cut_short_batch():
    import argparse

    aa = load_script("bench_aa")
    assert aa.wilson(0, 100) == (0.0, round(1.959964 ** 2 / (100 + 1.959964 ** 2), 4))  # closed form at 0 hits
    low, high = aa.wilson(13, 120)  # the "before": 13 of 120 rows
    assert low < 13 / 120 < high and (low, high) == pytest.approx((0.064, 0.177), abs=0.001)
    row = {"test": "tg8", "verdict": "disturbed", "statistical_verdict": "faster"}
    runs = [{"rows": [row], "disturbed": True, "rounds": 5, "wall_s": 20.0},
            {"rows": [dict(row, statistical_verdict="no clear difference")], "disturbed": False, "rounds": 9,
             "wall_s": 30.0}]
    args = argparse.Namespace(candidate=None, expect="slower", flags="-t 2", budget=20.0)
    summary = aa.summarize(runs, [], "tiny", args)
    assert summary["false_rows_ignoring_disturbance"] == "1/2" and summary["false_positive_rows"] == "0/2"
    assert summary["median_rounds"] == 7
