"""`apply --bench` with the real llama-bench and the tiny test model, on a writable test root (TUNEHOST_ROOT)."""

from __future__ import annotations

import pytest

from tests.apply.fakehost import build_root
from tunehost.bench import runner

pytestmark = pytest.mark.integration


def test_apply_bench_shows_a_before_after_table(cli, tmp_path, monkeypatch, llama_bench, tiny_model):
    root = build_root(tmp_path / "root", "intel_pstate", cpus=4)
    monkeypatch.setenv("TUNEHOST_ROOT", str(root))
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(llama_bench.parent))
    monkeypatch.setenv("LLAMA_CPP_DIR", str(llama_bench.parent))
    # apply --bench measures with llama-bench's defaults (-p 512 -n 128) for up to 120 s, twice: the real path
    # (bench_hook.measure -> runner.measure_model -> the real binary) runs here with the short test sizes and a 2 s
    # budget instead (the warm-up and the minimum rounds still run), as tests/bench/test_bench_real_cli.py does
    real_measure_model = runner.measure_model
    monkeypatch.setattr(runner, "measure_model", lambda model, facts, **kw: real_measure_model(
        model, facts, **{"n_prompt": 16, "n_gen": 8, "budget_s": 2.0, **kw}))
    result = cli("apply", "--profile", "throughput", "--yes", "--bench", str(tiny_model))
    assert result.exit_code == 0, result.output + result.stderr
    out = result.stdout
    assert "before/after applying throughput" in out
    assert "PP" in out and "TG" in out
    assert any(v in out for v in ("faster", "slower", "no clear difference", "disturbed"))
    assert (root / "sys/kernel/mm/transparent_hugepage/enabled").read_text().startswith("[always]")
