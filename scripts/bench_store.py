#!/usr/bin/env python3
"""The results store read as hostile, measured (issue 32, items 4, 5, 6, 11, 12, 13 and the store link of 15).

Each case builds a store in a fresh state directory and runs one tunehost command on it as a user starts it (a
fresh process), recording its exit status, wall time, CPU time (user + system: what a shared, loaded machine does
not inflate) and peak RSS (GNU time's %M), and whether it printed a traceback or JSON that is not strict
(Infinity, NaN):

    python scripts/bench_store.py                                     # this checkout's tunehost
    python scripts/bench_store.py --tunehost /work/main/.venv/bin/tunehost --only big   # another build, a subset
    python scripts/bench_store.py --json

Cases: `configs-N` (one run with N configurations: `history`'s time), `cap-summaries` / `big-summaries` (40 runs
whose summaries are ~240 KB / ~4 MB each: peak RSS of `history`, `history --json` and `doctor --check speed-drift`,
which reads up to 200 runs), `hostile-*` (rows of wrong types, NULLs, non-object summaries, non-string flags,
infinite medians), `bench-*` (a real llama-bench measurement with a store that is bad from the start or goes bad
while it measures: damaged, future schema, locked, read-only with WAL; needs TUNEHOST_LLAMA_BIN_DIR and
TUNEHOST_TEST_MODEL) and `link` (results.sqlite3 a dangling symlink).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, created, command, host_fp, host_json, build, model_path,
                   model_hash, model_name, label, summary_json);
CREATE INDEX runs_model ON runs (model_hash, created);
CREATE TABLE results (run_id, config, config_key, flags_json, test, kind, median_ts, rounds,
                      PRIMARY KEY (run_id, config, test));
CREATE TABLE rounds (run_id, seq, stage, round, counted, disturbed, watch_json, PRIMARY KEY (run_id, seq));
CREATE TABLE tune_steps (tune_key, seq, argv_json, duration_s, outcome_json, PRIMARY KEY (tune_key, seq));
INSERT INTO meta VALUES ('schema', '2');
"""  # the schema's tables with no types enforced: what a hand-edited or foreign store may hold


def new_store(state: Path) -> sqlite3.Connection:
    state.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(state / "results.sqlite3")
    db.executescript(SCHEMA)
    return db


HOST_FP = "fp"  # this host's fingerprint (main sets it): doctor and advise read only this host's runs


def host_fingerprint(tunehost: str) -> str:
    """This host's fingerprint as the tunehost under test computes it (its own Python, beside the executable)."""
    code = ("from tunehost.facts import HostFacts; from tunehost.host import open_host;"
            " from tunehost.store.records import host_identity; print(host_identity(HostFacts(open_host()))[1])")
    done = subprocess.run([str(Path(tunehost).parent / "python"), "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "fp"


def add_run(db: sqlite3.Connection, *, summary: object = "{}", command: object = "bench", host: object = "{}",
            created: object = "2026-01-01T00:00:00Z", model_hash: object = "h" * 24) -> int:
    cur = db.execute("INSERT INTO runs (created, command, host_fp, host_json, build, model_path, model_hash,"
                     " model_name, label, summary_json) VALUES (?, ?, ?, ?, 'b1 (abc)', '/m/x.gguf', ?, 'x.gguf',"
                     " NULL, ?)", (created, command, HOST_FP, host, model_hash, summary))
    return int(cur.lastrowid or 0)


def add_result(db: sqlite3.Connection, run_id: int, config: object, *, flags: object = '["-t", "4"]',
               kind: object = "tg", median: object = 10.0, rounds: object = 3, test: object = "tg128") -> None:
    db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (run_id, config, f"k{config}", flags, test, kind, median, rounds))


# ------------------------------------------------------------------ cases: each fills a state dir, names commands


def case_configs(n: int):
    def build(state: Path) -> None:
        db = new_store(state)
        for r in range(2):
            run = add_run(db, created=f"2026-01-0{r + 1}T00:00:00Z")
            db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, 'tg128', 'tg', ?, 3)",
                           [(run, f"c{i}", f"k{i}", json.dumps(["-t", str(i)]), 10.0 + i % 7) for i in range(n)])
        db.commit()
    return build, [["history"]]


def case_big_summaries(state: Path) -> None:
    db = new_store(state)
    payload = json.dumps({"rounds": 3, "verdicts": {"tg128": "faster"},
                          "rounds_ts": {"baseline": {"tg128": [1.25] * 640_000}}})  # ~3.9 MB, 640k floats
    for r in range(40):  # history reads 30 (its --limit), doctor all 40 (it reads up to 200)
        run = add_run(db, summary=payload, created=f"2026-01-01T00:{r // 60:02d}:{r % 60:02d}Z")
        add_result(db, run, "baseline")
    db.commit()


