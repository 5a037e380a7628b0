"""Saved results: the JSON schema round-trip, loading errors, before/after comparisons, importing every output form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CORPUS
from tunehost.bench import results
from tunehost.bench.results import ConfigResult, SavedResult, Side, TestSamples
from tunehost.bench.watch import WatchReport
from tunehost.errors import TunehostError

LLAMA_BENCH = CORPUS / "llama-bench"


def config(name: str, pp: list[float], tg: list[float], flags=()) -> ConfigResult:
    return ConfigResult(name=name, flags=tuple(flags), tests=(
        TestSamples("pp512", 512, 0, samples_ts=tuple(pp)), TestSamples("tg128", 0, 128, samples_ts=tuple(tg))))


def saved(pp: list[float], tg: list[float], *, label=None, watch=None, rounds: int = 0, **kw) -> SavedResult:
    """A measured result; ``rounds`` > 0 records each sample as one invocation (round) with one repetition."""
    base = dict(model={"name": "m.gguf", "sha256_head": "ab" * 32}, llama_bench={"build_commit": "0c1e570",
                "build_number": 11312}, host={"cpu_brand": "Test CPU"})
    if rounds:
        base["invocations"] = tuple(results.Invocation("baseline", i + 1, True, float(i), 1.0, ("-m", "x"),
                                                       {"pp512": (p,), "tg128": (t,)})
                                    for i, (p, t) in enumerate(zip(pp, tg)))
    base.update(kw)
    return SavedResult(source="measured", configs=(config("baseline", pp, tg),), label=label, watch=watch,
                       created="2026-01-01T00:00:00Z", **base)


QUIET = WatchReport(wall_s=10, cpu_count=2, other_cpu_cores=0.01, steal_share=0.0, swap_in_pages=0,
                    swap_out_pages=0, throttle_delta=None, temp_before_c=None, temp_max_c=None, temp_after_c=None)
BUSY = WatchReport(wall_s=10, cpu_count=2, other_cpu_cores=0.9, steal_share=0.0, swap_in_pages=0, swap_out_pages=0,
                   throttle_delta=None, temp_before_c=None, temp_max_c=None, temp_after_c=None,
                   busiest_others=(("stress", 7, 9.0),), reasons=("other processes used 0.90 of 2 CPUs",))


def test_json_round_trip_keeps_everything(tmp_path: Path):
    before = saved([100, 101, 99], [50, 50.5, 49.5], label="before", watch=BUSY,
                   ceiling={"tg_ceiling_ts": 80.0, "bandwidth_gbps": 40.0, "bytes_per_token": 5e8},
                   invocations=(results.Invocation("baseline", 1, True, 0.5, 2.0, ("-m", "x"), {"pp512": (100.0,)}),))
    path = results.save(before, tmp_path / "sub" / "before.json")
    loaded = results.load(path)
    assert loaded == before
    assert loaded.watch == BUSY and loaded.disturbed
    assert json.loads(path.read_text())["schema"] == "tunehost-bench/1"


def test_load_errors_are_one_line(tmp_path: Path):
    with pytest.raises(TunehostError, match="absent.json: no such file"):
        results.load(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(TunehostError, match="is truncated or malformed JSON"):
        results.load(bad)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"schema": "other/2"}))
    with pytest.raises(TunehostError, match="not a tunehost bench result"):
        results.load(foreign)
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps({"schema": results.SCHEMA, "configs": [{"name": "x", "tests": [{"test": "pp"}]}]}))
    with pytest.raises(TunehostError, match="damaged"):
        results.load(damaged)


def test_compare_saved_after_faster_than_before():
    before = saved([100, 101, 99, 100.5, 100.2], [50, 50.5, 49.5, 50, 50.2], label="before", watch=QUIET, rounds=5)
    after = saved([120, 121, 119, 120.5, 120.1], [50, 50.4, 49.6, 50.1, 49.9], label="after", watch=QUIET, rounds=5)
    comparison = results.compare_saved(before, after)
    rows = {r.kind: r for r in comparison.rows}
    assert rows["pp"].verdict == "faster" and round(rows["pp"].change_percent) == 20
    assert rows["pp"].rounds == 5 and rows["pp"].method == "unpaired rounds, Welch t interval"
    assert rows["tg"].verdict == "no clear difference"
    assert comparison.baseline == "before" and comparison.candidate == "after"  # a label equal to the side is not repeated
    assert not comparison.interleaved and any("not interleaved" in n for n in comparison.notes)
    assert str(comparison).startswith("after vs before: pp512 +20.0 % (faster)")


def test_compare_saved_with_a_disturbed_side_is_disturbed_and_says_why():
    before = saved([100, 101, 99, 100, 100.5], [50, 50.5, 49.5, 50, 50], watch=QUIET, rounds=5)
    after = saved([120, 121, 119, 120, 120.5], [50, 50.4, 49.6, 50, 50], watch=BUSY, rounds=5)
    comparison = results.compare_saved(before, after)
    assert {r.verdict for r in comparison.rows} == {"disturbed"}
    assert comparison.row("pp").statistical_verdict == "faster"
    assert any(n.startswith("after was disturbed: other processes") for n in comparison.notes)


def test_compare_saved_notes_what_differs():
    before = saved([100] * 3, [50] * 3)
    after = saved([100] * 3, [50] * 3, model={"name": "n.gguf", "sha256_head": "cd" * 32},
                  llama_bench={"build_commit": "abc", "build_number": 1}, host={"cpu_brand": "Other CPU"})
    notes = " | ".join(results.compare_saved(before, after).notes)
    assert "different model files" in notes and "different llama-bench builds" in notes and "different CPUs" in notes


def test_too_few_samples_give_no_verdict():
    comparison = results.compare_configs(Side(config("a", [100], [50])), Side(config("b", [200], [100])),
                                         interleaved=True)
    assert {r.verdict for r in comparison.rows} == {"no clear difference"}
    assert "fewer than 5" in comparison.rows[0].note


def test_repetitions_of_one_run_are_one_round_whatever_their_number():
    # before: 20 tight repetitions from ONE llama-bench run a side; pooled as independent they gave "faster"
    base, cand = config("a", [100.0 + i % 3 * 0.1 for i in range(20)], [50.0] * 20), \
        config("b", [104.0 + i % 3 * 0.1 for i in range(20)], [50.0] * 20)
    row = results.compare_configs(Side(base), Side(cand), interleaved=True).row("pp")
    assert row is not None and row.verdict == "no clear difference" and row.rounds == 1 and row.n_baseline == 20


def test_rows_carry_rounds_effective_samples_and_method_through_json():
    before = saved([100, 101, 99, 100, 100.5], [50, 50.5, 49.5, 50, 50], rounds=5)
    row = results.compare_saved(before, before).rows[0]
    again = results.TestComparison.from_json(json.loads(json.dumps(row.to_json())))
    assert (again.rounds, again.effective_samples, again.method) == (5, 5.0, row.method) and again.rounds == 5


def test_saved_result_str_is_one_readable_line():
    text = str(saved([100, 102, 98], [50, 50, 50], watch=BUSY))
    assert text == "pp512 100.0 t/s ±2.0 %, tg128 50.0 t/s ±0.0 % (median of 3, DISTURBED)"


@pytest.mark.parametrize("name, tests, samples", [
    ("csv-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt", ["pp512", "tg128"], 0),
    ("csv-cuda-i9-13900k-rtx3090ti-llama7b-q4_0-2023-old-schema.txt", ["pp512", "tg128"], 0),
    ("json-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt", ["pp512", "tg128"], 5),
    ("jsonl-cuda-ryzen7-7800x3d-rtx4080-qwen2.5-7b-q4km-2025.txt", ["pp512", "tg128"], 5),
    ("jsonl-rocm-strix-halo-radeon8060s-llama3.2-1b-with-stderr-banner.txt",
     ["pp512", "tg128", "pp512 @ d1024", "tg128 @ d1024", "pp512 @ d4096", "tg128 @ d4096"], 1),
])
def test_import_every_output_form(name, tests, samples):
    result = results.import_results(LLAMA_BENCH / name)
    assert result.source == "imported" and result.label == name
    assert [t.test for t in result.configs[0].tests] == tests
    assert all(len(t.samples_ts) == samples for t in result.configs[0].tests)
    assert result.llama_bench["build_number"] is not None


def test_import_groups_a_markdown_sweep_by_what_differs():
    result = results.import_results(LLAMA_BENCH / "md-cuda-partial-offload-ngl-sweep-10-35-llama7b-q4_0.txt")
    names = [c.name for c in result.configs]
    assert names[0] == "n_gpu_layers=10" and len(names) == len(set(names)) > 2
    assert result.configs[0].tests[0].avg_ts is not None and result.configs[0].tests[0].spread is not None


def test_import_of_a_saved_result_reads_it_as_is(tmp_path: Path):
    path = results.save(saved([1, 2, 3], [1, 2, 3]), tmp_path / "r.json")
    assert results.import_results(path).configs[0].name == "baseline"


def test_import_of_garbage_names_the_file(tmp_path: Path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\n")
    with pytest.raises(TunehostError, match="junk.txt: llama-bench output not recognised"):
        results.import_results(junk)


def test_a_round_without_positive_throughput_is_not_comparable_not_a_crash():
    base = config("a", [100.0, 101.0, 99.0], [50.0, 50.0, 50.0])
    broken = config("b", [0.0, 0.0, 0.0], [50.0, 50.0, 50.0])
    rounds = {"pp512": [(100.0,), (101.0,), (99.0,)], "tg128": [(50.0,)] * 3}
    comparison = results.compare_configs(
        Side(base, rounds=rounds), Side(broken, rounds={"pp512": [(0.0,)] * 3, "tg128": [(50.0,)] * 3}),
        interleaved=True)
    assert comparison.row("pp").verdict == "n/a" and "no positive throughput" in comparison.row("pp").note
    assert comparison.row("tg").verdict == "no clear difference"
