#!/usr/bin/env python3
"""Measure tunehost's own CLI speed targets (issue 2): `tunehost --help` < 0.3 s and
`tunehost doctor --snapshot DIR --json` < 0.4 s wall on the 2-core CI machine.

Runs each command as a fresh process (what a user or a script pays), a few warm-ups then N timed runs,
and prints median / min / max per command. Exit 1 when a median misses its target.

    python scripts/bench_cli.py [--runs 15] [--snapshot tests/data/snapshots/desktop-12700f-rtx3060]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SNAPSHOT = REPO / "tests" / "data" / "snapshots" / "desktop-12700f-rtx3060"


def time_command(argv: list[str], runs: int, warmups: int = 2) -> list[float]:
    times = []
    for i in range(warmups + runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = time.perf_counter() - start
        if proc.returncode not in (0, 2):
            sys.exit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
        if i >= warmups:
            times.append(elapsed)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--snapshot", type=Path, default=DEFAULT_SNAPSHOT)
    args = parser.parse_args()
    exe = shutil.which("tunehost") or str(Path(sys.executable).parent / "tunehost")
    targets = [
        ("tunehost --help", [exe, "--help"], 0.3),
        (f"tunehost doctor --snapshot {args.snapshot.name} --json", [exe, "doctor", "--snapshot", str(args.snapshot), "--json"], 0.4),
    ]
    failed = False
    for label, argv, target in targets:
        times = time_command(argv, args.runs)
        med = statistics.median(times)
        ok = med < target
        failed |= not ok
        print(f"{label:<70} median {med*1000:6.0f} ms  min {min(times)*1000:6.0f}  max {max(times)*1000:6.0f}  "
              f"target < {target*1000:.0f} ms  {'OK' if ok else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