def case_cap_summaries(state: Path) -> None:
    """40 runs whose summaries are just under the 256 KiB a read takes (~40k floats each): what is read."""
    db = new_store(state)
    payload = json.dumps({"rounds": 3, "verdicts": {"tg128": "faster"},
                          "rounds_ts": {"baseline": {"tg128": [1.25] * 40_000}}})  # ~240 KB
    for r in range(40):
        run = add_run(db, summary=payload, created=f"2026-01-01T00:00:{r:02d}Z")
        add_result(db, run, "baseline")
    db.commit()


HOSTILE_RUNS = {  # one run each (besides a good one): a column of the wrong type or shape
    "text-median": dict(result=dict(median="fast")),
    "null-median": dict(result=dict(median=None)),
    "inf-median": dict(result=dict(median=float("inf"))),
    "huge-median": dict(result=dict(median=1e308)),
    "neg-huge-median": dict(result=dict(median=-1e308)),
    "text-rounds": dict(result=dict(rounds="many")),
    "flags-not-strings": dict(result=dict(flags="[1, null, {}]")),
    "flags-not-list": dict(result=dict(flags='{"a": 1}')),
    "null-config": dict(result=dict(config=None)),
    "summary-list": dict(run=dict(summary="[1, 2]")),
    "summary-number": dict(run=dict(summary="7")),
    "summary-infinity": dict(run=dict(summary='{"rounds": Infinity, "verdicts": {"tg128": NaN}}')),
    "summary-1e999": dict(run=dict(summary='{"best": "c", "ceiling": {"x": 1e999}, "ceiling_config": "c"}')),
    "summary-shapes": dict(run=dict(summary='{"verdicts": [1], "confirmation": 5, "improved": true, "settings": 3,'
                                            ' "rows": 5, "stopped": {"a": 1}}')),
    "summary-null": dict(run=dict(summary=None)),
    "summary-blob": dict(run=dict(summary=b"\x00\xff")),
    "host-list": dict(run=dict(host="[]")),
    "null-command": dict(run=dict(command=None)),
    "int-created": dict(run=dict(created=12345)),
    "drift-shapes": dict(run=dict(command="drift", summary='{"verdict": 3, "rows": [1, {"test": []}],'
                                                           ' "changed": "x", "since_run": "y"}')),
}


def case_hostile(name: str):
    spec = HOSTILE_RUNS[name]

    def build(state: Path) -> None:
        db = new_store(state)
        good = add_run(db, summary='{"rounds": 3}', created="2026-01-01T00:00:00Z")
        add_result(db, good, "baseline")
        run = add_run(db, **{"created": "2026-01-02T00:00:00Z", **spec.get("run", {})})
        fields = dict(spec.get("result", {}))  # a copy: each command builds its own store
        add_result(db, run, fields.pop("config", "baseline"), **fields)
        db.commit()
    return build, [["history"], ["history", "--json"], ["advise", "--calibrate"],
                   ["doctor", "--check", "speed-drift"]]


def case_tune_steps(state: Path) -> None:
    db = new_store(state)
    db.executemany("INSERT INTO tune_steps VALUES (?, ?, ?, ?, ?)", [
        ("k-1", "zero", '["-m"]', 1.0, "{}"), ("k-1", 1, "7", "slow", '{"results": [5]}'),
        ("k-1", 2, None, None, None)])
    db.commit()


def case_link(state: Path) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "results.sqlite3").symlink_to(state.parent / "elsewhere" / "results.sqlite3")
    (state.parent / "elsewhere").mkdir(exist_ok=True)


# bench with a store that fails after the measurement


def bench_damaged(state: Path) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "results.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\x01" * 4096)


def bench_future(state: Path) -> None:
    db = new_store(state)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.commit()


def bench_readonly_wal(state: Path) -> None:
    db = new_store(state)
    db.execute("PRAGMA journal_mode = WAL")
    add_run(db)
    db.commit()
    keep = sqlite3.connect(state / "results.sqlite3")  # a second reader keeps the -wal and -shm files
    keep.execute("SELECT 1 FROM runs").fetchall()
    shutil.copy(state / "results.sqlite3-wal", state / "wal.keep")
    db.close()
    keep.close()
    if not (state / "results.sqlite3-wal").exists():
        shutil.copy(state / "wal.keep", state / "results.sqlite3-wal")
    (state / "wal.keep").unlink()
    os.chmod(state, 0o555)


def later(build, delay_s: float = 4.0):
    """A case whose store is good when the command starts and goes bad ``delay_s`` later (while it measures)."""
    def start(state: Path) -> None:
        db = new_store(state)
        db.commit()
        db.close()

        def spoil() -> None:
            time.sleep(delay_s)
            if build is None:
                HOLDERS.append(hold_lock(state))
            else:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{state / 'results.sqlite3'}{suffix}").unlink(missing_ok=True)
                build(state)
        threading.Thread(target=spoil, daemon=True).start()
    start.after = True
    return start


