"""bench's comparison table (issue 29): the two t/s columns are what the change beside them is the ratio of, for
llama-bench (--candidate, before/after) and the server bench alike; it fits 80 columns without a number wrapped."""

from __future__ import annotations

import io
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from tunehost.bench.results import ROUNDS_LEVEL, ConfigResult, Side, TestSamples, compare_configs
from tunehost.cli.bench_render import _ts, render_comparison

TESTS = (("pp512", 512, 0), ("tg128", 0, 128))


def _sides(rounds_b, rounds_c, tests=TESTS):
    def config(name, rounds):
        return ConfigResult(name, (), tuple(TestSamples(t, p, n, samples_ts=tuple(x for r in rounds[t] for x in r))
                                            for t, p, n in tests))

    return config("baseline", rounds_b), config("candidate", rounds_c)


def _render(comparison, width=80, chart=True) -> str:
    out = io.StringIO()
    render_comparison(comparison, Console(file=out, width=width, color_system=None, force_terminal=False),
                      chart=chart)
    return out.getvalue()


def _drifting():
    """The shape behind `PP pp512 1 322 → 1 146 +8.9 %`: the host slows down over the session, and the candidate
    (5 % slower in every round) got most of its repetitions in the fast first round (one invocation kept 9 reps,
    the others 1): the pooled medians say "faster" while every round says "slower"."""
    base, cand = {}, {}
    for test, _, _ in TESTS:
        levels = [1400.0 - 60.0 * i for i in range(8)]
        base[test] = [(lv * 0.99, lv, lv * 1.01) for lv in levels]
        cand[test] = [tuple(lv * 0.95 * f for f in ((0.99, 1.0, 1.01) * 3 if i == 0 else (1.0,)))
                      for i, lv in enumerate(levels)]
    return base, cand


def test_the_columns_agree_with_the_change_where_pooled_medians_contradict_it():
    base, cand = _drifting()
    a, b = _sides(base, cand)
    assert b.tests[0].centre > a.tests[0].centre  # the old columns: "faster" medians beside a -5 % change
    comparison = compare_configs(Side(a, rounds=base), Side(b, rounds=cand), interleaved=True)
    for row in comparison.rows:
        assert row.level == ROUNDS_LEVEL and row.change_percent == pytest.approx(-5.0)
        assert row.candidate_ts / row.baseline_ts == pytest.approx(1 + row.change_percent / 100, rel=1e-12)
        assert row.candidate_ts < row.baseline_ts  # columns and change say the same
    text = _render(comparison)
    row = next(line for line in text.splitlines() if line.startswith("PP pp512"))
    shown_a, shown_b = (float(x.replace(" ", "")) for x in re.findall(r"\d{1,3}(?: \d{3})+|\d+\.\d\d", row)[:2])
    change = float(re.search(r"([+-]\d+\.\d) %", row).group(1))
    assert change == -5.0 and (shown_b / shown_a - 1) * 100 == pytest.approx(change, abs=0.15)
    assert "geometric mean over rounds of each round's median" in " ".join(text.split())


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), paired=st.booleans(), rounds=st.integers(1, 12))
def test_the_ratio_of_the_columns_is_the_change_judged(seed, paired, rounds):
    rng = random.Random(seed)
    base = {t: [tuple(rng.uniform(1, 20000) for _ in range(rng.randint(1, 4))) for _ in range(rounds)]
            for t, _, _ in TESTS}
    cand = {t: [tuple(rng.uniform(1, 20000) for _ in range(rng.randint(1, 4)))
                for _ in range(rounds if paired else rng.randint(1, 12))] for t, _, _ in TESTS}
    a, b = _sides(base, cand)
    comparison = compare_configs(Side(a, rounds=base), Side(b, rounds=cand), interleaved=paired)
    for row in comparison.rows:
        assert row.candidate_ts / row.baseline_ts == pytest.approx(1 + row.change_percent / 100, rel=1e-9)
        if row.low is not None and row.high is not None and row.high < float("inf"):
            assert row.low <= row.candidate_ts / row.baseline_ts <= row.high * (1 + 1e-12)


