"""Running servers judged from raw process facts: redaction, classification, llama-exposure and llama-build.

Fixtures: tests/system/data/processes/*.json, processes from public reports (sources in its README.md), turned into
`processes` sample rows by the real sampler code (candidate_row). Live tests start REAL processes named like
llama-server (a python symlink) with secrets in their command line and environment, and look at the snapshot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.facts.llama import LlamaBuildFacts
from tunehost.facts.processes import ProcessFacts, split_address
from tunehost.host import open_host
from tunehost.host.redact import REDACTED, redact
from tunehost.host.samples import RawProcess, address_value, candidate_row, is_candidate
from tunehost.checks.llama_build import LlamaBuildCheck
from tunehost.checks.llama_exposure import LlamaExposureCheck

from tests.system.test_processes import LISTEN, free_port, spawn_detached, stop, wait_for

DATA = Path(__file__).parent / "data" / "processes"
SNAPS = Path(__file__).parents[1] / "data" / "snapshots"


def sample_rows(processes: list[dict]) -> list[dict]:
    """`processes` sample rows as the sampler writes them, from a fixture's raw processes."""
    rows = []
    for p in processes:
        raw = RawProcess(p["pid"], p["name"], tuple(p["argv"]) if p.get("argv") else None, p.get("exe"),
                         p.get("environ"), tuple(tuple(x) for x in p["listeners"]) if p.get("listeners") is not None
                         else None, p.get("exe_file"))
        row = {"pid": p["pid"], "ppid": p.get("ppid"), "name": p["name"], "username": p.get("username"),
               "rss_bytes": p.get("rss_bytes"), "self": False}
        if is_candidate(raw) or raw.argv is None:
            row.update(candidate_row(raw))
        rows.append(json.loads(json.dumps(row)))  # exactly what a snapshot file holds
    return rows


def fixture_snapshot(make_snapshot, name: str, *, listeners=None, cmd=None, install=None, extra=()):
    data = json.loads((DATA / name).read_text())
    samples = {"processes": sample_rows(data["processes"] + list(extra))}
    if listeners is not None:
        samples["listeners"] = listeners
    if install is not None:
        samples["llama_install"] = install
    return make_snapshot(manifest={"format": 1, "uid": data["uid"]}, samples=samples, cmd=cmd or {})


def by_pid(snap, pid):
    return next(f for f in LlamaExposureCheck().run(HostFacts(open_host(snap))) if f"(pid {pid})" in f.summary)


# ---- the one redaction ----

@pytest.mark.parametrize("argv, kept, gone", [
    (["llama-server", "--api-key", "sk-secret-123", "--port=9000"], ["--api-key", REDACTED, "--port=9000"], "sk-secret-123"),
    (["llama-server", "--api-key=sk-secret-123"], ["--api-key=" + REDACTED], "sk-secret-123"),
    (["llama-server", "--api-key-file", "/etc/llama/keys.txt"], ["--api-key-file", REDACTED], "keys.txt"),
    (["llama-server", "-hf", "unsloth/Qwen3-8B-GGUF:Q4_K_M", "--hf-token", "hf_AbCdEfGhIjKlMnOpQrStUvWx"],
     ["-hf", "unsloth/Qwen3-8B-GGUF:Q4_K_M", "--hf-token", REDACTED], "hf_AbCd"),
    (["llama-server", "-hf", "org/model", "-hft", "hf_AbCdEfGhIjKlMnOpQrStUvWx"], ["-hft", REDACTED], "hf_AbCd"),
    (["koboldcpp", "--password", "hunter2", "--host", "0.0.0.0"], ["--password", REDACTED, "--host", "0.0.0.0"], "hunter2"),
    (["curl", "-H", "Authorization: Bearer eyJhbGciOi.x.y", "http://localhost:8080/v1/models"],
     ["-H", "Authorization: " + REDACTED], "eyJhbGciOi"),
    (["curl", "--header=X-Api-Key: abc123secret"], ["--header=X-Api-Key: " + REDACTED], "abc123secret"),
    (["curl", "-u", "admin:password", "http://0.0.0.0:11434"], ["-u", "admin:" + REDACTED], "password"),
    (["ollama", "serve", "http://admin:password@0.0.0.0:11434"], ["http://" + REDACTED + "@0.0.0.0:11434"], "password"),
    (["llama-swap", "--listen=http://admin:p@ss=w0rd@0.0.0.0:8080"], ["--listen=http://" + REDACTED + "@0.0.0.0:8080"], "w0rd"),
    (["x", "admin:password@10.0.0.5:11434"], [REDACTED + "@10.0.0.5:11434"], "password"),
    (["x", "https://host/v1?model=q&api_key=abc123&token=def456"], ["https://host/v1?model=q&api_key=" + REDACTED +
                                                                    "&token=" + REDACTED], "abc123"),
    (["env", "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWx", "LLAMA_ARG_HOST=0.0.0.0"],
     ["HF_TOKEN=" + REDACTED, "LLAMA_ARG_HOST=0.0.0.0"], "hf_AbCd"),
    (["vllm", "serve", "m", "--api-key", "--host", "0.0.0.0"], ["--api-key", "--host", "0.0.0.0"], "\0"),
])
def test_redact(argv, kept, gone):
    out = redact(argv)
    assert len(out) == len(argv)
    joined = " ".join(out)
    assert all(k in out or k in joined for k in kept), out
    assert gone not in joined


