#!/usr/bin/env python3
"""Measure the two noise levels of llama-bench on this host: between invocations and within one invocation.

Runs llama-bench INVOCATIONS times with ``-r REPS`` and splits the variance of log(tokens/s) per test into the part
shared by the repetitions of one invocation (thread placement, memory layout, clock state: sigma_between) and the
rest (sigma_within), by one-way ANOVA. These are the two figures the simulation test in
tests/bench/test_bench_simulation.py draws its fake llama-bench from.

    python scripts/bench_noise.py --model tiny --invocations 20 --reps 5 --json noise.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import build_llama_cpp  # noqa: E402
import make_test_model  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="tiny | medium | PATH.gguf")
    parser.add_argument("-p", dest="n_prompt", type=int, default=16)
    parser.add_argument("-n", dest="n_gen", type=int, default=8)
    parser.add_argument("--flags", default="-t 2")
    parser.add_argument("--invocations", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from tunehost.bench.llama_bench import run_llama_bench
    from tunehost.bench.runner import parse_flags
    from tunehost.bench.stats import variance_components

    binary = build_llama_cpp.script_llama_bench()
    model = make_test_model.ensure_model(args.model) if args.model in ("tiny", "medium") else Path(args.model)
    base = ["-m", str(model), "-p", str(args.n_prompt), "-n", str(args.n_gen), *parse_flags(args.flags)]
    argv = [*base, "-r", str(args.reps)]
    run_llama_bench(binary, [*base, "-r", "1"], timeout=900)  # warm-up: page the model in
    per_test: dict[str, list[list[float]]] = {}
    for i in range(args.invocations):
        for result in run_llama_bench(binary, argv, timeout=900):
            per_test.setdefault(result.test, []).append(list(result.samples_ts or (result.avg_ts,)))
        print(f"  {i + 1}/{args.invocations}", file=sys.stderr)
    summary = {}
    for test, rounds in per_test.items():
        between, within = variance_components(rounds)
        summary[test] = {"sigma_between_log": round(between, 5), "sigma_within_log": round(within, 5),
                         "invocations": len(rounds), "reps": args.reps}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"model": model.name, "argv": argv, "summary": summary,
                                         "samples_ts": per_test}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
