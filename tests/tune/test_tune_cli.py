"""`tunehost tune` and `tunehost history` through the real Typer app, llama-bench and the host faked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.advise.conftest import dense_tensors, write_gguf
from tests.tune.busy import quiet_watch
from tests.tune.test_race import FakeBench
from tunehost.advise.host_view import HostView
from tunehost.bench import runner

GiB = 1024 ** 3
SUPPORTED = frozenset({"-m", "-p", "-n", "-r", "-t", "-C", "--cpu-strict", "-ngl", "-ncmoe", "-ctk", "-ctv", "-fa",
                       "-b", "-ub", "-lm", "--repack", "--prio", "--numa", "--progress", "-o"})
HOST = HostView(online_cpus=(0, 1, 2, 3), cores=((0,), (1,), (2,), (3,)), pin_cpus=(0, 1, 2), performance_cores=4,
                threads=3, smt=False, hybrid=False, ram_total=16 * GiB, ram_available=12 * GiB,
                memlock_unlimited=True, numa_nodes=1)


@pytest.fixture
def model(tmp_path) -> Path:
    return write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)


@pytest.fixture
def boundary(monkeypatch, tmp_path):
    """llama-bench (a FakeBench: -t 4 is 30 % faster), its --help, the host view, the host identity."""
    from tunehost import store
    from tunehost.bench import llama_bench
    from tunehost.ops import tune as tune_op

    binary = tmp_path / "llama-bench"
    binary.write_text("#!/bin/sh\n")
    state = {"fake": FakeBench({("-t", "4"): 1.3}, seed=5), "host": HOST}
    monkeypatch.setattr(runner, "resolve_binary", lambda explicit: binary)
    monkeypatch.setattr(runner, "_supported", lambda b: SUPPORTED)
    monkeypatch.setattr(llama_bench, "run_llama_bench", lambda b, args, timeout: state["fake"](args))
    monkeypatch.setattr(store.records, "host_identity", lambda host=None: ({"cpu": "Test CPU", "kernel": "6.8"}, "fp"))

    def plan_here(path, ctx, facts):
        from tunehost.advise.plan import AdviseOptions, plan
        from tunehost.model import read_model

        facts = read_model(path)
        return plan(facts, state["host"], AdviseOptions(model_path=path, ctx=ctx or 512)), state["host"], facts

    monkeypatch.setattr(tune_op, "_plan", plan_here)
    monkeypatch.setattr(tune_op, "CLOCK", lambda: state["fake"].now)
    monkeypatch.setattr(tune_op, "race_watch", lambda host: quiet_watch(state["fake"]))
    return state


def test_tune_finds_the_faster_threads_renders_it_and_records_it(cli, model, boundary):
    result = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16")
    assert result.exit_code == 0, result.output
    assert "-t 4: +" in result.stdout and "over advise's plan, 95 % interval +" in result.stdout
    assert "llama-server" in result.stdout and " -t 4 " in result.stdout  # rendered by advise's render_shell
    history = cli("history", "--json")
    doc = json.loads(history.stdout)
    (run,) = doc["runs"]
    assert run["command"] == "tune" and run["summary"]["improved"] and run["summary"]["winner"] == "-t 4"
    assert {r["config"] for r in run["results"]} == {"advise's plan", "winner"}
    # the winner's placement and bandwidth: one calibration point for advise (docs/history.md)
    assert run["summary"]["ceiling"]["path"] == "cpu" and run["summary"]["ceiling_config"] == "winner"
    assert run["summary"]["ceiling"]["layers"] == 2 and run["summary"]["ceiling"]["moe"] is False
    text = cli("history").stdout
    assert "tune" in text and "-t 4: +" in text


def test_tune_json_and_systemd_use_the_same_launch_config(cli, model, boundary, monkeypatch):
    from tests.advise.test_i30_units import _open_chain

    _open_chain(monkeypatch)  # every path reachable (the unit check itself: tests/tune/test_tune_unit.py)
    doc = json.loads(cli("tune", "--model", str(model), "--budget", "2h", "-n", "16", "--format", "json").stdout)
    assert doc["schema"] == "tunehost-tune/1" and doc["winner_launch"]["argv"][0] == "llama-server"
    boundary["fake"] = FakeBench({("-t", "4"): 1.3}, seed=5)
    unit = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16", "--format", "systemd", "--fresh").stdout
    assert "[Service]" in unit and "ExecStart=" in unit


def test_a_killed_tune_resumes_and_says_how_much_it_reused(cli, model, boundary):
    boundary["fake"] = FakeBench({("-t", "4"): 1.3}, seed=5, kill_after=12)
    killed = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16")
    assert killed.exit_code == 130
    boundary["fake"] = FakeBench({("-t", "4"): 1.3}, seed=5, start=12)
    resumed = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16")
    assert resumed.exit_code == 0, resumed.output
    assert "resuming an interrupted tune: 12 llama-bench runs are in the store" in resumed.stderr
    assert "resumed: reused 12 of " in resumed.stdout


def test_a_model_that_does_not_fit_is_one_line(cli, model, boundary):
    boundary["host"] = HostView(online_cpus=(0,), cores=((0,),), pin_cpus=(0,), threads=1, ram_available=1024)
    result = cli("tune", "--model", str(model))
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "does not fit on this host" in result.stderr and boundary["fake"].invocations == []


def test_a_budget_too_short_is_one_line(cli, model, boundary):
    result = cli("tune", "--model", str(model), "--budget", "5s")
    assert result.exit_code == 1 and "--budget 5 s is too short" in result.stderr
    assert cli("tune", "--model", str(model), "--budget", "ten").stderr.startswith(
        "tunehost: error: --budget must be a duration like 90, 90s, 2m")


def test_a_state_dir_that_cannot_be_written_warns_and_tunes_anyway(cli, model, boundary, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(blocker / "state"))
    result = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16")
    assert result.exit_code == 0 and "warning: not recorded in the results store" in result.stderr


def test_history_of_an_empty_store_and_bad_filters(cli):
    assert "no runs recorded" in cli("history").stdout
    assert cli("history", "--command", "nope").exit_code == 1
    assert "--drift needs --model" in cli("history", "--drift").stderr


def test_a_damaged_store_is_one_line(cli, tmp_path, monkeypatch):
    state = tmp_path / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "results.sqlite3").write_bytes(b"garbage" * 1000)
    result = cli("history")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "is damaged or not a tunehost store" in result.stderr


def test_drift_says_the_box_got_slower_and_what_changed(cli, model, boundary, monkeypatch):
    from tunehost import store
    from tunehost.bench import watch

    assert cli("tune", "--model", str(model), "--budget", "2h", "-n", "16").exit_code == 0
    slow = FakeBench({("-t", "4"): 1.3}, seed=9, level=35.0)  # everything 30 % slower now
    monkeypatch.setattr(runner, "default_invoke", lambda binary, timeout_s: lambda args, on_line: slow(args))
    monkeypatch.setattr(watch, "describe_host", lambda host: {"cpu_brand": "Test CPU"})
    monkeypatch.setattr(watch, "read_reading", lambda host, **kw: simulated_reading(other_cores=0.0))
    monkeypatch.setattr(store.records, "host_identity", lambda host=None: ({"cpu": "Test CPU", "kernel": "6.9"}, "fp2"))
    result = cli("history", "--drift", "--model", str(model), "--budget", "30")
    assert result.exit_code == 2, result.output
    assert "this box got slower beyond the noise since then" in result.stdout
    assert "kernel 6.8 -> 6.9" in result.stdout
    assert " -t 4 " in " ".join(slow.invocations[-1]) + " "
    runs = json.loads(cli("history", "--json").stdout)["runs"]
    assert [r["command"] for r in runs] == ["drift", "tune"]
    assert runs[0]["summary"]["verdict"] == "slower beyond the noise" and runs[0]["summary"]["since_run"] == runs[1]["id"]
    assert runs[0]["summary"]["changed"] == ["kernel 6.8 -> 6.9"]
    [row] = runs[0]["summary"]["rows"]  # what doctor's speed-drift shows: then -> now, the change, the interval
    assert row["test"] == "tg" and row["verdict"] == "slower" and row["now"] < row["then"]
    assert row["change_percent"] < -2 and row["low"] < row["high"] < 1
    doctor = cli("doctor", "--json", "--quick", "--check", "speed-drift")
    assert doctor.stdout.strip(), doctor.output
    [finding] = json.loads(doctor.stdout)["findings"]
    assert finding["severity"] == "warn" and finding["summary"].startswith("tiny.gguf got slower beyond the noise")
    assert "changed in between: kernel 6.8 -> 6.9" in finding["summary"]


def simulated_reading(*, other_cores: float) -> Any:
    """A reading of a host whose other processes keep ``other_cores`` CPUs busy (on the real clock)."""
    import time

    from tunehost.bench import watch

    now = time.monotonic()
    return watch.HostReading(at_s=now, cpu=watch.CpuTimes(now * other_cores, 0.0, now * 4), own_cpu_s=0.0,
                             swap_in=0, swap_out=0, throttle_count=0, temperature=None)


def test_drift_on_a_busy_host_leaves_the_disturbed_rounds_out_and_judges_nothing(cli, model, boundary, monkeypatch):
    from tunehost.bench import watch

    assert cli("tune", "--model", str(model), "--budget", "2h", "-n", "16").exit_code == 0
    slow = FakeBench({("-t", "4"): 1.3}, seed=9, level=35.0)  # slower, but measured while the host is busy
    monkeypatch.setattr(runner, "default_invoke", lambda binary, timeout_s: lambda args, on_line: slow(args))
    monkeypatch.setattr(watch, "describe_host", lambda host: {"cpu_brand": "Test CPU"})
    monkeypatch.setattr(watch, "read_reading", lambda host, **kw: simulated_reading(other_cores=1.5))
    result = cli("history", "--drift", "--model", str(model), "--budget", "30")
    assert result.exit_code == 75, result.output
    said = " ".join(result.stdout.split())
    assert re.search(r"not judged: the host was busy in (\d+) of \1 rounds \(other processes used 1\.50 of", said), said
    assert "drift: round 1 (" in result.stderr  # plain progress lines: stderr is not a terminal here
    runs = json.loads(cli("history", "--json").stdout)["runs"]
    assert runs[0]["command"] == "drift" and runs[0]["summary"]["disturbed"] is True
    assert runs[0]["summary"]["discarded_rounds"] >= 5 and not runs[0]["summary"]["rows"]


def test_drift_whose_round_marks_do_not_line_up_judges_nothing(cli, model, boundary, monkeypatch):
    import dataclasses

    from tunehost.bench import watch

    assert cli("tune", "--model", str(model), "--budget", "2h", "-n", "16").exit_code == 0
    slow = FakeBench({("-t", "4"): 1.3}, seed=9, level=35.0)  # slower beyond the noise on a quiet host
    monkeypatch.setattr(runner, "default_invoke", lambda binary, timeout_s: lambda args, on_line: slow(args))
    monkeypatch.setattr(watch, "describe_host", lambda host: {"cpu_brand": "Test CPU"})
    monkeypatch.setattr(watch, "read_reading", lambda host, **kw: simulated_reading(other_cores=0.0))
    measure = runner.measure

    def one_mark_short(*args, **kwargs):  # one round watched disturbed, and one mark fewer than the rounds
        result = measure(*args, **kwargs)
        first = dataclasses.replace(result.round_watch[0], reasons=("other processes used 1.50 of 4 CPUs",))
        return dataclasses.replace(result, round_watch=(first, *result.round_watch[1:-1]))

    monkeypatch.setattr(runner, "measure", one_mark_short)
    result = cli("history", "--drift", "--model", str(model), "--budget", "30")
    assert result.exit_code == 75, result.output  # before: exit 2, the disturbed round judged with the rest
    said = " ".join(result.stdout.split())
    assert "not judged: 1 of" in said and "which values they were is unknown" in said
    assert "were left out" not in said and "got slower" not in said


@pytest.mark.parametrize("hostile", ["[/]", "[bold red]x[/]", "[link=file:///etc]y", "\x1b[31mred"])
def test_progress_text_with_a_hostile_process_name_is_shown_not_read_as_markup(hostile):
    import io

    from rich.console import Console

    from tunehost.cli.bench import progress_view
    from tunehost.cli.tune import _TuneView
    from tunehost.tune.race import TuneProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    event = TuneProgress("threads", 0, 2, 3, "-t 1", None, 2, 10.0, 60.0, 0, 0,
                         f"waiting for quiet: other processes used 1.00 of 2 CPUs: {hostile} (pid 7, 4.0 s)")
    with _TuneView(console, enabled=True) as view:  # before: rich.errors.MarkupError on "[/]"
        view.update(event)
        view._progress.refresh()
    bench_event = type("Event", (), {"phase": "round", "config": "-t 2", "round": 1, "rounds_planned": 5,
                                     "line": f"llama-bench: {hostile}", "eta_s": 3.0, "planned": 10, "done": 2})()
    with progress_view(console, enabled=True) as progress:
        progress.update(bench_event)
        progress.status(hostile)
        progress._progress.refresh()
    assert "[/]" in out.getvalue() or hostile != "[/]"
    assert "\x1b[31mred" not in out.getvalue()


def test_tune_opens_the_host_once(cli, model, boundary, monkeypatch):
    """The CLI opens the host; the operation and everything below it use that one (issue 31)."""
    import tunehost.host as host_layer
    from tunehost.store import records

    opened = []
    real = host_layer.open_host

    def counted(*args, **kwargs):
        opened.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(host_layer, "open_host", counted)
    given = []
    monkeypatch.setattr(records, "host_identity", lambda host=None: given.append(host) or ({"cpu": "Test CPU"}, "fp"))
    result = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16")
    assert result.exit_code == 0, result.output
    assert len(opened) == 1 and len(given) == 1 and given[0] is not None


def test_a_model_that_does_not_fit_names_the_memory_it_overflows(cli, model, boundary):
    boundary["host"] = HostView(online_cpus=(0,), cores=((0,),), pin_cpus=(0,), threads=1, ram_available=1024)
    result = cli("tune", "--model", str(model))
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "at this context (does not fit: the CPU side needs " in result.stderr
    assert "only 0.0 GiB is available (MemAvailable)" in result.stderr


def test_tune_offers_the_formats_the_registry_lists_for_it(cli, tmp_path):
    """tune's --format choices are tunehost.formats.TUNE, each a registered format (one registry, one list)."""
    from tunehost.formats import FORMATS, TUNE

    assert set(TUNE) <= set(FORMATS) and "ollama" not in TUNE
    result = cli("tune", "-m", str(tmp_path / "m.gguf"), "--format", "ollama")
    assert result.exit_code == 1
    assert "--format must be one of human, shell, systemd, json, not 'ollama'" in result.output
