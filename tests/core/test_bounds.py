"""tunehost.bounds: the one place a hostile number becomes unknown (None)."""

from __future__ import annotations

import pytest

from tunehost.bounds import number, number_text, share, whole, whole_text


@pytest.mark.parametrize("text, low, high, expected", [
    ("60\n", 0, 200, 60), ("-999999999999999999", 0, 200, None), ("201", 0, 200, None), ("12 kB", 0, 2**62, 12),
    ("\u00b2", 0, 9, None), ("1_000", 0, 2**62, None), ("9" * 5000, 0, 2**62, None), ("", 0, 9, None),
    (None, 0, 9, None), ("-2", -5, 5, -2),
])
def test_whole_text(text, low, high, expected):
    assert whole_text(text, low, high) == expected


@pytest.mark.parametrize("value, expected", [(3, 3), (True, None), (-1, None), (2.0, None), ("3", None)])
def test_whole(value, expected):
    assert whole(value) == expected


@pytest.mark.parametrize("value, expected", [(0.5, 0.5), (float("nan"), None), (float("inf"), None), (-1, None),
                                             (True, None), (10**400, None), ("1", None)])
def test_number(value, expected):
    assert number(value) == expected


def test_number_above_low_and_text():
    assert number(0, above_low=True) is None and number(0) == 0.0
    assert number_text("3200") == 3200.0 and number_text("9" * 400) is None and number_text("nan") is None


@pytest.mark.parametrize("part, total, expected", [(5, 10, 0.5), (10000, 100, None), (1, 0, None), (-1, 10, None),
                                                   (None, 10, None)])
def test_share(part, total, expected):
    assert share(part, total) == expected
