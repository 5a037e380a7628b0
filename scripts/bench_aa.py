#!/usr/bin/env python3
"""A/A check of `tunehost bench`: compare a configuration with itself many times and count false verdicts.

An honest engine says "faster" or "slower" for identical flags only by chance; the target is <= 5 % of A/A
comparisons. Each A/A run is a full tunehost measurement (warm-up, alternating rounds, auto-extension, host
watching) with the real llama-bench on the test model. Also reports the interval width reached with a 30-second
budget (the engine stops early once the interval lies within ±2 %, so the width is the one a user would get).

    python scripts/bench_aa.py                          # 30 A/A runs on the tiny model, then the 30 s width runs
    python scripts/bench_aa.py --model medium -p 64 -n 16 --runs 10
    python scripts/bench_aa.py --json out.json
    python scripts/bench_aa.py --candidate "-t 1 -ub 1" --expect slower --budget 120 --runs 20 --width-runs 0
                                                        # power: a real slowdown, called within the default budget?

Prints a summary with 95 % Wilson intervals; exit 1 when the false-positive rate exceeds --target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))  # build_llama_cpp, make_test_model

import build_llama_cpp  # noqa: E402
import make_test_model  # noqa: E402




def resolve(model: str) -> Path:
    if model in ("tiny", "medium"):
        return make_test_model.ensure_model(model)
    return Path(model)


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """95 % Wilson score interval of a proportion hits / n (Wilson 1927)."""
    if n == 0:
        return None
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def one_aa(model: Path, binary: Path, flags: tuple[str, ...], args: argparse.Namespace, budget: float,
           max_rounds: int, candidate: tuple[str, ...] | None = None) -> dict:
    from tunehost.bench.runner import measure

    started = time.perf_counter()
    result = measure(model, baseline=flags, candidate=flags if candidate is None else candidate,
                     n_prompt=args.n_prompt, n_gen=args.n_gen,
                     budget_s=budget, max_rounds=max_rounds, llama_bench=binary, describe=False, ceiling=False)
    assert result.comparison is not None
    return {
        "wall_s": round(time.perf_counter() - started, 2),
        "rounds": result.settings["rounds"],
        "stop_reason": result.settings["stop_reason"],
        "disturbed": result.disturbed,
        "reasons": list(result.watch.reasons) if result.watch else [],
        "rows": [{"test": r.test, "verdict": r.verdict, "statistical_verdict": r.statistical_verdict,
                  "change_percent": round(r.change_percent, 2), "low": r.low, "high": r.high,
                  "width_percent": round(((r.high or 0) - (r.low or 0)) * 100, 2), "n": r.n_baseline,
                  "rounds": getattr(r, "rounds", None), "effective_samples": getattr(r, "effective_samples", None)}
                 for r in result.comparison.rows],
    }


def summarize(runs: list[dict], widths: list[dict], model_name: str, args: argparse.Namespace) -> dict:
    """False verdicts (A/A) or correct ones (power, with --candidate), each with its 95 % Wilson interval."""
    candidate = args.candidate

    def false(run: dict, key: str) -> bool:
        return any(r[key] in ("faster", "slower") for r in run["rows"])

    n = len(runs)
    fp = sum(false(r, "verdict") for r in runs)
    fp_stat = sum(false(r, "statistical_verdict") for r in runs)
    quiet = [r for r in runs if not r["disturbed"]]
    fp_quiet = sum(false(r, "verdict") for r in quiet)
    rows_total = sum(len(r["rows"]) for r in runs)
    rows_fp = sum(row["verdict"] in ("faster", "slower") for r in runs for row in r["rows"])
    rows_fp_stat = sum(row["statistical_verdict"] in ("faster", "slower") for r in runs for row in r["rows"])
    summary = {
        "model": model_name, "runs": n, "false_positive_rate": fp / n if n else None,
        "false_positive_rate_ignoring_disturbance": fp_stat / n if n else None,
        "false_positive_rate_quiet_runs": (fp_quiet / len(quiet)) if quiet else None,
        "quiet_runs": len(quiet), "disturbed_runs": n - len(quiet),
        "false_positive_rows": f"{rows_fp}/{rows_total}",
        "false_rate_interval_runs": wilson(fp_stat, n),
        "false_rows_ignoring_disturbance": f"{rows_fp_stat}/{rows_total}",
        "false_rate_interval_rows": wilson(rows_fp_stat, rows_total),
        "median_rounds": statistics.median(r["rounds"] for r in runs) if runs else None,
        "median_wall_s": statistics.median(r["wall_s"] for r in runs) if runs else None,
        "width_at_budget": {row["test"]: statistics.median(w["rows"][i]["width_percent"] for w in widths)
                            for i, row in enumerate(widths[0]["rows"])} if widths else None,
    }
    if candidate is not None:  # power runs: "false" above is the share of runs with a verdict; what counts is below
        right = [sum(row["statistical_verdict"] == args.expect for row in r["rows"]) == len(r["rows"]) for r in runs]
        per_test = {row["test"]: sum(r["rows"][i]["statistical_verdict"] == args.expect for r in runs)
                    for i, row in enumerate(runs[0]["rows"])} if runs else {}
        summary = {"model": model_name, "runs": n, "baseline": args.flags, "candidate": args.candidate,
                   "expect": args.expect, "budget_s": args.budget,
                   "all_tests_correct": sum(right), "power_runs": sum(right) / n if n else None,
                   "power_interval_runs": wilson(sum(right), n),
                   "correct_by_test": {t: f"{k}/{n}" for t, k in per_test.items()},
                   "wrong_direction_rows": sum(row["statistical_verdict"] not in (args.expect, "no clear difference")
                                               for r in runs for row in r["rows"]),
                   "median_rounds": summary["median_rounds"], "median_wall_s": summary["median_wall_s"],
                   "disturbed_runs": summary["disturbed_runs"]}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="tiny | medium | PATH.gguf (default tiny)")
    parser.add_argument("-p", dest="n_prompt", type=int, default=16)
    parser.add_argument("-n", dest="n_gen", type=int, default=8)
    parser.add_argument("--flags", default="-t 2", help="the llama-bench flags of both sides")
    parser.add_argument("--candidate", help="power runs: other flags for the candidate (a real, known change)")
    parser.add_argument("--expect", choices=("faster", "slower"), default="slower",
                        help="with --candidate: the verdict a correct run gives")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--budget", type=float, default=20.0, help="budget of each A/A run (s)")
    parser.add_argument("--width-budget", type=float, default=30.0)
    parser.add_argument("--width-runs", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.05)
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument("--summarize", type=Path, metavar="RUNS.json",
                        help="only summarize the runs a previous --json wrote (also a batch cut short)")
    args = parser.parse_args()
    if args.summarize:
        runs = json.loads(args.summarize.read_text())["runs"]
        print(json.dumps(summarize(runs, [], args.model, args), indent=2))
        return 0

    from tunehost.bench.runner import MAX_ROUNDS, parse_flags

    binary = build_llama_cpp.script_llama_bench()
    model = resolve(args.model)
    flags = parse_flags(args.flags)
    candidate = parse_flags(args.candidate, what="--candidate") if args.candidate else None
    print(f"A/A: {args.runs} runs of {model.name} -p {args.n_prompt} -n {args.n_gen} {args.flags!r} vs itself, "
          f"budget {args.budget:g} s each", file=sys.stderr)
    runs = []
    for i in range(args.runs):
        run = one_aa(model, binary, flags, args, args.budget, MAX_ROUNDS, candidate)
        runs.append(run)
        if args.json:  # every finished run is kept, so a batch cut short still counts
            args.json.write_text(json.dumps({"runs": runs}, indent=2))
        print(f"  {i + 1:>2}: " + ", ".join(f"{r['test']} {r['change_percent']:+.1f} % [{r['width_percent']:.1f}] "
                                            f"{r['verdict']}" for r in run["rows"])
              + f"  ({run['rounds']} rounds, {run['wall_s']} s)", file=sys.stderr)

    widths = []
    if args.width_runs:
        print(f"interval width with a {args.width_budget:g} s budget (max rounds lifted so the budget binds):",
              file=sys.stderr)
        for i in range(args.width_runs):
            run = one_aa(model, binary, flags, args, args.width_budget, 10_000)
            widths.append(run)
            print(f"  {i + 1}: " + ", ".join(f"{r['test']} ±{r['width_percent'] / 2:.2f} % (n={r['n']})"
                                             for r in run["rows"])
                  + f"  ({run['rounds']} rounds, {run['wall_s']} s, {run['stop_reason']})", file=sys.stderr)

    summary = summarize(runs, widths, model.name, args)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": runs, "width_runs": widths}, indent=2))
    if candidate is not None:
        return 0
    rate = summary.get("false_positive_rate")
    return 0 if rate is None or rate <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
