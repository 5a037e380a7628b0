"""Issue 32, the server bench's HTTP surface: one wall-clock deadline per exchange and a total-bytes cap (classes
1), the API key file through the bounded reader (2), a cap on /tokenize requests (3), the served server's whole
process group stopped (7), secrets redacted from every message (10), and a named binary run as named.

Real local servers (tests/bounds/hostile_http.py: http.server in a thread) trickle, flood, echo the key and answer
one token per call; each case is bounded in wall time and in Python allocations (tests/bounds/limits.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounds.hostile_http import HostileServer
from tests.bounds.limits import MiB, alive, group_alive, program, within
from tunehost.bench.server.client import ServerClient, parse_target, read_api_key, redact
from tunehost.errors import TunehostError

QUICK = ["--depths", "32", "--budget", "0", "-n", "4"]
KEY = "sk-live-7f3a9c2e41"


def _client(server: HostileServer, timeout_s: float, api_key: str | None = None) -> ServerClient:
    return ServerClient(parse_target(server.url), timeout_s=timeout_s, api_key=api_key)


def _one_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.strip() and not ln.startswith("starting llama-server")]
    assert len(lines) == 1, result.output
    return lines[0]


# ---------------------------------------------------------------- 1. one deadline per exchange, a bytes cap


@settings(max_examples=6, deadline=None)
@given(st.sampled_from(["trickle-headers", "trickle-body", "trickle-line"]), st.sampled_from([0.05, 0.3]),
       st.sampled_from([0.5, 1.0]))
def test_a_trickle_is_cut_at_the_request_deadline(mode: str, interval: float, timeout_s: float) -> None:
    """A server sending one byte per interval in its headers, its body or inside one streamed line held the client
    until it stopped (the timeout was per read, and every byte reset it); now the request ends at its deadline."""
    with HostileServer(mode, interval=interval) as server:
        client = _client(server, timeout_s)
        began = time.monotonic()
        with within(f"{mode} every {interval} s", seconds=timeout_s + 2.0, peak_bytes=4 * MiB):
            with pytest.raises(TunehostError) as caught:
                if mode == "trickle-line":
                    for _ in client.stream("/completion", {"prompt": [1], "n_predict": 1, "stream": True}):
                        pass
                else:
                    client.request_json("GET", "/health")
        assert time.monotonic() - began >= timeout_s * 0.9
    message = str(caught.value)
    assert f"no complete answer within {timeout_s:g} s" in message and "\n" not in message


def test_a_flooding_stream_stops_at_the_total_cap() -> None:
    """Comment lines forever (each one short, all skipped) were read until --timeout (5 min by default); now the
    whole stream has a cap on its bytes, and memory stays flat while it is read."""
    from tunehost.bench.server.client import MAX_STREAM_BYTES

    with HostileServer("flood") as server:
        client = _client(server, 300.0)
        with within("a flood of comment lines", seconds=20.0, peak_bytes=8 * MiB):
            with pytest.raises(TunehostError, match=f"larger than {MAX_STREAM_BYTES >> 20} MiB"):
                for _ in client.stream("/completion", {"prompt": [1], "n_predict": 1, "stream": True}):
                    pass


@pytest.mark.parametrize("mode", ["trickle-headers", "trickle-line"])
def test_the_bench_ends_at_its_timeout_on_a_trickle(cli, mode: str) -> None:
    with HostileServer(mode, interval=0.2) as server:
        with within(f"bench against {mode}", seconds=8.0, peak_bytes=64 * MiB):
            result = cli("bench", "--server", server.url, *QUICK, "--timeout", "1")
    assert result.exit_code == 1
    assert "no complete answer within 1 s" in _one_line(result)



HOSTILE = Path(__file__).with_name("hostile_http.py")


def test_the_start_timeout_is_wall_clock(cli, tmp_path: Path) -> None:
    """--serve's /health wait: a served server trickling its /health headers held tunehost for ever."""
    server = program(tmp_path / "llama-server", f'exec "{sys.executable}" "{HOSTILE}" --mode trickle-headers '
                                                 '--interval 0.2 "$@"')
    with within("--serve with a trickling /health", seconds=12.0, peak_bytes=64 * MiB):
        result = cli("bench", "--serve", *QUICK, "--start-timeout", "2", "--", str(server))
    assert result.exit_code == 1
    assert "did not become ready within 2 s (--start-timeout)" in _one_line(result)


