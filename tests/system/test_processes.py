"""cpu-hogs, headless and llama-exposure: ProcessFacts from the processes/activity/listeners samples.

Live tests start REAL processes (a python busy loop; python sockets in a process whose executable is named
llama-server) detached from pytest (so they are not tunehost's own children) and sample them with
open_host().sample(...). Snapshot tests use the composite snapshots (tests/data/snapshots/*: process lists and
sockets hand-written in the samples' real format, pids matching the GPU group's nvidia-smi process list) and
single-purpose snapshots built here.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.facts.processes import ProcessFacts, is_loopback
from tunehost.host import open_host
from tunehost.host.redact import REDACTED
from tunehost.host.samples import RawProcess, candidate_row
from tunehost.checks.cpu_hogs import CpuHogsCheck
from tunehost.checks.headless import HeadlessCheck
from tunehost.checks.llama_exposure import LlamaExposureCheck

SNAPS = Path(__file__).parents[1] / "data" / "snapshots"


def findings(check, snap):
    return list(check().run(HostFacts(open_host(snap))))


def sev(items):
    return [f.severity.value for f in items]


def spawn_detached(argv, tmp_path):
    """Start argv as a grandchild (its parent exits), so the samplers do not count it as tunehost's own child."""
    out = subprocess.run(["sh", "-c", '"$0" "$@" >/dev/null 2>&1 </dev/null & echo $!', *argv],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def stop(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_for(path: Path, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"helper process did not start ({path})"


# ---- live ----

@pytest.mark.live
def test_live_busy_loop_is_reported(tmp_path):
    ready = tmp_path / "busy.ready"
    code = f"open({str(ready)!r}, 'w').close()\nwhile True: pass\n"
    pid = spawn_detached([sys.executable, "-c", code], tmp_path)
    try:
        wait_for(ready)
        host = open_host()
        activity = host.sample("activity")
        row = next(r for r in activity["processes"] if r["pid"] == pid)
        assert row["cpu_percent"] > 20 and row["self"] is False
        hog = [f for f in CpuHogsCheck().run(HostFacts(host)) if f"pid {pid}" in f.summary]
        assert len(hog) == 1 and hog[0].severity in (Severity.WARN, Severity.FAIL)
        assert f"kill -STOP {pid}" in " ".join(hog[0].fix.commands)
    finally:
        stop(pid)


LISTEN = """
import socket, sys
host, port = sys.argv[sys.argv.index('--host') + 1], int(sys.argv[sys.argv.index('--port') + 1])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port)); s.listen(1)
open(sys.argv[sys.argv.index('--ready') + 1], 'w').close()
import time
time.sleep(120)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.live
@pytest.mark.parametrize("bind, severity", [("127.0.0.1", Severity.OK), ("0.0.0.0", Severity.FAIL)])
def test_live_llama_server_bound_to_loopback_vs_all(tmp_path, bind, severity):
    exe = tmp_path / "llama-server"
    exe.symlink_to(os.path.realpath(sys.executable))
    ready, port = tmp_path / "listen.ready", free_port()
    pid = spawn_detached([str(exe), "-c", LISTEN, "--host", bind, "--port", str(port), "--ready", str(ready)], tmp_path)
    try:
        wait_for(ready)
        host = open_host()
        rows = {r["pid"]: r for r in host.sample("processes")}
        assert rows[pid]["name"] == "llama-server" and rows[pid]["argv0"] == str(exe)
        assert rows[pid]["options"] == {"--host": bind, "--port": str(port)}
        assert rows[pid]["listeners"] == [{"address": bind, "port": port}]
        assert any(l["port"] == port and l["address"] == bind for l in host.sample("listeners"))
        mine = [f for f in LlamaExposureCheck().run(HostFacts(host)) if f"pid {pid}" in f.summary]
        assert len(mine) == 1 and mine[0].severity is severity
        assert f"{bind}:{port}" in mine[0].summary
    finally:
        stop(pid)


# ---- cpu-hogs ----

def test_cpu_hogs_on_the_12700f_desktop():
    items = findings(CpuHogsCheck, SNAPS / "desktop-12700f-rtx3060")
    assert sev(items) == ["warn", "warn"]
    assert "tracker-miner-f" in items[0].summary and "tunehost" not in " ".join(f.summary for f in items)
    assert "competes for memory bandwidth/VRAM" in items[1].summary


def test_cpu_hog_is_fail_on_a_small_box(make_snapshot):
    snap = make_snapshot(samples={"activity": {"interval_s": 0.5, "cpu_count": 4, "cpu_percent_total": 101.0,
                                               "processes": [{"pid": 77, "name": "updatedb", "cpu_percent": 99.0,
                                                              "self": False}]}})
    [hog] = findings(CpuHogsCheck, snap)
    assert hog.severity is Severity.FAIL and "4-CPU machine" in hog.summary
    assert hog.fix.commands[1] == "sudo kill -STOP 77"


def test_self_is_excluded(make_snapshot):
    snap = make_snapshot(samples={"activity": {"cpu_count": 2, "processes": [
        {"pid": 5, "name": "tunehost", "cpu_percent": 90.0, "self": True}]}})
    assert sev(findings(CpuHogsCheck, snap)) == ["ok"]


def test_idle_ollama_without_model_is_info(make_snapshot):
    snap = make_snapshot(samples={"activity": {"cpu_count": 8, "processes": []},
                                  "processes": [{"pid": 9, "name": "ollama", "rss_bytes": 60 * 2**20, "server": "ollama",
                                                 "flags": {"host": None, "port": None, "api_key": False}}]})
    items = findings(CpuHogsCheck, snap)
    assert sev(items) == ["ok", "info"] and items[1].fix.commands == ("sudo systemctl stop ollama",)


def test_cpu_hogs_missing_and_garbage_samples(make_snapshot):
    assert sev(findings(CpuHogsCheck, make_snapshot())) == ["skip"]
    snap = make_snapshot(samples={"activity": {"processes": [{"pid": "x"}, None, {"pid": 3, "cpu_percent": "hot"}]},
                                  "processes": "garbage"})
    assert sev(findings(CpuHogsCheck, snap)) == ["ok"]


# ---- headless ----

def test_headless_12700f_compositor_holds_vram_of_the_inference_gpu():
    [finding] = findings(HeadlessCheck, SNAPS / "desktop-12700f-rtx3060")
    assert finding.severity is Severity.WARN and "599 MiB of VRAM" in finding.summary
    assert finding.fix.commands == ("sudo systemctl set-default multi-user.target",
                                    "sudo systemctl isolate multi-user.target")
    assert "graphical.target" in finding.fix.text


def test_headless_laptop_apu_is_info():
    [finding] = findings(HeadlessCheck, SNAPS / "laptop-5800u-apu")
    assert finding.severity is Severity.INFO and "plasmashell" in finding.summary


def test_headless_server_is_ok():
    [finding] = findings(HeadlessCheck, SNAPS / "server-epyc9654-2s")
    assert finding.severity is Severity.OK and "multi-user.target" in finding.summary


def test_headless_without_gpu_facts(make_snapshot):
    snap = make_snapshot(cmd={"systemctl get-default": "graphical.target\n"},
                         samples={"processes": [{"pid": 40, "name": "Xorg", "rss_bytes": 90 * 2**20}]})
    facts = HostFacts.of(ProcessFacts.gather(open_host(snap)))  # no GpuFacts given: the view says why
    [finding] = HeadlessCheck().run(facts)
    assert finding.severity is Severity.INFO and "GPU facts" in finding.evidence


def test_headless_missing_and_garbage(make_snapshot):
    assert sev(findings(HeadlessCheck, make_snapshot())) == ["skip"]
    snap = make_snapshot(cmd={"systemctl get-default": ("", 1, "Failed to connect to bus\n")},
                         samples={"processes": [{"pid": None}, 3, {"pid": 4, "name": None}]})
    assert sev(findings(HeadlessCheck, snap)) == ["ok"]


# ---- llama-exposure ----

def test_exposure_12700f_llama_server_on_all_interfaces_without_key():
    [finding] = findings(LlamaExposureCheck, SNAPS / "desktop-12700f-rtx3060")
    assert finding.severity is Severity.FAIL and "0.0.0.0:8080" in finding.summary
    assert "llama-server --host 127.0.0.1 --port 8080 -m MODEL.gguf" in finding.fix.commands


def test_exposure_with_api_key_is_info_and_never_shows_it():
    [finding] = findings(LlamaExposureCheck, SNAPS / "server-epyc9654-2s")
    assert finding.severity is Severity.INFO and "with an API key" in finding.summary
    assert finding.evidence["pid 5120 options"] == "--host 0.0.0.0, --port 8080, --api-key (set; the value is never recorded)"


def test_recorded_options_never_keep_the_key():
    row = candidate_row(RawProcess(1, "llama-server", ("llama-server", "--host", "0.0.0.0", "--api-key",
                                                       "sk-secret-123", "--port=9000")))
    assert row["options"] == {"--host": "0.0.0.0", "--port": "9000", "--api-key": REDACTED}
    assert "sk-secret-123" not in repr(row)


def test_listener_pid_hidden_when_not_root(make_snapshot):
    snap = make_snapshot(manifest={"format": 1, "uid": 1000},
                         samples={"processes": [{"pid": 10, "name": "llama-server", "server": "llama-server",
                                                 "flags": {"host": "0.0.0.0", "port": "8081", "api_key": False},
                                                 "api_key_env": False}],
                                  "listeners": [{"address": "0.0.0.0", "port": 8081, "pid": None}]})
    [finding] = findings(LlamaExposureCheck, snap)
    assert finding.severity is Severity.FAIL
    assert "matched by port 8081" in finding.evidence["listeners sample"] and "not root" in finding.evidence["listeners sample"]


def test_ollama_host_env_all_interfaces_fails(make_snapshot):
    snap = make_snapshot(samples={"processes": [{"pid": 20, "name": "ollama", "server": "ollama",
                                                 "flags": {"host": None, "port": None, "api_key": False},
                                                 "ollama_host_env": "0.0.0.0"}]})
    [finding] = findings(LlamaExposureCheck, snap)
    assert finding.severity is Severity.FAIL and "ollama has no authentication" in finding.summary
    assert "0.0.0.0:11434" in finding.summary
    assert any("OLLAMA_HOST=127.0.0.1:11434" in c for c in finding.fix.commands)


def test_llama_arg_host_env_of_an_old_snapshot(make_snapshot):
    # old-shape row: the old sampler recorded LLAMA_ARG_HOST only when the environment was readable
    snap = make_snapshot(samples={"processes": [{"pid": 30, "name": "llama-server", "server": "llama-server",
                                                 "flags": {"host": None, "port": None, "api_key": False},
                                                 "api_key_env": False, "host_env": "192.168.1.20"}],
                                  "listeners": []})
    [finding] = findings(LlamaExposureCheck, snap)
    assert finding.severity is Severity.FAIL and "192.168.1.20:8080" in finding.summary
    assert finding.evidence["pid 30 environment"].startswith("LLAMA_ARG_HOST=192.168.1.20")


def test_unreadable_environment_of_an_old_snapshot_is_unknown_not_loopback(make_snapshot):
    # before raw facts this was judged "loopback" (llama-server's default); LLAMA_ARG_HOST may have moved it
    snap = make_snapshot(samples={"processes": [{"pid": 30, "name": "llama-server", "server": "llama-server",
                                                 "flags": {"host": None, "port": None, "api_key": False},
                                                 "api_key_env": None, "host_env": None}],
                                  "listeners": []})
    [finding] = findings(LlamaExposureCheck, snap)
    assert finding.severity is Severity.SKIP and "LLAMA_ARG_HOST" in finding.summary


def test_vllm_default_binds_every_interface(make_snapshot):
    snap = make_snapshot(samples={"processes": [{"pid": 50, "name": "python3", "server": "vllm",
                                                 "flags": {"host": None, "port": None, "api_key": False}}]})
    [finding] = findings(LlamaExposureCheck, snap)
    assert finding.severity is Severity.FAIL and "0.0.0.0:8000" in finding.summary


def test_loopback_only_and_no_servers():
    assert sev(findings(LlamaExposureCheck, SNAPS / "desktop-9950x3d-rtx5090")) == ["ok"]
    assert sev(findings(LlamaExposureCheck, SNAPS / "strix-halo-395")) == ["ok"]


def test_exposure_missing_sample_is_skip(make_snapshot):
    assert sev(findings(LlamaExposureCheck, make_snapshot())) == ["skip"]


@pytest.mark.parametrize("address, loop", [("127.0.0.1", True), ("::1", True), ("::ffff:127.0.0.1", True),
                                           ("localhost", True), ("0.0.0.0", False), ("::", False),
                                           ("192.168.1.5", False), ("", False), ("garbage", False)])
def test_is_loopback(address, loop):
    assert is_loopback(address) is loop