def _big_disturbed_comparison(tests=TESTS, labels=("before (a-long-label-for-the-saved-file)", "after (this run)")):
    base = {t: [(12345.6 * (1 + i / 20),) * 3 for i in range(6)] for t, _, _ in tests}
    cand = {t: [tuple(v * 1.089 * f for v, f in zip(r, (0.99, 1.0, 1.01))) for r in base[t]] for t, _, _ in tests}
    a, b = _sides(base, cand, tests)
    return compare_configs(Side(a, labels[0], base), Side(b, labels[1], cand), interleaved=True, disturbed=True)


def _assert_fits_without_broken_numbers(text: str, comparison) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    table = [line for line in lines if re.match(r"^(PP|TG|PP\+TG) ", line)]
    assert len(table) == len(comparison.rows), text
    for row, line in zip(comparison.rows, table):  # each number whole on its row's first line
        for number in (_ts(row.baseline_ts), _ts(row.candidate_ts), f"{row.change_percent:+.1f} %"):
            assert number in line, (number, line)
        assert re.search(r"[+-]\d+\.\d … [+-]\d+\.\d %", line), line


def test_80_columns_with_large_numbers_long_labels_and_a_disturbed_verdict():
    comparison = _big_disturbed_comparison()
    text = _render(comparison)
    _assert_fits_without_broken_numbers(text, comparison)
    assert "12 346" in text or "12 " in text
    assert "A = before (a-long-label-for-the-saved-file) · B = after (this run)" in text
    assert "disturbed" in text


def test_the_server_bench_table_fits_80_columns_too():
    tests = (("pp16384", 16384, 0), ("cached16384 client", 16384, 0), ("tg64@d16384", 0, 64), ("tg64 x4", 0, 64))
    comparison = _big_disturbed_comparison(tests, labels=("A", "B"))
    text = _render(comparison, chart=False)
    _assert_fits_without_broken_numbers(text, comparison)
    assert "A, B: the two servers above" in text


def test_the_cli_table_at_80_columns(cli, monkeypatch, tmp_path):
    """The whole `bench --candidate` output through the CLI at 80 columns: fits, numbers whole, agreeing."""
    from tests.bench.test_bench_cli import Boundary
    from tests.conftest import write_tiny_gguf

    monkeypatch.setenv("COLUMNS", "80")
    Boundary(monkeypatch, speeds={"default": 12345.6, "1": 6172.8, "2": 12345.6}, disturbed=True)
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--candidate", "-t 1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    table = [line for line in lines if line.startswith(("PP pp16", "TG tg8"))]
    assert len(table) == 2 and all(len(line) <= 80 for line in table), result.stdout
    for line in table:
        a, b = (float(x.replace(" ", "")) for x in re.findall(r"\d{1,3}(?: \d{3})+", line)[:2])
        change = float(re.search(r"([+-]\d+\.\d) %", line).group(1))
        assert (b / a - 1) * 100 == pytest.approx(change, abs=0.1), line


def test_a_real_server_ab_run_renders_agreeing_columns_at_80(tmp_path):
    """Two fake llama-servers through the engine (as `bench --serve A --vs B`): every comparison row's columns
    have the change as their ratio, the whole output fits 80 columns and each number stays whole."""
    from tests.bench.fake_server import FakeLlamaServer
    from tunehost.bench.server.rounds import ServerSettings, ServerTarget, measure_server
    from tunehost.bench.server.client import parse_target
    from tunehost.cli.bench_server import render_server_result

    with FakeLlamaServer() as slow, FakeLlamaServer(speed=1.5) as fast:
        result = measure_server([ServerTarget("A", parse_target(slow.url)), ServerTarget("B", parse_target(fast.url))],
                                ServerSettings(depths=(32,), n_gen=4, budget_s=0))
    out = io.StringIO()
    render_server_result(result, Console(file=out, width=80, color_system=None, force_terminal=False))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "A, B: the two servers above" in text
    for number in ("1 000 000", "1 500 000", "100 000", "150 000"):  # the servers' own tables: whole numbers too
        assert number in text, text
    for row in result.comparison.rows:
        assert row.level == ROUNDS_LEVEL
        assert row.candidate_ts / row.baseline_ts == pytest.approx(1 + row.change_percent / 100, rel=1e-9)
        # a long test name may fold at a space ("PP cached32" / "client"), a number never does
        cells = (_ts(row.baseline_ts), _ts(row.candidate_ts), f"{row.change_percent:+.1f} %")
        assert any(all(c in line for c in cells) for line in text.splitlines()), (cells, text)
