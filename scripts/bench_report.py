#!/usr/bin/env python3
"""The size and render time of `tunehost report`'s page for a big results store (default 10,000 runs).

Builds a store of --runs runs (tests/report/fixtures.py: bench, tune and drift runs of two models, a kernel, BIOS,
RAM-speed and llama.cpp-build change on the way), then measures, best of --repeat:

  build    tunehost.ops.report.build_report on a snapshot (doctor on it, the store read, charts' series thinned)
  render   tunehost.formats.report_html.render (the HTML page)
  browser  headless Chromium: navigation to the load event (inline scripts run, charts drawn), when a Chromium
           and websocket-client are installed (tests/report/browser.py)

and the page's size in bytes, how many points and marks its charts embed, against --max-bytes and --max-seconds
(exit 1 when over).

    python scripts/bench_report.py                     # 10,000 runs
    python scripts/bench_report.py --runs 1000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.report.fixtures import make_store  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--snapshot", type=Path, default=REPO / "tests/data/snapshots/desktop-12700f-rtx3060")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-bytes", type=int, default=1_000_000, help="the page may be at most this big")
    parser.add_argument("--max-seconds", type=float, default=10.0, help="build + render at most this long")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--keep", type=Path, help="keep the page here")
    args = parser.parse_args()

    from tunehost.doctor.registry import load_checks
    from tunehost.facts import HostFacts
    from tunehost.formats.report_html import render
    from tunehost.host import open_host
    from tunehost.ops.report import ReportRequest, build_report
    from tunehost.store import open_store

    with tempfile.TemporaryDirectory(prefix="tunehost-bench-report-") as tmp:
        started = time.perf_counter()
        store_file = make_store(Path(tmp) / "results.sqlite3", runs=args.runs)
        made_s = time.perf_counter() - started
        checks = tuple(load_checks().checks)
        builds, renders, page = [], [], ""
        report = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            with open_store(store_file) as store:
                report = build_report(HostFacts(open_host(args.snapshot)), ReportRequest(checks=checks,
                                                                                         snapshot=args.snapshot),
                                      store)
            t1 = time.perf_counter()
            page = render(report)
            t2 = time.perf_counter()
            builds.append(t1 - t0)
            renders.append(t2 - t1)
        assert report is not None
        out = Path(args.keep) if args.keep else Path(tmp) / "report.html"
        out.write_text(page)
        browser_s = _browser_load(out, args.repeat)
        figures = {
            "runs_in_store": args.runs, "runs_read": report.runs_read, "store_made_s": round(made_s, 2),
            "build_s": round(min(builds), 3), "render_s": round(min(renders), 3),
            "page_bytes": len(page.encode()), "series": len(report.series),
            "points_embedded": sum(len(s.points) for s in report.series),
            "points_total": sum(s.total_points for s in report.series),
            "marks_embedded": sum(len(s.marks) for s in report.series),
            "browser_load_s": round(browser_s, 3) if browser_s is not None else None,
        }
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key.ljust(width)}  {value if value is not None else 'not measured (no Chromium)'}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    over = []
    if figures["page_bytes"] > args.max_bytes:
        over.append(f"page {figures['page_bytes']} bytes > {args.max_bytes}")
    if figures["build_s"] + figures["render_s"] > args.max_seconds:
        over.append(f"build + render {figures['build_s'] + figures['render_s']:.2f} s > {args.max_seconds}")
    for line in over:
        print(f"OVER: {line}", file=sys.stderr)
    return 1 if over else 0


def _browser_load(page: Path, repeat: int) -> float | None:
    """Best-of-``repeat`` seconds from navigation to the load event in headless Chromium, None without one."""
    try:
        from tests.report.browser import Browser, find_browser

        binary = find_browser()
        if binary is None:
            return None
        with Browser(binary) as browser:
            browser.viewport(1200, 900)
            times = [browser.load(page) for _ in range(repeat)]
            drawn = browser.evaluate("document.documentElement.getAttribute('data-charts')")
            if browser.problems() or not drawn:
                print(f"browser: {browser.problems()} charts={drawn}", file=sys.stderr)
            return min(times)
    except ImportError:
        return None


if __name__ == "__main__":
    sys.exit(main())
