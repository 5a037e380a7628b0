"""Helpers of the fleet tests: the worst severity per check of a real `doctor --json` report, written independently
of tunehost.ops.fleet so the fleet table is checked against the doctor's own report."""

from __future__ import annotations

import json

import pytest

# the order of tunehost.check.Severity.rank, restated: a check that says ok and fail is a fail cell
WORST_ORDER = ("ok", "info", "skip", "warn", "error", "fail")
FLEET_SNAPSHOTS = ("ci-vm", "desktop-12700f-rtx3060", "laptop-5800u-apu")  # ready, not-ready, not-ready


def worst_per_check(doctor_doc: dict) -> dict[str, str]:
    worst: dict[str, str] = {}
    for f in doctor_doc["findings"]:
        old = worst.get(f["check"], "ok")
        worst[f["check"]] = max(old, f["severity"], key=WORST_ORDER.index)
    return worst


@pytest.fixture(scope="session")
def doctor_reports() -> dict[str, dict]:
    """Each fleet snapshot's own `tunehost doctor --json` document, from the real CLI."""
    from typer.testing import CliRunner

    from tests.conftest import SNAPSHOTS
    from tunehost.cli import app

    reports = {}
    for name in FLEET_SNAPSHOTS:
        result = CliRunner().invoke(app, ["doctor", "--json", "--snapshot", str(SNAPSHOTS / name)])
        assert result.exit_code in (0, 2), result.output
        reports[name] = json.loads(result.stdout)
    return reports
