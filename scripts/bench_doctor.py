#!/usr/bin/env python3
"""Wall time of `tunehost doctor`, measuring vs `--quick`, side by side with `python -c pass`.

Each round runs the three commands in a rotating order (so drift of the shared host hits all three), as fresh
processes exactly as a user starts them; the report gives the median, min and max of each, and what measuring adds.
The target of issue 9: a measuring doctor within ~4 s of wall time on the 2-core CI machine.

    python scripts/bench_doctor.py                 # 5 rounds
    python scripts/bench_doctor.py --rounds 9 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "tunehost doctor --quick": [sys.executable, "-m", "tunehost", "doctor", "--quick", "--json"],
    "tunehost doctor": [sys.executable, "-m", "tunehost", "doctor", "--json"],
}


def timed(argv: list[str]) -> tuple[float, dict | None]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 2):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:300]}")
    try:
        return wall, json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        return wall, None


def measured_findings(report: dict | None) -> list[str]:
    return [f"{f['check']}: {f['severity']}: {f['summary']}" for f in (report or {}).get("findings", [])
            if f["check"] in ("memory-bandwidth", "cpu-clocks")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    names = list(COMMANDS)
    walls: dict[str, list[float]] = {n: [] for n in names}
    last: dict | None = None
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            wall, report = timed(COMMANDS[name])
            walls[name].append(wall)
            if name == "tunehost doctor":
                last = report
    rows = {n: {"median_s": round(statistics.median(w), 3), "min_s": round(min(w), 3), "max_s": round(max(w), 3)}
            for n, w in walls.items()}
    added = rows["tunehost doctor"]["median_s"] - rows["tunehost doctor --quick"]["median_s"]
    result = {"rounds": args.rounds, "commands": rows, "measuring_adds_s": round(added, 3),
              "measured": measured_findings(last)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{'command':<26} {'median':>8} {'min':>8} {'max':>8}   ({args.rounds} rounds, rotating order)")
    for name, row in rows.items():
        print(f"{name:<26} {row['median_s']:>7.2f}s {row['min_s']:>7.2f}s {row['max_s']:>7.2f}s")
    print(f"measuring adds {added:.2f} s (median doctor - median doctor --quick)")
    for line in result["measured"]:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
