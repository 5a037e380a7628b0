"""`apply --bench` with the real llama-bench and the tiny test model, on a writable test root (TUNEHOST_ROOT)."""

from __future__ import annotations

import pytest

from tests.tuning.fakehost import build_root

pytestmark = pytest.mark.integration


def test_apply_bench_shows_a_before_after_table(cli, tmp_path, monkeypatch, llama_bench, tiny_model):
    root = build_root(tmp_path / "root", "intel_pstate", cpus=4)
    monkeypatch.setenv("TUNEHOST_ROOT", str(root))
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(llama_bench.parent))
    monkeypatch.setenv("LLAMA_CPP_DIR", str(llama_bench.parent))
    result = cli("apply", "--profile", "throughput", "--yes", "--bench", str(tiny_model))
    assert result.exit_code == 0, result.output + result.stderr
    out = result.stdout
    assert "before/after applying throughput" in out
    assert "PP" in out and "TG" in out
    assert any(v in out for v in ("faster", "slower", "no clear difference", "disturbed"))
    assert (root / "sys/kernel/mm/transparent_hugepage/enabled").read_text().startswith("[always]")