def test_redact_keeps_what_the_checks_read():
    argv = ["llama-server", "--host", "0.0.0.0", "--port", "8080", "-m", "/m/a@b.gguf", "--n-keep", "4",
            "--rpc", "192.168.1.2:50052,192.168.1.3:50052", "-ngl", "99"]
    assert redact(argv) == argv


def test_address_variables_keep_only_scheme_host_port():
    # issue 12: OLLAMA_HOST=http://admin:password@... landed in the snapshot verbatim
    assert address_value("http://admin:password@0.0.0.0:11434") == "http://0.0.0.0:11434"
    assert address_value("admin:password@[::]:11434/path?token=x") == "[::]:11434"
    assert address_value("0.0.0.0") == "0.0.0.0"
    assert split_address(address_value("http://admin:password@0.0.0.0:11434")) == ("0.0.0.0", 11434)


def test_candidate_row_keeps_no_secret_of_argv_or_environment():
    raw = RawProcess(10, "llama-server", ("/opt/llama/llama-server", "--host", "0.0.0.0", "--api-key", "sk-live-abc",
                                          "-H", "Authorization: Bearer tok-xyz"), "/opt/llama/llama-server",
                     {"OLLAMA_HOST": "http://admin:password@0.0.0.0:11434", "LLAMA_API_KEY": "k-env-secret",
                      "LLAMA_ARG_HOST": "0.0.0.0", "AWS_SECRET_ACCESS_KEY": "aws-secret", "HOME": "/home/x"},
                     (("0.0.0.0", 8080),))
    row = candidate_row(raw)
    text = json.dumps(row)
    for secret in ("sk-live-abc", "tok-xyz", "password", "k-env-secret", "aws-secret", "/home/x"):
        assert secret not in text
    assert row["env"] == {"OLLAMA_HOST": "http://0.0.0.0:11434", "LLAMA_ARG_HOST": "0.0.0.0", "LLAMA_API_KEY": REDACTED}
    assert row["options"] == {"--host": "0.0.0.0", "--api-key": REDACTED}
    assert row["listeners"] == [{"address": "0.0.0.0", "port": 8080}]


def test_every_server_kind_is_recorded_by_the_sampler():
    # the sampler keeps raw facts only for candidates: every kind the reader knows must be one
    from tunehost.facts.processes import SERVER_KINDS

    for kind in SERVER_KINDS:
        assert is_candidate(RawProcess(1, kind, (kind,))), kind
    assert not is_candidate(RawProcess(1, "bash", ("bash",)))
    assert is_candidate(RawProcess(1, "sshd", ("sshd: /usr/sbin/sshd -D [listener]",), listeners=(("0.0.0.0", 22),)))


