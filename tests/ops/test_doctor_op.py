"""doctor as an operation (tunehost.ops.doctor): it judges the HostFacts it is given and returns the report with
the lines for stderr; it never prints and never opens a host (the CLI does both)."""

from __future__ import annotations

from tests.conftest import SNAPSHOTS
from tunehost import host as host_module
from tunehost.doctor.registry import load_checks
from tunehost.facts import HostFacts
from tunehost.ops.doctor import DoctorRequest, diagnose, measures


def test_diagnose_judges_a_snapshot_and_prints_nothing(monkeypatch, capsys):
    facts = HostFacts(host_module.open_host(SNAPSHOTS / "desktop-12700f-rtx3060"))

    def live(*args, **kwargs):
        raise AssertionError("the operation opened a host")

    monkeypatch.setattr(host_module, "open_host", live)
    checks = tuple(load_checks().checks)
    heard: list[str] = []
    diagnosis = diagnose(facts, DoctorRequest(checks, quick=True), on_status=heard.append)
    assert {f.check for f in diagnosis.report.findings} == {c.id for c in checks}
    assert not measures(facts.host, quick=False)  # a snapshot is never measured: no spinner, nothing heard
    assert heard == [] and facts.host.on_status is None
    assert capsys.readouterr() == ("", "")
    again = diagnose(HostFacts(facts.host), DoctorRequest(checks, quick=True))
    assert [(f.check, f.severity) for f in again.report.findings] == \
        [(f.check, f.severity) for f in diagnosis.report.findings]
