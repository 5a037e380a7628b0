"""A results store is hostile input: rows of text, NULL or huge values in the rounds (and results) tables are
left out with a reason, never a traceback, through `history`, `history --json` and `doctor --check speed-drift`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tunehost.store import StoredRound, open_store, store_path

from .test_rounds import new_run

# the rounds table as a hand-crafted store may have it: no NOT NULL, no types enforced
LOOSE_ROUNDS = """
DROP TABLE rounds;
CREATE TABLE rounds (run_id, seq, stage, round, counted, disturbed, watch_json, PRIMARY KEY (run_id, seq));
"""
HOSTILE = [  # (stage, round, counted, disturbed, watch_json)
    ("threads", "three", 1, 0, "{}"),  # text where a round number goes: int() raised ValueError here
    ("threads", None, 1, 0, "{}"),
    ("threads", 2 ** 63 - 1, 1, 0, "{}"),  # huge
    ("threads", 1e300, 1, 0, "{}"),
    (None, 1, 1, 0, "{}"),
    ("threads", 1, "yes", 0, "{}"),
    ("threads", 1, 1, 7, "{}"),
    ("threads\x1b[31m", 4, 1, 0, "[1, 2]"),  # valid: an escape in text stays data (JSON escapes it); watch not an object
    ("x" * 5000, 1, 1, 0, "{}"),
]


def _hostile_store(tmp_path: Path, monkeypatch) -> int:
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(tmp_path / "state"))
    path = store_path()
    with open_store(path) as store:
        run_id = store.record(new_run((StoredRound("threads", 1, True, False, {}),)))
    db = sqlite3.connect(path)
    db.executescript(LOOSE_ROUNDS)
    db.execute("INSERT INTO rounds VALUES (?, 0, 'threads', 1, 1, 0, '{}')", (run_id,))
    db.executemany("INSERT INTO rounds VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [(run_id, seq, *row) for seq, row in enumerate(HOSTILE, start=1)])
    # a results row of text where the median goes (REAL affinity keeps text): float() raised here
    db.execute("INSERT INTO results VALUES (?, 'bad', 'k2', '[]', 'tg', 'tg', 'fast', 'many')", (run_id,))
    db.commit()
    db.close()
    return run_id


def test_store_reads_skip_bad_round_rows_with_their_reasons(tmp_path, monkeypatch):
    run_id = _hostile_store(tmp_path, monkeypatch)
    with open_store() as store:
        rounds, skipped = store.round_rows(run_id)
        assert store.rounds(run_id) == rounds
        (run,) = store.runs()
    assert [(r.stage, r.round) for r in rounds] == [("threads", 1), ("threads\x1b[31m", 4)]
    assert rounds[1].watch == {}
    assert len(skipped) == len(HOSTILE) - 1
    assert skipped[0] == f"run {run_id}, round row 1: round 'three' is not a whole number from 0 to 10000000"
    assert "round None" in skipped[1] and "round 9223372036854775807" in skipped[2] and "round 1e+300" in skipped[3]
    assert "stage None is not text" in skipped[4] and "counted 'yes' is not 0 or 1" in skipped[5]
    assert "disturbed 7 is not 0 or 1" in skipped[6] and "stage 'xxxx" in skipped[7]
    assert all("\n" not in s and "\x1b" not in s for s in skipped)
    assert [r.config for r in run.results] == ["winner"]  # the bad results row is left out


def test_history_json_and_text_and_doctor_read_a_hostile_store(cli, tmp_path, monkeypatch):
    run_id = _hostile_store(tmp_path, monkeypatch)
    r = cli("history", "--json")
    assert r.exit_code == 0, r.output
    (run,) = json.loads(r.stdout)["runs"]
    assert run["id"] == run_id and [x["round"] for x in run["rounds"]] == [1, 4]
    assert len(run["rounds_skipped"]) == len(HOSTILE) - 1 and "round 'three'" in run["rounds_skipped"][0]
    text = cli("history")
    assert text.exit_code == 0 and "Traceback" not in text.output, text.output
    doctor = cli("doctor", "--check", "speed-drift")
    assert doctor.exit_code == 0 and "Traceback" not in doctor.output, doctor.output
    # the store was read (its one run is another host's), not given up as unreadable
    assert "speed-drift  no tunehost bench or tune result recorded on this host" in doctor.output
