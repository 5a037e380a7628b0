"""`history --drift`'s operation (tunehost.ops.drift) without the CLI: it takes the host's facts and the open
store, returns a DriftResult, records the drift run, never prints and never opens the host; and the one label of a
llama.cpp build (tunehost.facts.llama.build_label), whose missing None guard in drift's copy reported a build
change where there was none. The CLI's rendering of the same runs: tests/tune/test_tune_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunehost.bench import runner
from tunehost.bench.results import Invocation, SavedResult
from tunehost.facts import HostFacts
from tunehost.facts.llama import build_label
from tunehost.ops.drift import DriftRequest, measure_drift
from tunehost.store import NewRun, model_hash, open_store, records

IDENTITY = {"cpu": "Test CPU", "kernel": "6.8"}


@pytest.mark.parametrize(("number", "commit", "label"), [
    (4567, "0c1e570", "b4567 (0c1e570)"),
    (None, "0c1e570", "0c1e570"),  # drift's copy wrote "bNone (0c1e570)" here
    (4567, None, "b4567"),
    (4567, "", "b4567"),
    (0, "abc", "b0 (abc)"),
    (None, None, None),
    (None, "", None),
])
def test_the_build_label_with_a_part_unknown(number, commit, label):
    assert build_label(number, commit) == label


@pytest.fixture
def drift_setup(tmp_path, monkeypatch):
    """A store holding one tune of a model whose llama.cpp build was known only by its commit ("abc"), the host
    identity unchanged since, and llama-bench faked (runner.measure) as measuring the same speed again."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(4096))
    store = open_store(tmp_path / "results.sqlite3")
    store.record(NewRun(command="tune", host=IDENTITY, host_fp="fp", build=build_label(None, "abc"),
                        model_path=str(model), model_hash=model_hash(model), model_name="m.gguf", results=(),
                        summary={"winner_rounds": [10.0, 10.1, 9.9, 10.0, 10.05], "winner_flags": ["-t", "4"],
                                 "settings": {"objective": "tg", "n_gen": 16, "reps": 1}}))
    monkeypatch.setattr(records, "host_identity", lambda host=None: (dict(IDENTITY), "fp"))

    def no_open_host(*args, **kwargs):
        raise AssertionError("the operation opened the host")

    monkeypatch.setattr("tunehost.host.open_host", no_open_host)
    state: dict = {"llama_bench": {}, "calls": []}

    def measure(settings, configs, facts, hooks):  # runner.measure's inputs, as the calls' keywords
        [config] = configs
        kwargs = {"host": facts.host, "baseline": tuple(config.flags), "n_gen": settings.n_gen,
                  "label": settings.label}
        model_path = settings.model
        state["calls"].append(kwargs)
        rounds = tuple(Invocation("baseline", i, True, float(i), 1.0, ("llama-bench",), {"tg128": (v,)})
                       for i, v in enumerate((10.0, 9.95, 10.1, 10.0, 10.02), start=1))
        return SavedResult("measured", (), model={"path": str(model_path), "name": "m.gguf"},
                           llama_bench=state["llama_bench"], invocations=rounds, label=kwargs.get("label"))

    monkeypatch.setattr(runner, "measure", measure)
    yield model, store, state
    store.close()


@pytest.mark.parametrize(("llama_bench", "changed"), [
    ({"build_number": None, "build_commit": "abc"}, ()),  # before: "llama.cpp build abc -> bNone (abc)"
    ({"build_commit": "abc"}, ()),
    ({}, ()),  # llama-bench said nothing of its build now: no change can be told
    ({"build_number": 4567, "build_commit": "def"}, ("llama.cpp build abc -> b4567 (def)",)),
])
def test_drift_reports_a_build_change_only_when_the_build_changed(drift_setup, llama_bench, changed, capsys):
    model, store, state = drift_setup
    state["llama_bench"] = llama_bench
    host = object()  # what the CLI opened: handed on to the measurement, never opened again
    result = measure_drift(DriftRequest(model, model_hash(model), 30.0), facts=HostFacts(host), store=store)
    assert result.changed == changed
    assert result.verdict == "no clear change" and not result.slower and not result.not_judged
    [row] = result.rows
    assert (row.test, row.rounds_then, row.rounds_now, row.verdict) == ("tg", 5, 5, "no clear difference")
    [call] = state["calls"]
    assert call["host"] is host and call["baseline"] == ("-t", "4") and call["n_gen"] == 16
    [recorded] = store.runs(command="drift")
    assert recorded.id == result.run_id and recorded.summary["changed"] == list(changed)
    assert recorded.summary["since_run"] == result.since.id and recorded.summary["verdict"] == result.verdict
    assert recorded.build == build_label(llama_bench.get("build_number"), llama_bench.get("build_commit"))
    assert capsys.readouterr() == ("", "")  # an operation never prints


def test_drift_without_a_reference_is_one_error_and_measures_nothing(drift_setup, tmp_path):
    from tunehost.errors import TunehostError

    model, store, state = drift_setup
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + bytes(8192))
    with pytest.raises(TunehostError, match="no earlier run of this model"):
        measure_drift(DriftRequest(other, model_hash(other), 30.0), facts=HostFacts(None), store=store)
    assert state["calls"] == [] and store.runs(command="drift") == []
