"""Hostile input to `tunehost bench` (issue 12), through the real CLI: --compare given a model or binary file,
--import of NaN/Infinity, JSON nested too deeply, a llama-bench reporting NaN/negative/inf t/s, files too large, and
numbers llama-bench cannot take. Each is one line on stderr and exit 1, no traceback, and nothing is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.bench.test_bench_cli import Boundary
from tests.conftest import CORPUS, write_tiny_gguf
from tunehost.bench.llama_bench import MAX_INPUT_BYTES, parse_output
from tunehost.errors import TunehostError

MD_HEADER = "| model | size | params | backend | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | --- | ---: |\n"


def one_line_exit_1(result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunehost: error: "), result.stderr
    return lines[0]


def files_under(directory: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


@pytest.mark.parametrize("kind, content, message", [
    ("model", None, "is a GGUF model file, not a saved tunehost bench result"),
    ("binary", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64, "is a binary file, not a saved tunehost bench result"),
    ("latin-1", b'{"schema": "tunehost-bench/1", "label": "caf\xe9"}', "is not UTF-8 text (byte 45)"),
    ("nan", json.dumps({"schema": "tunehost-bench/1", "configs": []}).replace("[]", "[NaN]").encode(),
     "NaN is not a number"),
    ("deep", b"[" * 100_000 + b"]" * 100_000, "is nested too deeply"),
    ("no-configs", json.dumps({"schema": "tunehost-bench/1", "configs": []}).encode(), "holds no configuration"),
    ("nan-sample", json.dumps({"schema": "tunehost-bench/1", "configs": [{"name": "a", "tests": [
        {"test": "pp8", "n_prompt": 8, "n_gen": 0, "samples_ts": ["nan"]}]}]}).encode(), "is a damaged tunehost"),
    ("watch-a-number", json.dumps({"schema": "tunehost-bench/1", "configs": [{"name": "a", "tests": []}],
                                   "watch": 5}).encode(), "is a damaged tunehost"),
])
def test_compare_with_a_file_that_is_no_saved_result(cli, monkeypatch, tmp_path, model, kind, content, message):
    Boundary(monkeypatch)
    saved = model if content is None else tmp_path / f"{kind}.json"
    if content is not None:
        saved.write_bytes(content)
    before = files_under(tmp_path)
    line = one_line_exit_1(cli("bench", "--model", str(model), "--compare", str(saved), "--save",
                               str(tmp_path / "out.json")))
    assert message in line
    assert files_under(tmp_path) == before  # nothing measured, nothing saved


def test_compare_and_import_with_a_directory_say_so(cli, tmp_path, model):
    assert "is a directory, not a saved" in one_line_exit_1(cli("bench", "-m", str(model), "--compare", str(tmp_path)))
    assert "is a directory, not llama-bench output" in one_line_exit_1(cli("bench", "--import", str(tmp_path)))
    assert "absent.md: no such file" in one_line_exit_1(cli("bench", "--import", str(tmp_path / "absent.md")))
    assert "--save" in one_line_exit_1(cli("bench", "-m", str(model), "--save", str(tmp_path)))


def test_an_unreadable_import_says_permission_denied(cli, tmp_path, monkeypatch):
    path = tmp_path / "secret.md"
    path.write_text(MD_HEADER)
    path.chmod(0)
    if os.geteuid() == 0:  # root reads a 0000 file: meet what a user meets
        real_open = os.open

        def denied(name, *args, **kwargs):
            if str(name) == str(path):
                raise PermissionError(13, "Permission denied", str(name))
            return real_open(name, *args, **kwargs)

        monkeypatch.setattr("os.open", denied)
    assert one_line_exit_1(cli("bench", "--import", str(path))) == f"tunehost: error: cannot read {path}: permission denied"


@pytest.mark.parametrize("name, text, message", [
    ("nan.json", '[{"n_prompt": 512, "n_gen": 0, "avg_ts": NaN, "stddev_ts": 0}]', "NaN is not a number"),
    ("inf.json", '[{"n_prompt": 512, "n_gen": 0, "avg_ts": Infinity}]', "Infinity is not a number"),
    ("huge.json", '[{"n_prompt": 512, "n_gen": 0, "avg_ts": 1e400}]', "reports avg_ts inf: not a positive"),
    ("negative.jsonl", '{"n_prompt": 512, "n_gen": 0, "avg_ts": -3.5}\n', "reports avg_ts -3.5: not a positive"),
    ("sample.jsonl", '{"n_prompt": 512, "n_gen": 0, "avg_ts": 3.5, "samples_ts": [3.5, 0]}\n',
     "reports a samples_ts value 0"),
    ("stddev.jsonl", '{"n_prompt": 512, "n_gen": 0, "avg_ts": 3.5, "stddev_ts": -1}\n', "reports a stddev of -1"),
    ("nan.md", MD_HEADER + "| llama 7B | 3.56 GiB | 6.74 B | CPU | 4 | pp512 | nan ± 0.1 |\n", "reports t/s nan"),
    ("negative.md", MD_HEADER + "| llama 7B | 3.56 GiB | 6.74 B | CPU | 4 | tg128 | -5.00 ± 0.1 |\n",
     "reports t/s -5.0"),
    ("inf.md", MD_HEADER + "| llama 7B | 3.56 GiB | 6.74 B | CPU | 4 | tg128 | 5.00 ± inf |\n",
     "reports a stddev of inf"),
    ("inf.csv", "build_commit,n_prompt,n_gen,avg_ts,stddev_ts\n\"abc\",\"0\",\"128\",\"inf\",\"0.1\"\n",
     "reports avg_ts inf"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("model.gguf", None, "is a GGUF model file, not llama-bench output"),
])
def test_import_of_impossible_values_is_one_line(cli, tmp_path, name, text, message):
    path = tmp_path / name
    if text is None:
        write_tiny_gguf(path)
    else:
        path.write_text(text)
    before = files_under(tmp_path)
    assert message in one_line_exit_1(cli("bench", "--import", str(path)))
    assert files_under(tmp_path) == before


def test_a_llama_bench_reporting_nan_is_one_line_not_a_verdict():
    line = '{"n_prompt": 0, "n_gen": 16, "avg_ts": 12.0, "samples_ts": [12.0, NaN]}'
    with pytest.raises(TunehostError, match="NaN is not a number"):
        parse_output(line)


def test_an_input_larger_than_any_llama_bench_output_is_refused_before_parsing(cli, tmp_path):
    path = tmp_path / "big.md"
    with open(path, "wb") as fh:
        fh.truncate(MAX_INPUT_BYTES + 1)  # sparse: no disk, no time
    assert "is larger than 16 MiB" in one_line_exit_1(cli("bench", "--import", str(path)))


@pytest.mark.parametrize("args, message", [
    (["-p", "-5"], "-p/--n-prompt must be between 0 and 2147483647 tokens (0 skips the test), not -5"),
    (["-p", str(10**12)], "-p/--n-prompt must be between 0 and 2147483647 tokens (0 skips the test), not 1000000000000"),
    (["-n", "-1"], "-n/--n-gen must be between 0 and 2147483647"),
    (["--depth", "-1"], "--depth must be between 0 and 2147483647 tokens, not -1"),
    (["-p", "2000000000", "-n", "2000000000"], "-p + -n + --depth must be at most 2147483647 tokens"),
    (["--reps", "0"], "--reps must be between 1 and 2147483647, not 0"),
    (["--budget", "nan"], "--budget must be a duration like 90, 90s, 2m, 1m30s or 1h (a bare number is seconds), "
                          "not 'nan'"),
    (["--budget", "inf"], "--budget must be a duration like 90, 90s, 2m, 1m30s or 1h"),
    (["--budget", "-5"], "--budget must be a duration like 90, 90s, 2m, 1m30s or 1h"),
    (["--budget", "2x"], "--budget must be a duration like 90, 90s, 2m, 1m30s or 1h"),
    (["--budget", "8d"], "--budget must be a duration like"),
    (["--budget", "169h"], "--budget must be at least 0 s and at most 168 h, not '169h'"),
])
def test_numbers_llama_bench_cannot_take_are_one_line(cli, monkeypatch, tmp_path, model, args, message):
    Boundary(monkeypatch)
    line = one_line_exit_1(cli("bench", "--model", str(model), *args))
    assert line.startswith(f"tunehost: error: {message}")
    assert "both 0" not in line


def test_a_sweep_of_many_configurations_imports(cli, tmp_path):
    """Every row its own configuration (the shape that was quadratic): all of them come back, named by what differs."""
    rows = "".join(f"| llama 7B | 3.56 GiB | 6.74 B | CPU | {t} | pp64 | {t}.5 ± 0.1 |\n" for t in range(1, 3001))
    path = tmp_path / "sweep.md"
    path.write_text(MD_HEADER + rows)
    result = cli("bench", "--import", str(path), "--json")
    assert result.exit_code == 0, result.output
    names = [c["name"] for c in json.loads(result.stdout)["configs"]]
    assert len(names) == 3000 and names[0] == "n_threads=1" and names[-1] == "n_threads=3000"


def test_the_real_thread_sweep_still_names_its_configs(cli):
    path = CORPUS / "llama-bench" / "md-cpu-thread-sweep-1-32-llama7b-q4_0.txt"
    doc = json.loads(cli("bench", "--import", str(path), "--json").stdout)
    assert [c["name"] for c in doc["configs"]] == [f"n_threads={t}" for t in (1, 2, 4, 8, 16, 32)]
