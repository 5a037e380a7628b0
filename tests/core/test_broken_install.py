"""A broken install is never a silent "ready" (seen on a real GPU machine, tests/data/gpu-proof/README.md).

scripts/gpu_proof installed tunehost without -e and then ran ``python -m tunehost`` from the checkout: the checkout's
``tunehost/`` shadowed the installed package, it has no ``checks`` inside (setup installs checks/ as
tunehost.checks), and doctor printed 23 warnings and then ``{"findings": [], "verdict": "ready"}``, exit 0.
"""

from __future__ import annotations

import importlib.metadata
import json
from importlib.metadata import EntryPoint

from tests.conftest import SNAPSHOTS

GROUP = "tunehost.checks"


def _broken(*ids: str, every: bool = False):
    """The installed entry points with these built-ins (or every one) pointing at a module that is not there."""
    real = list(importlib.metadata.entry_points(group=GROUP))
    entries = [EntryPoint(ep.name, f"tunehost.checks.no_such_{ep.name.replace('-', '_')}:Gone", GROUP)
               if every or ep.name in ids else ep for ep in real]

    def fake(group: str | None = None, **kw):
        return entries if group == GROUP else importlib.metadata.entry_points(group=group, **kw)

    return fake


def test_a_builtin_that_cannot_be_imported_is_an_error_finding_under_its_own_id(monkeypatch, cli) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", _broken("thp"))
    result = cli("doctor", "--json", "--snapshot", str(SNAPSHOTS / "ci-vm"))
    doc = json.loads(result.stdout)
    [thp] = [f for f in doc["findings"] if f["check"] == "thp"]
    assert thp["severity"] == "error"
    assert thp["summary"].startswith("this built-in check could not be loaded: ModuleNotFoundError")
    assert "tunehost was imported from" in thp["fix"]["text"]
    assert "source checkout" in thp["fix"]["text"]  # the module named is under tunehost.checks: the likely cause
    assert "check plugin 'thp'" in result.stderr  # the warning line is still there
    assert {f["check"] for f in doc["findings"]} > {"thp", "swap", "numa"}  # the others ran
    assert result.exit_code == (2 if doc["verdict"] == "not-ready" else 0)


def test_strict_makes_a_missing_builtin_not_ready(monkeypatch, cli) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", _broken("thp"))
    result = cli("doctor", "--json", "--strict", "--check", "thp", "--snapshot", str(SNAPSHOTS / "ci-vm"))
    assert json.loads(result.stdout)["verdict"] == "not-ready" and result.exit_code == 2


def test_no_loadable_check_at_all_is_exit_1_with_one_line(monkeypatch, cli) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", _broken(every=True))
    result = cli("doctor", "--json", "--snapshot", str(SNAPSHOTS / "ci-vm"))
    assert result.exit_code == 1
    assert result.stdout == ""  # no "ready" for scripts to read
    [line] = [ln for ln in result.stderr.splitlines() if not ln.startswith("tunehost: warning:")]
    assert line.startswith("tunehost: error: no check could be loaded (ModuleNotFoundError")


def test_snapshot_refuses_before_writing_when_no_check_loads(monkeypatch, cli, tmp_path) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", _broken(every=True))
    target = tmp_path / "snap"
    result = cli("snapshot", str(target), "--quick")
    assert result.exit_code == 1 and "no check could be loaded" in result.stderr
    assert not target.exists() or not any(target.iterdir())


def test_list_checks_names_the_missing_builtin(monkeypatch, cli) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", _broken("thp"))
    result = cli("doctor", "--list-checks", "--json")
    [thp] = [c for c in json.loads(result.stdout) if c["id"] == "thp"]
    assert "could not be imported" in thp["judges"]