HOLDERS: list[subprocess.Popen] = []


def hold_lock(state: Path) -> subprocess.Popen:
    """Another process holding the store's write lock (for 600 s: past the 30 s busy timeout)."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3,sys,time; d=sqlite3.connect(sys.argv[1], isolation_level=None);"
        " d.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(600)"),
        str(state / "results.sqlite3")], stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    return holder


def run(argv: list[str], env: dict[str, str], timeout: float = 600) -> dict:
    """One command as a fresh process: its exit status, wall time and its own peak RSS (wait4's rusage)."""
    # the peak RSS as GNU time reports it: Linux keeps a process's ru_maxrss across exec, so a child forked from
    # this script (grown by building stores) would report this script's size; time(1) is a small parent
    timer_file = tempfile.NamedTemporaryFile("r", suffix=".rss")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, timer_file:
        start = time.perf_counter()
        child = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", timer_file.name, *argv], stdout=out,
                                 stderr=err, env=env, text=True)
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        _, status, usage = os.wait4(child.pid, 0)
        timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        peak_kb = int((Path(timer_file.name).read_text().split() or ["0"])[-1])
    strict = None
    if "--json" in argv and stdout.strip():
        try:
            json.loads(stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            strict = True
        except ValueError:
            strict = False
    return {"exit": child.returncode, "wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(peak_kb / 1024, 1),
            "traceback": "Traceback" in stdout + stderr, "strict_json": strict, "stdout_bytes": len(stdout),
            "shows_result": "t/s" in stdout, "last_line": (stderr.strip().splitlines() or [""])[-1][:160]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tunehost", default=str(Path(sys.executable).parent / "tunehost"))
    parser.add_argument("--only", action="append", default=[], help="cases whose name contains this (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    global HOST_FP
    HOST_FP = host_fingerprint(args.tunehost)
    cases: dict[str, tuple] = {}
    for name in HOSTILE_RUNS:
        cases[f"hostile-{name}"] = case_hostile(name)
    cases["tune-steps"] = (case_tune_steps, [["history", "--json"]])
    cases["link"] = (case_link, [["history"]])
    for n in (5000, 10000, 20000):
        cases[f"configs-{n}"] = case_configs(n)
    model, bins = os.environ.get("TUNEHOST_TEST_MODEL"), os.environ.get("TUNEHOST_LLAMA_BIN_DIR")
    if model and bins:
        bench = ["bench", "--model", model, "-p", "16", "-n", "8", "--reps", "1", "--budget", "8s", "--save"]
        for name, build in (("damaged", bench_damaged), ("future-schema", bench_future),
                            ("readonly-wal", bench_readonly_wal), ("locked", None)):
            cases[f"bench-{name}"] = (build, [bench + ["SAVE"]])
        for name, build in (("damaged", bench_damaged), ("future-schema", bench_future), ("locked", None)):
            cases[f"bench-{name}-after"] = (later(build), [bench + ["SAVE"]])  # goes bad while measuring
    cases["cap-summaries"] = (case_cap_summaries, [["history"], ["history", "--json"],
                                                   ["doctor", "--check", "speed-drift"]])
    cases["big-summaries"] = (case_big_summaries, [["history"], ["history", "--json"],
                                                   ["doctor", "--check", "speed-drift"]])
    figures = {}
    for name, (build, commands) in cases.items():
        if args.only and not any(o in name for o in args.only):
            continue
        for command in commands:
            root = Path(tempfile.mkdtemp(prefix="tunehost-store-"))
            state = root / "state"
            env = {**os.environ, "TUNEHOST_STATE_DIR": str(state), "COLUMNS": "80"}
            if build is None:  # locked: another process holds a write lock for longer than the busy timeout
                db = new_store(state)
                db.commit()
                db.close()
                HOLDERS.append(hold_lock(state))
            else:
                build(state)
            save = root / "out.json"
            argv_ = [args.tunehost, *[str(save) if a == "SAVE" else a for a in command]]
            try:
                result = run(argv_, env)
            finally:
                while HOLDERS:
                    holder = HOLDERS.pop()
                    holder.kill()
                    holder.wait()
                os.chmod(state, 0o755) if state.exists() else None
            if "SAVE" in command:
                result["saved"] = save.is_file()
            if name == "link":
                result["created_outside"] = (root / "elsewhere" / "results.sqlite3").exists()
            figures[f"{name}: {' '.join(command)}"] = result
            if not args.json:
                print(f"{name}: {' '.join(command)}: {json.dumps(result)}", flush=True)
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
