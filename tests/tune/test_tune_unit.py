"""`tune --format systemd` hands out a unit only through advise's check (issue 30 §2): the account it runs as
(a dynamic user, --service-user NAME, or you with --user) must reach llama-server and the model, the GPU groups
it names must exist, and a unit that could not start is refused BEFORE the race spends its budget."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.advise.test_hostile_text import _values, _verify, parse_unit
from tests.advise.test_i30_units import _open_chain
from tests.tune.test_tune_cli import boundary, model  # noqa: F401 (fixtures)
from tunehost.bench import runner

RUN = ("--budget", "2h", "-n", "16", "--format", "systemd")


def _server_beside_bench(monkeypatch, directory: Path, *, libs: bool = False) -> Path:
    """A llama-bench and a llama-server in one build directory (a shared-library build when `libs`)."""
    directory.mkdir(parents=True, exist_ok=True)
    bench = directory / "llama-bench"
    server = directory / "llama-server"
    for f in (bench, server):
        f.write_text("#!/bin/sh\n")
        f.chmod(0o755)
    if libs:
        (directory / "libllama.so").write_text("")
        (directory / "libggml-base.so").write_text("")
    monkeypatch.setattr(runner, "resolve_binary", lambda explicit: bench)
    return server


def test_a_unit_its_dynamic_user_cannot_reach_is_refused_before_any_measurement(cli, model, boundary,
                                                                                 monkeypatch, tmp_path):
    home = tmp_path / "root-cache"  # as root's ~/.cache: a 0700 directory on the way
    server = _server_beside_bench(monkeypatch, home / "bin")
    home.chmod(0o700)
    r = cli("tune", "--model", str(model), *RUN)
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.output
    assert r.stderr.startswith("tunehost: error: the unit would fail at start: the unit's dynamic user "
                               f"(DynamicUser=yes) cannot reach llama-server {server} (")
    assert "--service-user NAME" in r.stderr
    assert boundary["fake"].invocations == []  # no budget spent


def test_the_unit_is_checked_names_the_measured_server_and_only_groups_the_host_has(cli, model, boundary,
                                                                                    monkeypatch, tmp_path):
    import tunehost.host.access as access

    _open_chain(monkeypatch)
    server = _server_beside_bench(monkeypatch, tmp_path / "build" / "bin")
    monkeypatch.setattr(access, "group_id", lambda host, name: 44 if name == "video" else None)
    r = cli("tune", "--model", str(model), *RUN)
    assert r.exit_code == 0, r.output
    assert "# checked on this host: the unit's dynamic user (DynamicUser=yes) can reach every path below" in r.stdout
    assert "# no render group on this host: left out of SupplementaryGroups=" in r.stdout
    unit = parse_unit(r.stdout)
    assert _values(unit, "Service", "SupplementaryGroups") == ["video"]
    assert _values(unit, "Service", "DynamicUser") == ["yes"]
    assert _values(unit, "Service", "ExecStart")[0].startswith(f"{server} ")
    assert " -t 4 " in _values(unit, "Service", "ExecStart")[0]  # the winner, not the plan
    _verify(r.stdout, tmp_path, user=False)


def test_user_unit_runs_as_you_and_is_checked(cli, model, boundary, monkeypatch, tmp_path):
    _server_beside_bench(monkeypatch, tmp_path / "build")
    r = cli("tune", "--model", str(model), *RUN, "--user")
    assert r.exit_code == 0, r.output
    assert "# checked on this host: you (" in r.stdout and "DynamicUser" not in r.stdout
    assert "SupplementaryGroups" not in r.stdout
    _verify(r.stdout, tmp_path, user=True)


@pytest.mark.parametrize("args, message", [
    (("--format", "systemd", "--service-user", "root"), "--service-user root is root"),
    (("--format", "systemd", "--service-user", "no-such-account-i30"), "no such account"),
    (("--format", "shell", "--user"), "--user chooses the kind of systemd unit"),
    (("--format", "json", "--service-user", "llama"), "--service-user sets User= of a system unit"),
])
def test_unit_options_are_refused_up_front(cli, model, boundary, args, message):
    r = cli("tune", "--model", str(model), "--budget", "2h", *args)
    assert r.exit_code == 1 and message in r.stderr and r.stderr.count("\n") == 1, r.output
    assert boundary["fake"].invocations == []


def test_service_user_unit_is_checked_for_that_account(cli, model, boundary, monkeypatch, tmp_path):
    import pwd

    name = next((p.pw_name for p in pwd.getpwall() if 0 < p.pw_uid < 65534 and p.pw_name.isalnum()), None)
    if name is None:
        pytest.skip("this host has no unprivileged account to run a unit as")
    _open_chain(monkeypatch)
    _server_beside_bench(monkeypatch, tmp_path / "build")
    r = cli("tune", "--model", str(model), *RUN, "--service-user", name)
    assert r.exit_code == 0, r.output
    assert _values(parse_unit(r.stdout), "Service", "User") == [name]
    assert f"# checked on this host: user {name} (User={name})" in r.stdout


def test_a_shared_library_build_is_copied_whole(cli, model, boundary, monkeypatch, tmp_path):
    """The fix for an unreachable llama-server copies its libraries too (a lone binary fails at start)."""
    home = tmp_path / "closed"
    _server_beside_bench(monkeypatch, home / "bin", libs=True)
    home.chmod(0o700)
    r = cli("tune", "--model", str(model), *RUN)
    assert r.exit_code == 1
    assert f"cp -a {home / 'bin'}/. /opt/llama.cpp/bin/" in r.stderr
    assert "install -D -m 755" not in r.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
