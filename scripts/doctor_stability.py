#!/usr/bin/env python3
"""Does doctor give one verdict when run again and again on a loaded box? (issue 29: 2, 2, 0 with one 0.5 s sample)

Runs `tunehost doctor --json --check cpu-hogs` (its 1.5 s activity sample; `--quick`: 0.5 s) N times back to back, as fresh processes, optionally beside a
background load this script starts and stops itself, and counts the exit statuses and cpu-hogs' severities.

    python scripts/doctor_stability.py                       # 20 runs, whatever load the box has
    python scripts/doctor_stability.py --load core           # one busy-looping process (a `stress`-like core)
    python scripts/doctor_stability.py --load bursty         # the same, on 2 s / off 3 s
    python scripts/doctor_stability.py --load build          # one core of short-lived jobs, like a compile
    python scripts/doctor_stability.py --tunehost /other/venv/bin/tunehost   # another build, for a before/after

Only cpu-hogs is run: the other checks do not read the load (and nothing is measured: no check that reads the
`measure` sample runs). The report: each status and how often, and "stable" when all runs agree.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time

LOADS = {
    "none": None,
    "core": "while True: pass",
    # a build: one core kept busy by short-lived jobs (0.2-1 s each, one after another), like make's compilers
    "build": ("import random, subprocess, sys\nwhile True:\n    subprocess.run([sys.executable, '-c', "
              "'import time\\nend = time.monotonic() + %f\\nwhile time.monotonic() < end: pass' "
              "% random.uniform(0.2, 1.0)])"),
    "bursty": ("import time\nwhile True:\n    end = time.monotonic() + 2\n    while time.monotonic() < end: pass\n"
               "    time.sleep(3)"),
}


def start_load(kind: str) -> subprocess.Popen | None:
    code = LOADS[kind]
    if code is None:
        return None
    # its own session: not a child tunehost would count as its own, and stopped as a group at the end
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stop_load(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def one_run(argv: list[str]) -> tuple[int, tuple[str, ...], float]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - start
    try:
        report = json.loads(done.stdout)
        severities = tuple(f.get("severity", "?") for f in report.get("findings", ()) if f.get("check") == "cpu-hogs")
    except ValueError:
        severities = ("unreadable",)
    return done.returncode, severities, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load", choices=sorted(LOADS), default="none")
    parser.add_argument("--tunehost", help="the tunehost executable (default: this checkout's, via python -m)")
    parser.add_argument("--quick", action="store_true", help="doctor --quick (the short activity sample)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = [args.tunehost] if args.tunehost else [sys.executable, "-m", "tunehost"]
    argv = base + ["doctor", "--json", "--check", "cpu-hogs"] + (["--quick"] if args.quick else [])
    load = start_load(args.load)
    try:
        if load is not None:
            time.sleep(1.0)  # let the load show
        runs = [one_run(argv) for _ in range(args.runs)]
    finally:
        stop_load(load)
    statuses = collections.Counter(r[0] for r in runs)
    verdicts = collections.Counter("+".join(sorted(set(r[1]))) or "none" for r in runs)
    walls = sorted(r[2] for r in runs)
    summary = {"runs": args.runs, "load": args.load, "quick": args.quick, "exit_statuses": dict(statuses),
               "cpu_hogs_worst": dict(verdicts), "stable": len(statuses) == 1,
               "wall_s_median": round(walls[len(walls) // 2], 2), "tunehost": " ".join(base)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{args.runs} runs{' (--quick)' if args.quick else ''}, load {args.load}: exit statuses {dict(statuses)}; cpu-hogs findings "
              f"{dict(verdicts)}; median {summary['wall_s_median']} s per run; "
              + ("stable" if summary["stable"] else "NOT stable"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
