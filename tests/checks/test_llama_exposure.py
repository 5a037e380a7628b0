"""llama-exposure: inference servers listening beyond loopback without a key, from the processes and
listeners samples."""

import json
import os
import subprocess
import sys

import pytest

from tunehost.check import Severity
from tunehost.checks.llama_exposure import LlamaExposureCheck
from tunehost.facts import HostFacts
from tunehost.facts.llama import LlamaBuildFacts
from tunehost.facts.processes import ProcessFacts
from tunehost.host import open_host
from tunehost.host.redact import REDACTED
from tunehost.host.samples import RawProcess, candidate_row

from tests.system.test_processes import LISTEN, SNAPS, findings, free_port, sev, spawn_detached, stop, wait_for
from tests.system.test_running_servers import DATA, by_pid, fixture_snapshot, sample_rows


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


def test_exposure_12700f_llama_server_on_all_interfaces_without_key():
    [finding] = findings(LlamaExposureCheck, SNAPS / "desktop-12700f-rtx3060")
    assert finding.severity is Severity.FAIL and "0.0.0.0:8080" in finding.summary
    assert "llama-server --host 127.0.0.1 --port 8080 -m MODEL.gguf" in finding.fix.commands


def test_exposure_with_api_key_is_info_and_never_shows_it():
    [finding] = findings(LlamaExposureCheck, SNAPS / "server-epyc9654-2s")
    assert finding.severity is Severity.INFO and "with an API key" in finding.summary
    assert finding.evidence["pid 5120 options"] == "--host 0.0.0.0, --port 8080, --api-key (set; the value is never recorded)"


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


def test_a_server_in_a_container_is_judged_from_its_settings(make_snapshot):
    raw = RawProcess(77, "llama-server", ("/app/llama-server", "--host", "0.0.0.0", "--port", "8080"), None, {},
                     (), None, other_netns=True)
    row = {"pid": 77, "name": "llama-server", **candidate_row(raw)}
    assert row["listeners"] is None and row["other_netns"] is True
    snap = make_snapshot(samples={"processes": [row], "listeners": [{"address": "0.0.0.0", "port": 8080, "pid": 55}]})
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.FAIL and "0.0.0.0:8080" in finding.summary
    assert "another network namespace" in finding.evidence["listeners sample"]


def test_llama_swap_default_listen_is_every_interface_and_its_llama_server_is_behind_it(make_snapshot):
    snap = fixture_snapshot(make_snapshot, "llama-swap-306-gpt-oss-20b.json")
    swap, server = by_pid(snap, 2210), by_pid(snap, 2288)
    assert swap.severity is Severity.WARN and "[::]:8080" in swap.summary and "config file" in swap.summary
    assert "llama-swap --config CONFIG.yaml --listen 127.0.0.1:8080" in swap.fix.commands
    assert server.severity is Severity.OK and "behind llama-swap (pid 2210)" in server.summary
    assert "clients reach this server through it" in server.evidence["pid 2288 parent"]
    # a proxy holds no model: cpu-hogs and the probes do not count it as an inference server
    assert [p.pid for p in ProcessFacts.gather(open_host(snap)).servers] == [2288]


def test_rpc_server_on_a_lan_address_fails(make_snapshot):
    snap = fixture_snapshot(make_snapshot, "rpc-server-11807-cpu-nodes.json")
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))  # llama-cli is a client, not a server
    assert finding.severity is Severity.FAIL and "rpc-server (pid 3001)" in finding.summary
    assert "192.168.13.12:50020" in finding.summary and "no authentication" in finding.summary
    assert "rpc-server -H 127.0.0.1 -p 50020" in finding.fix.commands
    assert finding.evidence["pid 3001 options"] == "-H 192.168.13.12, -p 50020"


def test_rpc_server_judged_from_its_options_when_its_sockets_are_hidden(make_snapshot):
    hidden = dict(json.loads((DATA / "rpc-server-11807-cpu-nodes.json").read_text())["processes"][0],
                  listeners=None, pid=3002, environ=None)
    snap = make_snapshot(manifest={"format": 1, "uid": 1000}, samples={"processes": sample_rows([hidden])})
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.FAIL and "192.168.13.12:50020" in finding.summary
    assert finding.evidence["judged from"] == "-H: 192.168.13.12:50020"


def test_python_llama_cpp_server_and_the_old_server_binary(make_snapshot):
    snap = fixture_snapshot(make_snapshot, "llama-cpp-python-home-llm-29.json")
    py, old = by_pid(snap, 5400), by_pid(snap, 5500)
    assert py.severity is Severity.FAIL and "llama-cpp-python (pid 5400)" in py.summary and "0.0.0.0:8000" in py.summary
    assert py.evidence["pid 5400 started as"] == "python3 llama_cpp.server"
    assert old.severity is Severity.FAIL and "llama-server (pid 5500)" in old.summary


def test_koboldcpp_py_without_host_listens_everywhere(make_snapshot):
    snap = fixture_snapshot(make_snapshot, "koboldcpp-317-noavx2.json")
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.FAIL and "koboldcpp (pid 6100)" in finding.summary
    assert "0.0.0.0:5001" in finding.summary


