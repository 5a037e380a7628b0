"""The one duration parser (tunehost.durations) and the options that use it: every --budget/--timeout takes the same
units, and nonsense is one error line."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunehost.durations import DAY_S, WEEK_S, format_duration, parse_duration
from tunehost.errors import TunehostError


@pytest.mark.parametrize("text, seconds", [
    ("90", 90.0), ("90s", 90.0), ("2m", 120.0), ("1h", 3600.0), ("1m30s", 90.0), ("1h30m", 5400.0),
    ("1h0m1s", 3601.0), ("1.5m", 90.0), ("10 m", 600.0), ("1h 30m", 5400.0), ("1 m 30 s", 90.0), (" 2M ", 120.0), ("0", 0.0), ("0s", 0.0), ("0.25", 0.25),
])
def test_what_people_write(text, seconds):
    assert parse_duration(text, option="--budget") == seconds


@pytest.mark.parametrize("text", ["", " ", "-5", "-1m", "nan", "inf", "-inf", "1e3", "2x", "m", "s", "30s1m",
                                  "1m1m", "1  m", "1 0m", "1,5m", "0x10", "１０", "5d", None, "9" * 41])
def test_nonsense_is_one_error_line(text):
    with pytest.raises(TunehostError) as caught:
        parse_duration(text, option="--budget")
    message = str(caught.value)
    assert message.startswith("--budget must be a duration like 90, 90s, 2m, 1m30s or 1h") and "\n" not in message


def test_ranges_per_option():
    assert parse_duration("0", option="--budget") == 0.0  # bench: 0 = only the rounds that always run
    with pytest.raises(TunehostError, match=r"^--timeout must be more than 0 s and at most 24 h, not '0'$"):
        parse_duration("0", option="--timeout", maximum=DAY_S, allow_minimum=False)
    with pytest.raises(TunehostError, match=r"at most 24 h, not '25h'"):
        parse_duration("25h", option="--timeout", maximum=DAY_S)
    assert parse_duration("24h", option="--timeout", maximum=DAY_S) == DAY_S
    with pytest.raises(TunehostError, match="at most 168 h"):
        parse_duration("10000000m", option="--budget")


def test_a_hostile_value_is_shown_on_one_printable_line():
    with pytest.raises(TunehostError) as caught:
        parse_duration("1\n\x1b[31mred", option="--budget")
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


@given(hours=st.integers(0, 40), minutes=st.integers(0, 59), secs=st.integers(0, 59))
def test_parts_add_up(hours, minutes, secs):
    text = "".join(f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if v) or "0s"
    assert parse_duration(text, option="--budget") == hours * 3600 + minutes * 60 + secs


@given(st.floats(0, WEEK_S, allow_nan=False))
def test_bare_seconds_and_their_formatting_read_back(value):
    text = f"{value:.3f}"
    assert parse_duration(text, option="--budget") == pytest.approx(float(text))
    shown = format_duration(round(value)).replace(" m", "m").replace(" h", "h").replace(" s", "s")
    assert parse_duration(shown, option="--budget") == round(value)


@given(st.one_of(st.integers(0, 10 ** 11).map(float), st.integers(0, 10 ** 11).map(lambda ms: ms / 1000)))
def test_format_duration_is_what_the_parser_reads_back(value):
    # as shown in error lines ("at most 10 m"): the same text given back to --budget is the same duration
    assert parse_duration(format_duration(value), option="--budget", maximum=math.inf) == value


def test_format_duration_writes_the_units_the_parser_reads():
    assert [format_duration(v) for v in (0, 90, 600, 86400, 1.5, 1e7)] == \
        ["0 s", "90 s", "10 m", "24 h", "1.5 s", "10000000 s"]


@settings(max_examples=400)
@given(st.text(max_size=24))
def test_any_text_is_a_duration_in_range_or_one_error_line(text):
    try:
        value = parse_duration(text, option="--budget")
    except TunehostError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--budget must be")
    else:
        assert math.isfinite(value) and 0.0 <= value <= WEEK_S


@pytest.mark.parametrize("argv", [
    ["bench", "--import", "x.md", "--budget", "2x"],
    ["bench", "--server", "http://127.0.0.1:9", "--timeout", "nan"],
    ["bench", "--serve", "--start-timeout", "-1", "--", "llama-server"],
    ["history", "--drift", "--budget", "1e3"],
    ["tune", "--model", "m.gguf", "--budget", "inf"],
])
def test_every_duration_option_refuses_nonsense_in_one_line(argv):
    from typer.testing import CliRunner

    from tunehost.cli import app

    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "must be a duration like 90, 90s, 2m" in lines[0], result.output


@pytest.mark.parametrize("argv", [["history", "--drift", "--budget", "2m"], ["bench", "--budget", "2m"]])
def test_two_minutes_is_accepted_everywhere(argv):
    """The bug of issue 29: `bench --budget 2m` and `history --drift --budget 2m` refused what tune accepts. Here
    they get past the budget and stop at the next missing input (no model)."""
    from typer.testing import CliRunner

    from tunehost.cli import app

    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1 and "--budget" not in result.output and "--model" in result.output, result.output
