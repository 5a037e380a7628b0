"""Issue 32, the results store read as hostile input (items 4, 5, 6, 11, 12, 13 and the store link of 15): every row
is read through one validating layer (tunehost.store.rows) that leaves a bad row out with its reason; a store's
size never reaches memory whole; a bench's measurement is shown and saved before the store is touched, so a store
that fails after it is one warning line; JSON out is strict; a store file that is a link is refused."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, within
from tunehost.bounds import json_text, strict_json
from tunehost.errors import TunehostError

# the schema's tables with no types or NOT NULL enforced: what a hand-edited or foreign store may hold
LOOSE = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, created, command, host_fp, host_json, build, model_path,
                   model_hash, model_name, label, summary_json);
CREATE INDEX runs_model ON runs (model_hash, created);
CREATE TABLE results (run_id, config, config_key, flags_json, test, kind, median_ts, rounds,
                      PRIMARY KEY (run_id, config, test));
CREATE TABLE rounds (run_id, seq, stage, round, counted, disturbed, watch_json, PRIMARY KEY (run_id, seq));
CREATE TABLE tune_steps (tune_key, seq, argv_json, duration_s, outcome_json, PRIMARY KEY (tune_key, seq));
INSERT INTO meta VALUES ('schema', '2');
"""
GOOD_SUMMARY = {"rounds": 5, "verdicts": {"tg8": "faster"}, "disturbed": False, "best": "baseline",
                "settings": {"n_prompt": 0, "n_gen": 8, "n_depth": 0, "reps": 1},
                "rounds_ts": {"baseline": {"tg8": [10.0, 10.5, 9.5]}}}
RUN_COLUMNS = ("created", "command", "host_fp", "host_json", "build", "model_path", "model_hash", "model_name",
               "label", "summary_json")
RESULT_COLUMNS = ("config", "config_key", "flags_json", "test", "kind", "median_ts", "rounds")
HOSTILE = [None, "text", 7, -1, 1.5, math.inf, -math.inf, 1e308, -1e308, 2 ** 63 - 1, b"\x00\xff", "[1, 2]", "7",
           "null", '{"a": Infinity}', '{"a": 1e999}', '{"a": NaN}', '{"verdicts": [1]}', '{"verdicts": {"t": 5}}',
           '{"settings": {"n_prompt": "x"}}', '{"settings": 3}', '{"confirmation": 5, "improved": true}',
           '{"rounds_ts": {"baseline": {"tg8": ["fast", 1e999]}}}', '{"rows": [1, {"test": []}], "changed": "x"}',
           '{"winner_rounds": [-1], "winner_flags": [4]}', '{"ceiling": [], "ceiling_config": 3}', "[" * 5000,
           '["-t", 4]', '{"-t": 4}', "x" * 5000, "{}"]


def _fingerprint() -> str:
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.store.records import host_identity

    return host_identity(HostFacts(open_host()))[1]


@pytest.fixture(scope="module")
def fingerprint() -> str:
    return _fingerprint()


def loose_store(state: Path, fingerprint: str, runs: int = 2) -> sqlite3.Connection:
    """A store of ``runs`` good runs of this host (two configurations each), in the loose schema."""
    state.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(state / "results.sqlite3")
    db.executescript(LOOSE)
    for i in range(runs):
        db.execute("INSERT INTO runs VALUES (NULL, ?, 'bench', ?, '{}', 'b1 (abc)', '/m/x.gguf', 'h', 'x.gguf', NULL,"
                   " ?)", (f"2026-01-0{i + 1}T00:00:00Z", fingerprint, json.dumps(GOOD_SUMMARY)))
        for config, flags in (("baseline", []), ("candidate", ["-t", "1"])):
            db.execute("INSERT INTO results VALUES (?, ?, ?, ?, 'tg8', 'tg', 10.0, 5)",
                       (i + 1, config, f"k{config}", json.dumps(flags)))
    db.commit()
    return db


def invoke(state: Path, *args: str):
    from typer.testing import CliRunner

    from tunehost.cli import app

    return CliRunner().invoke(app, list(args), env={"TUNEHOST_STATE_DIR": str(state), "COLUMNS": "80"})


def strict(text: str) -> object:
    return strict_json(text)  # ValueError for NaN, Infinity, 1e999


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(table="results", column="median_ts", value=math.inf)  # the issue's: the chart crashed, --json printed
@example(table="results", column="median_ts", value=-1e308)  # Infinity
@example(table="runs", column="summary_json", value="[1, 2]")  # a summary that is not an object
@example(table="results", column="flags_json", value="[1, null, {}]")  # flags that are not text
@example(table="runs", column="summary_json", value='{"a": Infinity}')
@example(table="runs", column="created", value=12345)
@given(table=st.sampled_from(["runs", "results"]), column=st.sampled_from(RUN_COLUMNS + RESULT_COLUMNS),
       value=st.sampled_from(HOSTILE))
