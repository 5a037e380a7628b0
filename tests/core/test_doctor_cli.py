"""The doctor CLI through the real Typer app: the JSON contract of SNAPSHOT.md, exit statuses, plugins."""

from __future__ import annotations

import json

import pytest

from tunehost.check import Check, Fix, Severity
from tunehost.doctor import run_doctor, select_checks
from tunehost.errors import TunehostError
from tunehost.facts import HostFacts
from tunehost.facts.memory import THP_ENABLED
from tunehost.host import open_host
from tunehost.doctor.registry import BUILTIN_ORDER, load_checks

SEVERITIES = {"ok", "info", "warn", "fail", "skip", "error"}


def assert_contract(doc: dict) -> None:
    assert set(doc) == {"tunehost", "snapshot", "findings", "verdict"}
    assert doc["verdict"] in ("ready", "not-ready")
    for f in doc["findings"]:
        assert set(f) == {"check", "severity", "summary", "evidence", "fix"}
        assert f["severity"] in SEVERITIES
        assert isinstance(f["summary"], str) and f["summary"]
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in f["evidence"].items())
        if f["fix"] is not None:
            assert set(f["fix"]) == {"text", "commands"} and isinstance(f["fix"]["commands"], list)


def test_json_report_matches_contract(cli, make_snapshot):
    snap = make_snapshot(fs={THP_ENABLED: "always madvise [never]\n"})
    result = cli("doctor", "--json", "--snapshot", str(snap), "--check", "thp")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert_contract(doc)
    assert doc["snapshot"] == str(snap)
    assert [(f["check"], f["severity"]) for f in doc["findings"]] == [("thp", "warn")]
    assert doc["verdict"] == "ready"


def test_strict_makes_warnings_not_ready(cli, make_snapshot):
    snap = make_snapshot(fs={THP_ENABLED: "always madvise [never]\n"})
    result = cli("doctor", "--json", "--strict", "--snapshot", str(snap), "--check", "thp")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["verdict"] == "not-ready"


def test_quiet_prints_verdict_only_when_ready(cli, make_snapshot):
    snap = make_snapshot(fs={THP_ENABLED: "[always] madvise never\n"})
    result = cli("doctor", "--quiet", "--snapshot", str(snap), "--check", "thp")
    assert result.exit_code == 0
    assert result.stdout.strip() == "ready"


def test_human_report_shows_evidence_and_fix(cli, make_snapshot):
    snap = make_snapshot(fs={THP_ENABLED: "always madvise [never]\n"})
    result = cli("doctor", "--snapshot", str(snap), "--check", "thp")
    assert result.exit_code == 0
    assert "WARN" in result.stdout and THP_ENABLED in result.stdout
    assert "echo always | sudo tee" in result.stdout


def test_list_checks_names_every_stable_id(cli):
    result = cli("doctor", "--list-checks")
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.strip() and not line[0].isspace()]
    assert listed[: len(BUILTIN_ORDER)] == list(BUILTIN_ORDER)


def test_list_checks_json(cli):
    result = cli("doctor", "--list-checks", "--json")
    ids = [c["id"] for c in json.loads(result.stdout)]
    assert set(BUILTIN_ORDER) <= set(ids)


@pytest.mark.parametrize("args, message", [
    (["--snapshot", "/nonexistent/snap"], "does not exist"),
    (["--check", "no-such-check"], "unknown check id"),
])
def test_bad_arguments_are_one_line_and_exit_1(cli, args, message):
    result = cli("doctor", *args)
    assert result.exit_code == 1
    assert message in result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["doctor", "--bogus"], "tunehost: error: No such option: --bogus"),
    (["advise", "--model", "m.gguf", "--ctx", "abc"], "tunehost: error: Invalid value for '--ctx': 'abc' is not a valid"),
    (["profiles", "extra"], "tunehost: error: Got unexpected extra argument(s) (extra)"),
    (["nosuchcommand"], "tunehost: error: No such command 'nosuchcommand'"),
    (["advise"], "tunehost: error: Missing option '--model'"),
])
def test_bad_arguments_are_one_line_and_exit_1(cli, args, message):
    result = cli(*args)
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(message) and line.endswith("--help`)") and result.stdout == ""


