#!/usr/bin/env python3
"""The targets of `tunehost tune` (docs/tune.md), measured with the real llama-bench.

1. **grid**: over a small search space (below), an exhaustive grid (every configuration, interleaved rounds, each
   paired against advise's plan) against tune's race over the same space. Target: tune's winner within the noise
   of the grid's best (a long paired bench run of the two says "no clear difference" or "faster"), using at most
   1/3 of the grid's measurement time. Also: advise's plan reaches >= 97 % of the grid's best (paired ratio).
2. **aa**: tune over an A/A space (-ngl 0 / 1 / 99 on a CPU-only build: llama-bench ignores it; the plan with
   -t 1 so each run stays short on a loaded 2-core box) many times;
   target: a winner other than the plan in <= 5 % of the runs (95 % Wilson interval given).
3. **optimus**: llama-optimus (PyPI; Optuna TPE over llama-bench) on the same model, then `tune` as a user runs it
   (advise's plan, tunehost.tune.space's knobs) within the same measured time;
   both winners re-measured by the same paired bench against llama-bench's defaults.

The space (applied to advise's plan for this host): -t {1, all cores} x -ub {128, 512} x (KV, -fa) in
{(q8_0, on), (f16, on), (f16, off)} = 12 configurations; advise's plan is one of them on a CPU-only host.

    python scripts/bench_tune.py --model medium --parts grid,aa,optimus --json out.json
    python scripts/bench_tune.py --model tiny --parts aa --aa-runs 40 --aa-budget 20

Needs $TUNEHOST_LLAMA_BIN_DIR (or the build cache); llama-optimus on PATH (or --optimus PATH) for part 3.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))


def resolve_model(name: str) -> Path:
    env = {"tiny": "TUNEHOST_TEST_MODEL", "medium": "TUNEHOST_TEST_MODEL_MEDIUM"}.get(name)
    if env and os.environ.get(env):
        return Path(os.environ[env])
    if env:
        import make_test_model

        return make_test_model.ensure_model(name)
    return Path(name)


from bench_aa import wilson  # noqa: E402  (95 % Wilson interval, one copy)


class Setup:
    def __init__(self, args: argparse.Namespace):
        from tunehost.bench import runner
        from tunehost.bench.llama_bench import run_llama_bench
        from tunehost.facts import HostFacts
        from tunehost.host import open_host
        from tunehost.ops.tune import plan_for
        from tunehost.tune import race

        self.args = args
        self.model = str(resolve_model(args.model).resolve())
        self.binary = runner.resolve_binary(args.llama_bench)
        self.supported = runner._supported(self.binary)
        self.made, self.view, self.facts = plan_for(self.model, args.ctx, HostFacts(open_host()))
        self.plan = race.Candidate("advise's plan", self.made.launch(),
                                   runner.bench_flags(self.made.launch(), self.supported).flags)
        self.cores = len(self.view.cores) or os.cpu_count() or 1
        self.invoke = lambda a: run_llama_bench(self.binary, a, timeout=600)

    def settings(self, budget: float) -> "object":
        from tunehost.tune.race import TuneSettings

        return TuneSettings(model=self.model, n_prompt=self.args.n_prompt, n_gen=self.args.n_gen,
                            reps=self.args.reps, budget_s=budget, objective="tg")

    def candidate(self, label: str, launch) -> "object":
        from tunehost.tune.race import Candidate

        from tunehost.bench.runner import bench_flags

        return Candidate(label, launch, bench_flags(launch, self.supported).flags)

    def space(self) -> list:
        out = []
        for t, ub, (kv, fa) in itertools.product(("1", str(self.cores)), ("128", "512"),
                                                 (("q8_0", "on"), ("f16", "on"), ("f16", "off"))):
            launch = (self.plan.launch.with_flag("-t", t).with_flag("-tb", t).with_flag("-ub", ub)
                      .with_flag("-ctk", kv).with_flag("-ctv", kv).with_flag("-fa", fa))
            out.append(self.candidate(f"-t {t} -ub {ub} KV {kv} -fa {fa}", launch))
        return out

    def knobs(self) -> list:
        from tunehost.bench import runner
        from tunehost.tune.race import Knob

        def knob(name, values):
            def variants(inc):
                return [self.candidate(label, change(inc.launch)) for label, change in values
                        if runner.bench_flags(change(inc.launch), self.supported).flags != inc.args]
            return Knob(name, variants, uses_cpus=name in ("threads", "cpu set"))

        return [
            knob("threads", [(f"-t {t}", lambda l, t=t: l.with_flag("-t", t).with_flag("-tb", t))
                             for t in ("1", str(self.cores))]),
            knob("ubatch", [(f"-ub {u}", lambda l, u=u: l.with_flag("-ub", u)) for u in ("128", "512")]),
            knob("kv cache", [(f"KV {k}", lambda l, k=k: l.with_flag("-ctk", k).with_flag("-ctv", k).with_flag(
                "-fa", "on")) for k in ("q8_0", "f16")]),
            knob("flash attention", [(f"-fa {f}", lambda l, f=f: l.with_flag("-fa", f) if (l.value("-ctv") or "f16")
                                      == "f16" else l) for f in ("on", "off")]),
        ]


def grid(setup: Setup) -> dict:
    """Every configuration each round (interleaved, order reversed every other round), paired against the plan."""
    from tunehost.bench.stats import compare_rounds
    from tunehost.tune.race import Measurer, groups_of, score, split_results

    space = setup.space()
    plan_args = setup.plan.args
    arms = [a for a in space if a.args != plan_args]
    arms.insert(0, setup.plan)
    if setup.args.grid_from:  # the grid of an earlier run of this script (its partial JSON): race and check only
        partial = json.loads(Path(setup.args.grid_from).read_text())
        partial["grid_reused_from"] = setup.args.grid_from
        best_arm = next(a for a in arms if a.label == partial["grid_best"])
        return _race_and_check(setup, partial, best_arm, float(partial["grid_s"]))
    measurer = Measurer(setup.invoke)
    settings = setup.settings(1e9)
    values: dict[str, list[float]] = {a.label: [] for a in arms}
    for group in groups_of(arms):  # warm-up
        measurer.run([*settings.base_args(1), *group.args(False)])
    for r in range(setup.args.grid_rounds):
        groups = groups_of(arms)
        for group in (groups[::-1] if r % 2 else groups):
            got = split_results(group, measurer.run([*settings.base_args(settings.reps), *group.args(r % 2 == 1)]),
                                settings.tests(), r % 2 == 1)
            for arm, results in got.items():
                values[arm.label].append(score(results, "tg"))
        print(f"grid round {r + 1}/{setup.args.grid_rounds}: {measurer.spent_s:.0f} s", file=sys.stderr)
    base = values[setup.plan.label]
    ratios = {}
    for arm in arms[1:]:
        c = compare_rounds([[v] for v in base], [[v] for v in values[arm.label]], paired=True, describe=False)
        ratios[arm.label] = c
    best_label = max(ratios, key=lambda k: ratios[k].ratio)
    best = ratios[best_label]
    best_arm = next(a for a in arms if a.label == best_label)
    plan_best = best if best.ratio > 1 else None
    grid_s = measurer.spent_s
    print(f"grid: {len(arms)} configurations x {setup.args.grid_rounds} rounds in {grid_s:.0f} s; best "
          f"{best_label} {best.change_percent:+.1f} % vs plan", file=sys.stderr)

    partial = {"space": [a.label for a in arms], "grid_rounds": setup.args.grid_rounds, "grid_s": round(grid_s, 1),
               "grid_best": best_label, "grid_best_vs_plan": {"change_percent": round(best.change_percent, 2),
                                                              "low": best.low, "high": best.high},
               "plan_share_of_best": round(1.0 / best.ratio, 4) if plan_best else 1.0}
    Path("/tmp/bench_tune_grid_partial.json").write_text(json.dumps(partial, indent=2, default=str))
    return _race_and_check(setup, partial, best_arm, grid_s)


def _race_and_check(setup: Setup, partial: dict, best_arm, grid_s: float) -> dict:
    """tune over the same space with a third of the grid's time, then its winner against the grid's best."""
    from tunehost.tune.race import Measurer, tune

    t0 = time.monotonic()
    from tunehost.errors import TunehostError

    try:
        outcome = tune(setup.plan, setup.knobs(), Measurer(setup.invoke), setup.settings(grid_s / 3.0))
    except TunehostError as exc:
        return dict(partial, tune_error=str(exc))
    tune_s = outcome.spent_s
    print(f"tune: {outcome.winner.label} in {tune_s:.0f} s ({time.monotonic() - t0:.0f} s wall)", file=sys.stderr)

    from tunehost.bench.runner import measure

    if outcome.winner.args == best_arm.args:
        versus = {"same configuration": True}
    else:
        check = measure(setup.model, baseline=best_arm.args, candidate=outcome.winner.args, n_prompt=0,
                        n_gen=setup.args.n_gen, reps=setup.args.reps, budget_s=setup.args.check_budget,
                        llama_bench=setup.binary, describe=False, ceiling=False, watch=False)
        row = check.comparison.rows[0]
        versus = {"change_percent": round(row.change_percent, 2), "low": row.low, "high": row.high,
                  "verdict": row.statistical_verdict, "rounds": row.rounds}
    return {
        **partial,
        "tune_winner": outcome.winner.label, "tune_selected": outcome.best.label, "tune_s": round(tune_s, 1),
        "tune_share_of_grid_time": round(tune_s / grid_s, 3),
        "tune_stages": [{"knob": s.knob, "rounds": s.rounds, "winner": s.winner.label, "stop": s.stop_reason}
                        for s in outcome.stages],
        "tune_winner_vs_grid_best": versus,
    }


def aa(setup: Setup) -> dict:
    """Tune over a space whose candidates cannot differ: -ngl 0 / 1 / 99 on a CPU-only llama-bench."""
    from tunehost.tune.race import Knob, Measurer, tune

    def variants(inc):
        return [setup.candidate(f"-ngl {n}", inc.launch.with_flag("-ngl", n)) for n in ("1", "99")
                if inc.launch.value("-ngl") != n]

    # -t 1: one spinning thread keeps each run short on a loaded 2-core box; the A/A property does not depend on it
    plan = setup.candidate("plan -t 1 -ngl 0", setup.plan.launch.with_flag("-t", "1").with_flag("-tb", "1")
                           .with_flag("-ngl", "0"))
    runs = []
    from tunehost.errors import TunehostError

    refused = []
    for i in range(setup.args.aa_runs):
        try:
            outcome = tune(plan, [Knob("ngl (ignored on CPU)", variants)], Measurer(setup.invoke),
                           setup.settings(setup.args.aa_budget))
        except TunehostError as exc:  # a load spike made the budget too short: not a run, said so
            refused.append(str(exc))
            print(f"A/A {i + 1}/{setup.args.aa_runs}: refused: {exc}", file=sys.stderr)
            continue
        runs.append({"winner": outcome.winner.label, "selected": outcome.best.label,
                     "rounds": sum(s.rounds for s in outcome.stages), "spent_s": round(outcome.spent_s, 1)})
        print(f"A/A {i + 1}/{setup.args.aa_runs}: {outcome.winner.label} (search picked {outcome.best.label})",
              file=sys.stderr)
    false = sum(1 for r in runs if r["winner"] != plan.label)
    selected = sum(1 for r in runs if r["selected"] != plan.label)
    return {"runs": len(runs), "refused": len(refused), "false_winners": false, "rate": round(false / len(runs), 4) if runs else None,
            "wilson95": wilson(false, len(runs)), "search_selected_non_plan": selected,
            "median_rounds": statistics.median(r["rounds"] for r in runs) if runs else None, "detail": runs}


def optimus(setup: Setup) -> dict:
    """llama-optimus and tune, same model and budget; both winners re-measured against llama-bench's defaults."""
    from tunehost.bench.runner import measure
    from tunehost.tune.race import Measurer, tune

    exe = setup.args.optimus or shutil.which("llama-optimus")
    if not exe:
        return {"error": "llama-optimus not found (pip install llama-optimus, or --optimus PATH)"}
    budget = setup.args.optimus_budget
    argv = [exe, "--trials", str(setup.args.optimus_trials), "--model", setup.model, "--llama-bin",
            str(Path(setup.binary).parent), "--metric", "tg", "-r", "3", "--n-tokens", str(setup.args.n_gen),
            "--ngl-max", "0", "--no-warmup", "--override-mode", "none"]
    began = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=budget * 1.5, stdin=subprocess.DEVNULL)
        text = done.stdout
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    optimus_s = time.monotonic() - began
    match = None
    for line in text.splitlines():
        if "llama-bench" in line and "--ubatch-size" in line:
            match = line
    claimed = [float(m) for m in re.findall(r"Best Stage_\d tg tokens/sec: ([0-9.]+)", text)]
    if match is None:
        return {"error": "llama-optimus printed no final configuration", "wall_s": round(optimus_s, 1),
                "tail": text[-2000:]}
    words = match.split()

    def value(*names: str) -> str | None:
        for n in names:
            if n in words:
                return words[words.index(n) + 1]
        return None

    fa = value("--flash-attn")
    opt_flags = ("-t", value("-t"), "-b", value("--batch-size"), "-ub", value("--ubatch-size"),
                 "-fa", "on" if fa == "1" else "off")
    # tunehost as a user runs it: advise's plan and tune's own search space (tunehost.tune.space), same budget
    from tunehost.tune import space

    knobs = space.knobs(setup.facts, setup.view, setup.made.path, setup.supported, "tg", setup.args.n_prompt)
    outcome = tune(setup.plan, knobs, Measurer(setup.invoke), setup.settings(optimus_s))
    print(f"tune: {outcome.winner.label} ({outcome.spent_s:.0f} s)", file=sys.stderr)

    def ab(baseline, candidate) -> dict:
        check = measure(setup.model, baseline=baseline, candidate=candidate, n_prompt=0, n_gen=setup.args.n_gen,
                        reps=setup.args.reps, budget_s=setup.args.check_budget, llama_bench=setup.binary,
                        describe=False, ceiling=False, watch=False)
        row = check.comparison.rows[0]
        return {"change_percent": round(row.change_percent, 2), "low": row.low, "high": row.high,
                "verdict": row.statistical_verdict, "rounds": row.rounds, "baseline_ts": row.baseline_ts,
                "candidate_ts": row.candidate_ts}

    results = {}
    for name, flags in (("llama-optimus", tuple(opt_flags)), ("tunehost", outcome.winner.args)):
        results[name] = dict(ab((), flags), flags=list(flags))
        print(f"{name} vs llama-bench defaults: {results[name]}", file=sys.stderr)
    c = outcome.confirmation
    claim = None if c is None else {"vs_plan_percent": round(c.change_percent, 2), "low": c.low, "high": c.high,
                                    "verdict": c.verdict, "rounds": c.rounds}
    # does tunehost's claim hold up? the winner against advise's plan again, in a fresh paired run
    claim_check = ab(setup.plan.args, outcome.winner.args) if outcome.improved else None
    head_to_head = ab(tuple(opt_flags), outcome.winner.args)  # tunehost's winner against llama-optimus's
    return {"budget_s": round(optimus_s, 1), "optimus_trials": setup.args.optimus_trials,
            "optimus_claimed_best_ts": max(claimed) if claimed else None,
            "optimus_claim_vs_remeasured_ts": (round(max(claimed) / results["llama-optimus"]["candidate_ts"], 3)
                                               if claimed and results["llama-optimus"]["candidate_ts"] else None),
            "tunehost_claim": claim, "tunehost_claim_remeasured": claim_check,
            "tunehost_winner": outcome.winner.label,
            "tunehost_stages": [s.describe() for s in outcome.stages],
            "tunehost_skipped": [list(k) for k in outcome.skipped],
            "remeasured_vs_defaults": results, "tunehost_vs_optimus": head_to_head}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="medium")
    parser.add_argument("--llama-bench", default=None)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("-p", "--n-prompt", type=int, default=64)
    parser.add_argument("-n", "--n-gen", type=int, default=16)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--parts", default="grid,aa,optimus")
    parser.add_argument("--grid-rounds", type=int, default=10)
    parser.add_argument("--grid-from", default=None, help="reuse the grid of an earlier run (its partial JSON)")
    parser.add_argument("--check-budget", type=float, default=120.0)
    parser.add_argument("--aa-runs", type=int, default=40)
    parser.add_argument("--aa-budget", type=float, default=60.0)
    parser.add_argument("--optimus", default=None)
    parser.add_argument("--optimus-trials", type=int, default=4)
    parser.add_argument("--optimus-budget", type=float, default=300.0)
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args()
    setup = Setup(args)
    report: dict = {"model": setup.model, "binary": str(setup.binary), "plan": list(setup.plan.args),
                    "cores": setup.cores, "settings": {"n_gen": args.n_gen, "reps": args.reps},
                    "load_average": os.getloadavg()}
    for part in args.parts.split(","):
        try:
            report[part] = {"grid": grid, "aa": aa, "optimus": optimus}[part](setup)
        except Exception as exc:  # one part failing must not lose the others' figures
            report[part] = {"error": f"{exc.__class__.__name__}: {exc}"}
        print(json.dumps({part: report[part]}, indent=2, default=str))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