def test_the_probe_wait_is_wall_clock() -> None:
    from tunehost.bench.server.rounds import probe

    with HostileServer("trickle-headers", interval=0.1) as server:
        with within("probe of a trickling server", seconds=4.0, peak_bytes=4 * MiB):
            with pytest.raises(TunehostError, match="no complete answer within"):
                probe(_client(server, 60.0), wait_s=1.0)


# ---------------------------------------------------------------- 2. the API key file


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "large", "procfs", "sysfs", "link to procfs"])
def test_the_api_key_file_is_read_bounded(cli, tmp_path: Path, kind: str) -> None:
    """`--api-key-file FIFO` blocked for ever in a plain open(); every kind but a regular file is one line. A
    kernel file looks regular but is no user's file (a read of /proc/kmsg drains the kernel log): refused before
    any read (shown here with files whose read is harmless)."""
    path = tmp_path / "key"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "procfs":
        path = Path("/proc/self/environ")
    elif kind == "sysfs":
        path = next((p for p in (Path("/sys/kernel/mm/transparent_hugepage/enabled"), Path("/sys/power/state"),
                                 Path("/sys/kernel/uevent_seqnum")) if p.is_file()), None)
        if path is None:
            pytest.skip("no sysfs file to name here")
    elif kind == "link to procfs":
        path.symlink_to("/proc/self/environ")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"k" * (64 * MiB))
    with within(f"--api-key-file {kind}", seconds=5.0, peak_bytes=1 * MiB):
        with pytest.raises(TunehostError) as caught:
            read_api_key(str(path))
    assert str(caught.value).startswith("--api-key-file") and "\n" not in str(caught.value)
    with HostileServer("ok") as server:
        with within(f"bench --api-key-file {kind}", seconds=10.0, peak_bytes=64 * MiB):
            result = cli("bench", "--server", server.url, *QUICK, "--api-key-file", str(path))
        assert server.requests == []  # refused before any request
    assert result.exit_code == 1 and "--api-key-file" in _one_line(result)


# ---------------------------------------------------------------- 3. a cap on /tokenize requests


@pytest.mark.parametrize("depths", ["512", "64,512"])
def test_a_degenerate_tokenizer_costs_one_request(cli, depths: str) -> None:
    """A /tokenize answering one token per call was called once per token: 3,072 requests for --depths 512
    --budget 0. Now a prompt takes one request (a real tokenizer) or the server is refused."""
    with HostileServer("one-token") as server:
        with within("one token per /tokenize", seconds=10.0, peak_bytes=64 * MiB):
            result = cli("bench", "--server", server.url, "--depths", depths, "--budget", "0", "-n", "4")
        assert server.count("/tokenize") == 1
    assert result.exit_code == 1
    assert "not a real tokenizer" in _one_line(result)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 20_000), st.sampled_from([0.5, 1.0, 1.7, 4.0]))
def test_a_prompt_takes_at_most_the_cap_of_requests(n_tokens: int, per_word: float) -> None:
    """Any tokenizer giving at least half a token per word: exactly n tokens within MAX_TOKENIZE_PER_PROMPT calls."""
    from tunehost.bench.server.rounds import MAX_TOKENIZE_PER_PROMPT, RequestBudget, seeded_prompt

    class Tokenizer:
        calls = 0
        timeout_s = 10.0
        target = parse_target("http://127.0.0.1:9")

        def request_json(self, method, path, body, timeout_s=None, max_bytes=None):
            self.calls += 1
            words = len(body["content"].split())
            return 200, {"tokens": [3] * max(1, int(words * per_word))}

    fake = Tokenizer()
    budget = RequestBudget(100)
    assert len(seeded_prompt(fake, n_tokens, 42, budget=budget)) == n_tokens  # type: ignore[arg-type]
    assert fake.calls <= MAX_TOKENIZE_PER_PROMPT and budget.used == fake.calls
    if per_word >= 1.0:
        assert fake.calls == 1


