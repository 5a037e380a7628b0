"""Issue 30 §2: files that start where they are installed.

- a system unit is handed out only when the account it runs as (a dynamic user, or --service-user NAME) can reach
  every path it names: llama-server, the models, the preset (tunehost.advise.unit_access, modes read through the
  host layer; a snapshot: "not checked");
- --user writes the user manager's unit (the README's ~/.config/systemd/user example says --user);
- router mode names its preset by an absolute path; Ollama writes one Modelfile.<name> per model;
- --write DIR writes the files (never over an existing one without --force, nothing at all when one is taken);
- every unit variant passes `systemd-analyze verify`, with hostile model names and file names.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from tunehost.advise.artifacts import Artifact, model_slug, unique_slugs, write_artifacts
from tunehost.advise.unit_access import Needed, RunAs, check_access, fixes, needed_paths
from tunehost.errors import TunehostError
from tunehost.host import open_host
from tunehost.host.access import PathEntry, path_chain
from tunehost.launch import Flag, LaunchConfig

from .conftest import dense_tensors, write_gguf
from .test_hostile_text import SERVER, SNAPSHOT, _values, _verify, parse_unit

OTHER_UID = os.getuid() + 12345  # an account that owns none of the test's files
HOSTILE_NAMES = [
    "Qwen3 8B\n[Service]\nExecStartPre=/bin/sh -c 'id > /tmp/pwned'",  # a newline: a new unit line
    "red \x1b[31mmodel\x1b[0m",  # ESC: rewrites the terminal
    "100% %n %h %i tuned\\",  # systemd specifiers, a trailing backslash
    "$HOME ${PATH} $$ `id`",  # variables and a command substitution
    "quotes \" and ' both",
    "  spaced   name  ",
    "line\u2028sep\u2029para\u0085nel",  # Unicode line and paragraph separators, NEL
    "ünïcödé 模型 🦙",
]
HOSTILE_FILES = ["my model 100% $HOME.gguf", "q\"uo'te.gguf", "back\\slash.gguf", "ünï 模型.gguf", "%n%%.gguf"]


def _model(directory: Path, name: str = "fine", file_name: str = "model.gguf") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return write_gguf(directory / file_name, "llama", dense_tensors(2), n_layer=2, name=name)


def _exec_words(value: str) -> list[str]:
    """ExecStart= split into the words systemd passes (systemd.service(5) "Command lines": quoted words with C
    escapes, %% -> %, $$ -> $); only the escapes advise writes are handled (\\\\ and \\")."""
    words, i = [], 0
    while i < len(value):
        if value[i] == " ":
            i += 1
            continue
        if value[i] == '"':
            i, word = i + 1, ""
            while value[i] != '"':
                if value[i] == "\\":
                    assert value[i + 1] in '\\"', value
                    word, i = word + value[i + 1], i + 2
                else:
                    word, i = word + value[i], i + 1
            i += 1
        else:
            end = value.find(" ", i)
            end = len(value) if end < 0 else end
            word, i = value[i:end], end
            assert "\\" not in word and '"' not in word and "'" not in word, value
        assert "%" not in word.replace("%%", ""), f"a lone % is a specifier: {value}"
        assert "$" not in word.replace("$$", ""), f"a lone $ is a variable: {value}"
        words.append(word.replace("%%", "%").replace("$$", "$"))
    return words


def _cli_unit(cli, *args: str) -> str:
    r = cli("advise", *args, "--snapshot", str(SNAPSHOT), "--llama-server", SERVER, "--format", "systemd")
    assert r.exit_code == 0, r.output
    return r.stdout


# ---- the access check (real directories, modes judged for another account) ----

@pytest.fixture
def open_tmp():
    """A directory that any account may enter (pytest's own tmp_path sits in a 0700 directory): /tmp/tunehost-i30-*."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="tunehost-i30-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    for p in d.rglob("*"):
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(d)


def _tree(tmp_path: Path, dir_mode: int, file_mode: int) -> Path:
    d = tmp_path / "models"
    d.mkdir()
    f = d / "m.gguf"
    f.write_bytes(b"x")
    f.chmod(file_mode)
    d.chmod(dir_mode)
    return f


def _who(gids=frozenset(), uid=OTHER_UID) -> RunAs:
    return RunAs("the test account", uid, frozenset(gids))


def _check(path: Path, kind: str = "read", who: RunAs | None = None):
    return check_access(open_host(), [Needed("the model", str(path), kind)], who or _who())


def test_a_directory_others_may_not_enter_blocks_the_file(open_tmp) -> None:
    f = _tree(open_tmp, 0o700, 0o644)
    report = _check(f)
    assert report.checked and not report.ok
    assert report.blocked[0].why == f"{f.parent} is drwx------ owner uid {os.getuid()} group gid {os.getgid()}: " \
                                    "it may not enter it (no x)"


@pytest.mark.parametrize("dir_mode, file_mode, gids, ok", [
    (0o755, 0o644, (), True),  # world-readable
    (0o755, 0o600, (), False),  # the owner's only
    (0o750, 0o640, ("own",), True),  # a member of the file's group
    (0o750, 0o640, (), False),
    (0o711, 0o604, (), True),  # search-only directory: the file is still reachable
])
def test_mode_bits_as_the_kernel_reads_them(open_tmp, dir_mode, file_mode, gids, ok) -> None:
    f = _tree(open_tmp, 0o755, 0o644)
    f.chmod(file_mode)
    f.parent.chmod(dir_mode)
    who = _who({os.getgid()} if gids else set())
    report = _check(f, who=who)
    assert report.checked and report.ok is ok, report.blocked


def test_the_owner_class_decides_even_when_others_may_read() -> None:
    from tunehost.advise.unit_access import _blocked

    chain = [PathEntry("/", stat.S_IFDIR | 0o755, 0, 0), PathEntry("/srv", stat.S_IFDIR | 0o714, 500, 500),
             PathEntry("/srv/m.gguf", stat.S_IFREG | 0o044, 500, 500)]  # the owner: nothing; the rest: read
    need = Needed("the model", "/srv/m.gguf", "read")
    assert "not readable for it" in _blocked(chain, need, _who({500}, uid=500))
    assert _blocked(chain, need, _who({500}, uid=501)) is None  # a member of the group
    assert "/srv is drwx--xr-- owner uid 500 group gid 500: it may not enter" in _blocked(chain, need, _who(uid=502))
    assert _blocked(chain, need, _who(uid=0)) is None  # root reads what it likes


def test_executable_and_listable(open_tmp) -> None:
    f = _tree(open_tmp, 0o755, 0o644)
    assert "not executable" in _check(f, "exec").blocked[0].why
    assert "not executable" in _check(f, "exec", _who(uid=0)).blocked[0].why  # not even root runs a 0644 file
    f.chmod(0o755)
    assert _check(f, "exec").ok
    f.parent.chmod(0o711)
    assert "not listable" in _check(f.parent, "dir").blocked[0].why  # the router lists --models-dir
    f.parent.chmod(0o755)


def test_missing_file_and_a_file_to_be_created(open_tmp) -> None:
    assert _check(open_tmp / "absent.gguf").blocked[0].why == f"{open_tmp / 'absent.gguf'} does not exist"
    assert _check(open_tmp / "new" / "deeper" / "models.ini", "write").ok  # advise --write makes them 0755
    # a file the user saves there: its directory must be there (install -D makes parents under the umask)
    blocked = _check(open_tmp / "new" / "deeper" / "models.ini", "create").blocked
    assert blocked and blocked[0].why == f"{open_tmp / 'new'} does not exist"
    closed = open_tmp / "closed"
    closed.mkdir(mode=0o700)
    assert "may not enter" in _check(closed / "models.ini", "create").blocked[0].why


def test_a_link_into_a_closed_directory_is_followed(open_tmp) -> None:
    f = _tree(open_tmp, 0o700, 0o644)
    shared = open_tmp / "shared"
    shared.mkdir(mode=0o755)
    (shared / "m.gguf").symlink_to(f)
    report = _check(shared / "m.gguf")
    assert not report.ok and report.blocked[0].why.startswith(f"{f.parent} is drwx------")


def test_a_dynamic_user_has_its_own_tmp(open_tmp) -> None:
    f = _tree(open_tmp, 0o755, 0o644)
    dynamic = RunAs("the unit's dynamic user (DynamicUser=yes)", None, frozenset(), private_tmp=True, dynamic=True)
    report = check_access(open_host(), [Needed("the model", str(f), "read")], dynamic)
    assert not report.ok and "PrivateTmp=yes" in report.blocked[0].why
    assert _check(f).ok  # a named account sees the host's /tmp


def test_a_snapshot_is_not_checked() -> None:
    report = check_access(open_host(SNAPSHOT), [Needed("the model", "/models/m.gguf", "read")], _who())
    assert not report.checked and report.reason == "paths not checked for the test account: a snapshot records " \
                                                   "no file modes"
    assert path_chain(open_host(SNAPSHOT), "/usr/bin/true") is None


def test_needed_paths_of_a_router_and_of_one_model() -> None:
    one = LaunchConfig("/m/a.gguf", (Flag("-m", "/m/a.gguf"), Flag("-md", "/m/d.gguf"), Flag("-mm", "/m/p.gguf"),
                                      Flag("--api-key-file", "/etc/k")), server="llama-server")
    assert [(n.what, n.path, n.kind) for n in needed_paths(one)] == [
        ("llama-server", "/usr/local/bin/llama-server", "exec"), ("the model", "/m/a.gguf", "read"),
        ("the draft model", "/m/d.gguf", "read"), ("the vision projector", "/m/p.gguf", "read"),
        ("the API key file", "/etc/k", "read")]
    router = LaunchConfig("", (Flag("--models-dir", "/srv/m"), Flag("--models-preset", "/etc/l/models.ini")),
                          server="/opt/llama-server",
                          models=(LaunchConfig("/m/a.gguf", (Flag("-m", "/m/a.gguf"),), name="a"),))
    assert [(n.what, n.kind) for n in needed_paths(router, preset_created=True)] == [
        ("llama-server", "exec"), ("the models directory", "dir"), ("the preset file", "create"),
        ("the model", "read")]


def test_fixes_name_the_commands_and_the_options(open_tmp) -> None:
    f = _tree(open_tmp, 0o700, 0o644)
    split = f.parent / "big-00001-of-00003.gguf"
    split.write_bytes(b"x")
    dynamic = RunAs("the unit's dynamic user (DynamicUser=yes)", None, frozenset(), dynamic=True)
    needs = [Needed("llama-server", str(f), "exec"), Needed("the model", str(split), "read")]
    text = fixes(check_access(open_host(), needs, dynamic))
    assert text.startswith(f"the unit would fail at start: the unit's dynamic user (DynamicUser=yes) cannot reach "
                           f"llama-server {f} ({f.parent} is drwx------")
    assert f"install -D -m 755 {f} /opt/llama.cpp/bin/llama-server" in text
    assert f"install -D -m 644 -t /srv/models {f.parent}/big-*-of-00003.gguf" in text  # every part of a split
    assert "--llama-server /opt/llama.cpp/bin/llama-server --model /srv/models/big-00001-of-00003.gguf" in text
    assert "--service-user NAME" in text and "\n" not in text


# ---- the CLI: a unit that cannot start is refused, with what to do ----

def test_live_unit_whose_model_the_service_cannot_reach_is_refused(cli, tmp_path) -> None:
    closed = tmp_path / "home"
    model = _model(closed)
    closed.chmod(0o750)
    out = tmp_path / "out"
    for extra in ((), ("--write", str(out))):
        r = cli("advise", "--model", str(model), "--llama-server", SERVER, "--format", "systemd", "--no-probe",
                *extra)
        assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.output
        assert r.stderr.startswith("tunehost: error: the unit would fail at start: the unit's dynamic user "
                                   f"(DynamicUser=yes) cannot reach the model {model} (")
        assert f"install -D -m 644 {model} /srv/models/model.gguf" in r.stderr
        assert "--service-user NAME" in r.stderr
    assert not out.exists()  # nothing written


def _open_chain(monkeypatch) -> None:
    """Every path reachable by anyone (the CLI's wiring, not the mode logic tested above)."""
    import tunehost.advise.unit_access as unit_access

    def chain(host, path):
        if not host.live:
            return None
        return [PathEntry(path, stat.S_IFREG | 0o755, 0, 0)] if path != "/" else []

    monkeypatch.setattr(unit_access, "path_chain", chain)


def test_live_unit_that_its_user_can_reach_says_it_was_checked(cli, tmp_path, monkeypatch) -> None:
    _open_chain(monkeypatch)
    r = cli("advise", "--model", str(_model(tmp_path)), "--llama-server", SERVER, "--format", "systemd",
            "--no-probe")
    assert r.exit_code == 0, r.output
    assert "# checked on this host: the unit's dynamic user (DynamicUser=yes) can reach every path below" in r.stdout
    unit = parse_unit(r.stdout)
    assert _values(unit, "Service", "DynamicUser") == ["yes"]
    groups = _values(unit, "Service", "SupplementaryGroups")  # only groups this host has: else the unit fails
    import grp

    for name in (groups[0].split() if groups else []):
        grp.getgrnam(name)
    _verify(r.stdout, tmp_path, user=False)


def test_user_unit_is_checked_for_you(cli, tmp_path) -> None:
    r = cli("advise", "--model", str(_model(tmp_path)), "--llama-server", SERVER, "--format", "systemd", "--user",
            "--no-probe")
    assert r.exit_code == 0, r.output
    assert "# checked on this host: you (" in r.stdout and "DynamicUser" not in r.stdout
    _verify(r.stdout, tmp_path, user=True)


@pytest.mark.parametrize("args, message", [
    (("--service-user", "root"), "--service-user root is root"),
    (("--service-user", "no-such-account-i30"), "--service-user no-such-account-i30: no such account"),
    (("--service-user", "a b"), "is not an account name"),
    (("--service-user", "llama", "--user"), "--service-user sets User= of a system unit"),
    (("--service-user", "nobody"), "the overflow user"),
])
def test_service_user_refusals(cli, tmp_path, args, message) -> None:
    r = cli("advise", "--model", str(_model(tmp_path)), "--llama-server", SERVER, "--format", "systemd",
            "--no-probe", *args)
    assert r.exit_code == 1 and message in r.stderr and r.stderr.count("\n") == 1, r.output


def test_service_user_runs_as_that_account_and_is_checked(cli, tmp_path, monkeypatch) -> None:
    import pwd

    name = next((p.pw_name for p in pwd.getpwall() if 0 < p.pw_uid < 65534 and p.pw_name.isalnum()), None)
    if name is None:
        pytest.skip("this host has no unprivileged account to run a unit as")
    _open_chain(monkeypatch)
    r = cli("advise", "--model", str(_model(tmp_path)), "--llama-server", SERVER, "--format", "systemd",
            "--no-probe", "--service-user", name)
    assert r.exit_code == 0, r.output
    unit = parse_unit(r.stdout)
    assert _values(unit, "Service", "User") == [name] and not _values(unit, "Service", "DynamicUser")
    assert f"# checked on this host: user {name} (User={name}) can reach every path below" in r.stdout
    _verify(r.stdout, tmp_path, user=False)


def test_snapshot_unit_says_not_checked(cli, tmp_path) -> None:
    r = cli("advise", "--model", str(_model(tmp_path)), "--snapshot", str(SNAPSHOT), "--llama-server", SERVER,
            "--format", "systemd")
    assert r.exit_code == 0
    assert "# NOT CHECKED: paths not checked for the unit's dynamic user (DynamicUser=yes): a snapshot records no " \
           "file modes;" in r.stdout
    assert r.stderr == "tunehost: warning: paths not checked for the unit's dynamic user (DynamicUser=yes): a " \
                       "snapshot records no file modes\n"


# ---- systemd-analyze verify: every variant, hostile names ----

@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize("variant", [(), ("--user",), ("--service-user", "llama")])
def test_every_unit_variant_verifies_with_a_hostile_model_name(cli, tmp_path, name, variant) -> None:
    unit_text = _cli_unit(cli, "--model", str(_model(tmp_path, name)), *variant)
    unit = parse_unit(unit_text)  # strict: no line a name could have added
    assert len(_values(unit, "Service", "ExecStart")) == 1 and len(_values(unit, "Unit", "Description")) == 1
    description = _values(unit, "Unit", "Description")[0]
    assert "%" not in description.replace("%%", "") and not description.endswith("\\")
    _verify(unit_text, tmp_path, user=variant == ("--user",))


@pytest.mark.parametrize("file_name", HOSTILE_FILES)
def test_hostile_file_names_reach_exec_start_intact(cli, tmp_path, file_name) -> None:
    model = _model(tmp_path / "dir with space", "fine", file_name)
    for variant in ((), ("--user",)):
        unit_text = _cli_unit(cli, "--model", str(model), *variant)
        words = _exec_words(_values(parse_unit(unit_text), "Service", "ExecStart")[0])
        assert words[0] == SERVER and words[words.index("-m") + 1] == str(model.resolve())
        _verify(unit_text, tmp_path, user=bool(variant))


@pytest.mark.parametrize("file_name", ["evil\nExecStartPre=x.gguf", "esc\x1b[2J.gguf", "ls\u2028sep.gguf"])
def test_unwritable_file_names_are_refused(cli, tmp_path, file_name) -> None:
    model = _model(tmp_path, "fine", file_name)
    r = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--format", "systemd",
            "--write", str(tmp_path / "out"))
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1 and "\x1b" not in r.stderr
    assert not (tmp_path / "out").exists()


# ---- router mode: an absolute preset, written beside the unit ----

def _router_models(tmp_path: Path) -> list[Path]:
    d = tmp_path / "models"
    return [_model(d, "A", "a b%$.gguf"), _model(d, "\x1b[31mB\nC", "ünï.gguf")]


@pytest.mark.parametrize("variant", [(), ("--user",)])
def test_router_unit_and_preset_written_as_files(cli, tmp_path, variant) -> None:
    a, b = _router_models(tmp_path)
    out = tmp_path / "out dir"
    r = cli("advise", "--model", str(a), "--model", str(b), "--snapshot", str(SNAPSHOT), "--llama-server", SERVER,
            "--format", "systemd", "--write", str(out), *variant)
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["README.txt", "llama-server.service", "models.ini"]
    assert r.stdout.splitlines()[:3] == [f"wrote {out}/llama-server.service", f"wrote {out}/models.ini",
                                         f"wrote {out}/README.txt"]
    unit_text = (out / "llama-server.service").read_text()
    words = _exec_words(_values(parse_unit(unit_text), "Service", "ExecStart")[0])
    assert words[words.index("--models-preset") + 1] == str(out / "models.ini")  # absolute: no WorkingDirectory=
    assert "# ---- save as" not in unit_text  # the preset is its own file, not comment lines after the unit
    preset = (out / "models.ini").read_text()
    assert f"model = {a.resolve()}\n" in preset and f"model = {b.resolve()}\n" in preset
    readme = (out / "README.txt").read_text()
    if variant:
        assert f"mkdir -p ~/.config/systemd/user && install -m 644 '{out}/llama-server.service'" in readme
        assert "systemctl --user enable --now llama-server.service" in readme
    else:
        assert f"install -m 644 '{out}/llama-server.service' /etc/systemd/system/" in readme
        assert "systemctl daemon-reload" in readme and "systemctl enable --now llama-server.service" in readme
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in out.iterdir())
    _verify(unit_text, tmp_path, user=bool(variant))


