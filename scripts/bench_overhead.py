#!/usr/bin/env python3
"""tunehost's own overhead around llama-bench: the same invocations raw vs through the bench engine.

The engine runs a fixed plan (warm-up + R alternating rounds of baseline and candidate: min = max rounds, so both
sides do exactly the same llama-bench runs); the raw side replays those argument lists with subprocess.run. Pairs
alternate which goes first, so drift of the (shared) host hits both; the overhead is the median over pairs of
(engine wall - raw wall) / raw wall. The fixed cost `measure()` adds once per command (doctor checks + py-cpuinfo +
the bandwidth probe for the TG ceiling) is timed separately. Target: engine overhead < 3 % of the bench wall time.

    python scripts/bench_overhead.py                    # medium model -p 128 -n 32, then tiny -p 16 -n 8
    python scripts/bench_overhead.py --model tiny --pairs 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))  # build_llama_cpp, make_test_model

import build_llama_cpp  # noqa: E402
import make_test_model  # noqa: E402

WORKLOADS = {"medium": (128, 32, 3), "tiny": (16, 8, 5)}  # -p, -n, rounds




def engine_run(binary: Path, settings, configs) -> tuple[float, list[list[str]]]:
    from tunehost.bench.runner import RoundsHooks, default_invoke, run_rounds
    from tunehost.bench.watch import HostWatcher
    from tunehost.host import open_host

    started = time.perf_counter()
    hooks = RoundsHooks(default_invoke(binary, timeout_s=900), watcher=HostWatcher(open_host()))
    outcome = run_rounds(configs, settings, hooks)
    wall = time.perf_counter() - started
    return wall, [list(i.argv) for i in outcome.invocations]


def raw_run(binary: Path, argvs: list[list[str]]) -> float:
    started = time.perf_counter()
    for argv in argvs:
        subprocess.run([str(binary), *argv, "-o", "jsonl"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - started


def workload(name: str, binary: Path, pairs: int) -> dict:
    from tunehost.bench.runner import BenchConfig, BenchSettings

    model = make_test_model.ensure_model(name)
    n_prompt, n_gen, rounds = WORKLOADS[name]
    settings = BenchSettings(model=str(model), n_prompt=n_prompt, n_gen=n_gen, reps=3, min_rounds=rounds,
                             max_rounds=rounds)
    configs = [BenchConfig("baseline", ("-t", "2")), BenchConfig("candidate", ("-t", "1"))]
    _, argvs = engine_run(binary, settings, configs)  # the fixed list of invocations (and a warm page cache)
    overheads, engine_walls, raw_walls = [], [], []
    for i in range(pairs):
        if i % 2 == 0:
            engine, _ = engine_run(binary, settings, configs)
            raw = raw_run(binary, argvs)
        else:
            raw = raw_run(binary, argvs)
            engine, _ = engine_run(binary, settings, configs)
        engine_walls.append(engine)
        raw_walls.append(raw)
        overheads.append((engine - raw) / raw)
        print(f"  {name} pair {i + 1}: engine {engine:.3f} s, raw {raw:.3f} s, overhead {overheads[-1] * 100:+.2f} %",
              file=sys.stderr)
    return {"model": model.name, "n_prompt": n_prompt, "n_gen": n_gen, "invocations": len(argvs),
            "median_engine_s": round(statistics.median(engine_walls), 3),
            "median_raw_s": round(statistics.median(raw_walls), 3),
            "median_overhead_percent": round(statistics.median(overheads) * 100, 2),
            "per_invocation_overhead_ms": round((statistics.median(engine_walls) - statistics.median(raw_walls))
                                                / len(argvs) * 1000, 2)}


def fixed_cost(model_name: str) -> dict:
    from tunehost.bench.runner import tg_ceiling
    from tunehost.bench.watch import describe_host
    from tunehost.facts import HostFacts
    from tunehost.host import open_host

    model = make_test_model.ensure_model(model_name)
    started = time.perf_counter()
    describe_host(HostFacts(open_host()))
    described = time.perf_counter() - started
    started = time.perf_counter()
    tg_ceiling(model)
    ceiling = time.perf_counter() - started
    return {"describe_host_s": round(described, 3), "tg_ceiling_s": round(ceiling, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(WORKLOADS), action="append")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--target", type=float, default=3.0, help="percent")
    args = parser.parse_args()

    binary = build_llama_cpp.script_llama_bench()
    results = {name: workload(name, binary, args.pairs) for name in (args.model or ["medium", "tiny"])}
    results["fixed_cost_per_command"] = fixed_cost("medium")
    print(json.dumps(results, indent=2))
    first = results[(args.model or ["medium"])[0]]
    return 0 if first["median_overhead_percent"] < args.target else 1


if __name__ == "__main__":
    sys.exit(main())