def test_a_hostile_row_is_one_skipped_row_in_every_reader(tmp_path_factory, fingerprint, table, column, value):
    """history, history --json, advise --calibrate and doctor read a store with one hostile value: exit 0, no
    traceback, strict JSON, the good run still listed, and the bad row either valid or left out with its reason."""
    if (column in RUN_COLUMNS) != (table == "runs"):
        column = RUN_COLUMNS[hash(column) % len(RUN_COLUMNS)] if table == "runs" else \
            RESULT_COLUMNS[hash(column) % len(RESULT_COLUMNS)]
    state = tmp_path_factory.mktemp("hostile") / "state"
    db = loose_store(state, fingerprint)
    where = "id = 2" if table == "runs" else "run_id = 2 AND config = 'baseline'"
    db.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (value,))
    db.commit()
    db.close()
    with within(f"{table}.{column} = {value!r:.40}", seconds=30.0, peak_bytes=256 * MiB):
        listed = invoke(state, "history", "--json")
        text = invoke(state, "history")
        calibrate = invoke(state, "advise", "--calibrate")
        doctor = invoke(state, "doctor", "--check", "speed-drift")
    for result in (listed, text, calibrate, doctor):
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    document = strict(listed.stdout)
    ids = [run["id"] for run in document["runs"]]
    assert 1 in ids  # the good run is read whatever its neighbour holds
    if 2 not in ids or len(document["runs"][0]["results"]) < 2:
        assert any(line.startswith("run 2") for line in document["runs_skipped"]), document["runs_skipped"]
        assert "left out" in text.stderr  # said once, on one line
        assert text.stderr.count("warning:") == 1
    assert all("\n" not in line and "\x1b" not in line for line in document["runs_skipped"])


@pytest.mark.parametrize("median", [math.inf, -math.inf, 1e308, -1e308, float("nan"), 1e10])
def test_an_impossible_median_is_left_out_of_the_chart_and_json(tmp_path, fingerprint, median):
    state = tmp_path / "state"
    db = loose_store(state, fingerprint, runs=3)
    db.execute("UPDATE results SET median_ts = ? WHERE run_id = 2", (median,))
    db.commit()
    db.close()
    text = invoke(state, "history")
    assert text.exit_code == 0 and "TG over time" in text.stdout, text.output
    listed = invoke(state, "history", "--json")
    assert listed.exit_code == 0 and "Infinity" not in listed.stdout and "NaN" not in listed.stdout
    document = strict(listed.stdout)
    assert [len(r["results"]) for r in document["runs"]] == [2, 0, 2]


def test_json_out_is_strict_whatever_a_summary_holds(tmp_path, fingerprint):
    """Values a strict JSON reader refuses never reach a run's summary, nor any document tunehost writes."""
    state = tmp_path / "state"
    db = loose_store(state, fingerprint)
    db.execute("UPDATE runs SET summary_json = ? WHERE id = 1", ('{"rounds": 5, "extra": 1e999}',))
    db.execute("UPDATE runs SET summary_json = ? WHERE id = 2", ('{"rounds": 5, "extra": [NaN, -Infinity]}',))
    db.commit()
    db.close()
    listed = invoke(state, "history", "--json")
    document = strict(listed.stdout)
    assert document["runs"] == [] and len(document["runs_skipped"]) == 2
    assert "not strict JSON" in document["runs_skipped"][0]


@given(st.recursive(st.floats() | st.integers() | st.text(max_size=5) | st.none(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                                 max_size=4), max_leaves=20))
def test_the_json_writer_never_writes_nan_or_infinity(value):
    text = json_text(value, indent=2)
    assert strict_json(text) is not None or text == "null"


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "1e999", "[-1e400]",
                                  "[" * 10_000 + "]" * 10_000, "[" * 65 + "]" * 65])
def test_strict_json_refuses_what_other_readers_refuse(text):
    with pytest.raises(ValueError):
        strict_json(text)


# ---------------------------------------------------------------- item 5: memory


