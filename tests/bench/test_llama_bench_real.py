"""The real llama-bench binary on the tiny random-weight test model (fixtures `llama_bench`, `tiny_model`
in tests/conftest.py).

Where they come from:
- llama-bench: ``$TUNEHOST_LLAMA_BIN_DIR`` if set, else the cached build of
  ``scripts/build_llama_cpp.py`` (these tests never start the ~5 minute build themselves);
- the model: ``$TUNEHOST_TEST_MODEL`` if set, else ``scripts/make_test_model.py``'s tiny model,
  written into the cache on first use (a few seconds).

Missing pieces skip the tests locally, but fail them when ``$CI`` is set: CI must run
``python scripts/build_llama_cpp.py`` first, and must never pass by skipping.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunehost.bench.llama_bench import (
    parse_output,
    run_llama_bench,
    supported_options,
    unsupported_options,
)
from tunehost.errors import TunehostError

pytestmark = pytest.mark.integration

QUICK_RUN = ["-p", "16", "-n", "8", "-r", "2", "-t", "1"]


def test_run_tiny_model_gives_pp_and_tg(llama_bench: Path, tiny_model: Path):
    progress: list[str] = []
    results = run_llama_bench(
        llama_bench, ["-m", str(tiny_model), *QUICK_RUN, "--progress"], timeout=180, on_progress=progress.append
    )
    by_test = {result.test: result for result in results}
    assert set(by_test) == {"pp16", "tg8"}
    for result in results:
        assert result.avg_ts > 0
        assert len(result.samples_ts) == 2 and all(sample > 0 for sample in result.samples_ts)
        assert result.n_threads == 1
        assert "CPU" in (result.backend or "")
        assert (result.model_type or "").startswith("llama")
        assert result.build_number is not None and result.build_commit
    assert any("benchmark 2/2" in line for line in progress)  # --progress lines streamed from stderr


def test_markdown_output_of_the_real_binary_parses(llama_bench: Path, tiny_model: Path):
    import subprocess

    completed = subprocess.run(
        [str(llama_bench), "-m", str(tiny_model), "-p", "8", "-n", "4", "-r", "1", "-t", "1", "-o", "md"],
        capture_output=True, text=True, timeout=180, check=True,
    )
    results = parse_output(completed.stdout)
    assert [result.test for result in results] == ["pp8", "tg4"]
    assert results[0].build_number is not None  # from the trailing "build: <commit> (<number>)" line


def test_bad_flag_is_a_tunehost_error_with_the_tools_message(llama_bench: Path, tiny_model: Path):
    with pytest.raises(TunehostError) as raised:
        run_llama_bench(llama_bench, ["-m", str(tiny_model), "--bogus-flag"], timeout=60)
    message = str(raised.value)
    assert "--bogus-flag" in message and "exit 1" in message
    assert "\n" not in message


def test_missing_model_is_a_tunehost_error_with_the_tools_message(llama_bench: Path, tmp_path: Path):
    with pytest.raises(TunehostError, match="failed to load model"):
        run_llama_bench(llama_bench, ["-m", str(tmp_path / "absent.gguf"), *QUICK_RUN], timeout=60)


def test_supported_options_read_from_help(llama_bench: Path):
    options = supported_options(llama_bench)
    assert {"-m", "-p", "-n", "-r", "-t", "-o", "--progress", "-ngl", "-fa"} <= options
    assert unsupported_options(["-m", "x.gguf", *QUICK_RUN, "--progress"], options) == []
    assert unsupported_options(["--bogus-flag"], options) == ["--bogus-flag"]
