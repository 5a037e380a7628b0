"""Benchmarks with the real llama-bench: parse its output, run it, compare results honestly.

- :mod:`tunehost.bench.llama_bench`: ``parse_output(text) -> list[BenchResult]`` for every output
  form llama-bench has printed, ``find_llama_bench``, ``supported_options``, ``run_llama_bench``.
- :mod:`tunehost.bench.stats`: rounds as the unit, an anytime-valid interval over rounds, "faster"/"slower" verdicts
  (imports numpy, so it is not imported here).
"""

from tunehost.bench.llama_bench import BenchResult, find_llama_bench, parse_output, run_llama_bench

__all__ = ["BenchResult", "find_llama_bench", "parse_output", "run_llama_bench"]

# The engine's entry points load lazily (numpy, rich-free but heavier than the parser): `apply --bench` calls
# tunehost.bench.measure_model(model, facts, label=...) before and after a change, then compare_saved(before, after).
_LAZY = {
    "measure": "tunehost.bench.runner", "measure_model": "tunehost.bench.runner",
    "compare_saved": "tunehost.bench.results", "SavedResult": "tunehost.bench.results",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tunehost.bench' has no attribute {name!r}")
