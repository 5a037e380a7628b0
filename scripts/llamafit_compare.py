#!/usr/bin/env python3
"""llamafit's KV cache + recurrent state beside tunehost's and llama.cpp's own figures; with --tg, llamafit 0.1.1's
token-generation estimate beside tunehost's band on the published runs of tests/advise/data/published_tg.csv.

    python3 -m venv /tmp/lf && /tmp/lf/bin/pip install -e . llamafit==0.1.1 && /tmp/lf/bin/python scripts/llamafit_compare.py
    /tmp/lf/bin/python scripts/llamafit_compare.py --tg
    /tmp/lf/bin/python scripts/llamafit_compare.py --tg --scoreboard   (llama.cpp's scoreboards and LocalScore)

--tg applies llamafit's generation formula (llamafit.speed.estimate.formula_estimate, section 10.1) with its own
constants (llamafit.constants.speed: EFF_VRAM, EFF_RAM_SEQUENTIAL, EFF_RAM_SCATTERED, FIXED_OVERHEAD_S) to each row's
bytes and bandwidths: VRAM and unified memory at EFF_VRAM, a CPU's dense bytes at EFF_RAM_SEQUENTIAL, routed experts
in RAM at EFF_RAM_SCATTERED (a CPU-only MoE row's bytes all count as experts: the rows do not split them), no KV term
(the rows do not give the context). llamafit knows no power cap and no Ollama: it gives one number for those rows too.

For the models of tests/advise/data/llama_memory_table.json that llamafit's catalog also has, prints llama.cpp's
figure (captured by scripts/llama_memory_check.py), tunehost's and llamafit's (`llamafit.budget.kv.kv_cache_bytes` +
the catalog's `recurrent_state_bytes`). Where they disagree, llama.cpp's figure says who is right. llamafit is not a
tunehost dependency: install it in a scratch environment.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# tunehost's table name -> llamafit catalog name (qwen3.6-35b-a3b has Qwen3.5-35B-A3B's shape: 40 layers, 10 with KV)
PAIRS = {"llama-3.1-8b": "llama-3.1-8b-instruct", "gemma-3-27b": "gemma-3-27b-it", "gpt-oss-20b": "gpt-oss-20b",
         "gpt-oss-120b": "gpt-oss-120b", "qwen3-coder-next": "qwen3-coder-next", "qwen3.5-35b-a3b": "qwen3.6-35b-a3b"}
LLAMAFIT_KV_TYPES = ("f16", "q8_0", "q4_0")


def tg_main() -> int:
    import statistics

    from llamafit.constants.speed import EFF_RAM_SCATTERED, EFF_RAM_SEQUENTIAL, EFF_VRAM, FIXED_OVERHEAD_S

    from tunehost.advise.calibration import (judge, leave_one_source_out, load, load_apple_scoreboard,
                                             load_localscore, load_scoreboard, scoreboard_of)

    data = ROOT / "tests" / "advise" / "data"
    if "--scoreboard" in sys.argv[1:]:  # an evaluation set: nothing is fitted on it, so tunehost's band is as it is
        rows = load_scoreboard(data / "scoreboard_tg.csv", as_judged=False)
        rows += load_apple_scoreboard(data / "scoreboard_apple_tg.csv")
        rows += load_localscore(data / "localscore_tg.csv", as_judged=False)
        ours = {v.m.id: v for v in judge(rows)}
        report_class = lambda m: "localscore" if m.runtime == "llamafile" else scoreboard_of(m)  # noqa: E731
    else:
        rows = [m for m in load(data / "published_tg.csv") if m.counted]
        ours = {v.m.id: v for v in leave_one_source_out(rows)}
        report_class = lambda m: m.report_class()  # noqa: E731
    print(f"{'id':4} {'class':12} {'measured':>8} {'llamafit':>8} {'ratio':>6}   tunehost band (out of sample)")
    per: dict[str, list[tuple[float, bool, bool]]] = {}
    for m in rows:
        t = FIXED_OVERHEAD_S
        if m.kind == "cpu":
            t += m.bytes_gb * 1e9 / (m.gbps * 1e9 * (EFF_RAM_SCATTERED if m.moe else EFF_RAM_SEQUENTIAL))
        else:
            t += m.bytes_gb * 1e9 / (m.gbps * 1e9 * EFF_VRAM)
            if m.cpu_bytes_gb:
                t += m.cpu_bytes_gb * 1e9 / (m.cpu_gbps * 1e9 * (EFF_RAM_SCATTERED if m.moe else EFF_RAM_SEQUENTIAL))
        lf = 1.0 / t
        v = ours[m.id]
        near = 0.8 <= m.tps / lf <= 1.25
        per.setdefault(report_class(m), []).append((lf / m.tps, near, v.inside))
        print(f"{m.id:4} {report_class(m):12} {m.tps:8.1f} {lf:8.1f} {lf / m.tps:6.2f}   "
              f"{v.low:7.1f} - {v.high:7.1f} {'in' if v.inside else 'OUT'}")
    print(f"\n{'class':13} {'n':>3}  llamafit/measured median [min, max]  llamafit within 0.8-1.25x  tunehost inside")
    for k in sorted(per):
        r = [x[0] for x in per[k]]
        print(f"{k:13} {len(r):>3}  {statistics.median(r):5.2f} [{min(r):.2f}, {max(r):.2f}]"
              f"{sum(x[1] for x in per[k]):>20}/{len(r):<3} {sum(x[2] for x in per[k]):>13}/{len(r)}")
    return 0


def main() -> int:
    if "--tg" in sys.argv[1:]:
        return tg_main()
    import llamafit
    from llamafit.budget.kv import kv_cache_bytes
    from llamafit.models.gguf import GgufFacts

    import importlib.util
    spec = importlib.util.spec_from_file_location("llama_memory_check", ROOT / "scripts" / "llama_memory_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)

    catalog = {}
    for path in glob.glob(os.path.join(os.path.dirname(llamafit.__file__), "data", "catalog", "*.facts.json")):
        for name, model in json.loads(Path(path).read_text())["models"].items():
            catalog[name] = GgufFacts(**next(iter(model["quants"].values()))["gguf_facts"])
    mib = 1024 * 1024
    print(f"{'model (llamafit catalog name)':42} {'ctx':>7} {'np':>3} {'KV':5} {'llama.cpp':>10} {'tunehost':>10} "
          f"{'llamafit':>10}   MiB, KV + recurrent state")
    with tempfile.TemporaryDirectory() as tmp:
        for entry in json.loads(check.TABLE.read_text()):
            other = PAIRS.get(entry["name"])
            if other not in catalog:
                continue
            path = check.write_gguf(Path(tmp) / "model.gguf", entry["arch"], entry["metadata"])
            for case in entry["cases"]:
                kv_type = case.get("ctk", "f16")
                if not case.get("llama_cpp") or kv_type not in LLAMAFIT_KV_TYPES or case.get("fa") is False \
                        or case.get("swa_full"):
                    continue
                theirs = case["llama_cpp"]["kv_mib"] + case["llama_cpp"]["state_mib"]
                ours = check.tunehost_figures(path, case)
                facts = catalog[other]
                lf = (kv_cache_bytes(facts, context=case["ctx"], kv_type=kv_type)
                      + (facts.recurrent_state_bytes or 0)) / mib
                print(f"{entry['name'] + ' (' + other + ')':42} {case['ctx']:>7} {case.get('np', 1):>3} {kv_type:5} "
                      f"{theirs:>10.1f} {ours['kv_mib'] + ours['state_mib']:>10.1f} {lf:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
