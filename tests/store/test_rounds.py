"""Per-round host watch in the results store: rounds round-trip with their disturbed marks, and a store written
before rounds were kept (schema 1) still opens, keeps every run and gains the rounds table."""

from __future__ import annotations

import sqlite3

from tunehost.bench.watch import WatchReport, rejudge
from tunehost.store import NewRun, StoredResult, StoredRound, config_key, open_store

# the schema of a version-1 store, as tunehost wrote it before this change
SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, command TEXT NOT NULL,
    host_fp TEXT NOT NULL, host_json TEXT NOT NULL, build TEXT, model_path TEXT NOT NULL, model_hash TEXT NOT NULL,
    model_name TEXT, label TEXT, summary_json TEXT NOT NULL);
CREATE INDEX runs_model ON runs (model_hash, created);
CREATE TABLE results (run_id INTEGER NOT NULL REFERENCES runs (id), config TEXT NOT NULL, config_key TEXT NOT NULL,
    flags_json TEXT NOT NULL, test TEXT NOT NULL, kind TEXT NOT NULL, median_ts REAL NOT NULL,
    rounds INTEGER NOT NULL, PRIMARY KEY (run_id, config, test));
CREATE TABLE tune_steps (tune_key TEXT NOT NULL, seq INTEGER NOT NULL, argv_json TEXT NOT NULL,
    duration_s REAL NOT NULL, outcome_json TEXT NOT NULL, PRIMARY KEY (tune_key, seq));
INSERT INTO meta VALUES ('schema', '1');
INSERT INTO runs VALUES (1, '2026-01-01T00:00:00Z', 'bench', 'fp', '{}', 'b1 (abc)', '/m.gguf', 'h', 'm', NULL,
    '{"rounds": 5}');
INSERT INTO results VALUES (1, 'baseline', 'k', '["-t", "2"]', 'tg8', 'tg', 12.5, 5);
INSERT INTO tune_steps VALUES ('key-1', 0, '["-m", "m"]', 1.5, '{"results": []}');
"""


def report(other_cores: float, *, cpus_used: int | None = 2) -> WatchReport:
    return rejudge(WatchReport(wall_s=4.0, cpu_count=2, other_cpu_cores=other_cores, steal_share=0.0, swap_in_pages=0,
                               swap_out_pages=0, throttle_delta=0, temp_before_c=None, temp_max_c=None,
                               temp_after_c=None, busiest_others=(("stress", 42, other_cores * 4.0),),
                               cpus_used=cpus_used))


def new_run(rounds: tuple[StoredRound, ...]) -> NewRun:
    flags = ("-t", "2")
    return NewRun(command="tune", host={}, host_fp="fp", build=None, model_path="/m.gguf", model_hash="h",
                  model_name="m", results=(StoredResult("winner", config_key(flags), flags, "tg", "tg", 10.0, 2),),
                  summary={"disturbed": False}, rounds=rounds)


def test_rounds_round_trip_with_their_disturbed_marks_and_raw_facts(tmp_path):
    quiet, busy = report(0.02), report(0.98)
    assert not quiet.disturbed and busy.disturbed
    rounds = (StoredRound("threads", 1, True, False, quiet.to_json()),
              StoredRound("threads", 2, False, True, busy.to_json()),
              StoredRound("threads", 3, True, False, quiet.to_json()))
    with open_store(tmp_path / "r.sqlite3") as store:
        run_id = store.record(new_run(rounds))
        back = store.rounds(run_id)
    assert [(r.stage, r.round, r.counted, r.disturbed) for r in back] == [
        ("threads", 1, True, False), ("threads", 2, False, True), ("threads", 3, True, False)]
    assert back[1].reasons and "other processes used 0.98 of 2 CPUs" in back[1].reasons[0]
    assert "stress (pid 42" in back[1].reasons[0]
    # the raw facts are kept: newer code judges an old round again from them
    again = rejudge(WatchReport.from_json(back[1].watch), 1)
    assert again.cpus_used == 1 and again.disturbed  # 0.98 cores > 0.10 + half of the one spare CPU


def test_a_version_1_store_opens_keeps_its_runs_and_gains_the_rounds_table(tmp_path):
    path = tmp_path / "r.sqlite3"
    db = sqlite3.connect(str(path))
    db.executescript(SCHEMA_1)
    db.commit()
    db.close()
    with open_store(path) as store:
        (old,) = store.runs()
        assert old.command == "bench" and old.results[0].median_ts == 12.5 and old.summary == {"rounds": 5}
        assert store.rounds(old.id) == [] and store.tune_steps("key-1")[0][2] == 1.5
        new_id = store.record(new_run((StoredRound("", 1, True, False, report(0.0).to_json()),)))
        assert len(store.rounds(new_id)) == 1
        assert store._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == "2"
    with open_store(path) as store:  # opened again: already migrated
        assert len(store.runs()) == 2
