"""Benchmarks with the real llama-bench: parse its output, run it, compare results honestly.

- :mod:`tunehost.bench.llama_bench`: ``parse_output(text) -> list[BenchResult]`` for every output
  form llama-bench has printed, ``find_llama_bench``, ``supported_options``, ``run_llama_bench``.
- :mod:`tunehost.bench.stats`: medians, spread, bootstrap intervals, "faster"/"slower" verdicts
  (imports numpy, so it is not imported here).
"""

from tunehost.bench.llama_bench import BenchResult, find_llama_bench, parse_output, run_llama_bench

__all__ = ["BenchResult", "find_llama_bench", "parse_output", "run_llama_bench"]
