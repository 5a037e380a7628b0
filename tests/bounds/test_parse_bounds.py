"""Issue 22, classes 1, 4 and 9: parsers are linear on hostile text, GGUF shapes llama.cpp never writes are refused in
bounded time and memory (a duplicated key named as such), and numbers from outside are held to physical bounds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, nested_arrays_kv, string_kv, within, write_raw_gguf
from tests.fuzz.test_parsers import PARSERS
from tunehost.bench.llama_bench import parse_output
from tunehost.bounds import MAX_TOKENS, MAX_TOKENS_PER_S
from tunehost.errors import TunehostError
from tunehost.facts.gpu import link_gen, parse_pp_dpm_pcie
from tunehost.model import read_model

TEXT_PARSERS = {**{name: parse for name, (parse, _) in PARSERS.items()}, "link_gen": link_gen,
                "pp_dpm_pcie": parse_pp_dpm_pcie, "llama_bench_output": parse_output}
# the runs that made regexes quadratic: digits (max_link_speed), word letters (sensors limits), blanks (tlp.conf)
UNITS = ["1", "9.", "a", " ", "\t", "a=", "=1", "x: ", "1 ", "<a>", "|", "pp", "@", "GT/s", "-"]
PREFIXES = ["", "A=x", "chip-isa-0\ntemp1: +3 C (", "Speed: ", "    ", "| model | test | t/s |\n| pp", "0: "]


@settings(max_examples=40)
@example("link_gen", "", "1", 200_000)  # the issue's examples, always tried: each took seconds to minutes before
@example("sensors", "chip-isa-0\ntemp1: +3 C (", "a", 20_000)
@example("tlp_conf", "A=x", " ", 20_000)
@given(st.sampled_from(sorted(TEXT_PARSERS)), st.sampled_from(PREFIXES), st.sampled_from(UNITS),
       st.integers(1_000, 200_000))
def test_a_parser_is_linear_on_a_long_run(name: str, prefix: str, unit: str, size: int) -> None:
    """200 KB of one repeated unit: ~10 ms of work for a linear parser (a quadratic one took 5-15 s at 20 KB)."""
    text = prefix + unit * (size // len(unit))
    with within(f"{name} on {size} chars", seconds=2.0, peak_bytes=64 * MiB):
        try:
            TEXT_PARSERS[name](text)
        except TunehostError:
            pass  # llama-bench output that is not output: one line, which is what it should be


def test_a_200_kb_link_speed_is_unknown_not_minutes() -> None:
    with within("max_link_speed of 200 KB", seconds=1.0, peak_bytes=8 * MiB):
        assert link_gen("1" * 200_000) is None
    assert link_gen("16.0 GT/s PCIe") == 4 and link_gen("8 GT/s") == 3 and link_gen("100016.0 GT/s") is None


@pytest.fixture(autouse=True, scope="module")
def _reader_loaded() -> None:
    """gguf and numpy imported once, outside the measured blocks (their import is not what is bounded)."""
    from tunehost.model import _header_reader_class

    _header_reader_class()


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([0, 1, 1000, 1_000_000]), st.sampled_from(["tokenizer.ggml.merges", "general.x"]))
def test_an_array_of_arrays_is_refused_before_it_is_read(tmp_path_factory, count: int, key: str) -> None:
    """gguf.cpp refuses nested arrays ("invalid GGUF type"): so does tunehost, without reading a million of them
    (40-55 s and a few hundred MB before)."""
    path = write_raw_gguf(tmp_path_factory.mktemp("gguf") / "nested.gguf",
                          [string_kv("general.architecture", "llama"), nested_arrays_kv(key, count)])
    with within(f"{count} nested arrays", seconds=2.0, peak_bytes=32 * MiB):
        with pytest.raises(TunehostError, match=rf"array of {count} arrays, a shape llama.cpp refuses"):
            read_model(path)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["general.architecture", "general.name", "llama.block_count"]), st.integers(0, 3))
def test_a_duplicated_key_is_named_not_called_corrupt(tmp_path_factory, key: str, filler: int) -> None:
    kvs = [string_kv("general.architecture", "llama")] + [string_kv(f"general.f{i}", "x") for i in range(filler)]
    kvs += [string_kv(key, "a"), string_kv(key, "b")] if key != "general.architecture" else [kvs[0]]
    path = write_raw_gguf(tmp_path_factory.mktemp("gguf") / "dup.gguf", kvs)
    with within("duplicated key", seconds=2.0, peak_bytes=32 * MiB):
        with pytest.raises(TunehostError) as caught:
            read_model(path)
    message = str(caught.value)
    assert f"metadata key '{key}' appears twice" in message and "corrupt" not in message and "fetch" not in message


# --- class 4: numbers from outside ---------------------------------------------------------------------------------

RATES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e308, -1.0, 0.0, 1e9, 1e9 + 1]),
                  st.integers(-(10**30), 10**30))
COUNTS = st.one_of(st.integers(-(2**63), 2**63), st.sampled_from([-512, -1, 0, MAX_TOKENS, MAX_TOKENS + 1]))


@given(RATES, st.lists(RATES, max_size=5), COUNTS, COUNTS)
def test_absurd_llama_bench_numbers_are_one_line(avg: float, samples: list, n_prompt: int, n_gen: int) -> None:
    """A JSONL record from a live llama-bench or `bench --import`: within bounds it is a result whose statistics are
    finite, outside it is one TunehostError line (1e308 ended in an OverflowError traceback in the mean)."""
    from tunehost.bench.results import result_from_bench_results

    record = {"n_prompt": n_prompt, "n_gen": n_gen, "avg_ts": avg, "stddev_ts": 0.0, "samples_ts": samples}
    try:
        text = json.dumps(record, allow_nan=True)
    except (ValueError, OverflowError):
        return
    with within("absurd numbers", seconds=2.0, peak_bytes=16 * MiB):
        try:
            [result] = parse_output(text)
        except TunehostError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400
            return
        saved = result_from_bench_results([result], source="imported")
        for test in saved.configs[0].tests:
            assert math.isfinite(test.centre) and (test.spread is None or math.isfinite(test.spread))
    assert 0 < result.avg_ts <= MAX_TOKENS_PER_S and all(0 < s <= MAX_TOKENS_PER_S for s in result.samples_ts)
    assert 0 <= result.n_prompt <= MAX_TOKENS and 0 <= result.n_gen <= MAX_TOKENS


def test_the_issue_examples(tmp_path: Path, cli) -> None:
    big = tmp_path / "big.jsonl"
    big.write_text('{"n_prompt":512,"n_gen":0,"avg_ts":5,"samples_ts":[1e308,1e308]}\n')
    neg = tmp_path / "neg.jsonl"
    neg.write_text('{"n_prompt":-512,"n_gen":0,"avg_ts":5,"samples_ts":[5,5]}\n')
    for path, why in ((big, "a samples_ts value 1e+308: not a positive finite number up to 1e+09"),
                      (neg, "n_prompt -512: not a token count")):
        result = cli("bench", "--import", str(path))
        assert result.exit_code == 1 and why in result.stderr and "Traceback" not in result.output
