"""A results store for `tunehost report` (its tests and scripts/bench_report.py): bench, tune and drift runs of
two models over weeks, with a kernel update, a BIOS update that dropped the RAM speed and a new llama.cpp build on
the way; `hostile` names one model and one configuration with markup, a script end tag, ANSI and a home path."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tunehost.store import NewRun, StoredResult, config_key, open_store

HOSTILE_MODEL = "evil</script><script>alert(1)</script>\x1b[31m<img src=x onerror=alert(2)>.gguf"
HOSTILE_CONFIG = "cfg<b onmouseover=alert(3)>\x1b]0;title\x07"
HOSTILE_USER = "alice"
SECRET = "sk-supersecretvalue1234567"
MODELS = (("/home/alice/models/llama-3.1-8b-Q4_K_M.gguf", "llama-3.1-8b-Q4_K_M.gguf", "a1b2c3d4e5f6a7b8c9d0e1f2"),
          (f"/home/{HOSTILE_USER}/models/{HOSTILE_MODEL}", HOSTILE_MODEL, "ffeeddccbbaa998877665544"))
START = 1_772_000_000  # 2026-02-25: the first run
STEP_S = 6 * 3600


def identity(i: int, n: int) -> dict:
    """The host as it was at run i of n: kernel update at a third, BIOS update (RAM 6000 -> 4800) at two thirds."""
    late = i >= 2 * n // 3
    return {"cpu": "AMD Ryzen 9 7950X 16-Core Processor",
            "memory": [f"DIMM_A{k}: F5-6000J3038F16G @ {4800 if late else 6000} MT/s" for k in (1, 2)],
            "gpus": ["NVIDIA GeForce RTX 4090"], "kernel": "6.11.0-1-amd64" if i >= n // 3 else "6.8.0-1-amd64",
            "bios_version": "1813" if late else "1602", "bios_date": "2026-03-02" if late else "2025-11-10"}


def run_at(i: int, n: int, *, hostile: bool) -> NewRun:
    path, name, digest = MODELS[i % 2] if hostile else MODELS[0]
    late = i >= 2 * n // 3
    tg = (118.0 if not late else 96.0) + (i % 7) * 0.4
    pp = 5200.0 + (i % 5) * 30
    build = "b4100 (abc1234)" if i < n // 2 else "b4500 (def5678)"
    kind = ("tune", "drift", "bench", "bench")[i % 4]
    flags = ["-ngl", "99", "-fa", "1", "-t", "16"]
    config = HOSTILE_CONFIG if hostile and i % 2 else "baseline"
    if config == HOSTILE_CONFIG:  # a secret in a flag the page shows (the configuration's tooltip)
        flags = flags + ["--api-key", SECRET]
    rounds = [round(tg * f, 3) for f in (0.99, 1.0, 1.01, 1.005, 0.995)]
    if kind == "tune":
        results = (StoredResult("advise-plan", config_key(flags), tuple(flags), "tg", "tg", tg * 0.95, 5),
                   StoredResult("winner", config_key(flags + ["-ub", "256"]), tuple(flags + ["-ub", "256"]), "tg",
                                "tg", tg, 5))
        summary = {"best": "winner", "improved": True, "winner": "ubatch 256", "winner_rounds": rounds,
                   "confirmation": {"ratio": 1.052, "low": 1.021, "high": 1.084, "verdict": "faster", "rounds": 5},
                   "settings": {"objective": "tg", "n_gen": 128, "reps": 3}}
    elif kind == "drift":
        results = (StoredResult("baseline", config_key(flags), tuple(flags), "tg128", "tg", tg, 5),)
        summary = {"verdict": "slower beyond the noise" if late else "no clear change", "since_run": max(1, i - 1),
                   "changed": ["bios version 1602 -> 1813"] if late else [],
                   "rows": [{"test": "tg128", "then": 118.2, "now": tg, "change_percent": (tg / 118.2 - 1) * 100,
                             "low": 0.79, "high": 0.83 if late else None,
                             "verdict": "slower" if late else "no clear difference"}]}
    else:
        results = (StoredResult(config, config_key(flags), tuple(flags), "pp512", "pp", pp, 5),
                   StoredResult(config, config_key(flags), tuple(flags), "tg128", "tg", tg, 5))
        summary = {"rounds": 5, "verdicts": {}, "settings": {"n_prompt": 512, "n_gen": 128, "reps": 3},
                   "rounds_ts": {config: {"pp512": [round(pp * f, 2) for f in (0.99, 1.0, 1.01, 1.0, 0.998)],
                                          "tg128": rounds}},
                   "note": f"token hf_{'A' * 24} from /home/{HOSTILE_USER}/.cache"}
    ident = identity(i, n)
    return NewRun(command=kind, host=ident, host_fp=f"fp{int(ident['kernel'][:4] == '6.11')}{int(late)}",
                  build=build, model_path=path, model_hash=digest, model_name=name, results=results,
                  summary=summary, label=None)


def make_store(path: Path, runs: int = 40, *, hostile: bool = True) -> Path:
    """A results store at ``path`` with ``runs`` runs, one every six hours from START."""
    with open_store(path) as store:
        for i in range(runs):
            store.record(run_at(i, runs, hostile=hostile))
    db = sqlite3.connect(str(path))
    with db:
        db.execute("UPDATE runs SET created = strftime('%Y-%m-%dT%H:%M:%SZ', ? + (id - 1) * ?, 'unixepoch')",
                   (START, STEP_S))
    db.close()
    return path