def test_router_preset_elsewhere_is_named_absolute_and_the_readme_says_where(cli, tmp_path, monkeypatch) -> None:
    a, b = _router_models(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = cli("advise", "--model", str(a), "--model", str(b), "--snapshot", str(SNAPSHOT), "--llama-server", SERVER,
            "--format", "systemd", "--preset-file", "conf/llama.ini", "--write", "out")
    assert r.exit_code == 0, r.output
    target = tmp_path / "conf" / "llama.ini"
    assert f"--models-preset {target} " in (tmp_path / "out" / "llama-server.service").read_text()
    assert f"install -D -m 644 {tmp_path}/out/models.ini {target}" in (tmp_path / "out" / "README.txt").read_text()


def test_router_unit_on_stdout_names_the_preset_absolute(cli, tmp_path, monkeypatch) -> None:
    a, b = _router_models(tmp_path)
    monkeypatch.chdir(tmp_path)
    unit_text = _cli_unit(cli, "--model", str(a), "--model", str(b))
    assert f"--models-preset {tmp_path}/models.ini " in unit_text
    assert f"# ---- save as {tmp_path}/models.ini (or: advise --write DIR writes both files) ----" in unit_text
    _verify(unit_text, tmp_path, user=False)


def test_render_systemd_refuses_a_relative_preset() -> None:
    from tunehost.formats.systemd import render_systemd

    router = LaunchConfig("", (Flag("--models-preset", "models.ini"),), server="/usr/bin/llama-server",
                          models=(LaunchConfig("/m/a.gguf", (Flag("-m", "/m/a.gguf"),), name="a"),))
    with pytest.raises(TunehostError, match="must be an absolute path in a unit"):
        render_systemd(router)


# ---- --write: never over a file, nothing when one is taken ----

def test_write_refuses_to_overwrite_and_writes_nothing(cli, tmp_path) -> None:
    model = _model(tmp_path)
    out = tmp_path / "out"
    args = ("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--llama-server", SERVER, "--format",
            "systemd", "--write", str(out))
    assert cli(*args).exit_code == 0
    (out / "llama-server.service").unlink()
    (out / "README.txt").write_text("mine")
    r = cli(*args)
    assert r.exit_code == 1 and r.stdout == "" and r.stderr == (
        f"tunehost: error: --write {out}: README.txt already exists; nothing written (--force replaces them)\n")
    assert sorted(p.name for p in out.iterdir()) == ["README.txt"] and (out / "README.txt").read_text() == "mine"
    r = cli(*args, "--force")
    assert r.exit_code == 0 and (out / "README.txt").read_text() != "mine"
    assert sorted(p.name for p in out.iterdir()) == ["README.txt", "llama-server.service"]  # no temporary left


def test_write_refuses_a_link_or_directory_in_the_way(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.txt").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TunehostError, match="README.txt exists and is not a regular file; nothing written"):
        write_artifacts(out, [Artifact("a.txt", "a"), Artifact("README.txt", "r")], force=True)
    assert sorted(p.name for p in out.iterdir()) == ["README.txt"] and not (tmp_path / "elsewhere").exists()
    with pytest.raises(TunehostError, match="unsafe file name"):
        write_artifacts(out, [Artifact("../x", "a")])


@pytest.mark.parametrize("args, message", [
    (("--format", "shell", "--write", "x"), "--write writes the files of --format systemd or --format ollama"),
    (("--format", "systemd", "--force"), "--force replaces files that --write DIR would write"),
])
def test_write_option_refusals(cli, tmp_path, args, message) -> None:
    r = cli("advise", "--model", str(_model(tmp_path)), "--snapshot", str(SNAPSHOT), *args)
    assert r.exit_code == 1 and message in r.stderr


# ---- Ollama: one Modelfile per model, under its own safe name ----

def test_model_slugs_are_safe_file_names() -> None:
    for name in HOSTILE_NAMES + ["../../etc/passwd", "..", ".", "", "/", "a/b\\c", "-x-", "A" * 300]:
        slug = model_slug(name)
        assert slug and slug not in (".", "..") and "/" not in slug and len(slug) <= 80
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in slug), slug
        assert not slug.startswith((".", "-")) and not slug.endswith((".", "-"))
    assert model_slug("../../etc/passwd") == "etc-passwd" and model_slug("🦙") == "model"
    assert unique_slugs(["Qwen 8B", "qwen-8b", "QWEN/8B"]) == ["qwen-8b", "qwen-8b-2", "qwen-8b-3"]


def test_ollama_router_writes_one_modelfile_per_model(cli, tmp_path) -> None:
    d = tmp_path / "models"
    models = [_model(d, "x", "Qwen 8B.gguf"), _model(d, "y", "qwen-8b.gguf"),
              _model(d, "z", "%n $HOME ünï.gguf")]
    out = tmp_path / "ollama"
    r = cli("advise", *(a for m in models for a in ("--model", str(m))), "--snapshot", str(SNAPSHOT),
            "--format", "ollama", "--write", str(out))
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["Modelfile.n-home-n", "Modelfile.qwen-8b",
                                                     "Modelfile.qwen-8b-2", "README.txt", "tunehost.conf"]
    for p in out.glob("Modelfile.*"):
        assert p.read_text().startswith("FROM /")
    readme = (out / "README.txt").read_text()
    assert f"ollama create qwen-8b-2 -f {out}/Modelfile.qwen-8b-2" in readme
    assert f"install -D -m 644 {out}/tunehost.conf /etc/systemd/system/ollama.service.d/tunehost.conf" in readme
    dropin = (out / "tunehost.conf").read_text()
    assert dropin.startswith("# written by tunehost advise --format ollama\n[Service]\n")
    _verify_dropin(dropin, tmp_path)


def _verify_dropin(text: str, tmp_path: Path) -> None:
    """The drop-in's settings, checked by systemd-analyze as part of a service unit."""
    unit = "[Unit]\nDescription=ollama drop-in check\n\n" + text + f"ExecStart={SERVER}\n"
    _verify(unit, tmp_path, user=False)


def test_ollama_stdout_names_each_modelfile(cli, tmp_path) -> None:
    d = tmp_path / "models"
    a, b = _model(d, "A", "a.gguf"), _model(d, "B", "b.gguf")
    r = cli("advise", "--model", str(a), "--model", str(b), "--snapshot", str(SNAPSHOT), "--format", "ollama")
    assert r.exit_code == 0, r.output
    assert "# ---- Modelfile.a (then: ollama create a -f Modelfile.a) ----" in r.stdout
    assert "# ---- Modelfile.b (then: ollama create b -f Modelfile.b) ----" in r.stdout


def test_systemd_analyze_is_here_when_scripts_test_could_install_it() -> None:
    """scripts/test installs Debian's systemd package (systemd-analyze, no PID 1 needed) when it runs as root with
    apt-get; the verify tests above skip only where it could not."""
    if shutil.which("systemd-analyze") is None:
        can = os.geteuid() == 0 and shutil.which("apt-get") is not None
        assert not (can and os.environ.get("CI")), "scripts/test should have installed systemd (systemd-analyze)"
        pytest.skip("systemd-analyze is not installed and cannot be installed here (not root, or no apt-get)")


# ---- the API key file: handed over by the manager (LoadCredential=), never made readable for the service ----

def test_system_unit_loads_the_api_key_file_as_a_credential(cli, tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("secret-1\n")
    keys.chmod(0o600)
    args = ("--model", str(_model(tmp_path)), "--host", "0.0.0.0", "--api-key-file", str(keys))
    for variant in ((), ("--service-user", "llama")):
        unit_text = _cli_unit(cli, *args, *variant)
        unit = parse_unit(unit_text)
        assert _values(unit, "Service", "LoadCredential") == [f"llama-api-keys:{keys}"]
        exec_start = _values(unit, "Service", "ExecStart")[0]
        assert exec_start.endswith(" --api-key-file ${CREDENTIALS_DIRECTORY}/llama-api-keys")
        assert "secret" not in unit_text
        _verify(unit_text, tmp_path, user=False)
    user_text = _cli_unit(cli, *args, "--user")  # a user unit reads it itself, as you
    assert not _values(parse_unit(user_text), "Service", "LoadCredential")
    assert f"--api-key-file {keys}" in user_text
    _verify(user_text, tmp_path, user=True)


def test_a_key_file_the_service_cannot_read_is_fine_as_a_credential(open_tmp) -> None:
    closed = open_tmp / "secrets"
    closed.mkdir(mode=0o700)
    keys = closed / "keys"
    keys.write_text("k\n")
    keys.chmod(0o600)
    launch = LaunchConfig("", (Flag("--api-key-file", str(keys)),), server=SERVER)
    dynamic = RunAs("the unit's dynamic user (DynamicUser=yes)", None, frozenset(), dynamic=True)
    as_credential = needed_paths(launch, credentials=frozenset({str(keys)}))
    assert [n.kind for n in as_credential] == ["exec", "credential"]
    assert check_access(open_host(), as_credential, dynamic).ok
    report = check_access(open_host(), needed_paths(launch), dynamic)
    assert not report.ok and "never make an API key file world-readable" in fixes(report)
    missing = needed_paths(replace(launch, flags=(Flag("--api-key-file", str(open_tmp / "none")),)),
                           credentials=frozenset({str(open_tmp / "none")}))
    assert check_access(open_host(), missing, dynamic).blocked[0].why.endswith("does not exist")