def test_llamafile_with_a_truncated_kernel_name(make_snapshot):
    snap = fixture_snapshot(make_snapshot, "llamafile-398-open-webui.json")
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.OK and "llamafile (pid 7100)" in finding.summary
    assert "127.0.0.1:8082" in finding.summary


def test_ollama_run_is_a_client_and_an_unreadable_ollama_host_is_unknown(make_snapshot):
    snap = fixture_snapshot(make_snapshot, "ollama-run-client-llms-from-scratch-193.json")
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))  # not `ollama run`, not the runner
    assert finding.severity is Severity.SKIP and "ollama (pid 900)" in finding.summary
    assert "OLLAMA_HOST not readable" in finding.summary
    assert "not readable" in finding.evidence["pid 900 environment"]


def test_ollama_with_unreadable_environment_is_judged_by_its_socket(make_snapshot):
    snap = fixture_snapshot(make_snapshot, "ollama-run-client-llms-from-scratch-193.json",
                            listeners=[{"address": "0.0.0.0", "port": 11434, "pid": None}])
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.FAIL and "0.0.0.0:11434" in finding.summary
    assert "matched by port 11434" in finding.evidence["listeners sample"]


def test_ollama_host_with_credentials_is_recorded_without_them(make_snapshot):
    serve = {"pid": 901, "ppid": 1, "name": "ollama", "argv": ["/usr/local/bin/ollama", "serve"],
             "exe": "/usr/local/bin/ollama", "environ": {"OLLAMA_HOST": "http://admin:password@0.0.0.0:11434"},
             "listeners": [["::", 11434]]}
    snap = make_snapshot(samples={"processes": sample_rows([serve])})
    assert "password" not in (snap / "samples" / "processes.json").read_text()
    [finding] = LlamaExposureCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.FAIL and "[::]:11434" in finding.summary
    assert finding.evidence["pid 901 environment"] == "OLLAMA_HOST=http://0.0.0.0:11434"


def test_old_snapshots_keep_their_verdicts():
    # written by the sampler before raw facts: the recorded kind and flags are read as raw facts
    assert [f.severity for f in LlamaExposureCheck().run(HostFacts(open_host(SNAPS / "desktop-12700f-rtx3060")))] == [
        Severity.FAIL]
    assert [f.severity for f in LlamaExposureCheck().run(HostFacts(open_host(SNAPS / "server-epyc9654-2s")))] == [
        Severity.INFO]


@pytest.mark.live
def test_live_snapshot_of_a_server_with_secrets_holds_none(tmp_path):
    from tunehost.doctor import run_doctor
    from tunehost.host.snapshot import write_snapshot
    from tunehost.doctor.registry import load_checks

    exe = tmp_path / "llama-server"
    exe.symlink_to(os.path.realpath(sys.executable))
    ready, port = tmp_path / "listen.ready", free_port()
    secrets = {"OLLAMA_HOST": "http://admin:password-in-url@0.0.0.0:11434", "LLAMA_API_KEY": "env-key-value-42",
               "LLAMA_ARG_HOST": "0.0.0.0"}
    env = dict(os.environ, **secrets)
    argv = [str(exe), "-c", LISTEN, "--host", "0.0.0.0", "--port", str(port), "--ready", str(ready),
            "--api-key", "argv-key-value-42", "--hf-token", "hf_LiveTokenValue0123456789ab"]
    out = subprocess.run(["sh", "-c", '"$0" "$@" >/dev/null 2>&1 </dev/null & echo $!', *argv],
                         capture_output=True, text=True, check=True, env=env)
    pid = int(out.stdout.strip())
    try:
        wait_for(ready)
        host = open_host(record=True)
        run_doctor(HostFacts(host), load_checks().checks)
        write_snapshot(host, tmp_path / "snap")
        row = next(r for r in json.loads((tmp_path / "snap/samples/processes.json").read_text()) if r["pid"] == pid)
        assert row["options"] == {"--host": "0.0.0.0", "--port": str(port), "--api-key": REDACTED,
                                  "--hf-token": REDACTED}
        assert row["env"] == {"OLLAMA_HOST": "http://0.0.0.0:11434", "LLAMA_ARG_HOST": "0.0.0.0",
                              "LLAMA_API_KEY": REDACTED}
        assert row["exe"] == os.path.realpath(sys.executable) and row["listeners"] == [{"address": "0.0.0.0", "port": port}]
        for path in (tmp_path / "snap").rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for secret in (b"password-in-url", b"env-key-value-42", b"argv-key-value-42", b"hf_LiveToken"):
                    assert secret not in data, (path, secret)
        mine = [f for f in LlamaExposureCheck().run(HostFacts(open_host(tmp_path / "snap"))) if f"pid {pid}" in f.summary]
        assert [f.severity for f in mine] == [Severity.INFO]  # exposed, with a key (never shown)
        # llama-build: the running server's own executable (here python) comes first
        build = LlamaBuildFacts.gather(open_host())
        assert build.binaries and build.binaries[0].path == os.path.realpath(sys.executable)
        assert pid in build.binaries[0].running
    finally:
        stop(pid)