def test_large_summaries_never_reach_memory_whole(tmp_path, fingerprint, monkeypatch):
    """30 runs with summaries just under the read cap and 10 far over it: history's listing keeps what it shows,
    doctor's sample one run at a time, an oversized summary is never read (main peaked at ~30 MB a 4 MB summary)."""
    from tunehost.ops.history import list_runs
    from tunehost.store import doctor_sample, open_store
    from tunehost.store.rows import MAX_SUMMARY_READ

    state = tmp_path / "state"
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(state))
    db = loose_store(state, fingerprint, runs=0)
    under = json.dumps({**GOOD_SUMMARY, "pad": [1.25] * ((MAX_SUMMARY_READ - 400) // 6)})
    over = json.dumps({**GOOD_SUMMARY, "pad": [1.25] * (4 * 1024 * 1024 // 6 - 100)})
    assert len(under) <= MAX_SUMMARY_READ < len(over)
    for i in range(40):
        db.execute("INSERT INTO runs VALUES (NULL, ?, 'bench', ?, '{}', 'b1', '/m.gguf', 'h', 'x.gguf', NULL, ?)",
                   (f"2026-01-01T00:00:{i:02d}Z", fingerprint, under if i % 4 else over))
        db.execute("INSERT INTO results VALUES (?, 'baseline', 'k', '[]', 'tg8', 'tg', 10.0, 5)", (i + 1,))
    db.commit()
    db.close()
    with open_store() as store:
        with within("history's listing of 30 runs", seconds=40.0, peak_bytes=24 * MiB):
            listing = list_runs(store, limit=30)
    assert len(listing.runs) + len(listing.skipped) == 30
    assert all(set(r.summary) <= {"rounds", "verdicts", "disturbed", "best"} for r in listing.runs)
    assert all("beyond the 256 KiB a read takes" in line for line in listing.skipped)
    with within("doctor's sample of 40 runs", seconds=40.0, peak_bytes=24 * MiB):
        sample = doctor_sample(limit=200)
    assert len(sample["runs"]) == 30 and len(sample["rows_left_out"]) == 10
    text = invoke(state, "history", "--json", "--limit", "40")
    assert len(strict(text.stdout)["runs"]) == 30


# ---------------------------------------------------------------- item 4: many configurations


def test_a_run_of_many_configurations_is_listed_once_each_in_order(tmp_path, fingerprint):
    from io import StringIO

    from rich.console import Console

    from tunehost.cli.history import render_runs
    from tunehost.store import open_store

    state = tmp_path / "state"
    db = loose_store(state, fingerprint, runs=1)
    db.executemany("INSERT INTO results VALUES (1, ?, ?, ?, ?, ?, ?, 3)",
                   [(f"c{i}", f"k{i}", json.dumps(["-t", str(i)]), test, test[:2], 10.0 + i % 7)
                    for i in range(3000) for test in ("tg8", "pp16")])
    db.commit()
    db.close()
    with open_store(state / "results.sqlite3") as store:
        runs = store.runs()
    out = StringIO()
    render_runs(runs, Console(file=out, width=80))
    lines = [line for line in out.getvalue().splitlines() if line.lstrip()[:2] in {f"c{d}" for d in range(10)}]
    assert len(lines) == 3000 and lines[0].split()[0] == "c0" and lines[-1].split()[0] == "c2999"
    assert "TG 11.00  PP 11.00 t/s" in lines[1]


# ---------------------------------------------------------------- item 13: a resumed tune and --drift


@pytest.mark.parametrize("row", [
    ("zero", '["-m"]', 1.0, "{}"), (0, "7", 1.0, "{}"), (0, '["-m", 4]', 1.0, "{}"), (0, '["-m"]', "slow", "{}"),
    (0, '["-m"]', math.inf, "{}"), (0, '["-m"]', 1.0, "[1]"), (0, '["-m"]', 1.0, None), (0, None, None, None),
    (0, '["-m"]', 1.0, '{"results": 5}')])
def test_a_resumed_tune_replays_only_sound_steps(tmp_path, row):
    """A journal row of the wrong types or shapes stops the replay there with its reason (measured afresh)."""
    from tunehost.ops.tune import _StoreJournal
    from tunehost.store import open_store
    from tunehost.tune.race import Measurer

    state = tmp_path / "state"
    db = loose_store(state, "fp", runs=0)
    db.execute("INSERT INTO tune_steps VALUES ('k-1', ?, ?, ?, ?)", row)
    db.commit()
    db.close()
    calls: list[list[str]] = []
    with open_store(state / "results.sqlite3") as store:
        journal = _StoreJournal(store, "k-1")
        measurer = Measurer(lambda args: calls.append(list(args)) or [], journal, clock=lambda: 0.0, budget_s=60.0)
        measurer.run(["-m"])
    assert calls == [["-m"]]  # measured, not replayed, not a traceback
    assert measurer.reused_steps == 0
    if row[3] != '{"results": 5}':
        assert measurer.journal_note is not None and "measuring afresh" in measurer.journal_note


def test_drift_reads_its_reference_through_the_validated_shapes(tmp_path, fingerprint):
    """A reference whose settings or per-round values are of the wrong shape is no reference (the next is)."""
    from tunehost.ops.drift import last_best
    from tunehost.store import open_store

    state = tmp_path / "state"
    db = loose_store(state, fingerprint)
    db.execute("UPDATE runs SET summary_json = ? WHERE id = 2",
               (json.dumps({**GOOD_SUMMARY, "settings": {"n_prompt": "many"}}),))
    db.commit()
    db.close()
    with open_store(state / "results.sqlite3") as store:
        runs, skipped = store.run_rows(model_hash="h")
    reference = last_best(runs)
    assert reference is not None and reference.run.id == 1
    assert skipped == ["run 2 left out: summary's settings {'n_prompt': 'many'} is not an object of whole numbers"]


# ---------------------------------------------------------------- item 6: never lose a measurement to the store


def _spoil_damaged(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"SQLite format 3\x00" + b"\x01" * 4096)


def _spoil_future(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.commit()
    db.close()


HELD: list[sqlite3.Connection] = []


def _spoil_locked(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    HELD.append(db)


@pytest.mark.parametrize("spoil", [_spoil_damaged, _spoil_future, _spoil_locked])
def test_a_store_failing_after_the_measurement_is_a_warning_after_the_result(tmp_path, monkeypatch, spoil):
    """The store is good when bench starts (checked first) and goes bad while it measures: the result is shown
    and saved, the store's failure is one warning line after it, exit 0."""
    from tests.bench.test_bench_cli import Boundary
    from tests.conftest import write_tiny_gguf
    from tunehost.bench import runner
    from tunehost.store import repository

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    state = tmp_path / "state"
    monkeypatch.setattr(repository, "BUSY_TIMEOUT_S", 0.2)
    Boundary(monkeypatch)
    ceiling = runner.tg_ceiling

    def spoiling(*args, **kwargs):  # runs while measuring, after the store was checked
        spoil(state / "results.sqlite3")
        return ceiling(*args, **kwargs)

    monkeypatch.setattr(runner, "tg_ceiling", spoiling)
    save = tmp_path / "out.json"
    try:
        result = invoke(state, "bench", "--model", str(model), "-p", "16", "-n", "8", "--save", str(save))
    finally:
        while HELD:
            HELD.pop().close()
    assert result.exit_code == 0, result.output
    assert "tg8" in result.stdout and "saved to" in result.stdout and json.loads(save.read_text())["configs"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: not recorded")]
    assert len(warnings) == 1 and "results store" in warnings[0], result.stderr


@pytest.mark.parametrize("spoil", [_spoil_damaged, _spoil_future])
def test_a_bad_store_is_refused_before_measuring(tmp_path, monkeypatch, spoil):
    """As tune does: a damaged or newer store is one error line before llama-bench runs (nothing measured)."""
    from tests.bench.test_bench_cli import Boundary
    from tests.conftest import write_tiny_gguf
    from tunehost.store import open_store

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    state = tmp_path / "state"
    state.mkdir()
    open_store(state / "results.sqlite3").close()
    spoil(state / "results.sqlite3")
    from tunehost.bench import runner

    Boundary(monkeypatch)
    measured: list[object] = []
    monkeypatch.setattr(runner, "measure", lambda *args, **kwargs: measured.append(args))
    result = invoke(state, "bench", "--model", str(model), "-p", "16", "-n", "8")
    assert result.exit_code == 1 and "results store" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and measured == []


# ---------------------------------------------------------------- item 15: the store file as a link


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
@pytest.mark.parametrize("dangling", [True, False])
def test_a_store_file_that_is_a_link_is_refused(tmp_path, suffix, dangling):
    from tunehost.store import open_store

    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    target = elsewhere / f"results.sqlite3{suffix}"
    if not dangling:
        target.write_bytes(b"")
    (state / f"results.sqlite3{suffix}").symlink_to(target)
    with pytest.raises(TunehostError, match="is a symbolic link") as caught:
        open_store(state / "results.sqlite3")
    assert "\n" not in str(caught.value)
    assert sorted(p.name for p in elsewhere.iterdir()) == ([] if dangling else [target.name])
    result = invoke(state, "history")
    assert result.exit_code == 1 and "symbolic link" in result.output and "Traceback" not in result.output


def test_tunehost_never_writes_a_document_its_reader_would_leave_out(tmp_path):
    """The writer's limit per document is the reader's cap: a summary over it is not recorded (one line, and
    record_run's warning), never a row every later read skips."""
    from tests.store.test_rounds import new_run
    from tunehost.store import open_store
    from tunehost.store.records import record_run
    from tunehost.store.rows import MAX_SUMMARY_READ

    big = {"pad": "x" * MAX_SUMMARY_READ}
    with open_store(tmp_path / "r.sqlite3") as store:
        with pytest.raises(TunehostError, match="not recorded"):
            store.record(new_run(()).__class__(**{**new_run(()).__dict__, "summary": big}))
        assert store.runs() == []
    run_id, warnings = record_run(lambda: new_run(()).__class__(**{**new_run(()).__dict__, "summary": big}))
    assert run_id is None and len(warnings) == 1 and warnings[0].startswith("not recorded in the results store")


@pytest.mark.parametrize("spoil", [_spoil_damaged, _spoil_future, _spoil_locked])
def test_a_server_bench_keeps_its_measurement_when_the_store_fails_after_it(tmp_path, monkeypatch, spoil):
    """The server bench: measured, saved and shown (--json), then one warning line for the store, exit 0."""
    from tests.bench.fake_server import FakeLlamaServer
    from tunehost.bench.server import rounds
    from tunehost.store import repository

    state = tmp_path / "state"
    monkeypatch.setattr(repository, "BUSY_TIMEOUT_S", 0.2)
    real = rounds.measure_server

    def spoiling(*args, **kwargs):  # the store was checked before; it goes bad while the server is measured
        spoil(state / "results.sqlite3")
        return real(*args, **kwargs)

    monkeypatch.setattr(rounds, "measure_server", spoiling)
    save = tmp_path / "server.json"
    try:
        with FakeLlamaServer() as fake:
            result = invoke(state, "bench", "--server", fake.url, "--depths", "32", "--budget", "0", "-n", "8",
                            "--save", str(save), "--json")
    finally:
        while HELD:
            HELD.pop().close()
    assert result.exit_code == 0, result.output
    assert strict(result.stdout) == json.loads(save.read_text())
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: not recorded")]
    assert len(warnings) == 1 and "Traceback" not in result.output, result.stderr


@pytest.fixture
def tune_boundary(monkeypatch, tmp_path):
    """tests/tune/test_tune_cli.py's boundary: a simulated llama-bench, host view and identity."""
    from tests.tune import test_tune_cli

    return test_tune_cli.boundary.__wrapped__(monkeypatch, tmp_path)


def test_a_tune_keeps_its_result_when_the_store_stays_locked_after_the_race(cli, tmp_path, monkeypatch,
                                                                              tune_boundary):
    """tune checks the store first; one locked past the busy timeout by the time the race is over costs the
    record (one warning after the result, exit 0), never the tune."""
    from tests.advise.conftest import dense_tensors, write_gguf
    from tunehost.ops import tune as tune_op
    from tunehost.store import repository, store_path

    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    monkeypatch.setattr(repository, "BUSY_TIMEOUT_S", 0.2)
    real = tune_op._record

    def locked_then_record(*args, **kwargs):
        _spoil_locked(store_path())
        return real(*args, **kwargs)

    monkeypatch.setattr(tune_op, "_record", locked_then_record)
    try:
        result = cli("tune", "--model", str(model), "--budget", "2h", "-n", "16")
    finally:
        while HELD:
            HELD.pop().close()
    assert result.exit_code == 0, result.output
    assert "-t 4: +" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if "not recorded in the results store" in line]
    assert len(warnings) == 1 and "locked" in warnings[0], result.stderr


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([1e308, -1e308, 0.0, 5e-324]),
                min_size=2, max_size=6))
def test_the_chart_draws_any_medians_it_is_given(medians):
    """The chart's arithmetic holds for whatever a run carries (the store's reader admits only finite t/s; a run
    built elsewhere may not): ±1e308 spans, infinities and NaN are never a traceback."""
    from io import StringIO

    from rich.console import Console

    from tunehost.cli.history import render_chart
    from tunehost.store import StoredResult, StoredRun

    runs = [StoredRun(id=i + 1, created=f"2026-01-0{i + 1}T00:00:00Z", command="bench", host_fp="fp", host={},
                      build=None, model_path="/m.gguf", model_hash="h", model_name="m", label=None, summary={},
                      results=(StoredResult("baseline", "k", (), "tg8", "tg", m, 3),)) for i, m in enumerate(medians)]
    out = StringIO()
    render_chart(runs, Console(file=out, width=80))
    assert "TG over time" in out.getvalue()
