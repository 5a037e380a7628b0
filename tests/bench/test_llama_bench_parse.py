"""llama-bench output parsing against every real output in the corpus (tests/data/corpus/llama-bench).

The expected numbers are the ones SOURCES.md ("llama-bench" section) states for each file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tunehost.bench.llama_bench import (
    BenchResult,
    detect_format,
    find_llama_bench,
    format_test_name,
    parse_csv,
    parse_help_options,
    parse_json,
    parse_jsonl,
    parse_markdown,
    parse_output,
    run_llama_bench,
    unsupported_options,
)
from tunehost.errors import TunehostError

DATA = Path(__file__).parents[1] / "data"
CORPUS = DATA / "corpus" / "llama-bench"
SHARED_CORPUS = Path(__file__).parents[2].parent / "shared" / "corpus" / "llama-bench"
CORPUS_FILES = sorted(CORPUS.glob("*.txt"))


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()


def by_test(results: list[BenchResult]) -> dict[str, BenchResult]:
    return {result.test: result for result in results}


# ---------------------------------------------------------------- the whole corpus


def test_corpus_copy_is_complete():
    assert len(CORPUS_FILES) == 12


@pytest.mark.skipif(not SHARED_CORPUS.is_dir(), reason="../shared/corpus is not next to this checkout")
def test_corpus_copy_matches_shared_corpus():
    shared = {path.name: path.read_bytes() for path in SHARED_CORPUS.glob("*.txt")}
    copied = {path.name: path.read_bytes() for path in CORPUS_FILES}
    assert copied == shared


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda path: path.name)
def test_every_corpus_file_parses(path: Path):
    results = parse_output(path.read_text())
    assert results
    for result in results:
        assert result.avg_ts > 0
        assert result.stddev_ts >= 0
        assert result.kind in ("pp", "tg")
        assert result.test == format_test_name(result.n_prompt, result.n_gen, result.n_depth)
        assert result.model_type


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("json-", "json"), ("jsonl-", "jsonl"), ("md-", "markdown"), ("csv-", "csv")],
)
def test_format_detected_from_content(prefix: str, expected: str):
    files = [path for path in CORPUS_FILES if path.name.startswith(prefix)]
    assert files
    for path in files:
        assert detect_format(path.read_text()) == expected, path.name


# ---------------------------------------------------------------- JSON, three schemas


def test_json_2025_schema_7800x3d_full_offload():
    results = parse_json(corpus("json-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt"))
    tests = by_test(results)
    assert list(tests) == ["pp512", "tg128"]
    pp, tg = tests["pp512"], tests["tg128"]
    assert pp.avg_ts == pytest.approx(7100.0, abs=0.01)
    assert tg.avg_ts == pytest.approx(118.9, abs=0.05)
    assert tg.stddev_ts == pytest.approx(1.041811)
    assert pp.samples_ts == (6863.1, 7147.55, 7136.37, 7115.79, 7237.21)
    assert (pp.n_prompt, pp.n_gen, pp.n_depth) == (512, 0, 0)
    assert (tg.n_prompt, tg.n_gen, tg.n_depth) == (0, 128, 0)
    assert pp.backend == "CUDA"
    assert (pp.build_commit, pp.build_number) == ("8cf427ff", 5163)
    assert (pp.n_threads, pp.n_gpu_layers) == (8, 99)
    assert pp.model_type == "qwen2 7B Q4_K - Medium"
    assert (pp.model_size, pp.n_params) == (4677120000, 7615616512)
    assert pp.flags["n_ubatch"] == 512
    assert pp.flags["flash_attn"] is False
    assert pp.flags["cpu_info"] == "AMD Ryzen 7 7800X3D 8-Core Processor"
    assert "samples_ns" not in pp.flags


def test_json_2023_old_schema_backend_from_cuda_boolean():
    results = parse_json(corpus("json-cuda-i9-13900k-rtx3090ti-llama7b-q4_0-2023-old-schema.txt"))
    pp, tg = by_test(results)["pp512"], by_test(results)["tg128"]
    assert pp.avg_ts == pytest.approx(2411, abs=0.5)
    assert tg.avg_ts == pytest.approx(131, abs=0.05)
    assert pp.backend == "CUDA"
    assert pp.n_depth == 0  # the 2023 schema has no n_depth
    assert (pp.build_commit, pp.build_number) == ("3469684", 1275)
    assert pp.flags["f16_kv"] is True and pp.flags["mul_mat_q"] is True
    assert len(tg.samples_ts) == 5


def test_json_ik_llama_fork_schema_fa_off():
    results = parse_json(corpus("json-cpu-xeon-e5-2690v3-dual-deepseek-r1-671b-iq4kr4-fa-off.txt"))
    pp, tg = by_test(results)["pp512"], by_test(results)["tg128"]
    assert pp.avg_ts == pytest.approx(8.20, abs=0.005)
    assert tg.avg_ts == pytest.approx(2.97, abs=0.005)
    assert pp.backend == "CPU"  # every per-backend boolean false, "rpc": "0"
    assert pp.n_threads == 48
    assert (pp.build_commit, pp.build_number) == ("ddc8eee1", 3599)
    assert pp.flags["mla_attn"] == 3
    assert pp.flags["fused_moe"] is True
    assert pp.flags["flash_attn"] is False
    assert "test" not in pp.flags  # the fork's "test" field became BenchResult.test
    assert pp.test == "pp512" and tg.test == "tg128"


def test_json_ik_llama_fork_fa_on_first_sample_outlier_from_page_in():
    results = parse_json(corpus("json-cpu-xeon-e5-2690v3-dual-deepseek-r1-671b-iq4kr4-fa-on.txt"))
    pp, tg = by_test(results)["pp512"], by_test(results)["tg128"]
    assert pp.avg_ts == pytest.approx(9.95, abs=0.005)
    assert tg.avg_ts == pytest.approx(2.75, abs=0.005)
    assert pp.flags["flash_attn"] is True
    assert pp.samples_ts[0] == pytest.approx(8.89501)
    assert pp.samples_ts[0] < min(pp.samples_ts[1:])


def test_json_with_banner_lines_before_the_array():
    text = "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: X\n" + corpus(
        "json-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt"
    )
    assert [r.test for r in parse_output(text)] == ["pp512", "tg128"]


# ---------------------------------------------------------------- JSONL


def test_jsonl_7800x3d():
    results = parse_jsonl(corpus("jsonl-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt"))
    tests = by_test(results)
    assert tests["pp512"].avg_ts == pytest.approx(7263.6, abs=0.05)
    assert tests["tg128"].avg_ts == pytest.approx(119.8, abs=0.05)
    assert tests["tg128"].samples_ts == (120.038, 120.203, 118.624, 120.377, 119.982)


def test_jsonl_strix_halo_banner_lines_skipped_and_depths():
    text = corpus("jsonl-rocm-strix-halo-radeon8060s-llama3.2-1b-with-stderr-banner.txt")
    assert text.startswith("ggml_cuda_init")
    results = parse_output(text)
    assert [r.test for r in results] == [
        "pp512", "tg128", "pp512 @ d1024", "tg128 @ d1024", "pp512 @ d4096", "tg128 @ d4096",
    ]
    tests = by_test(results)
    assert tests["pp512"].avg_ts == pytest.approx(5008, abs=0.5)
    assert tests["tg128"].avg_ts == pytest.approx(192.6, abs=0.05)
    assert tests["tg128 @ d4096"].avg_ts == pytest.approx(142.8, abs=0.05)
    assert tests["tg128 @ d4096"].n_depth == 4096
    assert tests["tg128"].stddev_ts == 0.0  # -r 1
    assert tests["tg128"].samples_ts == (192.587,)
    assert tests["tg128"].backend == "ROCm"
    assert (tests["tg128"].build_commit, tests["tg128"].build_number) == ("1c1409e1", 6865)
    assert tests["tg128"].flags["n_cpu_moe"] == 0
    assert tests["tg128"].flags["tensor_buft_overrides"] == "none"


# ---------------------------------------------------------------- CSV


def test_csv_2025_all_values_quoted():
    results = parse_csv(corpus("csv-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt"))
    tests = by_test(results)
    assert tests["pp512"].avg_ts == pytest.approx(7285.7, abs=0.05)
    assert tests["tg128"].avg_ts == pytest.approx(119.9, abs=0.05)
    pp = tests["pp512"]
    assert (pp.n_threads, pp.n_gpu_layers, pp.build_number) == (8, 99, 5163)
    assert pp.model_size == 4677120000
    assert pp.backend == "CUDA"
    assert pp.flags["use_mmap"] is True and pp.flags["flash_attn"] == 0
    assert pp.samples_ts == ()


def test_csv_2023_old_header():
    results = parse_csv(corpus("csv-cuda-i9-13900k-rtx3090ti-llama7b-q4_0-2023-old-schema.txt"))
    tests = by_test(results)
    assert tests["pp512"].avg_ts == pytest.approx(2413, abs=0.5)
    assert tests["tg128"].avg_ts == pytest.approx(132, abs=0.1)
    assert tests["pp512"].backend == "CUDA"  # from the "cuda" column, "1"
    assert tests["pp512"].n_depth == 0
    assert tests["pp512"].flags["f16_kv"] is True


# ---------------------------------------------------------------- Markdown


def test_markdown_thread_sweep_old_test_names_and_stray_double_pipe():
    text = corpus("md-cpu-thread-sweep-1-32-llama7b-q4_0.txt")
    assert text.rstrip().endswith("||")
    results = parse_markdown(text)
    assert len(results) == 12
    assert {r.test for r in results} == {"pp64", "tg16"}  # printed as "pp 64" / "tg 16"
    tg = {r.n_threads: r.avg_ts for r in results if r.kind == "tg"}
    pp = {r.n_threads: r.avg_ts for r in results if r.kind == "pp"}
    assert max(tg, key=tg.get) == 8 and tg[8] == 16.71
    assert tg[16] == 15.32
    assert max(pp, key=pp.get) == 32 and pp[32] == 59.00
    last = results[-1]  # the row ending in "||"
    assert (last.n_threads, last.test, last.avg_ts, last.stddev_ts) == (32, "tg16", 16.41, 0.79)
    assert last.backend == "CPU"
    assert last.model_size == round(3.56 * 1024**3)
    assert last.n_params == 6_740_000_000
    assert last.build_commit is None and last.build_number is None  # no build line was pasted


def test_markdown_ngl_sweep_shows_the_full_offload_cliff():
    results = parse_markdown(corpus("md-cuda-partial-offload-ngl-sweep-10-35-llama7b-q4_0.txt"))
    assert len(results) == 16
    tg = {r.n_gpu_layers: r.avg_ts for r in results if r.test == "tg128"}
    assert sorted(tg) == [10, 20, 30, 31, 32, 33, 34, 35]
    assert tg[34] == 71.76
    assert tg[35] == 131.66
    pp35 = next(r for r in results if r.n_gpu_layers == 35 and r.test == "pp512")
    assert (pp35.avg_ts, pp35.stddev_ts) == (2400.01, 7.72)
    assert pp35.n_threads is None  # no threads column on a GPU run


def test_markdown_ik_fork_extra_columns_fa_mla_fmoe():
    results = parse_markdown(corpus("md-cpu-xeon-e5-2690v3-dual-thread-sweep-16-48-deepseek-r1.txt"))
    assert len(results) == 8
    tg = {r.n_threads: r.avg_ts for r in results if r.kind == "tg"}
    pp = {r.n_threads: r.avg_ts for r in results if r.kind == "pp"}
    assert min(tg.values()) == 2.53 and max(tg.values()) == 2.68
    assert max(pp, key=pp.get) == 48 and pp[48] == 10.27
    assert results[0].flags == {"flash_attn": 1, "mla_attn": 3, "fused_moe": 1}
    assert results[0].model_type == "deepseek2 671B IQ4_K_R4 - 4.5 bpw"


def test_markdown_backend_list_ot_column_banner_and_build_line():
    text = corpus("md-cuda-partial-moe-offload-ryzen5-3500-16gb-ddr4-2667-gtx1650s-4gb-qwen3-30b-a3b.txt")
    results = parse_output(text)
    assert len(results) == 4
    for result in results:
        assert result.backend == "CUDA,BLAS"
        assert (result.build_commit, result.build_number) == ("15e03282", 5318)
        assert result.flags["tensor_buft_overrides"] == "exps=CPU"
        assert result.n_threads == 6
    tg = [r for r in results if r.test == "tg128"]
    assert [r.avg_ts for r in tg] == [2.75, 2.75]
    assert [r.flags["flash_attn"] for r in tg] == [0, 1]
    assert results[0].model_size == round(15.32 * 1024**3)


def test_markdown_depth_and_combined_test_names():
    text = (
        "| model | size | params | backend | threads | test | t/s |\n"
        "| --- | ---: | ---: | --- | ---: | ---: | ---: |\n"
        "| llama 1B Q8_0 | 1.22 GiB | 1.24 B | CPU | 8 | pp512 @ d4096 | 100.50 ± 1.00 |\n"
        "| llama 1B Q8_0 | 1.22 GiB | 1.24 B | CPU | 8 | pp512+tg128 | 20.00 ± 0.10 |\n"
        "| llama 1B Q8_0 | 4.50 MiB | 4.50 M | CPU | 8 | tg128 | 30.00 |\n"
    )
    first, combined, no_stddev = parse_markdown(text)
    assert (first.test, first.n_prompt, first.n_depth) == ("pp512 @ d4096", 512, 4096)
    assert (combined.kind, combined.n_prompt, combined.n_gen) == ("pp+tg", 512, 128)
    assert (no_stddev.avg_ts, no_stddev.stddev_ts) == (30.0, 0.0)
    assert no_stddev.model_size == round(4.5 * 1024**2) and no_stddev.n_params == 4_500_000


# ---------------------------------------------------------------- garbage in, one-line error out


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "hello world\nthis is not llama-bench\n",
        "ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    no\nggml_cuda_init: found 1 ROCm devices:\n",
        "error: unknown argument: --bogus\n",
        "[]\n",
        '[\n  {"build_commit": "x", "n_prompt": 512}\n]\n',  # no avg_ts
        '{"n_prompt": 512, "n_gen": 0, "avg_ts": "fast"}\n',
        "| model | test | t/s |\n| --- | --- | --- |\n",  # header, no rows
        "| model | size |\n| --- | --- |\n| x | 1 GiB |\n",  # no test / t/s columns
        "| model | test | t/s |\n| --- | --- | --- |\n| x | warmup | 1.0 ± 0.1 |\n",  # unknown test name
        "| model | test | t/s |\n| --- | --- | --- |\n| x | pp512 | fast |\n",
    ],
    ids=[
        "empty", "blank", "prose", "banner-only", "error-message", "empty-array", "no-avg-ts",
        "non-numeric-avg-ts", "header-only-table", "table-without-test-column", "unknown-test-name",
        "unreadable-throughput",
    ],
)
def test_garbage_raises_one_line_tunehost_error(text: str):
    with pytest.raises(TunehostError) as raised:
        parse_output(text)
    message = str(raised.value)
    assert message and "\n" not in message


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda path: path.name)
def test_truncated_corpus_file_raises(path: Path):
    text = path.read_text()
    if path.name.startswith("md-"):
        # A table cut mid-row: the last row has too few cells.
        cut = text[: text.rindex("|", 0, text.rindex("±")) - 1]
    elif path.name.startswith("csv-"):
        cut = text[: text.rindex('","')]
    else:
        cut = text[: len(text) // 2]
    with pytest.raises(TunehostError, match="truncated"):
        parse_output(cut)


# ---------------------------------------------------------------- options and finding the binary


HELP_EXCERPT = """\
usage: llama-bench [options]

