"""Issue 12, hole 2: a snapshot never reads outside its directory (SNAPSHOT.md: "a reader never follows a link out
of DIR"), and never blocks on a FIFO. Every file kind is covered: cmd/*, samples/*, manifest.json, which.json, fs/
(and fs itself). A refused file reads as unknown: the check that needed it skips, and the CLI says which file and why.

The attacks are the issue's: `cmd/dmidecode_-t_memory -> /proc/self/environ` put the reader's environment into the
report, `-> /etc/shadow` printed root's hash (a temporary file stands in for it here), `fs -> /` turned a replay
into a live read.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS
from tunehost.errors import TunehostError
from tunehost.host import open_host
from tunehost.host.files import Refused, read_confined

BASE = SNAPSHOTS / "desktop-12700f-rtx3060"
SECRET = "tunehost-test-secret-8c1f"
SHADOW = "root:$6$rounds=5000$tunehostsalt$notarealhashbutsecret:19700:0:99999:7:::\n"


@pytest.fixture
def snap(tmp_path) -> Path:
    copy = tmp_path / "snap"
    shutil.copytree(BASE, copy, symlinks=True)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps(manifest | {"uid": 0}))  # written as root: dmidecode could run
    return copy


@pytest.fixture
def shadow(tmp_path) -> Path:
    """A stand-in for /etc/shadow: a secret file outside the snapshot."""
    path = tmp_path / "outside" / "shadow"
    path.parent.mkdir()
    path.write_text(SHADOW)
    return path


@pytest.fixture
def no_hang():
    """A read that blocks (a FIFO opened for reading waits for a writer) fails the test instead of hanging it."""
    def expired(signum, frame):
        raise AssertionError("a snapshot read blocked")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _relink(path: Path, target: str | Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def _doctor(cli, snap: Path):
    r = cli("doctor", "--snapshot", str(snap), "--json")
    assert r.exit_code in (0, 2), r.output
    return r, {f["check"]: f for f in json.loads(r.stdout)["findings"]}


def test_cmd_linked_to_proc_self_environ_is_not_read(cli, snap, monkeypatch) -> None:
    monkeypatch.setenv("TUNEHOST_TEST_SECRET", SECRET)
    _relink(snap / "cmd" / "dmidecode_-t_memory", "/proc/self/environ")
    r, findings = _doctor(cli, snap)
    assert SECRET not in r.stdout + r.stderr
    ram = findings["ram-speed"]
    assert ram["severity"] == "skip"
    assert "cmd/dmidecode_-t_memory: links out of the snapshot (to /proc/" in ram["summary"]
    assert "tunehost: warning: snapshot: cmd/dmidecode_-t_memory: links out of the snapshot" in r.stderr


def test_cmd_linked_to_a_shadow_file_is_not_read(cli, snap, shadow) -> None:
    _relink(snap / "cmd" / "dmidecode_-t_memory", shadow)
    r, findings = _doctor(cli, snap)
    assert "notarealhashbutsecret" not in r.stdout + r.stderr
    assert findings["ram-speed"]["severity"] == "skip"
    # the same through a relative link that climbs out
    _relink(snap / "cmd" / "dmidecode_-t_memory", os.path.relpath(shadow, snap / "cmd"))
    r, _ = _doctor(cli, snap)
    assert "notarealhashbutsecret" not in r.stdout + r.stderr and "links out of the snapshot" in r.stderr


def test_cmd_stderr_and_rc_files_are_confined_too(snap, shadow) -> None:
    _relink(snap / "cmd" / "nvidia-smi_-q.stderr", shadow)
    result = open_host(snap).run(["nvidia-smi", "-q"])
    assert result is not None and result.rc == 126 and result.stdout == ""
    assert "cmd/nvidia-smi_-q: links out of the snapshot" in result.stderr and "notareal" not in result.stderr


def test_fs_linked_to_root_reads_nothing_live(cli, snap) -> None:
    _relink(snap / "fs", "/")
    host = open_host(snap)
    for path in ("/proc/meminfo", "/proc/self/environ", "/etc/hostname", "/sys/kernel/mm/transparent_hugepage/enabled"):
        assert host.files.read(path) is None
    assert not host.files.exists("/proc/meminfo") and host.files.listdir("/proc") == []
    assert host.files.glob("/sys/devices/system/cpu/cpu*") == []
    assert host.files.readlink("/proc/self/exe") is None
    assert host.refusals[0] == f"fs/ links out of the snapshot (to /): nothing under it is read"
    r, findings = _doctor(cli, snap)
    assert findings["thp"]["severity"] == "skip" and findings["swap"]["severity"] == "skip"
    assert "tunehost: warning: snapshot: fs/ links out of the snapshot (to /)" in r.stderr


def test_fs_linked_to_a_directory_inside_the_snapshot_is_read(snap) -> None:
    (snap / "fs").rename(snap / "fs.real")
    _relink(snap / "fs", "fs.real")
    host = open_host(snap)
    assert host.files.read("/proc/meminfo") and host.refusals == []


def test_file_inside_fs_linked_out(snap, shadow) -> None:
    meminfo = snap / "fs" / "proc" / "meminfo"
    _relink(meminfo, shadow)  # absolute
    host = open_host(snap)
    assert host.files.read("/proc/meminfo") is None
    assert host.refusals == [f"fs/proc/meminfo links out of the snapshot (to {shadow}): not read"]
    _relink(meminfo, os.path.relpath(shadow, meminfo.parent))  # ../../..
    assert open_host(snap).files.read("/proc/meminfo") is None


def test_directory_inside_fs_linked_out(snap, shadow) -> None:
    _relink(snap / "fs" / "etc", shadow.parent)
    host = open_host(snap)
    assert host.files.read("/etc/shadow") is None and host.files.listdir("/etc") == []
    assert host.files.readlink("/etc/shadow") is None


@pytest.mark.parametrize("where", ["fs/proc/meminfo", "cmd/dmidecode_-t_memory", "samples/processes.json",
                                   "samples/which.json"])
def test_fifo_inside_the_snapshot_never_blocks(cli, snap, no_hang, where) -> None:
    path = snap / where
    path.unlink()
    os.mkfifo(path)
    r, _ = _doctor(cli, snap)
    assert f"is not a regular file (a FIFO, socket or device): not read" in r.stderr
    assert where.split("/")[-1] in r.stderr


def test_fifo_manifest_is_one_line_and_exit_1(cli, snap, no_hang) -> None:
    (snap / "manifest.json").unlink()
    os.mkfifo(snap / "manifest.json")
    r = cli("doctor", "--snapshot", str(snap))
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "is not a regular file" in r.stderr


def test_manifest_linked_out_is_refused(cli, snap, tmp_path) -> None:
    outside = tmp_path / "manifest.json"
    outside.write_text('{"format": 1}')
    _relink(snap / "manifest.json", outside)
    with pytest.raises(TunehostError, match="manifest.json links out of the snapshot"):
        open_host(snap)
    r = cli("doctor", "--snapshot", str(snap))
    assert r.exit_code == 1 and "links out of the snapshot" in r.stderr


def test_sample_linked_out_is_unknown_with_the_reason(snap, shadow) -> None:
    _relink(snap / "samples" / "processes.json", shadow)
    host = open_host(snap)
    assert host.sample("processes") is None
    assert host.sample_errors["processes"].startswith("samples/processes.json links out of the snapshot")
    assert any(r.startswith("samples/processes.json links out") for r in host.refusals)


def test_which_json_linked_out_is_ignored(snap, tmp_path) -> None:
    outside = tmp_path / "which.json"
    outside.write_text('{"llama-server": "/opt/live/llama-server"}')
    _relink(snap / "samples" / "which.json", outside)
    host = open_host(snap)
    assert host.which("llama-server") is None
    assert any(r.startswith("samples/which.json links out") for r in host.refusals)


def test_read_confined_unit(tmp_path, shadow) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok").write_text("fine")
    (root / "loop").symlink_to("loop")
    (root / "out").symlink_to(shadow)
    real = os.path.realpath(root)
    assert read_confined(root / "ok", real) == b"fine"
    assert read_confined(root / "absent", real) is None
    assert read_confined(root, real) is None  # a directory where a file was expected: absent
    for bad in ("loop", "out"):
        with pytest.raises(Refused):
            read_confined(root / bad, real)
    # a sibling directory whose name starts like the root's is still outside
    (tmp_path / "root-evil").mkdir()
    (tmp_path / "root-evil" / "x").write_text("no")
    with pytest.raises(Refused):
        read_confined(tmp_path / "root-evil" / "x", real)