def test_the_bench_wide_cap_is_hard() -> None:
    from tunehost.bench.server.rounds import RequestBudget

    budget = RequestBudget(3)
    for _ in range(3):
        budget.take("http://x")
    with pytest.raises(TunehostError, match="3 requests spent"):
        budget.take("http://x")


def test_a_bench_takes_one_tokenize_per_prompt(cli) -> None:
    with HostileServer("ok") as server:
        result = cli("bench", "--server", server.url, "--depths", "32,64", "--budget", "0", "-n", "4")
        assert result.exit_code == 0, result.output
        # a warm-up and 5 rounds, 2 depths: one /tokenize per prompt
        assert server.count("/tokenize") == 12


# ---------------------------------------------------------------- 7. the served group is stopped



@pytest.mark.parametrize("leader_ignores_term", [False, True])
def test_the_whole_served_group_is_stopped(tmp_path: Path, monkeypatch, leader_ignores_term: bool) -> None:
    """A wrapper whose llama-server ignores SIGTERM left it running after --serve when the wrapper itself exited
    on SIGTERM (SIGKILL went out only if the wrapper outlived the grace period)."""
    from tunehost.bench.server import launch

    monkeypatch.setattr(launch, "STOP_GRACE_S", 1.0)
    pid_file = tmp_path / "child.pid"
    trap = "trap '' TERM; " if leader_ignores_term else ""
    wrapper = program(tmp_path / "llama-server",
                       f"{trap}( trap '' TERM; exec \"{sys.executable}\" \"{HOSTILE}\" --mode ok \"$@\" ) &\n"
                       f"echo $! > {pid_file}\nwait")
    with within("stopping a group that ignores SIGTERM", seconds=15.0, peak_bytes=16 * MiB):
        with launch.ServedServer([str(wrapper)], name="A", start_timeout_s=10.0) as served:
            leader = served.proc.pid
            child = int(pid_file.read_text())
            assert alive(child)
    time.sleep(0.2)
    assert not alive(child), "the server's child outlived --serve"
    assert not alive(leader)
    assert not group_alive(leader), "a process of the served group outlived --serve"


# ---------------------------------------------------------------- 10. secrets redacted


@pytest.mark.parametrize("mode", ["echo-secret", "echo-props", "echo-escaped"])
def test_an_echoed_api_key_is_never_printed(cli, tmp_path: Path, mode: str) -> None:
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    out = tmp_path / "r.json"
    with HostileServer(mode) as server:
        result = cli("bench", "--server", server.url, *QUICK, "--api-key-file", str(key), "--save", str(out))
    assert KEY not in result.output and KEY[:8] not in result.output.replace("sk-live-", "")
    assert "[redacted]" in result.output or result.exit_code == 0
    if out.exists():
        assert KEY not in out.read_text()


@settings(max_examples=30, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=64),
       st.sampled_from(["plain", "json", "cut"]))
def test_redact_takes_every_spelling_of_the_key(key: str, spelling: str) -> None:
    import json

    shown = {"plain": key, "json": json.dumps(key)[1:-1], "cut": key}[spelling]
    text = f"error: invalid token {shown} for this user " * (40 if spelling == "cut" else 1)
    clean = redact(text, (key,))
    assert key not in clean and json.dumps(key)[1:-1] not in clean


def test_an_echoed_key_in_a_stream_error_is_redacted() -> None:
    client = ServerClient(parse_target("http://127.0.0.1:9"), timeout_s=1.0, api_key=KEY)
    error = client._status_error("/completion", 500, {"error": {"message": f"Bearer {KEY}"}}, b"")
    assert KEY not in str(error) and "[redacted]" in str(error)


@pytest.mark.parametrize("url", ["http://admin:hunter2pw@127.0.0.1:8080", "http://admin:hunter2pw@127.0.0.1:99999/",
                                 "https://:hunter2pw@[::1]:8080/x", "ftp://u:hunter2pw@host/",
                                 "http://u:hunter2pw@127.0.0.1:8080/?q=1", "admin:hunter2pw@127.0.0.1:8080",
                                 "http://u:hun/ter2pw@127.0.0.1:8080", "http://u:hunter2pw@[::1:80/"])