options:
  -h, --help
  --numa <distribute|isolate|numactl>       numa mode (default: disabled)
  -r, --repetitions <n>                     number of times to repeat each test (default: 5)
  --prio <-1|0|1|2|3>                       process/thread priority (default: 0)
  -o, --output <csv|json|jsonl|md|sql>      output format printed to stdout (default: md)
  -v, --verbose                             verbose output
  --progress                                print test progress indicators

test parameters:
  -m, --model <filename>                    (default: models/7B/ggml-model-q4_0.gguf)
  -p, --n-prompt <n>                        (default: 512)
  -n, --n-gen <n>                           (default: 128)
  -t, --threads <n>                         (default: 8)
  -C, --cpu-mask <hex,hex>                  (default: 0x0)
  -fa, --flash-attn <0|1>                   (default: 0)

Multiple values can be given for each parameter by separating them with ','
"""


def test_parse_help_options_reads_short_and_long_names():
    options = parse_help_options(HELP_EXCERPT)
    assert {"-h", "--help", "--numa", "-r", "--repetitions", "-o", "--output", "--progress"} <= options
    assert {"-m", "--model", "-p", "--n-prompt", "-t", "--threads", "-C", "-fa", "--flash-attn"} <= options
    assert "--distribute" not in options and "-1" not in options


def test_unsupported_options_ignores_values_and_negative_numbers():
    options = parse_help_options(HELP_EXCERPT)
    arguments = ["-m", "model.gguf", "-p", "512", "--prio", "-1", "-fa", "1", "--n-cpu-moe", "4", "-d", "0"]
    assert unsupported_options(arguments, options) == ["--n-cpu-moe", "-d"]


def _fake_binary(directory: Path, name: str = "llama-bench", script: str = "exit 0") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / name
    binary.write_text(f"#!/bin/sh\n{script}\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary


def test_find_llama_bench_order_explicit_then_configured_dirs_then_path_then_cache(tmp_path: Path):
    explicit = _fake_binary(tmp_path / "explicit")
    bin_dir = _fake_binary(tmp_path / "bin-dir")
    in_build = _fake_binary(tmp_path / "llama.cpp" / "build" / "bin")
    on_path = _fake_binary(tmp_path / "path")
    cached = _fake_binary(tmp_path / "cache" / "llama.cpp" / "0.3.36" / "bin")
    base = {"PATH": str(tmp_path / "path"), "TUNEHOST_CACHE_DIR": str(tmp_path / "cache")}
    environ = {**base, "LLAMA_CPP_DIR": str(tmp_path / "llama.cpp")}
    assert find_llama_bench(explicit, environ=environ) == explicit
    assert find_llama_bench(tmp_path / "explicit", environ=environ) == explicit  # a directory works too
    assert find_llama_bench(tmp_path / "llama.cpp", environ={}) == in_build  # so does a source tree
    assert find_llama_bench(environ={**environ, "TUNEHOST_LLAMA_BIN_DIR": str(tmp_path / "bin-dir")}) == bin_dir
    assert find_llama_bench(environ=environ) == in_build
    assert find_llama_bench(environ=base) == on_path
    assert find_llama_bench(environ={**base, "LLAMA_CPP_DIR": str(tmp_path / "nowhere")}) == on_path
    assert find_llama_bench(environ={**base, "PATH": str(tmp_path / "empty")}) == cached


def test_find_llama_bench_agrees_with_what_doctor_reports(tmp_path: Path, monkeypatch):
    # the llama-build check lists binaries in the llama_install sample's order; bench runs the first llama-bench
    from tunehost.host import open_host

    _fake_binary(tmp_path / "path")
    in_build = _fake_binary(tmp_path / "llama.cpp" / "build" / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("LLAMA_CPP_DIR", str(tmp_path / "llama.cpp"))
    monkeypatch.setenv("TUNEHOST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TUNEHOST_LLAMA_BIN_DIR", raising=False)
    rows = [b for b in open_host().sample("llama_install")["binaries"] if b["name"] == "llama-bench"]
    assert [r["path"] for r in rows][0] == str(in_build) == str(find_llama_bench())
    assert [r["from"] for r in rows] == ["$LLAMA_CPP_DIR/build/bin", "PATH"]


def test_find_llama_bench_missing_names_where_it_looked(tmp_path: Path):
    with pytest.raises(TunehostError, match="LLAMA_CPP_DIR") as raised:
        find_llama_bench(environ={"LLAMA_CPP_DIR": str(tmp_path), "PATH": str(tmp_path / "empty"),
                                  "TUNEHOST_CACHE_DIR": str(tmp_path / "no-cache")})
    assert str(tmp_path) in str(raised.value)
    with pytest.raises(TunehostError, match="no executable llama-bench"):
        find_llama_bench(tmp_path / "missing", environ={})


@pytest.mark.parametrize("where, says", [
    ("nowhere", "which is not a directory"),
    ("empty", "which has no executable llama-bench"),
    ("server-only", "which has no executable llama-bench"),
])
def test_tunehost_llama_bin_dir_pointing_nowhere_is_an_error_not_another_build(tmp_path: Path, where, says):
    # every other place holds a llama-bench: none of them is used instead of the one the user chose
    on_path = _fake_binary(tmp_path / "path")
    _fake_binary(tmp_path / "cache" / "llama.cpp" / "0.3.36" / "bin")
    _fake_binary(tmp_path / "llama.cpp" / "build" / "bin")
    (tmp_path / "empty").mkdir()
    _fake_binary(tmp_path / "server-only", name="llama-server")
    env = {"PATH": str(tmp_path / "path"), "TUNEHOST_CACHE_DIR": str(tmp_path / "cache"),
           "LLAMA_CPP_DIR": str(tmp_path / "llama.cpp"), "TUNEHOST_LLAMA_BIN_DIR": str(tmp_path / where)}
    with pytest.raises(TunehostError) as raised:
        find_llama_bench(environ=env)
    message = str(raised.value)
    assert message == (f"TUNEHOST_LLAMA_BIN_DIR is set to {tmp_path / where}, {says}; point it at a llama.cpp "
                       "build's bin directory (scripts/build_llama_cpp.py prints one) or unset it")
    assert "\n" not in message
    assert find_llama_bench(environ={k: v for k, v in env.items() if k != "TUNEHOST_LLAMA_BIN_DIR"}) != on_path
    assert find_llama_bench(on_path, environ=env) == on_path  # an explicit --llama-bench still wins


def test_tunehost_llama_bin_dir_without_llama_server_stops_serve(tmp_path: Path, monkeypatch):
    from tunehost.bench.server.launch import resolve_server_binary

    _fake_binary(tmp_path / "path", name="llama-server")
    _fake_binary(tmp_path / "mine")  # llama-bench only
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(tmp_path / "mine"))
    with pytest.raises(TunehostError, match="^--serve: TUNEHOST_LLAMA_BIN_DIR is set to .*which has no executable "
                                            "llama-server"):
        resolve_server_binary("llama-server")
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(tmp_path / "path"))
    assert resolve_server_binary("llama-server") == tmp_path / "path" / "llama-server"


def test_bench_with_tunehost_llama_bin_dir_pointing_nowhere_is_one_error_line(cli, tmp_path: Path, monkeypatch):
    from tests.conftest import write_tiny_gguf

    _fake_binary(tmp_path / "path")
    monkeypatch.setenv("PATH", str(tmp_path / "path") + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(tmp_path / "gone\x1b[31m"))
    result = cli("bench", "--model", str(write_tiny_gguf(tmp_path / "tiny.gguf")))
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "TUNEHOST_LLAMA_BIN_DIR is set to" in lines[0] and "not a directory" in lines[0]
    assert "\x1b" not in lines[0]  # the setting is shown as one printable line


# ---------------------------------------------------------------- running (a fake llama-bench script)

JSONL_LINE = corpus("jsonl-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt").splitlines()[0]


def test_run_streams_stderr_and_parses_jsonl(tmp_path: Path):
    fake = _fake_binary(tmp_path, script=(
        'echo "args: $*" >&2\n'
        'echo "ggml banner on stdout"\n'
        f"cat <<'EOF'\n{JSONL_LINE}\nEOF"
    ))
    progress: list[str] = []
    results = run_llama_bench(fake, ["-m", "model.gguf", "-p", "512"], timeout=30, on_progress=progress.append)
    assert progress == ["args: -m model.gguf -p 512 -o jsonl"]
    assert [r.test for r in results] == ["pp512"]


def test_run_failure_quotes_the_tools_last_stderr_lines(tmp_path: Path):
    fake = _fake_binary(tmp_path, script=(
        'echo "loading" >&2\necho "error: unknown argument: --bogus" >&2\necho "usage: llama-bench [options]" >&2\nexit 1'
    ))
    with pytest.raises(TunehostError) as raised:
        run_llama_bench(fake, ["--bogus"], timeout=30)
    message = str(raised.value)
    assert "exit 1" in message and "unknown argument: --bogus" in message and "\n" not in message


def test_run_timeout_kills_the_tool(tmp_path: Path):
    fake = _fake_binary(tmp_path, script='echo "started" >&2\nsleep 30')
    with pytest.raises(TunehostError, match="did not finish within 0.5 s"):
        run_llama_bench(fake, [], timeout=0.5)


def test_run_refuses_a_caller_chosen_output_format(tmp_path: Path):
    with pytest.raises(ValueError):
        run_llama_bench(_fake_binary(tmp_path), ["-o", "md"], timeout=5)


def test_run_missing_binary_is_a_tunehost_error(tmp_path: Path):
    with pytest.raises(TunehostError, match="cannot run"):
        run_llama_bench(tmp_path / "absent", [], timeout=5)


def test_fake_binaries_are_executable(tmp_path: Path):
    assert os.access(_fake_binary(tmp_path), os.X_OK)


def test_parse_help_options_of_the_real_b11312_help():
    # Real quirks: "-ot --override-tensor" has no comma, "-hf, -hfr, --hf-repo" has three names.
    text = (Path(__file__).parent / "data" / "llama-bench-help-b11312.txt").read_text()
    options = parse_help_options(text)
    assert {"-ot", "--override-tensor", "-hf", "-hfr", "--hf-repo", "-fitt", "--fit-target"} <= options
    assert {"-d", "--n-depth", "-ncmoe", "--n-cpu-moe", "--no-host", "--repack", "-lm", "--load-mode"} <= options
    assert {"-pg", "--delay", "--no-warmup", "--progress", "-oe"} <= options
    assert not any(option.startswith("--0") or option == "-1" for option in options)
