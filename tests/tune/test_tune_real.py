"""`tunehost tune` and `tunehost history` end to end with the real llama-bench on the tiny test model (~30 s).

The binary and model come from tests/conftest.py's fixtures (skip locally when missing, FAIL under CI=1). The
host may be busy, so the assertions hold whatever the noise decides: a result line, a launch command, a record.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


def test_tune_measures_records_and_history_shows_it(cli, llama_bench, tiny_model):
    # --allow-busy: the host may be busy, and this test is about measuring end to end (busy hosts: below)
    result = cli("tune", "--model", str(tiny_model), "--llama-bench", str(llama_bench), "--budget", "25s",
                 "-n", "8", "--format", "json", "--allow-busy")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "tunehost-tune/1" and doc["steps"] > 0 and doc["spent_s"] <= 25 * 1.5
    assert doc["headline"].startswith(("advise's plan is already the fastest", doc["winner"] + ":"))
    assert doc["winner_launch"]["argv"][0].endswith("llama-server")
    assert any(s["rounds"] >= 1 for s in doc["stages"])
    runs = json.loads(cli("history", "--json", "--model", str(tiny_model)).stdout)["runs"]
    assert [r["command"] for r in runs] == ["tune"] and runs[0]["build"].startswith("b")
    assert runs[0]["results"][0]["median_ts"] > 0
    assert runs[0]["summary"]["allow_busy"] is True and isinstance(runs[0]["summary"]["disturbed"], bool)


def test_tune_on_this_host_either_measures_quiet_rounds_or_stops_for_load(cli, llama_bench, tiny_model):
    """Whatever the load here: a winner only from undisturbed rounds, or exit 75 with the reason."""
    from tunehost.store import open_store

    result = cli("tune", "--model", str(tiny_model), "--llama-bench", str(llama_bench), "--budget", "25s",
                 "-n", "8", "--format", "json")
    assert result.exit_code in (0, 75), result.output
    doc = json.loads(result.stdout)
    if result.exit_code == 75:
        assert doc["stopped"].startswith("the host stayed busy") and doc["disturbed"] is True
        assert doc["headline"].startswith("no winner: the host stayed busy")
    else:
        assert doc["disturbed_rounds"] == 0
    (run,) = json.loads(cli("history", "--json", "--model", str(tiny_model)).stdout)["runs"]
    with open_store() as store:
        rounds = store.rounds(run["id"])
    assert all(not r.counted for r in rounds if r.disturbed)  # no disturbed round entered an interval
