"""`tunehost snapshot` on this (live) machine, and replaying it."""

from __future__ import annotations

import json
import os

import pytest

from tunehost.doctor import run_doctor
from tunehost.facts import HostFacts
from tunehost.host import open_host
from tunehost.host.commands import command_file_name
from tunehost.host.snapshot import CANONICAL_COMMANDS, write_snapshot
from tunehost.doctor.registry import load_checks


@pytest.mark.live
def test_replaying_a_snapshot_gives_the_same_findings(tmp_path):
    host = open_host(record=True)
    checks = load_checks().checks
    live = run_doctor(HostFacts(host), checks)
    write_snapshot(host, tmp_path / "snap")
    replayed = run_doctor(HostFacts(open_host(tmp_path / "snap")), checks)
    assert [f.to_json() for f in replayed.findings] == [f.to_json() for f in live.findings]


@pytest.mark.live
def test_snapshot_layout(tmp_path):
    host = open_host(record=True)
    run_doctor(HostFacts(host), load_checks().checks)
    manifest = write_snapshot(host, tmp_path / "snap")
    snap = tmp_path / "snap"
    assert json.loads((snap / "manifest.json").read_text()) == manifest and manifest["format"] == 1
    assert (snap / "fs" / "proc").is_dir() or (snap / "fs" / "sys").is_dir()
    for argv in CANONICAL_COMMANDS:
        # a command that is not installed leaves no file: "not available on that host"
        present = (snap / "cmd" / command_file_name(argv)).exists()
        assert present == (host.commands.log.results.get(command_file_name(argv)) is not None)
    assert (snap / "samples" / "activity.json").is_file()
    # no link may point out of the snapshot
    for root, dirs, files in os.walk(snap):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                assert os.path.realpath(path).startswith(os.path.realpath(snap))


@pytest.mark.live
def test_snapshot_holds_no_environment_or_foreign_command_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNEHOST_TEST_SECRET", "hunter2-secret-value")
    host = open_host(record=True)
    run_doctor(HostFacts(host), load_checks().checks)
    write_snapshot(host, tmp_path / "snap")
    for path in (tmp_path / "snap").rglob("*"):
        if path.is_file():
            assert b"hunter2-secret-value" not in path.read_bytes(), path


def test_snapshot_into_non_empty_directory_is_refused(cli, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("keep me")
    result = cli("snapshot", str(tmp_path / "x"))
    assert result.exit_code == 1 and "not empty" in result.stderr
    assert (tmp_path / "x" / "file").read_text() == "keep me"


def test_snapshot_reader_never_follows_links_out(tmp_path):
    snap = tmp_path / "snap"
    (snap / "fs" / "proc").mkdir(parents=True)
    (snap / "manifest.json").write_text('{"format": 1}')
    secret = tmp_path / "outside"
    secret.write_text("outside the snapshot")
    os.symlink(secret, snap / "fs" / "proc" / "meminfo")
    host = open_host(snap)
    assert host.files.read("/proc/meminfo") is None
    assert host.files.read("/../outside") is None


def test_snapshot_runs_no_commands(tmp_path):
    snap = tmp_path / "snap"
    (snap / "cmd").mkdir(parents=True)
    (snap / "manifest.json").write_text('{"format": 1}')
    (snap / "cmd" / "tuned-adm_active").write_text("Current active profile: throughput-performance\n")
    (snap / "cmd" / "dmidecode_-t_memory.rc").write_text("1\n")
    host = open_host(snap)
    assert host.run(["tuned-adm", "active"]).stdout.startswith("Current active profile")
    assert host.run(["echo", "hi"]) is None  # not recorded -> not available, never run
    assert host.sample("activity") is None and "samples/activity.json" in host.sample_errors["activity"]


def test_nvidia_smi_process_command_lines_are_scrubbed_to_the_executable_name():
    # corpus rtx4090 dump lists VS Code's and Chrome's full command lines (with a user's home path)
    from tests.conftest import corpus
    from tunehost.host.snapshot import scrub_command_output

    text = corpus("nvidia-smi/rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt")
    scrubbed = scrub_command_output(("nvidia-smi", "-q"), text)
    assert "--user-data-dir" not in scrubbed and "/home/tk" not in scrubbed
    assert "Name                          : code\n" in scrubbed and ": Xorg\n" in scrubbed
    assert "Product Name" in scrubbed and "NVIDIA GeForce RTX 4090" in scrubbed
    xml = "<process_info><process_name>/opt/google/chrome/chrome --type=gpu-process --secret=x</process_name></process_info>"
    assert scrub_command_output(("nvidia-smi", "-q", "-x"), xml) == \
        "<process_info><process_name>chrome</process_name></process_info>"
    assert scrub_command_output(("tuned-adm", "active"), "Name : /x --y") == "Name : /x --y"


def test_declared_reads_are_taken_and_a_broken_one_is_one_line(monkeypatch):
    from tunehost.host import snapshot

    taken = []
    monkeypatch.setattr(snapshot, "DECLARED_READS", {"a plugin": taken.append, "broken": lambda host: 1 / 0})
    assert snapshot.take_declared_reads("the host") == ["broken inputs not recorded: ZeroDivisionError: division by zero"]
    assert taken == ["the host"]


@pytest.mark.live
def test_advise_declares_its_reads_and_a_recording_host_stores_them(tmp_path):
    import tunehost.advise.flags  # noqa: F401 (declares advise's reads)
    from tunehost.host.snapshot import DECLARED_READS, take_declared_reads

    assert DECLARED_READS["advise"] is tunehost.advise.flags.read_advise_inputs
    from tunehost.facts import HostFacts

    host = open_host(record=True)
    assert take_declared_reads(HostFacts(host)) == []
    write_snapshot(host, tmp_path / "snap")
    assert (tmp_path / "snap" / "fs" / "proc" / "self" / "limits").is_file()   # the memlock limit advise reads
