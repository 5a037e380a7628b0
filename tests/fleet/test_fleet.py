"""`tunehost fleet DIR` through the real Typer app: the table and JSON against real doctor reports, exit statuses,
and reports as hostile input (malformed, escapes, links out of DIR, huge files)."""

from __future__ import annotations

import json
import os

import pytest

from tests.fleet.conftest import FLEET_SNAPSHOTS, worst_per_check
from tunehost.ops.fleet import MAX_REPORT_BYTES, load_fleet


def report(findings, verdict="ready", **extra) -> str:
    doc = {"tunehost": "0.1.0", "snapshot": None, "findings": findings, "verdict": verdict, **extra}
    return json.dumps(doc)


def finding(check, severity, summary="something"):
    return {"check": check, "severity": severity, "summary": summary, "evidence": {}, "fix": None}


@pytest.fixture
def fleet_dir(tmp_path, doctor_reports):
    """DIR/<host>/doctor.json for the real reports of three snapshots, as the Ansible role lays them out."""
    root = tmp_path / "fleet"
    for name in FLEET_SNAPSHOTS:
        (root / name).mkdir(parents=True)
        (root / name / "doctor.json").write_text(json.dumps(doctor_reports[name]))
    return root


def test_json_cells_are_each_reports_worst_severity_per_check(cli, fleet_dir, doctor_reports):
    result = cli("fleet", "--json", str(fleet_dir))
    assert result.exit_code == 2, result.output  # desktop and laptop are not ready
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "not-ready"
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert sorted(hosts) == sorted(FLEET_SNAPSHOTS)
    for name, own in doctor_reports.items():
        cells = {check: cell["severity"] for check, cell in hosts[name]["cells"].items()}
        assert cells == worst_per_check(own), name
        assert hosts[name]["status"] == own["verdict"]
        assert hosts[name]["report"] == f"{name}/doctor.json"
        summaries = sorted(f["summary"] for c in hosts[name]["cells"].values() for f in c["findings"])
        assert summaries == sorted(f["summary"] for f in own["findings"])


def test_table_shows_worst_severity_per_cell_and_lists_failures(cli, fleet_dir, doctor_reports):
    result = cli("fleet", str(fleet_dir), env={"COLUMNS": "200"})
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("check "))
    assert header.split() == ["check", *FLEET_SNAPSHOTS]
    labels = {"fail": "FAIL", "error": "ERROR", "warn": "WARN", "info": "info", "skip": "skip", "ok": "ok"}
    for check in worst_per_check(doctor_reports["desktop-12700f-rtx3060"]):
        row = next(line for line in lines if line.split()[:1] == [check]).split()
        assert row[1:] == [labels[worst_per_check(doctor_reports[n])[check]] for n in FLEET_SNAPSHOTS], check
    verdicts = next(line for line in lines if line.startswith("verdict"))
    assert verdicts.split() == ["verdict", "ready", "NOT", "READY", "NOT", "READY"]
    for name in FLEET_SNAPSHOTS:
        for f in doctor_reports[name]["findings"]:
            if f["severity"] == "fail":
                assert f"FAIL  {f['check']}  {f['summary']}" in result.stdout
    assert lines[-1] == "not-ready  (1 ready, 2 not-ready)"


def test_narrow_terminal_splits_hosts_into_several_tables(cli, fleet_dir):
    result = cli("fleet", str(fleet_dir), env={"COLUMNS": "60"})
    headers = [line.split() for line in result.stdout.splitlines() if line.startswith("check ")]
    assert len(headers) > 1 and sorted(h for header in headers for h in header[1:]) == sorted(FLEET_SNAPSHOTS)
    table_rows = [line for line in result.stdout.splitlines() if line.split()[:1] and not line.startswith(
        ("tunehost fleet", "  ", "desktop", "laptop", "not-ready"))]
    assert table_rows and all(len(line) <= 60 for line in table_rows)


def test_all_ready_exits_0_and_flat_reports_are_read(cli, tmp_path):
    (tmp_path / "a.json").write_text(report([finding("thp", "ok"), finding("thp", "warn")]))
    (tmp_path / "b.json").write_text(report([finding("swap", "skip")]))
    (tmp_path / "notes.txt").write_text("not a report")
    result = cli("fleet", "--json", str(tmp_path))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "ready" and doc["checks"] == ["thp", "swap"]
    assert {h["host"]: h["cells"] for h in doc["hosts"]}["a"]["thp"]["severity"] == "warn"


