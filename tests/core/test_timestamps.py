"""tunehost.timestamps: the one parser for stored times (export and report each had their own)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tunehost.timestamps import epoch_seconds

NOON = 1772445600.0  # 2026-03-02 10:00:00 UTC


def test_every_form_the_store_and_snapshots_write() -> None:
    assert epoch_seconds("2026-03-02T10:00:00Z") == NOON  # the results store, bench results
    assert epoch_seconds("2026-03-02T10:00:00+0000") == NOON  # a snapshot manifest's `created`
    assert epoch_seconds("2026-03-02T11:00:00+01:00") == NOON
    assert epoch_seconds("2026-03-02 10:00:00") == epoch_seconds("2026-03-02T10:00") == NOON  # no zone: UTC
    assert epoch_seconds("2026-03-02T10:00:00.250000+00:00") == NOON + 0.25
    assert epoch_seconds("2026-03-02") == 1772409600.0


def test_a_snapshots_created_time_is_read_by_the_report_too() -> None:
    from tunehost.formats.report_html import epoch, when

    assert epoch("2026-11-26T21:26:21+0000") == 1795728381  # the H200 snapshot's manifest (was None: cut at 20 chars)
    assert when("2026-11-26T21:26:21+0000") == "2026-11-26 21:26 UTC"


@given(st.one_of(st.text(max_size=60), st.integers(), st.none(), st.floats()))
def test_anything_else_is_none_never_an_exception(value) -> None:
    result = epoch_seconds(value)
    assert result is None or isinstance(result, float)


def test_hostile_strings() -> None:
    for text in ("", "</script>", "2026-13-45", "9" * 5000, "2026-03-02T10:00:00Z\n; rm -rf /", "\x1b[2J"):
        assert epoch_seconds(text) is None
