#!/usr/bin/env python3
"""Print how tunehost's TG band (tunehost.advise.ceiling.tg_band) covers the published llama.cpp/Ollama measurements in
tests/advise/data/published_tg.csv: one line per measurement, then per class (gpu, split, cpu, unified, ollama,
power-capped) the share inside, the median band width, the worst optimistic miss (measured / low edge) and the width
floor (calibration.width_floor: the narrowest band of the model's shape, centred with hindsight, that holds 85 %).
--cv adds leave-one-source-out per class (each row judged by constants fitted without any row of its source; slow),
then per band class (the record each published band states: ceiling.BAND_RECORD, which it is checked against).
--scoreboard judges llama.cpp's CUDA/ROCm/Vulkan scoreboards (tests/advise/data/scoreboard_tg.csv, an evaluation set
fitted on by nothing) as H17 judged them and at the bandwidths advise uses now, its Apple Silicon scoreboard
(scoreboard_apple_tg.csv, H20) per quant, and LocalScore's llamafile submissions (localscore_tg.csv, H21) per model.
--host judges the band advise gives from a host's own runs (host_calibration) on the published rows: each row by the
fit of the other rows of its host (calibration.within_host), per class, then for models new to the host and seen."""

from pathlib import Path

import sys

from tunehost.advise.calibration import (by_class, by_record, judge, leave_one_source_out, load, load_apple_scoreboard,
                                         load_localscore, load_scoreboard, scoreboard_of, summary, width_floor,
                                         within_host)
from tunehost.advise.ceiling import BAND_RECORD

DATA = Path(__file__).resolve().parent.parent / "tests" / "advise" / "data" / "published_tg.csv"
SCOREBOARD = DATA.with_name("scoreboard_tg.csv")
APPLE = DATA.with_name("scoreboard_apple_tg.csv")
LOCALSCORE = DATA.with_name("localscore_tg.csv")


def table(title: str, classes: dict) -> None:
    print(title)
    print(f"  {'class':13} {'inside':>8} {'median width':>13} {'worst miss':>11} {'width floor':>12}")
    for name, s in classes.items():
        print(f"  {name:13} {s['inside']:>3}/{s['n']:<4} {s['median_width']:>12.2f}x "
              f"{s['worst_low']:>11.2f} {s['width_floor']:>11.2f}x")


def scoreboards() -> None:
    for title, as_judged in (("as H17 judged them (the bandwidth table of d99c4ef)", True),
                             ("at the bandwidths advise uses now", False)):
        evaluation(f"llama.cpp scoreboards, Llama 2 7B Q4_0 tg128, {title}:",
                   judge(load_scoreboard(SCOREBOARD, as_judged=as_judged)), scoreboard_of, overall=False,
                   outside=not as_judged)
    evaluation("llama.cpp's Apple Silicon scoreboard (#4167), Llama 2 7B tg128, the unified band now:",
               judge(load_apple_scoreboard(APPLE)), lambda m: m.quant)
    evaluation("LocalScore's llamafile submissions (a mean over nine tests, deep contexts), the GPU band now:",
               judge(load_localscore(LOCALSCORE, as_judged=False)), lambda m: m.model)


def evaluation(title: str, verdicts: list, group, *, overall: bool = True, outside: bool = True) -> None:
    """One evaluation set: its rows outside the band (`outside`), then inside / total, width, worst miss and width
    floor per `group` (after all of them: `overall`)."""
    groups: dict[str, list] = {}
    for v in verdicts:
        groups.setdefault(group(v.m), []).append(v)
        if outside and not v.inside:
            print(f"OUT {v.m.id} {group(v.m)[:12]:12} {v.m.hardware[:44]:44} {v.m.gbps:7.1f} GB/s  measured "
                  f"{v.m.tps:6.1f}  band {v.low:6.1f} - {v.high:6.1f}")
    shown = ({"all": verdicts} if overall else {}) | dict(sorted(groups.items()))
    table(title, {k: {**summary(vs), "width_floor": width_floor(vs)} for k, vs in shown.items()})


def main() -> None:
    if "--scoreboard" in sys.argv[1:]:
        scoreboards()
        return
    rows = load(DATA)
    if "--host" in sys.argv[1:]:
        own = within_host(rows)
        evaluation(f"the band from a host's own runs ({len(own)} rows with another row of their host; "
                   "each judged by the fit of those):", own, lambda m: m.report_class())
        seen = {v.m.id for v in own if v.seen}
        evaluation("the same, by whether the host had run the row's model and quant:", own,
                   lambda m: "model seen" if m.id in seen else "model new", overall=False, outside=False)
        return
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
        loso = leave_one_source_out(rows)
        table("leave-one-source-out (each row judged by constants fitted without its source):", by_class(loso))
        records = by_record(loso)
        print("the same per band class (the record advise states with a published band; reliable: issue 33's targets):")
        for name, r in records.items():
            print(f"  {name:13} {r.inside:>3}/{r.runs:<4} {r.median_width:>12.2f}x {r.worst_low:>11.2f}"
                  f"  {'reliable' if r.reliable else 'a rough guide'}")
        print("ceiling.BAND_RECORD " + ("holds these figures" if records == BAND_RECORD else
                                        "differs: set it to\n" + repr(records)))


if __name__ == "__main__":
    main()
