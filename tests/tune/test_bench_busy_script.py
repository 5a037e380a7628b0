"""scripts/bench_busy.py's pure parts: the upper bounds it reports and how it judges a crown against the quiet box
(the measurement itself is the script's job, not a test's)."""

from __future__ import annotations

import pytest

from tests.conftest import load_script

busy = load_script("bench_busy")


def test_clopper_pearson_and_wilson_upper_bounds():
    assert busy.clopper_pearson_upper(0, 20) == pytest.approx(1 - 0.05 ** (1 / 20), abs=1e-4)  # 13.9 %
    assert busy.clopper_pearson_upper(0, 59) <= 0.05 < busy.clopper_pearson_upper(0, 58)
    assert busy.runs_for_bound(0.05) == 59
    assert 0.05 < busy.clopper_pearson_upper(1, 20) < 0.25 and busy.clopper_pearson_upper(3, 3) == 1.0
    assert busy.wilson_upper(0, 20) == pytest.approx(0.1192, abs=1e-3) and busy.wilson_upper(0, 0) is None


REFERENCE = {"statistical_verdict": "slower", "change_percent": -36.0, "low": 0.6, "high": 0.7}


def run(flags, outcome="crowned"):
    return {"outcome": outcome, "winner": " ".join(flags), "winner_flags": list(flags), "waited": False}


def test_a_crown_of_fewer_threads_than_the_quiet_winner_is_false():
    quiet = busy.quiet_winner(REFERENCE)
    assert quiet["threads"] == 2 and "-t 2" in quiet["text"]
    bad, why = busy.judge_crown(run(["-t", "1", "-fa", "on"]), quiet, {})
    assert bad and "-t 1" in why


def test_a_crown_is_judged_by_its_quiet_re_measure():
    quiet = busy.quiet_winner(REFERENCE)
    flags = ["-t", "2", "-ctk", "f16"]
    slower = {"-t 2 -ctk f16": {"statistical_verdict": "slower", "change_percent": -4.0}}
    same = {"-t 2 -ctk f16": {"statistical_verdict": "no clear difference", "change_percent": 0.5}}
    assert busy.judge_crown(run(flags), quiet, slower)[0] is True
    assert busy.judge_crown(run(flags), quiet, same)[0] is False


def test_the_summary_counts_each_outcome_and_bounds_the_false_crowns():
    quiet = busy.quiet_winner(REFERENCE)
    runs = [run([], "refused"), run([], "refused"), run(["-t", "1"]), run([], "kept")]
    runs[1]["waited"] = True
    summary = busy.summarize("core", runs, quiet, {})
    assert (summary["refused"], summary["crowned"], summary["kept"], summary["waited"]) == (2, 1, 1, 1)
    assert summary["false_crowns"] == 1 and summary["crowned_what"] == {"-t 1": 1}
    assert summary["false_crown_upper_clopper_pearson"] > 0.25
