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


# ---- build_llama_cpp: variants, cache key, smoke run and the portable rebuild, without compiling anything ----

CPUINFO = Path(__file__).parents[1] / "data" / "cpuinfo"


def _flags(name: str) -> frozenset[str]:
    from tunehost.host.cpuinfo import parse_cpu_flags

    return parse_cpu_flags((CPUINFO / name).read_text())


def _options(variant) -> dict[str, str]:
    return dict(option.removeprefix("-D").split("=") for option in variant.options)


def test_variants_on_sapphire_rapids_are_only_portable_with_avx512_and_without_amx():
    # the native build is known to crash on an AMX CPU: it is not even tried
    (portable,) = build.variants(_flags("xeon-gold-6459c-sapphire-rapids-amx.txt"))
    assert portable.name == "portable"
    native = build.variants(_flags("epyc-9654-genoa-avx512.txt"))[0]
    assert native.options == ("-DGGML_NATIVE=ON",)
    options = _options(portable)
    assert options["GGML_NATIVE"] == "OFF" and "without AMX" in portable.why
    assert all(options[o] == "OFF" for o in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"))
    assert all(options[o] == "ON" for o in ("GGML_AVX2", "GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_BF16",
                                            "GGML_AVX512_VBMI", "GGML_AVX_VNNI"))


def test_variants_on_avx512_epyc_and_avx2_only_cpus():
    genoa = _options(build.variants(_flags("epyc-9654-genoa-avx512.txt"))[1])
    assert genoa["GGML_AVX512"] == "ON" and genoa["GGML_AMX_INT8"] == "OFF"
    guest = build.variants(_flags("epyc-kvm-guest-avx2.txt"))[1]
    options = _options(guest)
    assert options["GGML_AVX2"] == "ON" and options["GGML_AVX512"] == "OFF" and options["GGML_AVX512_VNNI"] == "OFF"
    assert "AMX" not in guest.why


def test_built_isa_is_what_each_variant_may_use():
    spr = _flags("xeon-gold-6459c-sapphire-rapids-amx.txt")
    native, portable = build.variants(_flags("epyc-9654-genoa-avx512.txt"))
    (portable,) = build.variants(spr)
    assert "amx_int8" in build.built_isa(native, spr) and "amx_int8" not in build.built_isa(portable, spr)
    assert "avx512f" in build.built_isa(portable, spr)
    assert "avx512f" not in build.built_isa(portable, _flags("epyc-kvm-guest-avx2.txt"))


def test_cache_key_changes_with_cpu_options_and_revision(monkeypatch):
    native, portable = build.variants(_flags("epyc-9654-genoa-avx512.txt"))
    version = build.LLAMA_CPP_PYTHON_VERSION
    key = build.cache_key(version, native, "cpu-a")
    assert key == build.cache_key(version, native, "cpu-a")
    assert key != build.cache_key(version, native, "cpu-b")
    assert key != build.cache_key(version, portable, "cpu-a")
    monkeypatch.setattr(build, "BUILD_REVISION", build.BUILD_REVISION + 1)
    assert key != build.cache_key(version, native, "cpu-a")


def test_cached_bin_dir_refuses_a_marker_of_another_key(cache: Path):
    root = _fake_build(cache)
    record = json.loads((root / build.MARKER_NAME).read_text())
    (root / build.MARKER_NAME).write_text(json.dumps(dict(record, key="0" * 16)))
    assert build.cached_bin_dir() is None
    (root / build.MARKER_NAME).write_text(json.dumps(dict(record, variant="no-such-variant")))
    assert build.cached_bin_dir() is None


def _fake_binaries(directory: Path, *, crash: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    bodies = {
        "llama-bench": """echo '[{"n_prompt": 16, "n_gen": 0, "avg_ts": 900.0}, {"n_prompt": 0, "n_gen": 4, "avg_ts": 300.0}]'""",
        "llama-fit-params": "echo '-c 256 -ngl 0'",
        "llama-server": "exit 0",
    }
    for target, body in bodies.items():
        (directory / target).write_text(f"#!/bin/sh\n{f'kill -{crash} $$' if crash else body}\n")
        (directory / target).chmod(0o755)
    return directory


def test_smoke_run_reports_a_binary_that_dies_by_sigsegv(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(build.SMOKE_FAIL_ENV, raising=False)
    binaries = _fake_binaries(tmp_path / "bin", crash="SEGV")
    with pytest.raises(build.SmokeError, match="llama-bench killed by SIGSEGV"):
        build.smoke_run(binaries, tmp_path / "tiny.gguf", tmp_path / "log")


def test_smoke_run_passes_working_binaries_and_the_switch_forces_a_failure(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(build.SMOKE_FAIL_ENV, raising=False)
    monkeypatch.setattr(build, "_smoke_server", lambda *a: "llama-server: /health ok (fake)")
    binaries = _fake_binaries(tmp_path / "bin")
    evidence = build.smoke_run(binaries, tmp_path / "tiny.gguf", tmp_path / "log", variant="native")
    assert evidence[0] == "llama-bench: pp 900 t/s, tg 300 t/s" and evidence[1].startswith("llama-fit-params: -c 256")
    monkeypatch.setenv(build.SMOKE_FAIL_ENV, "native")
    with pytest.raises(build.SmokeError, match="forced"):
        build.smoke_run(binaries, tmp_path / "tiny.gguf", tmp_path / "log", variant="native")
    assert build.smoke_run(binaries, tmp_path / "tiny.gguf", tmp_path / "log", variant="portable")
    monkeypatch.setenv(build.SMOKE_FAIL_ENV, "all")
    with pytest.raises(build.SmokeError, match="forced"):
        build.smoke_run(binaries, tmp_path / "tiny.gguf", tmp_path / "log", variant="portable")


def _stub_build(monkeypatch, tmp_path: Path, flags: frozenset[str], native_crash: str | None) -> list[str]:
    """_build with everything but the variant loop, the smoke run and the marker stubbed out."""
    log: list[str] = []
    monkeypatch.setattr(build, "_download_sdist", lambda *a: tmp_path / "sdist.tar.gz")
    monkeypatch.setattr(build, "_unpack_vendored_llama_cpp", lambda sdist, work: work.mkdir(parents=True) or work)
    monkeypatch.setattr(build, "tiny_model", lambda: tmp_path / "tiny.gguf")
    monkeypatch.setattr(build, "cpu_flags", lambda: flags)
    monkeypatch.setattr(build, "_smoke_server", lambda *a: "llama-server: /health ok (fake)")
    monkeypatch.setattr(build, "_compile", lambda source, out, vendored, variant, log_file, log, backend=None: None)
    monkeypatch.setattr(build, "_install", lambda out, binaries, log_file: _fake_binaries(
        binaries, crash=native_crash if out.name == "build-native" else None))
    return log


def test_amx_cpu_goes_straight_to_the_portable_build(cache: Path, tmp_path, monkeypatch):
    monkeypatch.delenv(build.SMOKE_FAIL_ENV, raising=False)
    spr = _flags("xeon-gold-6459c-sapphire-rapids-amx.txt")
    log = _stub_build(monkeypatch, tmp_path, spr, "ILL")  # a native build would die: it is never built
    binaries = build.ensure_built(log=log.append)
    record = json.loads((binaries.parent / build.MARKER_NAME).read_text())
    assert record["variant"] == "portable" and "amx_int8" not in record["isa"] and "avx512f" in record["isa"]
    assert [t["variant"] for t in record["tried"]] == ["portable"] and record["tried"][0]["smoke"] == "passed"
    assert record["smoke"] and record["backend"] == "cpu"  # the smoke run still proves it
    assert any("AMX: building the portable variant only" in line for line in log)
    assert not any("native" in line and "configuring" in line for line in log)
    assert build.cached_bin_dir() == binaries  # the kept variant's key is what the cache checks


def test_native_build_that_dies_by_sigsegv_is_rebuilt_portable_and_kept(cache: Path, tmp_path, monkeypatch):
    monkeypatch.delenv(build.SMOKE_FAIL_ENV, raising=False)
    log = _stub_build(monkeypatch, tmp_path, _flags("epyc-9654-genoa-avx512.txt"), "SEGV")
    binaries = build.ensure_built(log=log.append)
    record = json.loads((binaries.parent / build.MARKER_NAME).read_text())
    assert record["variant"] == "portable" and "avx512f" in record["isa"]
    assert record["tried"][0]["smoke"] == "failed" and "SIGSEGV" in record["tried"][0]["reason"]
    assert any(line.startswith("the native build failed its smoke run: llama-bench killed by SIGSEGV") for line in log)
    assert build.cached_bin_dir() == binaries


def test_forced_smoke_failure_keeps_the_portable_build_and_all_fails(cache: Path, tmp_path, monkeypatch):
    log = _stub_build(monkeypatch, tmp_path, _flags("epyc-kvm-guest-avx2.txt"), None)
    monkeypatch.setenv(build.SMOKE_FAIL_ENV, "native")
    binaries = build.ensure_built(log=log.append)
    assert json.loads((binaries.parent / build.MARKER_NAME).read_text())["variant"] == "portable"
    monkeypatch.setenv(build.SMOKE_FAIL_ENV, "all")
    with pytest.raises(build.BuildError, match="every build failed its smoke run"):
        build.ensure_built(force=True, log=log.append)


@pytest.mark.parametrize(("lines", "expected"), [
    ([f"[{n}/40] Building CXX object x.o" for n in range(1, 41)], [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]),
    (["[  5%] Building C object a.o", "[ 12%] Building", "[ 13%] Building", "[ 25%] Linking", "[100%] Built target"],
     [10, 20, 100]),
    (["[0/0] nothing", "[x/y] junk", "-- Configuring done", "[ 99 ] no percent", "[ 1000000000000/2] odd",
      "[5/2] past the end", "[ 250%] odd"], []),
])
def test_progress_is_a_line_per_tenth(lines, expected):
    seen: list[str] = []
    reported = 0
    for line in lines:
        reported = build._report_progress(line, reported, 0.0, seen.append)
    assert [int(s.split()[1]) for s in seen] == expected


def test_scripts_honour_tunehost_llama_bin_dir_whatever_the_cache_holds(cache: Path, tmp_path, monkeypatch):
    root = _fake_build(cache)
    monkeypatch.delenv("TUNEHOST_LLAMA_BIN_DIR", raising=False)
    assert build.script_llama_bench() == root / "bin" / "llama-bench"
    mine = _fake_binaries(tmp_path / "mine")
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(mine))
    assert build.script_llama_bench() == mine / "llama-bench"
    for script in ("bench_aa.py", "bench_noise.py", "bench_overhead.py"):
        text = (Path(build.__file__).parent / script).read_text()
        assert "build_llama_cpp.script_llama_bench()" in text and "cached_bin_dir" not in text


def test_portable_option_builds_only_the_portable_variant(cache: Path, tmp_path, monkeypatch):
    monkeypatch.delenv(build.SMOKE_FAIL_ENV, raising=False)
    log = _stub_build(monkeypatch, tmp_path, _flags("xeon-gold-6459c-sapphire-rapids-amx.txt"), None)
    binaries = build.ensure_built(log=log.append, portable=True)
    record = json.loads((binaries.parent / build.MARKER_NAME).read_text())
    assert record["variant"] == "portable" and [t["variant"] for t in record["tried"]] == ["portable"]
    assert not any("native" in line for line in log)
    assert build.cached_bin_dir() == binaries  # a later plain run reuses it