def test_a_url_password_is_never_quoted(cli, url: str) -> None:
    result = cli("bench", "--server", url)
    assert result.exit_code == 1
    line = _one_line(result)
    assert "hunter2pw" not in line and "ter2pw" not in line and "tunehost: error: --server" in line


# ---------------------------------------------------------------- a named binary runs as named


def test_a_named_llama_server_runs_that_file(tmp_path: Path, monkeypatch) -> None:
    """`--serve -- ./llama-server` ran the llama-server on PATH (Path("./x") prints as "x")."""
    from tunehost.bench.server.launch import resolve_server_binary

    on_path = tmp_path / "path"
    on_path.mkdir()
    program(on_path / "llama-server", "exit 0")
    here = tmp_path / "here"
    here.mkdir()
    program(here / "llama-server", "exit 0")
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(here)
    found = resolve_server_binary("./llama-server")
    assert found == here / "llama-server" and found.is_absolute()
    with pytest.raises(TunehostError, match="no executable"):
        resolve_server_binary("./absent/llama-server")


def _marking(path: Path, marker: Path) -> Path:
    return program(path, f'echo "$0 $*" >> "{marker}"; echo "version: 1 (abc)"')


def test_no_other_llama_bench_runs_when_one_is_named(tmp_path: Path, monkeypatch) -> None:
    """`bench/tune --llama-bench ./llama-bench` measured with that file, but the host summary's llama.cpp search
    still ran the llama-bench on PATH (`--version`): with a binary named, no other file of its name is run."""
    from tunehost.facts.llama import LlamaBuildFacts
    from tunehost.host import open_host

    marker = tmp_path / "ran"
    on_path = tmp_path / "path"
    on_path.mkdir()
    _marking(on_path / "llama-bench", marker)
    named = _marking(tmp_path / "llama-bench", marker)
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(tmp_path / "absent"))
    monkeypatch.delenv("LLAMA_CPP_DIR", raising=False)
    facts = LlamaBuildFacts.gather_named(open_host(), {"llama-bench": str(named)})
    assert not marker.exists() or str(on_path) not in marker.read_text()
    listed = [b for b in facts.binaries if b.path == str(on_path / "llama-bench")]
    assert listed and listed[0].version_not_run and "was named" in listed[0].version_not_run
    LlamaBuildFacts.gather(open_host())  # the same search without a name runs it: the test can see a run
    assert str(on_path) in marker.read_text()


def test_fit_params_comes_from_the_named_servers_build(tmp_path: Path, monkeypatch) -> None:
    """`advise --llama-server ./build/llama-server` ran the llama-fit-params on PATH, another build's."""
    from tunehost.advise.flags import fit_params_path
    from tunehost.host import open_host

    on_path = tmp_path / "path"
    on_path.mkdir()
    program(on_path / "llama-fit-params", "exit 0")
    build = tmp_path / "build"
    build.mkdir()
    program(build / "llama-server", "exit 0")
    program(build / "llama-fit-params", "exit 0")
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    assert fit_params_path(open_host(), str(build / "llama-server")) == str(build / "llama-fit-params")
    assert fit_params_path(open_host(), "llama-server") == str(on_path / "llama-fit-params")


def test_a_trickled_tls_handshake_ends_at_the_deadline() -> None:
    """An https:// server that accepts and trickles garbage instead of a TLS handshake: each byte reset the
    per-read timeout; the deadline covers the handshake too."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    done = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            try:
                conn.sendall(b"\x16\x03\x03\x40\x00")  # a handshake record of 16 KiB, then its bytes one by one
                while not done.wait(0.1):
                    conn.sendall(b"\x00")
            except OSError:
                return

    threading.Thread(target=trickle, daemon=True).start()
    client = ServerClient(parse_target(f"https://127.0.0.1:{listener.getsockname()[1]}"), timeout_s=1.0)
    try:
        with within("a trickled TLS handshake", seconds=3.0, peak_bytes=4 * MiB):
            with pytest.raises(TunehostError, match="no complete answer within 1 s"):
                client.request_json("GET", "/health")
    finally:
        done.set()
        listener.close()
