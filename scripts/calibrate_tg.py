#!/usr/bin/env python3
"""Print how tunehost's TG band (tunehost.advise.ceiling.tg_band) covers the published llama.cpp measurements in
tests/advise/data/published_tg.csv: one line per measurement, then the share inside and the band's width.
--cv adds a leave-one-source-out figure (slow: a grid fit per measurement)."""

from pathlib import Path

import sys

from tunehost.advise.calibration import judge, leave_one_source_out, load, summary

DATA = Path(__file__).resolve().parent.parent / "tests" / "advise" / "data" / "published_tg.csv"


def main() -> None:
    verdicts = judge(load(DATA))
    for v in verdicts:
        mark = "in " if v.inside else "OUT"
        print(f"{mark} {v.m.id} {v.m.hardware[:38]:38} {v.m.model[:26]:26} {v.m.quant:7} measured {v.m.tps:7.1f}"
              f"  band {v.low:7.1f} - {v.high:7.1f}")
    s = summary(verdicts)
    print(f"{s['n']} measurements: {s['inside_share']:.0%} inside the band; band width (high/low) median "
          f"{s['median_width']:.2f}x, max {s['max_width']:.2f}x (in-sample: BAND_MODELS was fitted on these rows)")
    if "--cv" in sys.argv[1:]:
        cv = summary(leave_one_source_out(load(DATA)))
        print(f"leave-one-source-out (each row judged by a band fitted without its source): {cv['inside_share']:.0%} "
              f"inside, median width {cv['median_width']:.2f}x")


if __name__ == "__main__":
    main()