def test_strict_makes_warnings_not_ready(cli, tmp_path):
    (tmp_path / "a.json").write_text(report([finding("thp", "warn", "THP is never")]))
    result = cli("fleet", "--strict", str(tmp_path))
    assert result.exit_code == 2
    assert "WARN  thp  THP is never" in result.stdout


def test_a_fail_is_not_ready_whatever_the_report_claims(tmp_path):
    (tmp_path / "liar.json").write_text(report([finding("ram-speed", "fail")], verdict="ready"))
    assert load_fleet(tmp_path).verdict == "not-ready"


def test_strict_report_verdict_is_kept(tmp_path):
    # doctor --strict on the host: a warning made it not ready, and fleet keeps that verdict
    (tmp_path / "h.json").write_text(report([finding("thp", "warn")], verdict="not-ready"))
    assert load_fleet(tmp_path).exit_code == 2


@pytest.mark.parametrize("content, reason", [
    ("{", "not JSON"),
    ("[]", "not a doctor report"),
    (report([], verdict="maybe"), "verdict is 'maybe'"),
    (json.dumps({"verdict": "ready", "findings": {}}), "findings is not a list"),
    (report(["thp"]), "finding 1 is not an object"),
    (report([finding("thp", "bad")]), "severity 'bad' is not one of"),
    (report([finding("thp", "ok", 7)]), "summary is not text"),
    (report([finding("", "ok")]), "is not a check id"),
    (report([finding("a b", "ok")]), "is not a check id"),
    (report([finding("x" * 65, "ok")]), "is not a check id"),
    (report([], tunehost=["1"]), "tunehost is not text"),
    ("[" * 100_000 + "]" * 100_000, "not a doctor report"),
    (b"\xff\xfe".decode("latin-1"), "not JSON"),
])
def test_malformed_report_is_an_unreadable_host_not_an_abort(cli, tmp_path, content, reason):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "doctor.json").write_text(content)
    (tmp_path / "good.json").write_text(report([finding("thp", "ok")]))
    result = cli("fleet", "--json", str(tmp_path))
    assert result.exit_code == 1, result.output  # nothing is not ready, but one host could not be judged
    hosts = {h["host"]: h for h in json.loads(result.stdout)["hosts"]}
    assert hosts["good"]["status"] == "ready"
    assert hosts["bad"]["status"] == "unreadable" and reason in hosts["bad"]["problem"]
    assert f"bad: bad/doctor.json: {hosts['bad']['problem']}" in result.stderr


def test_not_utf8_report(tmp_path):
    (tmp_path / "h.json").write_bytes(b'{"verdict": "ready", "findings": [], "x": "\xff"}')
    assert "not UTF-8" in load_fleet(tmp_path).hosts[0].problem


def test_a_not_ready_host_wins_over_an_unreadable_one(cli, tmp_path):
    (tmp_path / "bad.json").write_text("garbage")
    (tmp_path / "down.json").write_text(report([finding("thp", "fail")], verdict="not-ready"))
    assert cli("fleet", str(tmp_path)).exit_code == 2


def test_escapes_and_markup_in_reports_never_reach_the_terminal(cli, tmp_path):
    evil = "\x1b]0;owned\x07\x1b[31mred[/][bold]x\nFAIL fake-line\r"
    (tmp_path / "h\x1b[2Jx.json").write_text(report([finding("thp", "fail", evil)], verdict="not-ready",
                                                      tunehost=evil, snapshot=evil))
    for args in (["fleet"], ["fleet", "--json"]):
        result = cli(*args, str(tmp_path))
        assert result.exit_code == 2
        assert "\x1b" not in result.stdout + result.stderr and "\r" not in result.stdout
        assert "\x07" not in result.stdout
    table = cli("fleet", str(tmp_path)).stdout
    assert "?]0;owned??[31mred[/][bold]x?FAIL fake-line?" in table  # markup shown literally, on one line
    assert not any(line.startswith("FAIL fake-line") for line in table.splitlines())