@pytest.mark.parametrize("argv, kind", [
    (["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B"], "vllm"),
    (["python3", "-X", "utf8", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
    (["/usr/bin/python3", "/usr/local/bin/vllm", "bench", "latency"], None),
    (["python", "-c", "import llama_cpp.server"], None),
    (["/usr/local/bin/ollama", "serve"], "ollama"),
    (["/usr/local/bin/ollama", "pull", "llama3"], None),
    (["ollama"], None),
    (["/opt/koboldcpp/koboldcpp-linux-x64-cuda1210", "--model", "m.gguf"], "koboldcpp"),
    (["llama-swap-linux-amd64", "-listen", "127.0.0.1:9292"], "llama-swap"),
    (["/usr/local/lib/ollama/runners/cuda_v12_avx/ollama_llama_server", "runner", "--port", "41813"], None),
])
def test_classification_from_raw_facts(make_snapshot, argv, kind):
    name = os.path.basename(argv[0])[:15]
    row = {"pid": 40, "name": name, **candidate_row(RawProcess(40, name, tuple(argv), None, {}, ()))}
    [proc] = ProcessFacts.gather(open_host(make_snapshot(samples={"processes": [row]}))).processes
    assert proc.server == kind


def test_process_titles_keep_only_the_program_name():
    row = candidate_row(RawProcess(22, "sshd", ("sshd: alice@pts/0",), listeners=(("0.0.0.0", 22),)))
    assert row["argv0"] == "sshd"


# ---- llama-exposure on the fixtures ----


@pytest.mark.parametrize("row", [
    {"pid": 1, "name": "ollama", "argv0": None, "exe": 5, "options": "x", "env": [1], "listeners": "y"},
    {"pid": 2, "name": "llama-server", "argv0": "\x1b[31mllama-server\n", "options": {"--host": None, "--port": "99999"},
     "env": {"LLAMA_ARG_HOST": 7}, "listeners": [{"address": 3, "port": "x"}, None]},
    {"pid": 3, "name": "rpc-server", "argv0": "rpc-server", "exe_file": {"uid": "0", "mode": None, "libs": "x"}},
])
def test_garbage_rows_never_crash(make_snapshot, row):
    snap = make_snapshot(manifest={"format": 1, "uid": 0}, samples={"processes": [row]})
    for check in (LlamaExposureCheck(), LlamaBuildCheck()):
        found = list(check.run(HostFacts(open_host(snap))))
        assert all(f.severity is not Severity.ERROR for f in found)
        shown = " ".join(f.summary + " ".join(str(v) for v in f.evidence.values()) for f in found)
        assert "\x1b" not in shown and "\n" not in shown


# ---- llama-build: the running server's own executable ----

VERSION = ("", 0, "version: 6865 (1c1409e1)\nbuilt with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu\n")
SERVER_EXE = "/home/user/IA/llama.cpp/build/bin/llama-server"


def running_server(**exe_file):
    p = json.loads((DATA / "llama-swap-306-gpt-oss-20b.json").read_text())["processes"][1]
    p["exe_file"] = {"uid": 0, "mode": 0o755, "dir_uid": 0, "dir_mode": 0o755, "same_file": True,
                     "mtime": "2025-10-29T21:13:52Z",
                     "libs": ["libggml-base.so", "libggml-cuda.so", "libllama.so"], **exe_file}
    return p


def build_snapshot(make_snapshot, proc, uid=0):
    return make_snapshot(manifest={"format": 1, "uid": uid}, cmd={f"{SERVER_EXE} --version": VERSION},
                         samples={"processes": sample_rows([proc]),
                                  "llama_install": {"sampled_at": "2026-11-20T00:00:00Z", "search_dirs": [],
                                                    "binaries": []}})


def test_a_running_server_found_on_path_follows_the_found_binary_rules(make_snapshot):
    snap = make_snapshot(manifest={"format": 1, "uid": 0}, cmd={f"{SERVER_EXE} --version": VERSION},
                         samples={"processes": sample_rows([running_server(uid=1000)]),
                                  "which": {"llama-server": SERVER_EXE}})
    [binary] = LlamaBuildFacts.gather(open_host(snap)).binaries
    assert binary.found_in == "PATH" and binary.running == (2288,) and binary.version.build_number == 6865


@pytest.mark.parametrize("exe_file, why", [({"mode": 0o777}, "writable by group or others"),
                                           ({"same_file": False}, "container"),
                                           ({"same_file": None}, "container"),
                                           ({"dir_uid": 1000}, "its folder belongs to uid 1000"),
                                           ({"dir_mode": 0o777}, "could be swapped"),
                                           ({"dir_mode": None}, "not recorded")])
def test_unsafe_running_binaries_are_not_run(make_snapshot, exe_file, why):
    [binary] = LlamaBuildFacts.gather(open_host(build_snapshot(make_snapshot, running_server(**exe_file)))).binaries
    assert binary.version_command is None and why in binary.version_not_run


# ---- live ----


def test_advise_never_runs_a_file_llama_build_refused(make_snapshot):
    from tunehost.advise.host_view import HostView

    safe = HostView.from_facts(HostFacts(open_host(build_snapshot(make_snapshot, running_server()))))
    assert safe.llama_server == SERVER_EXE  # the serving build is the one advised for
    unsafe = HostView.from_facts(HostFacts(open_host(build_snapshot(make_snapshot, running_server(uid=1000)))))
    assert unsafe.llama_server != SERVER_EXE
