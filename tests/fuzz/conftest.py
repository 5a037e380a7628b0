"""The fuzz suite: every generated input ends in a finding, a skip, or one line and exit 1 — never a traceback,
never a hang. Profiles and the time limit: tests/fuzz/profiles.py."""

from __future__ import annotations

from tests.fuzz.profiles import TRIED


def pytest_terminal_summary(terminalreporter) -> None:
    if TRIED:
        total = sum(TRIED.values())
        terminalreporter.write_line(f"fuzz: {total} generated inputs tried "
                                    f"({', '.join(f'{k} {v}' for k, v in sorted(TRIED.items()))})")
