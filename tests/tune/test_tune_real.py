"""`tunehost tune` and `tunehost history` end to end with the real llama-bench on the tiny test model (~30 s).

The binary and model come from tests/conftest.py's fixtures (skip locally when missing, FAIL under CI=1). The
host may be busy, so the assertions hold whatever the noise decides: a result line, a launch command, a record.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


def test_tune_measures_records_and_history_shows_it(cli, llama_bench, tiny_model):
    result = cli("tune", "--model", str(tiny_model), "--llama-bench", str(llama_bench), "--budget", "25s",
                 "-n", "8", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "tunehost-tune/1" and doc["steps"] > 0 and doc["spent_s"] <= 25 * 1.5
    assert doc["headline"].startswith(("advise's plan is already the fastest", doc["winner"] + ":"))
    assert doc["winner_launch"]["argv"][0].endswith("llama-server")
    assert any(s["rounds"] >= 1 for s in doc["stages"])
    runs = json.loads(cli("history", "--json", "--model", str(tiny_model)).stdout)["runs"]
    assert [r["command"] for r in runs] == ["tune"] and runs[0]["build"].startswith("b")
    assert runs[0]["results"][0]["median_ts"] > 0