@pytest.mark.parametrize("manifest, message", [
    (None, "no manifest.json"),
    (b"\x00\xffgarbage", "not valid JSON"),
    (b"[1, 2]", "no \"format\""),
    (b'{"format": 99}', "not supported"),
])
def test_garbage_snapshot_is_a_clear_error(cli, tmp_path, manifest, message):
    snap = tmp_path / "snap"
    snap.mkdir()
    if manifest is not None:
        (snap / "manifest.json").write_bytes(manifest)
    result = cli("doctor", "--json", "--snapshot", str(snap))
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_snapshot_that_is_a_file(cli, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    result = cli("doctor", "--snapshot", str(f))
    assert result.exit_code == 1 and "not a directory" in result.stderr


class _Boom(Check):
    id = "boom"
    title = "raises"
    judges = "nothing; it raises"

    def run(self, facts):
        raise RuntimeError("kaput")


class _Failing(Check):
    id = "always-fails"
    title = "fails"
    judges = "nothing; it fails"

    def run(self, facts):
        yield self.fail("broken on purpose", {"x": 1}, fix=Fix("do nothing", ("true",)))


def test_a_check_that_raises_becomes_an_error_finding_and_others_still_run(make_snapshot):
    facts = HostFacts(open_host(make_snapshot(fs={THP_ENABLED: "[always] madvise never"})))
    report = run_doctor(facts, [_Boom(), *select_checks(load_checks().checks, ["thp"])])
    boom, thp = report.findings
    assert boom.severity is Severity.ERROR and "kaput" in boom.summary
    assert thp.severity is Severity.OK
    assert report.exit_code == 0  # an error is not a fail ...
    assert run_doctor(facts, [_Boom()], strict=True).exit_code == 2  # ... except with --strict


def test_fail_finding_exits_2(make_snapshot):
    report = run_doctor(HostFacts(open_host(make_snapshot())), [_Failing()])
    assert report.exit_code == 2 and report.verdict == "not-ready"


class _EP:
    """A stand-in importlib.metadata entry point."""

    def __init__(self, name, value, target):
        self.name, self.value, self._target = name, value, target

    def load(self):
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


def test_broken_plugin_is_one_warning(monkeypatch, cli, make_snapshot):
    import importlib.metadata as md

    real = md.entry_points

    def fake(group=None, **kw):
        eps = list(real(group=group, **kw))
        return eps + [_EP("broken", "thirdparty.mod:Check", ImportError("no module named thirdparty")),
                      _EP("not-a-check", "thirdparty.mod:thing", object),
                      _EP("boom", "thirdparty.mod:Boom", _Boom)]

    monkeypatch.setattr(md, "entry_points", fake)
    loaded = load_checks()
    assert "boom" in loaded.ids()
    ours = [w for w in loaded.warnings if "thirdparty" in w]
    assert len(ours) == 2 and "broken" in ours[0] and "ImportError" in ours[0]
    snap = make_snapshot(fs={THP_ENABLED: "[always] madvise never"})
    result = cli("doctor", "--json", "--snapshot", str(snap), "--check", "thp", "--check", "boom")
    assert result.exit_code == 0
    assert sum("thirdparty.mod" in line for line in result.stderr.splitlines()) == 2
    doc = json.loads(result.stdout)
    assert [(f["check"], f["severity"]) for f in doc["findings"]] == [("thp", "ok"), ("boom", "error")]


def test_select_checks_rejects_unknown_ids():
    with pytest.raises(TunehostError):
        select_checks(load_checks().checks, ["nope"])


def test_version(cli):
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.startswith("tunehost ")
