"""The fuzz suite: every generated input ends in a finding, a skip, or one line and exit 1 — never a traceback,
never a hang. Profiles and the time limit: tests/fuzz/profiles.py."""

from __future__ import annotations

from tests.fuzz.profiles import TRIED, summary_lines


def pytest_terminal_summary(terminalreporter) -> None:
    for line in summary_lines(TRIED, terminalreporter.config.option.verbose > 0):
        terminalreporter.write_line(line)
