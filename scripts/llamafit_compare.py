#!/usr/bin/env python3
"""llamafit's KV cache + recurrent state beside tunehost's and llama.cpp's own figures.

    python3 -m venv /tmp/lf && /tmp/lf/bin/pip install -e . llamafit && /tmp/lf/bin/python scripts/llamafit_compare.py

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


def main() -> int:
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
