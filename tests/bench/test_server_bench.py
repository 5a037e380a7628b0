"""The server bench against fake llama-servers (tests/bench/fake_server.py): the numbers it reports, the A/B
verdict through the engine, and every bad target as one clear line and a non-zero exit within a bounded time."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bench.fake_server import FakeLlamaServer
from tunehost.bench.server import launch as serving
from tunehost.bench.server.rounds import (
    RoundRunner, ServerSettings, ServerTarget, cache_ram_statement, measure_server, percentile, plan_depths,
)
from tunehost.bench.server.client import ServerClient, parse_target, read_api_key
from tunehost.errors import TunehostError

FAKE = Path(__file__).with_name("fake_server.py")
QUICK = ["--depths", "32,64", "--budget", "0", "-n", "8"]


def run_cli(cli, *args: str):
    began = time.monotonic()
    result = cli("bench", *args)
    return result, time.monotonic() - began


def one_error_line(result) -> str:
    """The one error line (after at most the "starting llama-server" status lines of --serve)."""
    lines = [ln for ln in result.output.splitlines() if ln.strip() and not ln.startswith("starting llama-server")]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("tunehost: error:"), lines[0]
    return lines[0]


# ---------------------------------------------------------------- what it measures


def test_server_run_reports_cold_cached_and_concurrent_rows(cli, tmp_path):
    out = tmp_path / "server.json"
    with FakeLlamaServer(slots=2) as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--clients", "1,2", "--save", str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data == json.loads(result.stdout)
    assert data["schema"] == "tunehost-server-bench/1"
    server = data["servers"][0]
    assert (server["build"], server["total_slots"], server["n_ctx"]) == ("b11312-0c1e570", 2, 2048)
    rows = {(r["test"], r["depth"]): r for r in data["summary"]["server"]}
    assert set(rows) == {("cold", 32), ("cold", 64), ("cached", 32), ("cached", 64), ("x2", 32)}
    assert rows[("cold", 64)]["cache_n"] == 0 and rows[("cold", 64)]["prompt_n"] == 64
    assert rows[("cached", 64)]["cache_n"] == 63  # the repeated prompt came from the cache, and says so
    assert rows[("x2", 32)]["clients"] == 2 and rows[("x2", 32)]["requests"] == 2 * data["settings"]["rounds"]
    # the server's own timings: 64 tokens in 64 * 0.001 ms -> 1e6 t/s; 8 tokens in 0.08 ms -> 1e5 t/s
    assert rows[("cold", 64)]["pp_ts"] == pytest.approx(1e6)
    assert rows[("cold", 64)]["tg_ts"] == pytest.approx(1e5)
    tests = {t["test"] for t in data["configs"][0]["tests"]}
    assert {"pp64", "pp64 client", "tg8@d64", "cached64 client", "tg8 x2", "total x2"} <= tests
    cold = [r for r in data["requests"] if r["test"] == "cold"]
    assert all(r["ttft_ms"] <= r["total_ms"] for r in cold)
    # cold prompts are fresh: no two rounds send the same one; every cold request says cache_prompt false
    completions = [r for r in fake.requests if r[1] == "/completion"]
    assert len(completions) == (data["settings"]["rounds"] + 1) * (2 * 2 + 2)


def test_a_server_bench_is_recorded_in_the_results_store(cli):
    from tunehost.store import open_store

    with FakeLlamaServer() as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--json")
    assert result.exit_code == 0, result.output
    with open_store() as store:
        runs = store.runs(command="server-bench")
    assert len(runs) == 1
    run = runs[0]
    assert run.build == "b11312-0c1e570" and run.summary["servers"][0]["total_slots"] is not None
    assert run.model_hash.startswith("server:")  # the fake's model path is no file here: identified by what it said
    assert {r.test for r in run.results} >= {"pp64", "tg8@d64"}
    history = cli("history", "--command", "server-bench", "--json")
    assert history.exit_code == 0 and json.loads(history.stdout)["runs"][0]["command"] == "server-bench"


def test_openai_endpoint_streams_with_timings(cli):
    with FakeLlamaServer() as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--api", "openai", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["settings"]["endpoint"] == "/v1/completions (streamed)"
    assert {path for _, path, _ in fake.requests if "completion" in path} == {"/v1/completions"}
    assert all(r["predicted_n"] == 8 for r in data["requests"])


def test_default_clients_are_one_and_the_slot_count(cli):
    with FakeLlamaServer(slots=3) as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["settings"]["clients"] == [1, 3]
    assert {r["test"] for r in data["summary"]["server"]} == {"cold", "cached", "x3"}


def test_draft_acceptance_from_the_timings(cli):
    with FakeLlamaServer("draft") as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK)
    assert result.exit_code == 0, result.output
    assert "draft acceptance (cold d32): 70.0%" in result.output


def test_hostile_props_are_printed_as_one_clean_line(cli):
    with FakeLlamaServer() as fake:
        fake.alias = "evil\x1b[2J\nline two"
        result, _ = run_cli(cli, "--server", fake.url, *QUICK)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    header = next(ln for ln in result.output.splitlines() if ln.startswith("tunehost bench --server"))
    assert "evil" in header and "line two" in header


def test_depths_that_do_not_fit_the_context_are_dropped_and_said():
    settings = ServerSettings(depths=(512, 4096, 16384), n_gen=64, to_context=True)
    assert plan_depths(settings, 8192) == (512, 4096, 8192 - 64 - 8)
    with pytest.raises(TunehostError, match="no prompt depth fits"):
        plan_depths(ServerSettings(depths=(4096,), n_gen=64), 1024)


def test_ab_verdict_comes_from_the_engine():
    with FakeLlamaServer() as slow, FakeLlamaServer(speed=1.5) as fast:
        result = measure_server([ServerTarget("A", parse_target(slow.url)), ServerTarget("B", parse_target(fast.url))],
                                ServerSettings(depths=(32,), n_gen=4, budget_s=0))
    rows = {r.test: r for r in result.comparison.rows}
    assert rows["pp32"].verdict == "faster" and rows["pp32"].change_percent == pytest.approx(50.0)
    assert rows["tg4@d32"].verdict == "faster"
    assert rows["pp32"].rounds == result.settings["rounds"] >= 5


def test_percentile_interpolates():
    assert percentile([10.0, 20.0, 30.0, 40.0], 50) == 25.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 90) == pytest.approx(37.0)


def test_cache_ram_statement_reads_the_flags():
    assert "off" in cache_ram_statement(["llama-server", "--cache-ram", "0"])
    assert "4096" in cache_ram_statement(["llama-server", "-cram=4096"])
    assert "default" in cache_ram_statement(["llama-server", "-m", "x.gguf"])
    assert "not reported" in cache_ram_statement(None)


# ---------------------------------------------------------------- bad targets: one line, non-zero, bounded


@pytest.mark.parametrize("mode, expected", [
    ("html", "not JSON"),
    ("json-404", "not a llama-server"),
    ("absurd", "absurd timings"),
    ("garbage-stream", "not JSON"),
    ("cached-cold", "cache_prompt false"),
])
def test_bad_servers_are_one_line(cli, mode, expected):
    with FakeLlamaServer(mode) as fake:
        result, took = run_cli(cli, "--server", fake.url, *QUICK, "--timeout", "5")
    assert result.exit_code == 1
    assert expected in one_error_line(result)
    assert took < 10


def test_a_server_that_never_answers_times_out(cli):
    with FakeLlamaServer("hang") as fake:
        result, took = run_cli(cli, "--server", fake.url, *QUICK, "--timeout", "1")
    assert result.exit_code == 1
    assert "no complete answer within 1 s" in one_error_line(result)
    assert took < 5


def test_a_loading_server_is_waited_for():
    from tunehost.bench.server.rounds import probe

    with FakeLlamaServer() as fake:
        fake.loading_polls = 2
        info = probe(ServerClient(parse_target(fake.url), timeout_s=5))
        assert info.n_ctx == 2048 and fake.loading_polls == 0
        fake.loading_polls = 100
        with pytest.raises(TunehostError, match="still loading after 0.5 s"):
            probe(ServerClient(parse_target(fake.url), timeout_s=5), wait_s=0.5)


def test_a_closed_port(cli):
    result, took = run_cli(cli, "--server", f"http://127.0.0.1:{serving.free_port()}", *QUICK)
    assert result.exit_code == 1
    assert "nothing listens" in one_error_line(result)
    assert took < 5


def test_a_server_that_dies_mid_run(cli):
    with FakeLlamaServer("die", die_after=3) as fake:
        result, took = run_cli(cli, "--server", fake.url, *QUICK)
    assert result.exit_code == 1
    assert "did it crash?" in one_error_line(result)
    assert took < 10


def test_401_without_and_with_a_wrong_key(cli, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("nope\n")
    with FakeLlamaServer(api_key="s3cret-key") as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK)
        assert "answered 401: it wants an API key" in one_error_line(result)
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--api-key-file", str(wrong))
        assert "answered 401: the API key is wrong" in one_error_line(result)
        assert "nope" not in result.output
    assert result.exit_code == 1


def test_the_api_key_is_sent_and_never_printed_or_saved(cli, tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret-key\n")
    out = tmp_path / "r.json"
    with FakeLlamaServer(api_key="s3cret-key") as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--api-key-file", str(key), "--save", str(out))
    assert result.exit_code == 0, result.output
    assert "s3cret" not in result.output and "s3cret" not in out.read_text()
    assert any(auth == "Bearer s3cret-key" for _, path, auth in fake.requests if path == "/completion")


def test_api_key_file_must_hold_a_key(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(TunehostError, match="holds no key"):
        read_api_key(str(empty))
    with pytest.raises(TunehostError, match="no such file"):
        read_api_key(str(tmp_path / "missing"))


@pytest.mark.parametrize("url, expected", [
    ("ftp://127.0.0.1:1", "http:// or https://"),
    ("http://user:pw@127.0.0.1:8080", "no user or password"),
    ("http://127.0.0.1:99999", "not a URL"),
    ("http://127.0.0.1:8080/?x=1", "no query"),
])
def test_bad_urls(cli, url, expected):
    result, _ = run_cli(cli, "--server", url)
    assert result.exit_code == 1
    assert expected in one_error_line(result)
    assert "pw" not in result.output or expected == "no user or password"


def test_only_the_named_address_is_contacted():
    target = parse_target("http://127.0.0.1:8080/llama/")
    assert (target.host, target.port, target.prefix, target.loopback) == ("127.0.0.1", 8080, "/llama", True)
    assert not parse_target("http://192.0.2.7:80").loopback
    assert repr(ServerClient(target, timeout_s=1, api_key="k3y")).find("k3y") == -1


# ---------------------------------------------------------------- router mode


def test_model_name_is_for_a_router(cli):
    with FakeLlamaServer() as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--model", "x")
    assert "is for a router" in one_error_line(result)


def test_router_needs_a_model_name(cli):
    with FakeLlamaServer(router=True) as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK)
    assert result.exit_code == 1
    assert "router" in one_error_line(result) and "fake-model" in result.output


def test_router_load_time_is_reported_apart(cli):
    with FakeLlamaServer(router=True) as fake:
        result, _ = run_cli(cli, "--server", fake.url, *QUICK, "--model", "fake-model", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["servers"][0]["router"] is True and data["servers"][0]["load_s"] >= 0
    assert data["settings"]["model"] == "fake-model"


# ---------------------------------------------------------------- --serve: the process


def test_serve_arguments_split_and_check():
    a, b = serving.split_serve_args(["llama-server", "-m", "a.gguf", "--vs", "--", "-m", "b.gguf"])
    assert a == ["llama-server", "-m", "a.gguf"] and b == ["llama-server", "-m", "b.gguf"]
    assert serving.split_serve_args(["llama-server"]) == (["llama-server"], None)
    for bad in ("--port", "--host", "--api-key", "--api-key-file"):
        with pytest.raises(TunehostError, match="set by tunehost"):
            serving.check_server_args(["llama-server", bad, "x"], what="--serve")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_serve_starts_and_stops_the_server(cli, tmp_path):
    pid_file = tmp_path / "pid"
    result, _ = run_cli(cli, "--serve", *QUICK, "--", sys.executable, str(FAKE), "--pid-file", str(pid_file))
    assert result.exit_code == 0, result.output
    assert _gone(int(pid_file.read_text()))


def test_serve_says_which_signal_killed_the_server(cli, tmp_path):
    pid_file = tmp_path / "pid"
    result, took = run_cli(cli, "--serve", "--depths", "32", "-n", "8", "--budget", "60", "--", sys.executable,
                           str(FAKE), "--pid-file", str(pid_file), "--crash-after", "5")
    assert result.exit_code == 1
    assert "ended (killed by SIGSEGV)" in one_error_line(result)
    assert _gone(int(pid_file.read_text()))
    assert took < 30


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_ctrl_c_or_sigterm_leaves_no_server_behind(tmp_path, sig, status):
    pid_file = tmp_path / "pid"
    # 400 tokens at 2 ms each: the 6 rounds the engine always runs take over 9 s, far beyond the signal at 1 s
    tunehost = [sys.executable, "-m", "tunehost", "bench", "--serve", "--depths", "32", "-n", "400", "--budget",
                "60", "--", sys.executable, str(FAKE), "--pid-file", str(pid_file)]
    # Ctrl-C as from a terminal: a test run started in the background (`pytest &`, nohup) ignores SIGINT, and an
    # ignored SIGINT is inherited, so tunehost would never see it and the test would wait out its 30 s
    proc = subprocess.Popen(tunehost, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # past /health: measuring
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert _gone(int(pid_file.read_text()))


@pytest.mark.parametrize("exchange", ["stream", "json"])
def test_ctrl_c_while_an_answer_is_closed_is_not_lost(monkeypatch, exchange):
    """A SIGINT whose handler runs while an HTTP answer is being closed raises KeyboardInterrupt there: the client
    closes every answer itself, so it propagates; closed by the garbage collector (io's finalizer), CPython dropped
    it without a word and the bench ran on to its --budget (the flaky Ctrl-C test above)."""
    import http.client

    from tunehost.bench.server.rounds import RequestSpec, stream_request

    close = http.client.HTTPResponse.close

    def interrupted_close(self):  # the SIGINT handler, run inside close(): as Python does at a pending signal
        was_open = not self.closed
        close(self)
        if was_open:
            raise KeyboardInterrupt

    monkeypatch.setattr(http.client.HTTPResponse, "close", interrupted_close)
    # every answer "Connection: close" (as the stream's): http.client's connection then keeps no hold on it
    monkeypatch.setattr(http.client.HTTPResponse, "_check_close", lambda self: True)
    with FakeLlamaServer(token_delay_s=0.0) as fake:
        client = ServerClient(parse_target(fake.url), timeout_s=10)
        with pytest.raises(KeyboardInterrupt):
            if exchange == "stream":
                stream_request(client, [1, 2, 3], RequestSpec("A", 1, "cold", 3, n_gen=4))
            else:
                client.request_json("GET", "/health")


def test_round_runner_counts_warm_up_as_round_zero():
    with FakeLlamaServer() as fake:
        runner = RoundRunner("A", parse_target(fake.url), ServerSettings(depths=(16,), n_gen=2), (16,))
        runner.invoke([], None)
        runner.invoke([], None)
    assert [r.round for r in runner.records] == [0, 0, 1, 1]


def test_overhead_script_reports_the_share(tmp_path, capsys):
    from tests.conftest import load_script

    script = load_script("bench_server_overhead")
    out = tmp_path / "overhead.json"
    with FakeLlamaServer(token_delay_s=0.005) as fake:
        status = script.main(["--server", fake.url, "--depths", "32", "-n", "8", "--clients", "1", "--rounds", "1",
                              "--json", str(out)])
    data = json.loads(out.read_text())
    assert data["requests"] == 2 and data["build"] == "b11312-0c1e570"
    assert status == (0 if data["total_percent"] < 1.0 else 1)
    assert "client overhead:" in capsys.readouterr().out


def test_the_server_bench_operation_returns_the_recorded_result_and_never_prints(capfd, tmp_path):
    """tunehost.ops.server_bench.bench_server: measured, saved and recorded, its progress through the hooks, and
    nothing written to the terminal (the CLI renders)."""
    from tunehost.bench.server.rounds import ServerSettings, ServerTarget
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops.server_bench import ServerBenchHooks, ServerBenchRequest, bench_server
    from tunehost.store import open_store

    events: list[object] = []

    @contextlib.contextmanager
    def progress():
        events.append("start")
        yield events.append
        events.append("stop")

    out = tmp_path / "server.json"
    with FakeLlamaServer() as fake:
        request = ServerBenchRequest(ServerSettings(depths=(32,), n_gen=8, budget_s=0),
                                     target=ServerTarget("server", parse_target(fake.url)), label="server",
                                     save=out)
        outcome = bench_server(request, HostFacts(open_host()), ServerBenchHooks(progress=progress))
    assert outcome.run_id is not None and outcome.warnings == ()
    assert json.loads(out.read_text()) == outcome.result.to_json()
    assert events[0] == "start" and events[-1] == "stop" and len(events) > 2
    with open_store() as store:
        assert [run.id for run in store.runs(command="server-bench")] == [outcome.run_id]
    assert capfd.readouterr() == ("", "")


def _expected_lines(result) -> str:
    from rich.console import Console

    from tunehost.cli.bench_server import _render_expected

    console = Console(record=True, width=300, color_system=None)
    rows = [{"test": "cold", "depth": 4096, "tg_ts": 60.0}, {"test": "cold", "depth": 8192, "tg_ts": 30.0},
            {"test": "cached", "depth": 4096, "tg_ts": 99.0}]
    _render_expected(result, "A", rows, console)
    return " ".join(console.export_text().split())


def test_the_cold_tg_at_each_depth_is_set_beside_the_band_at_that_depth():
    from types import SimpleNamespace

    from tunehost.advise.ceiling import Ceiling, TgBand

    def ceiling(depth: int, low: float, high: float) -> dict:
        return Ceiling(100.0, (("VRAM", 4_000_000_000, 360.0),), "", band=TgBand(low, high, "gpu", "memory bandwidth"),
                       depth=depth, kv_bytes=depth * 131072).to_json()

    ceilings = {"A": {"4096": ceiling(4096, 50.0, 80.0), "8192": ceiling(8192, 40.0, 70.0)}}
    text = _expected_lines(SimpleNamespace(ceilings=ceilings, disturbed=False))
    assert ("d4096 60.0 t/s inside 50-80 t/s (0.54 GB of KV a token); d8192 30.0 t/s below 40-70 t/s (1.07 GB of KV a "
            "token)") in text
    assert "99.0" not in text  # a cached request's TG is not the cold one the band describes
    disturbed = _expected_lines(SimpleNamespace(ceilings=ceilings, disturbed=True))
    assert "inside" not in disturbed and "below" not in disturbed
    assert "no verdict: the rounds were disturbed" in disturbed
    failed = _expected_lines(SimpleNamespace(ceilings={"A": {"error": "model not readable: \x1b[31mx"}},
                                             disturbed=False))
    assert failed.startswith("no expected band: model not readable") and "\x1b" not in failed
    assert _expected_lines(SimpleNamespace(ceilings={}, disturbed=False)) == ""


def test_a_cold_tg_below_a_band_its_kind_often_missed_says_this_need_not_be_the_host():
    from types import SimpleNamespace

    from tunehost.advise.ceiling import BAND_RECORD, Ceiling, TgBand

    def ceiling(depth: int, kind: str) -> dict:
        band = TgBand(40.0, 70.0, kind, "memory bandwidth", record=BAND_RECORD[kind])
        return Ceiling(10.0, (("RAM", 4_000_000_000, 76.8),), "", band=band, depth=depth).to_json()

    rough = _expected_lines(SimpleNamespace(ceilings={"A": {"4096": ceiling(4096, "cpu"),
                                                            "8192": ceiling(8192, "cpu")}}, disturbed=False))
    assert rough.count("below") == 2 and rough.endswith(  # d8192 at 30 t/s below, d4096 at 60 inside
        "below: published runs of this kind fell outside it too: it held 26 of 29 out of sample, so this need not be "
        "the host")
    held = _expected_lines(SimpleNamespace(ceilings={"A": {"4096": ceiling(4096, "gpu"), "8192": ceiling(8192, "gpu")}},
                                           disturbed=False))
    assert "need not be the host" not in held and "below 40-70 t/s" in held


def test_served_ceilings_need_the_servers_model_file():
    """A router (--models-dir) names no model: no ceiling; a model that cannot be read: its error, no exception."""
    from types import SimpleNamespace

    from tunehost.ops.server_bench import served_ceilings

    def result(command: tuple[str, ...]) -> SimpleNamespace:
        return SimpleNamespace(settings={"depths_run": [64]}, servers=[SimpleNamespace(command=command)],
                               configs=[SimpleNamespace(name="A")])

    assert served_ceilings(result(("llama-server", "--models-dir", "/m")), None) == {}
    missing = served_ceilings(result(("llama-server", "-m", "/nonexistent/model.gguf")), None)
    assert list(missing) == ["A"] and "model not readable" in missing["A"]["error"]
