#!/usr/bin/env python3
"""Measure how long importing a large llama-bench Markdown table takes (issue 12: a 36 MB import took 96 s of CPU).

Writes a Markdown table of --mb megabytes whose rows cycle through --configs thread counts (each thread count is its
own configuration: the shape that made grouping quadratic), then times, in this process, the parser and the
grouping into configurations that `tunehost bench --import` runs. The CLI itself refuses inputs over
tunehost.bench.llama_bench.MAX_INPUT_BYTES (16 MiB), so this calls the functions directly.

    python scripts/bench_import.py [--mb 36] [--configs 20000]

Prints CPU seconds per phase; exit 1 when the whole import takes more than --limit CPU seconds (default 30).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HEADER = ("| model                          |       size |     params | backend    |    threads | test       |"
          "              t/s |\n"
          "| ------------------------------ | ---------: | ---------: | ---------- | ---------: | ---------- |"
          " ---------------: |\n")
ROW = "| llama 7B mostly Q4_0           |   3.56 GiB |     6.74 B | CPU        | {threads:>10} | pp 64      |" \
      " {ts:>16} |\n"


def write_table(path: Path, megabytes: float, configs: int) -> int:
    """A Markdown table of about `megabytes` MB; returns its row count."""
    target = int(megabytes * 1e6)
    rows = 0
    size = len(HEADER)
    with open(path, "w") as fh:
        fh.write(HEADER)
        while size < target:
            line = ROW.format(threads=rows % configs + 1, ts=f"{10 + rows % 97 / 10:.2f} ± 0.07")
            fh.write(line)
            size += len(line)
            rows += 1
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=36.0)
    parser.add_argument("--configs", type=int, default=20_000)
    parser.add_argument("--limit", type=float, default=30.0, help="fail above this many CPU seconds")
    args = parser.parse_args()

    from tunehost.bench.llama_bench import parse_output
    from tunehost.bench.results import result_from_bench_results

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.md"
        rows = write_table(path, args.mb, args.configs)
        text = path.read_text()
        start = time.process_time()
        parsed = parse_output(text)
        parsed_at = time.process_time()
        result = result_from_bench_results(parsed, source="imported", label=path.name)
        done = time.process_time()
    total = done - start
    print(f"{len(text) / 1e6:.1f} MB, {rows} rows, {len(result.configs)} configurations: parse {parsed_at - start:.2f} s, "
          f"group {done - parsed_at:.2f} s, total {total:.2f} s CPU")
    if total > args.limit:
        print(f"slower than {args.limit:g} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
