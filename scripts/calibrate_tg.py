#!/usr/bin/env python3
"""Print how tunehost's TG band (tunehost.advise.ceiling.tg_band) covers the published llama.cpp/Ollama measurements in
tests/advise/data/published_tg.csv: one line per measurement, then per class (gpu, split, cpu, unified, ollama,
power-capped) the share inside, the median band width, the worst optimistic miss (measured / low edge) and the width
floor (calibration.width_floor: the narrowest band of the model's shape, centred with hindsight, that holds 85 %).
--cv adds leave-one-source-out per class (each row judged by constants fitted without any row of its source; slow)."""

from pathlib import Path

import sys

from tunehost.advise.calibration import by_class, judge, leave_one_source_out, load

DATA = Path(__file__).resolve().parent.parent / "tests" / "advise" / "data" / "published_tg.csv"


def table(title: str, classes: dict) -> None:
    print(title)
    print(f"  {'class':13} {'inside':>8} {'median width':>13} {'worst miss':>11} {'width floor':>12}")
    for name, s in classes.items():
        print(f"  {name:13} {s['inside']:>3}/{s['n']:<4} {s['median_width']:>12.2f}x "
              f"{s['worst_low']:>11.2f} {s['width_floor']:>11.2f}x")


def main() -> None:
    rows = load(DATA)
    verdicts = judge(rows)
    for v in verdicts:
        mark = "in " if v.inside else "OUT"
        fits = "" if v.m.fits else "  (did not fit its memory: left out of the figures)"
        if v.m.fits and v.m.excluded:
            fits = f"  (excluded: {v.m.excluded[:60]})"
        print(f"{mark} {v.m.id} {v.m.hardware[:36]:36} {v.m.model[:22]:22} {v.m.quant:7} measured {v.m.tps:7.1f}"
              f"  band {v.low:7.1f} - {v.high:7.1f}{fits}")
    table(f"{len(rows)} measurements, in sample (BAND_MODELS were fitted on these rows):", by_class(verdicts))
    if "--cv" in sys.argv[1:]:
        table("leave-one-source-out (each row judged by constants fitted without its source):",
              by_class(leave_one_source_out(rows)))


if __name__ == "__main__":
    main()
