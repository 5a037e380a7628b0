"""Issue 22, class 7: a third-party check is a guest. Whatever it does (prints, yields garbage, a Fix without text,
raises an exception that cannot be printed, calls sys.exit, never ends, sleeps), it becomes at most one `error`
finding for that check alone, within its deadline and bounded memory; `doctor --json` stays JSON; a plugin that
claims a built-in id is refused, loudly."""

from __future__ import annotations

import json
import sys
from importlib.metadata import EntryPoint

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounds import plugins
from tests.bounds.limits import MiB, within
from tests.conftest import SNAPSHOTS
from tunehost.check import Severity
from tunehost.doctor import run_doctor
from tunehost.facts import HostFacts
from tunehost.host import open_host

GOOD = {"prints", "returns-none"}  # misbehaviours that still leave a valid report of the check's own


def _facts() -> HostFacts:
    return HostFacts(open_host(SNAPSHOTS / "ci-vm"))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(plugins.MODES), min_size=1, max_size=5, unique=True))
def test_each_misbehaving_guest_is_one_error_finding_of_its_own(modes: list[str]) -> None:
    from tunehost.checks.thp import ThpCheck as BuiltinThp

    guests = [plugins.make(mode)() for mode in modes]
    stdout, stderr = sys.stdout, sys.stderr
    with within(f"guests {modes}", seconds=10.0, peak_bytes=32 * MiB):
        report = run_doctor(_facts(), [BuiltinThp(), *guests])
    assert sys.stdout is stdout and sys.stderr is stderr  # nothing left routing the report's streams
    assert [f.check for f in report.findings if f.check == "thp"] and all(
        f.severity is not Severity.ERROR for f in report.by_check("thp"))
    for mode, guest in zip(modes, guests):
        found = report.by_check(guest.id)
        if mode in GOOD:
            assert found and all(f.severity is not Severity.ERROR for f in found), found
        else:
            assert len(found) == 1 and found[0].severity is Severity.ERROR, (mode, found)
            assert "\n" not in found[0].summary
    json.dumps(report.to_json())  # every finding serialises
    assert any("printed" in n for n in report.notes) == ("prints" in modes)


def test_a_guest_that_sleeps_is_cut_at_its_deadline(monkeypatch) -> None:
    import time

    monkeypatch.setenv("TUNEHOST_CHECK_DEADLINE_S", "0.5")
    sleeper = plugins.make("sleeps")
    sleeper.sleep_s = 2.0
    stdout = sys.stdout
    with within("a guest that sleeps past its deadline", seconds=5.0, peak_bytes=8 * MiB):
        report = run_doctor(_facts(), [sleeper(), plugins.make("prints")()])
    [late] = report.by_check("guest-sleeps")
    assert late.severity is Severity.ERROR and "did not finish within 0.5 s" in late.summary
    assert report.by_check("guest-prints")[0].severity is Severity.OK  # the next check still ran
    assert sys.stdout is not stdout  # the sleeper may still print: its writes stay away from the report
    ended = time.monotonic() + 2.5  # the wait it had; it sleeps 2 s in all, and its streams come back as it ends
    while sys.stdout is not stdout and time.monotonic() < ended:
        time.sleep(0.02)
    assert sys.stdout is stdout  # it ended: the streams are given back


def _entry_points(*pairs: tuple[str, str]):
    from importlib.metadata import entry_points

    real = list(entry_points(group="tunehost.checks"))
    fakes = [EntryPoint(name, value, "tunehost.checks") for name, value in pairs]

    def fake(group: str | None = None, **kw):
        return real + fakes if group == "tunehost.checks" else entry_points(group=group, **kw)

    return fake


@pytest.mark.parametrize("first", [True, False])
def test_a_plugin_may_not_take_a_builtin_id(monkeypatch, first: bool) -> None:
    import importlib.metadata

    from tunehost.doctor.registry import load_checks

    fake = _entry_points(("thp-impostor", "tests.bounds.plugins:TakesThp"))
    if first:  # whatever order the metadata lists them in
        original = fake
        fake = lambda group=None, **kw: list(reversed(original(group=group, **kw)))  # noqa: E731
    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    loaded = load_checks()
    [thp] = [c for c in loaded.checks if c.id == "thp"]
    assert type(thp).__module__ == "tunehost.checks.thp"
    assert any("is refused: it claims the built-in check id 'thp'" in w for w in loaded.warnings)


@pytest.mark.parametrize("mode", ["prints", "exit0", "unprintable", "fix_text_none"])
def test_doctor_json_stays_json_whatever_a_plugin_does(monkeypatch, cli, mode: str) -> None:
    """A plugin printing broke `doctor --json`; one calling sys.exit(0) made doctor exit 0, "ready", with no output."""
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points",
                        _entry_points((f"guest-{mode}", f"tests.bounds.plugins:Guest_{mode}")))
    result = cli("doctor", "--json", "--snapshot", str(SNAPSHOTS / "ci-vm"), "--check", f"guest-{mode.replace('_', '-')}",
                 "--check", "thp")
    doc = json.loads(result.stdout)
    [guest] = [f for f in doc["findings"] if f["check"].startswith("guest-")]
    assert guest["severity"] == ("ok" if mode == "prints" else "error")
    assert "\x1b" not in result.stdout and "\x1b" not in result.stderr
    assert result.exit_code in (0, 2) and doc["verdict"] in ("ready", "not-ready")
