#!/usr/bin/env python3
"""Time and peak RSS of tunehost on the hostile examples of issue 22, for a before/after table (docs/bounds.md).

    python scripts/bench_bounds.py                          # this checkout
    git archive f1a4f17 | tar -x -C /tmp/base               # the code before the bounds
    python scripts/bench_bounds.py --tree /tmp/base --limit 90

Each case runs in its own Python process (PYTHONPATH=TREE) under a wall-clock limit; the figures are that process's
wall time and peak RSS (VmHWM, polled every 20 ms: a peak in the last 20 ms of a run can be missed). A case still running at the limit is killed and shown as "> LIMIT s". Floods are
--flood-mib on stdout (the issue's 1.5 GB is 1536; the default 512 keeps the "before" run within a shared machine).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES: dict[str, str] = {
    # class 1: a run of digits where a PCIe link speed belongs (the regex was quadratic)
    "link speed, 20,000 digits": "from tunehost.facts.gpu import link_gen; link_gen('1' * 20_000)",
    "link speed, 200,000 digits": "from tunehost.facts.gpu import link_gen; link_gen('1' * 200_000)",
    # class 1: a GGUF whose metadata is an array of 1,000,000 empty arrays (12 MB)
    "GGUF, 1,000,000 nested arrays": "from tunehost.model import read_model\n"
                                     "try: read_model(WORK + '/nested.gguf')\nexcept Exception as e: print(e)",
    # class 9: a complete GGUF with a key written twice
    "GGUF, duplicated key": "from tunehost.model import read_model\n"
                            "try: read_model(WORK + '/dup.gguf')\nexcept Exception as e: print(e)",
    # class 2: llama-bench printing FLOOD MiB on stdout in one line
    "llama-bench, FLOOD MiB on stdout": "from tunehost.bench.llama_bench import run_llama_bench\n"
                                        "try: run_llama_bench(WORK + '/flood-bench', [], timeout=600)\n"
                                        "except Exception as e: print(e)",
    # class 2: a llama.cpp binary flooding on --version (doctor's llama-build facts run it)
    "--version, FLOOD MiB in lines": "from tunehost.host.commands import LiveCommands\n"
                                     "r = LiveCommands().run([WORK + '/flood-version', '--version'], timeout=600)\n"
                                     "print(r.rc, r.stderr[:80])",
    # class 3: llama-bench that ignores SIGTERM and never exits, run with a 2 s deadline
    "llama-bench ignoring SIGTERM, 2 s deadline": "from tunehost.bench.llama_bench import run_llama_bench\n"
                                                  "try: run_llama_bench(WORK + '/hang-bench', [], timeout=2)\n"
                                                  "except Exception as e: print(e)",
    # class 4: samples_ts 1e308 through `bench --import`
    "bench --import, samples_ts 1e308": "import sys; from tunehost.cli import main\n"
                                        "sys.argv = ['tunehost', 'bench', '--import', WORK + '/big.jsonl']\n"
                                        "main()",
    # class 5: a FIFO as --model
    "advise --model FIFO": "import sys; from tunehost.cli import main\n"
                           "sys.argv = ['tunehost', 'advise', '--model', WORK + '/fifo']\nmain()",
    "bench --import FIFO": "import sys; from tunehost.cli import main\n"
                           "sys.argv = ['tunehost', 'bench', '--import', WORK + '/fifo']\nmain()",
}


def prepare(work: Path, flood_mib: int) -> None:
    import struct

    def kv_string(name: str, value: str) -> bytes:
        return struct.pack("<Q", len(name)) + name.encode() + struct.pack("<IQ", 8, len(value)) + value.encode()

    count = 1_000_000
    nested = (struct.pack("<Q", 7) + b"general" + struct.pack("<IIQ", 9, 9, count)
              + struct.pack("<IQ", 4, 0) * count)
    arch = kv_string("general.architecture", "llama")
    (work / "nested.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + arch + nested)
    (work / "dup.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 3) + arch + kv_string("general.name", "a")
                                    + kv_string("general.name", "b"))
    scripts = {
        "flood-bench": f"head -c {flood_mib * 1024 * 1024} /dev/zero | tr '\\0' x",
        "flood-version": f"head -c {flood_mib * 1024 * 1024} /dev/zero | tr '\\0' x | fold -w 100",
        "hang-bench": "trap '' TERM; sleep 3600",
    }
    for name, body in scripts.items():
        path = work / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    (work / "big.jsonl").write_text('{"n_prompt":512,"n_gen":0,"avg_ts":5,"samples_ts":[1e308,1e308]}\n')
    os.mkfifo(work / "fifo")


def run_case(code: str, tree: Path, work: Path, limit: float) -> tuple[str, str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    program = f"WORK = {str(work)!r}\n{code}"
    started = time.monotonic()
    # cwd: the work directory, so `-c`'s "" on sys.path cannot pick up a tunehost/ other than TREE's
    proc = subprocess.Popen([sys.executable, "-c", program], env=env, stdout=subprocess.PIPE, cwd=work,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = started + limit
    status, peak_kib = 0, 0
    while True:
        peak_kib = max(peak_kib, _hwm_kib(proc.pid))
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            return f"> {limit:g} s (killed)", f"{peak_kib / 1024:.0f} MiB", "(still running)"
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    out = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
    lines = [line for line in out.splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit {os.waitstatus_to_exitcode(status)}"
    if "Traceback" in out:
        last = "Traceback: " + last
    return f"{elapsed:.2f} s", f"{peak_kib / 1024:.0f} MiB", last[:110]


def _hwm_kib(pid: int) -> int:
    """The process's own peak RSS (VmHWM) so far. Read from /proc while it runs: wait4's ru_maxrss would also count
    the memory of this script at fork time."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                        help="a tunehost source tree (default: this checkout)")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per case before it is killed")
    parser.add_argument("--flood-mib", type=int, default=512, help="MiB the flooding programs print")
    parser.add_argument("--only", action="append", default=[], help="run only cases whose name contains this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bounds-") as tmp:
        work = Path(tmp)
        prepare(work, args.flood_mib)
        print(f"tree: {args.tree}  limit: {args.limit:g} s  flood: {args.flood_mib} MiB")
        print(f"{'case':46} {'wall':>18} {'peak RSS':>10}  outcome")
        for name, code in CASES.items():
            if args.only and not any(o in name for o in args.only):
                continue
            wall, rss, outcome = run_case(code, args.tree, work, args.limit)
            print(f"{name.replace('FLOOD', str(args.flood_mib)):46} {wall:>18} {rss:>10}  {outcome}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
