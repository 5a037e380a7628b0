"""Review fixes to issue 30 §2: --write under a tight umask, and the fix for an unreachable shared-library build."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tunehost.advise.artifacts import Artifact, write_artifacts
from tunehost.advise.unit_access import SHARED_BIN, AccessReport, Blocked, Needed, RunAs, fixes

from .test_i30_units import _model
from .test_hostile_text import SERVER


@pytest.fixture
def umask_077():
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_write_makes_its_directories_0755_and_files_their_mode_under_umask_077(tmp_path, umask_077) -> None:
    out = tmp_path / "a" / "b" / "out"
    tmp_path.chmod(0o755)
    write_artifacts(out, [Artifact("models.ini", "x\n"), Artifact("run.sh", "#!/bin/sh\n", 0o755)])
    for d in (tmp_path / "a", tmp_path / "a" / "b", out):
        assert _mode(d) == 0o755, d
    assert _mode(out / "models.ini") == 0o644 and _mode(out / "run.sh") == 0o755


def test_write_leaves_an_existing_directory_as_it_is(tmp_path, umask_077) -> None:
    out = tmp_path / "mine"
    out.mkdir(mode=0o700)
    write_artifacts(out, [Artifact("README.txt", "x\n")])
    assert _mode(out) == 0o700 and _mode(out / "README.txt") == 0o644


def test_advise_write_under_umask_077_through_the_cli(cli, tmp_path, umask_077) -> None:
    out = tmp_path / "new" / "unit"
    r = cli("advise", "--model", str(_model(tmp_path)), "--llama-server", SERVER, "--format", "systemd",
            "--no-probe", "--user", "--write", str(out))
    assert r.exit_code == 0, r.output
    assert _mode(tmp_path / "new") == 0o755 and _mode(out) == 0o755
    assert all(_mode(p) == 0o644 for p in out.iterdir())


def _fix_for_server(path: Path) -> str:
    blocked = Blocked(Needed("llama-server", str(path), "exec"), "/root is drwx------: it may not enter it (no x)")
    report = AccessReport(RunAs("the unit's dynamic user (DynamicUser=yes)", None, frozenset(), dynamic=True), True,
                          (blocked,))
    return fixes(report)


def _build(root: Path, lib_dir: str | None) -> Path:
    (root / "bin").mkdir(parents=True)
    server = root / "bin" / "llama-server"
    server.write_text("#!/bin/sh\n")
    if lib_dir is not None:
        (root / lib_dir).mkdir(exist_ok=True)
        (root / lib_dir / "libggml-cpu.so").write_text("")
        (root / lib_dir / "libllama.so").write_text("")
    return server


def test_a_static_build_copies_the_binary(tmp_path) -> None:
    server = _build(tmp_path, None)
    assert f"install -D -m 755 {server} {SHARED_BIN}" in _fix_for_server(server)


def test_a_build_with_its_libraries_beside_it_copies_the_bin_directory(tmp_path) -> None:
    server = _build(tmp_path, "bin")
    text = _fix_for_server(server)
    assert f"cp -a {tmp_path / 'bin'}/. /opt/llama.cpp/bin/" in text and "install -D -m 755" not in text
    assert "/opt/llama.cpp/lib" not in text and "2 libggml/libllama libraries" in text
    assert f"--llama-server {SHARED_BIN}" in text


def test_a_build_with_its_libraries_in_lib_copies_both(tmp_path) -> None:
    server = _build(tmp_path, "lib")
    text = _fix_for_server(server)
    assert f"cp -a {tmp_path / 'bin'}/. /opt/llama.cpp/bin/" in text
    assert f"cp -a {tmp_path / 'lib'}/. /opt/llama.cpp/lib/" in text and "chmod -R a+rX /opt/llama.cpp" in text
