"""`tunehost bench` through the real Typer app, with llama-bench, the host reading and the bandwidth probe faked."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.bench.test_runner import SUPPORTED, FakeBench, reading
from tests.conftest import CORPUS, write_tiny_gguf
from tunehost.bench import runner, watch
from tunehost.errors import TunehostError
from tunehost.launch import LaunchConfig, flags_from
from tunehost.ops import bench as ops_bench


class Boundary:
    """The side effects `tunehost bench` has, replaced: llama-bench runs, --help, host description, watcher."""

    def __init__(self, monkeypatch, speeds=None, noise=(0.0, 0.01, -0.01), disturbed=False):
        self.fake = FakeBench(speeds or {"default": 100.0, "1": 50.0, "2": 100.0}, noise=noise, seconds=0.0)
        monkeypatch.setattr(runner, "default_invoke", lambda binary, timeout_s: self.fake)
        monkeypatch.setattr(runner, "_supported", lambda binary: SUPPORTED)
        monkeypatch.setattr(runner, "resolve_binary", lambda explicit: Path("/opt/llama/llama-bench"))
        monkeypatch.setattr(runner, "tg_ceiling", lambda model, *args, **kwargs: {"bandwidth_gbps": 40.0, "bandwidth_spread": 0.01,
                                                                 "probe_threads": 2, "bytes_per_token": 400_000_000,
                                                                 "tg_ceiling_ts": 100.0})
        monkeypatch.setattr(watch, "describe_host", lambda host: {"cpu_brand": "Test CPU 9000", "cpu_count": 2,
                                                                  "doctor": {"verdict": "ready", "findings": []}})
        after = reading(10, 20, 12, procs={7: ("stress", 9.0)}) if disturbed else reading(10, 20, 19.9)
        # the start, then the same reading for every round's lap and the end
        readings = itertools.chain([reading(0, 0, 0, procs={7: ("stress", 1.0)}), after], itertools.repeat(after))
        monkeypatch.setattr(watch, "read_reading", lambda host, **kw: next(readings))


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def test_table_with_verdicts_bars_and_ceiling(cli, monkeypatch, model):
    Boundary(monkeypatch)
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--candidate", "-t 1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "baseline: (llama-bench defaults)" in out and "candidate: -t 1" in out
    assert "PP pp16" in out and "TG tg8" in out
    assert out.count("slower") >= 2 and "-50.0 %" in out
    assert "█" in out
    assert "TG = 50% of the ~100 t/s ceiling" in out
    assert "host stayed quiet" in out
    assert "5 rounds (A B, B A, …) after 1 warm-up run per side" in out
    assert "pp16: 5 rounds behind the interval; 15 repetitions a side, worth" in out


def test_json_is_the_saved_schema_and_nothing_else(cli, monkeypatch, model):
    Boundary(monkeypatch)
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--candidate", "-t 1", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "tunehost-bench/1"
    assert [c["name"] for c in doc["configs"]] == ["baseline", "candidate"]
    assert [r["verdict"] for r in doc["comparison"]["rows"]] == ["slower", "slower"]
    assert doc["comparison"]["interleaved"] is True
    assert doc["host"]["cpu_brand"] == "Test CPU 9000"
    assert doc["configs"][1]["command"].startswith("/opt/llama/llama-bench -m ")
    assert doc["watch"]["disturbed"] is False
    assert len(doc["invocations"]) == 2 + 5 * 2
    assert {r["rounds"] for r in doc["comparison"]["rows"]} == {5}
    assert all(1 <= r["effective_samples"] <= 15 for r in doc["comparison"]["rows"])


def test_disturbed_run_says_so(cli, monkeypatch, model):
    Boundary(monkeypatch, disturbed=True)
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--candidate", "-t 1")
    assert result.exit_code == 0, result.output
    # the first round took the whole disturbance: the engine made it up with a sixth round, decided on the 5 quiet
    # ones (never on a disturbed one), and the estimate left it out, said so
    text = " ".join(result.stdout.split())
    assert "1 of 6 rounds disturbed by other processes were left out of the paired estimate" in text
    assert "pp16: 5 rounds behind the interval" in text and "6 rounds (A B, B A, …)" in text
    assert "disturbed (numbers alone" not in text and "slower" in text
    assert "disturbed: other processes used" in result.stdout and "stress (pid 7" in result.stdout


def test_save_then_compare_gives_before_after(cli, monkeypatch, model, tmp_path):
    Boundary(monkeypatch, speeds={"default": 100.0})
    saved = tmp_path / "before.json"
    first = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--save", str(saved))
    assert first.exit_code == 0, first.output
    assert json.loads(saved.read_text())["label"] == "before"
    boundary = Boundary(monkeypatch, speeds={"default": 120.0})
    second = cli("bench", "--model", str(model), "--compare", str(saved), "--json")
    assert second.exit_code == 0, second.output
    doc = json.loads(second.stdout)
    assert doc["schema"] == "tunehost-bench-compare/1"
    rows = doc["comparison"]["rows"]
    assert [r["verdict"] for r in rows] == ["faster", "faster"] and round(rows[0]["change_percent"]) == 20
    assert doc["comparison"]["interleaved"] is False
    # the saved run's -p/-n were reused
    assert boundary.fake.calls[0][boundary.fake.calls[0].index("-p") + 1] == "16"


def test_unknown_flag_is_one_line_exit_1_before_anything_runs(cli, monkeypatch, model):
    boundary = Boundary(monkeypatch)
    result = cli("bench", "--model", str(model), "--candidate", "-t 1 --bogus 3")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "tunehost: error: --candidate: this llama-bench has no option --bogus (see `llama-bench --help`)"]
    assert boundary.fake.calls == []


def test_controlled_option_is_refused(cli, monkeypatch, model):
    Boundary(monkeypatch)
    result = cli("bench", "--model", str(model), "--baseline", "-r 10")
    assert result.exit_code == 1 and "-r is set by tunehost; use tunehost's --reps" in result.stderr


def test_a_failing_llama_bench_is_one_clear_error(cli, monkeypatch, model):
    Boundary(monkeypatch)

    def broken(args, on_line):
        raise TunehostError("llama-bench failed (exit 1): main: error: failed to load model 'x.gguf'")

    monkeypatch.setattr(runner, "default_invoke", lambda binary, timeout_s: broken)
    result = cli("bench", "--model", str(model))
    assert result.exit_code == 1
    assert result.stderr.strip() == "tunehost: error: llama-bench failed (exit 1): main: error: failed to load model 'x.gguf'"


@pytest.mark.parametrize("args, message", [
    (["--candidate", "-t 1", "--advised"], "give one"),
    (["--import", "x.md", "--candidate", "-t 1"], "runs nothing"),
    ([], "--model PATH.gguf is required"),
])
def test_argument_conflicts(cli, monkeypatch, model, args, message):
    Boundary(monkeypatch)
    full = ["bench", *args] if "--import" in args or not args else ["bench", "--model", str(model), *args]
    result = cli(*full)
    assert result.exit_code == 1 and message in result.stderr


def test_missing_model_file(cli, monkeypatch, tmp_path):
    Boundary(monkeypatch)
    result = cli("bench", "--model", str(tmp_path / "absent.gguf"))
    assert result.exit_code == 1 and "absent.gguf: no such file" in result.stderr


def test_import_markdown_sweep_shows_every_config(cli, tmp_path):
    path = CORPUS / "llama-bench" / "md-cpu-thread-sweep-1-32-llama7b-q4_0.txt"
    saved = tmp_path / "imported.json"
    result = cli("bench", "--import", str(path), "--save", str(saved))
    assert result.exit_code == 0, result.output
    assert "n_threads=1" in result.stdout and "n_threads=8" in result.stdout and "mean only" in result.stdout
    assert json.loads(saved.read_text())["source"] == "imported"


def test_import_two_configs_compares_them_without_a_verdict_from_means(cli):
    path = CORPUS / "llama-bench" / "md-cuda-partial-moe-offload-ryzen5-3500-16gb-ddr4-2667-gtx1650s-4gb-qwen3-30b-a3b.txt"
    result = cli("bench", "--import", str(path))
    assert result.exit_code == 0, result.output
    assert "A = flash_attn=0 · B = flash_attn=1" in result.stdout and "n/a" in result.stdout
    assert "flash_attn=0  pp512     14.29    ± 0.05  mean only" in result.stdout  # llama-bench's own ± stddev
    assert "no per-repetition samples" in result.stdout


def test_import_json_then_compare_with_another_import(cli, tmp_path):
    off = CORPUS / "llama-bench" / "json-cpu-xeon-e5-2690v3-dual-deepseek-r1-671b-iq4kr4-fa-off.txt"
    on = CORPUS / "llama-bench" / "json-cpu-xeon-e5-2690v3-dual-deepseek-r1-671b-iq4kr4-fa-on.txt"
    saved = tmp_path / "off.json"
    assert cli("bench", "--import", str(off), "--save", str(saved)).exit_code == 0
    result = cli("bench", "--import", str(on), "--compare", str(saved), "--json")
    assert result.exit_code == 0, result.output
    rows = {r["test"]: r for r in json.loads(result.stdout)["comparison"]["rows"]}
    # one llama-bench run a side: its 5 repetitions cannot show run-to-run noise, so the +% gets no verdict
    assert rows["pp512"]["verdict"] == "no clear difference" and rows["pp512"]["n_baseline"] == 5
    assert rows["pp512"]["rounds"] == 1 and "fewer than 5: no verdict" in rows["pp512"]["note"]
    assert rows["pp512"]["change_percent"] > 10


def test_compare_with_a_foreign_file_is_one_error(cli, monkeypatch, model, tmp_path):
    Boundary(monkeypatch)
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    result = cli("bench", "--model", str(model), "--compare", str(other))
    assert result.exit_code == 1 and "is not a tunehost bench result" in result.stderr


def test_advised_candidate_comes_from_the_planner_mapping(cli, monkeypatch, model):
    Boundary(monkeypatch)
    seen = {}
    bench_flags = runner.bench_flags

    def mapped(launch, supported):
        seen["supported"] = supported
        return bench_flags(launch, supported)

    monkeypatch.setattr(ops_bench, "advised_launch",
                        lambda path, facts: LaunchConfig(str(path), flags_from([("-t", "1")])))
    monkeypatch.setattr(runner, "bench_flags", mapped)
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--advised", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["configs"][1]["flags"] == ["-t", "1"] and seen["supported"] == SUPPORTED


def test_a_bench_run_records_its_placement_as_a_calibration_point_for_advise(cli, monkeypatch, model):
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.store import host_calibration

    Boundary(monkeypatch, speeds={"default": 30.0})
    doc = {"path": "cpu", "layers": 32, "moe": False, "ram_dimm_gbps": None, "tokens_per_s": 50.0,
           "parts": [{"memory": "RAM", "bytes_per_token": 800_000_000, "gbps": 40.0}], "bandwidth_gbps": 40.0,
           "bytes_per_token": 800_000_000, "tg_ceiling_ts": 50.0}
    monkeypatch.setattr(runner, "tg_ceiling", lambda model, *args, **kwargs: doc)
    assert cli("bench", "--model", str(model), "-p", "16", "-n", "8").exit_code == 0
    fit = host_calibration(facts=HostFacts(open_host())).get("cpu")
    assert fit is not None and fit.runs == 1 and fit.points[0].tg_ts == pytest.approx(30.0, rel=0.05)
    assert fit.points[0].ram_bytes == 800_000_000 and fit.points[0].ram_gbps == 40.0
    shown = cli("advise", "--calibrate")
    assert "CPU dense: per-layer cost not determined" in shown.stdout and "GPU MoE" in shown.stdout


def test_piped_bench_prints_plain_progress_lines(cli, monkeypatch, model):
    Boundary(monkeypatch)
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--candidate", "-t 1")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("bench: ")]
    assert lines[0].startswith("bench: round 1 (") and lines[-1].startswith("bench: done: ")
    assert all(len(line) <= 80 for line in lines)