def test_brackets_and_backslashes_show_as_they_are(cli, tmp_path):
    (tmp_path / "host\\").mkdir()
    (tmp_path / "host\\" / "doctor.json").write_text(report([finding("thp", "fail", "[red]ends in \\")],
                                                             verdict="not-ready"))
    lines = cli("fleet", str(tmp_path)).stdout.splitlines()
    assert "host\\" in lines and "  FAIL  thp  [red]ends in \\" in lines
    assert next(line for line in lines if line.startswith("check")).split() == ["check", "host\\"]


def test_links_are_never_followed_out_of_dir(cli, tmp_path):
    outside = tmp_path / "outside"
    (outside / "host").mkdir(parents=True)
    (outside / "host" / "doctor.json").write_text(report([finding("thp", "ok")]))
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    os.symlink(outside / "host", fleet / "linked-dir")
    os.symlink(outside / "host" / "doctor.json", fleet / "linked-file.json")
    (fleet / "inner").mkdir()
    os.symlink(outside / "host" / "doctor.json", fleet / "inner" / "doctor.json")
    hosts = {h.host: h for h in load_fleet(fleet).hosts}
    assert set(hosts) == {"linked-dir", "linked-file", "inner"}
    assert all(not h.readable for h in hosts.values())
    assert "symbolic link" in hosts["linked-dir"].problem and "symbolic link" in hosts["linked-file"].problem
    assert "link" in hosts["inner"].problem  # O_NOFOLLOW: ELOOP


def test_huge_report_and_fifo_are_unreadable(tmp_path):
    (tmp_path / "huge").mkdir()
    with open(tmp_path / "huge" / "doctor.json", "wb") as fh:
        fh.truncate(MAX_REPORT_BYTES + 1)  # sparse: no disk used
    (tmp_path / "pipe").mkdir()
    os.mkfifo(tmp_path / "pipe" / "doctor.json")
    hosts = {h.host: h for h in load_fleet(tmp_path).hosts}
    assert "larger than 4 MiB" in hosts["huge"].problem
    assert "not a regular file" in hosts["pipe"].problem


def test_host_dir_without_report_and_expected_host_without_one(cli, tmp_path):
    (tmp_path / "a.json").write_text(report([finding("thp", "ok")]))
    (tmp_path / "empty").mkdir()
    result = cli("fleet", "--json", "--host", "a", "--host", "gone", str(tmp_path))
    assert result.exit_code == 1
    hosts = {h["host"]: h for h in json.loads(result.stdout)["hosts"]}
    assert hosts["a"]["status"] == "ready"
    assert "no doctor.json" in hosts["empty"]["problem"]
    assert hosts["gone"]["problem"].startswith("no report")


def test_two_reports_for_one_host(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "doctor.json").write_text(report([finding("thp", "ok")]))
    (tmp_path / "a.json").write_text(report([finding("thp", "ok")]))
    (only,) = load_fleet(tmp_path).hosts
    assert "two reports for one host" in only.problem


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "not a directory"),
    (lambda p: p.mkdir(), "no host reports"),
    (lambda p: (p.mkdir(), (p / "README").write_text("x")), "no host reports"),
])
def test_unusable_dir_is_one_line_and_exit_1(cli, tmp_path, setup, message):
    target = tmp_path / "reports"
    setup(target)
    result = cli("fleet", str(target))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr and result.stderr.startswith("tunehost: error:")


def test_report_not_run_check_shows_a_dash(cli, tmp_path):
    (tmp_path / "old.json").write_text(report([finding("thp", "ok")]))
    (tmp_path / "new.json").write_text(report([finding("thp", "ok"), finding("my-plugin", "info")]))
    result = cli("fleet", str(tmp_path), env={"COLUMNS": "120"})
    row = next(line for line in result.stdout.splitlines() if line.startswith("my-plugin"))
    assert row.split() == ["my-plugin", "info", "-"]


def test_too_many_hosts_is_refused(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("tunehost.ops.fleet.MAX_HOSTS", 3)
    for n in range(4):
        (tmp_path / f"h{n}.json").write_text(report([]))
    result = cli("fleet", str(tmp_path))
    assert result.exit_code == 1 and "more than 3 host entries" in result.stderr
