"""The results store: WAL, transactions, concurrent writers, a damaged file, a read-only state directory."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from tunehost.errors import TunehostError
from tunehost.facts import HostFacts
from tunehost.store import (
    NewRun, StoredResult, StoreUnavailable, config_key, model_hash, open_for_recording, open_store, store_dir,
    store_path,
)


def _run(i: int, *, model: str = "m.gguf", command: str = "bench", tg: float = 10.0) -> NewRun:
    flags = ("-t", str(1 + i % 2))
    return NewRun(command=command, host={"cpu": "x"}, host_fp="fp1", build="b1 (abc)", model_path=model,
                  model_hash="h-" + model, model_name="tiny", summary={"i": i},
                  results=(StoredResult("baseline", config_key(flags), flags, "tg8", "tg", tg + i, 5),
                           StoredResult("baseline", config_key(flags), flags, "pp16", "pp", 100.0, 5)))


def test_where_the_store_lives(tmp_path):
    assert store_dir({"TUNEHOST_STATE_DIR": str(tmp_path)}) == tmp_path
    assert str(store_dir({"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"})) == "/x/state/tunehost"
    assert str(store_dir({"HOME": "/home/u"})) == "/home/u/.local/state/tunehost"
    assert store_path({"TUNEHOST_STATE_DIR": str(tmp_path)}).name == "results.sqlite3"
    # a relative state dir is named absolute in every message; a relative XDG_STATE_HOME is invalid (XDG spec)
    assert store_dir({"TUNEHOST_STATE_DIR": "rel/dir"}) == Path.cwd() / "rel" / "dir"
    assert str(store_dir({"XDG_STATE_HOME": "x/state", "HOME": "/home/u"})) == "/home/u/.local/state/tunehost"


def test_record_and_read_back_newest_first(tmp_path):
    with open_store(tmp_path / "r.sqlite3") as store:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        ids = [store.record(_run(i, model="a.gguf" if i < 2 else "b.gguf", command="tune" if i == 2 else "bench"))
               for i in range(3)]
        runs = store.runs()
        assert [r.id for r in runs] == ids[::-1]
        assert [r.id for r in store.runs(model_path="a.gguf")] == ids[1::-1]
        assert [r.id for r in store.runs(command="tune")] == [ids[2]]
        first = runs[-1]
        assert first.tg() == 10.0 and first.results[0].flags == ("-t", "1") and first.summary == {"i": 0}
        assert first.to_json()["results"][0]["median_ts"] == 10.0


def test_a_failed_transaction_leaves_nothing(tmp_path):
    with open_store(tmp_path / "r.sqlite3") as store:
        good = _run(0)
        nan = StoredResult("baseline", "k", (), "tg9", "tg", float("nan"), 1)  # SQLite stores NaN as NULL: refused
        with pytest.raises(TunehostError, match="not recorded"):
            store.record(NewRun(**{**good.__dict__, "results": (*good.results, nan)}))
        assert store.runs() == []  # the runs row inserted before the failing result was rolled back
        for bad in (float("nan"), float("inf")):  # in a summary (a ceiling document, a drift row): one clear error
            with pytest.raises(TunehostError, match="not recorded"):
                store.record(NewRun(**{**good.__dict__, "summary": {"ceiling": {"tokens_per_s": bad}}}))
        assert store.runs() == []


def _writer(path: str, worker: int, count: int) -> None:
    with open_store(path) as store:
        for i in range(count):
            store.record(_run(worker * 1000 + i))


def _opener(path: str, start, done) -> None:
    start.wait(30)
    try:
        with open_store(path):
            done.put("ok")
    except Exception as exc:  # noqa: BLE001 - the test reports what the other process saw
        done.put(f"{type(exc).__name__}: {exc}")


def test_two_tunehosts_creating_the_store_at_once_both_open_it(tmp_path):
    """SQLite answers "database is locked" at once, without its busy handler, to one of two connections that switch
    a new database to WAL or create its schema together: before, half of 30 such pairs failed with "stayed locked
    by another tunehost for 30 s" in 0.0 s (and a CI run failed test_concurrent_writers_in_two_processes so)."""
    context = multiprocessing.get_context("spawn")
    for attempt in range(6):
        path = str(tmp_path / f"r{attempt}.sqlite3")
        start, done = context.Barrier(2), context.Queue()
        workers = [context.Process(target=_opener, args=(path, start, done)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert sorted(done.get(timeout=5) for _ in workers) == ["ok", "ok"], attempt


def test_concurrent_writers_in_two_processes(tmp_path):
    path = str(tmp_path / "r.sqlite3")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, w, 40)) for w in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    with open_store(path) as store:
        runs = store.runs(limit=1000)
        assert len(runs) == 80 and all(len(r.results) == 2 for r in runs)
        assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_damaged_file_is_one_clear_line(tmp_path):
    path = tmp_path / "r.sqlite3"
    path.write_bytes(b"this is not sqlite at all\n" * 100)
    with pytest.raises(TunehostError) as caught:
        open_store(path)
    message = str(caught.value)
    assert "\n" not in message and "damaged or not a tunehost store" in message and str(path) in message


def _sql(path, statement: str) -> None:
    db = sqlite3.connect(path)
    db.execute(statement)
    db.commit()
    db.close()


def test_another_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "r.sqlite3"
    _sql(path, "CREATE TABLE t (x)")
    with pytest.raises(TunehostError, match="not a tunehost store"):
        open_store(path)


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "r.sqlite3"
    open_store(path).close()
    _sql(path, "UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(TunehostError, match="has schema 99"):
        open_store(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_state_dir_warns_and_runs_without_recording(tmp_path, monkeypatch):
    state = tmp_path / "ro"
    state.mkdir()
    state.chmod(0o500)
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(state))
    try:
        with pytest.raises(StoreUnavailable):
            open_store()
        lines: list[str] = []
        assert open_for_recording(lines.append) is None
        assert len(lines) == 1 and "not recorded" in lines[0] and "TUNEHOST_STATE_DIR" in lines[0]
    finally:
        state.chmod(0o700)


def test_state_dir_that_is_a_file_warns(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(blocker / "state"))
    lines: list[str] = []
    assert open_for_recording(lines.append) is None
    assert len(lines) == 1 and "not recorded" in lines[0]


def test_model_hash_samples_blocks(tmp_path):
    path = tmp_path / "m.gguf"
    data = bytearray(os.urandom(3 * 1024 * 1024))
    path.write_bytes(data)
    first = model_hash(path)
    assert model_hash(path) == first and len(first) == 24
    data[-1] ^= 0xFF  # the last block is always sampled
    path.write_bytes(data)
    assert model_hash(path) != first
    path.write_bytes(data + b"x")  # the size is part of it
    assert model_hash(path) not in (first,)
    with pytest.raises(TunehostError, match="no such file"):
        model_hash(tmp_path / "absent.gguf")


def test_advise_reads_what_this_host_measured_for_the_model(tmp_path, monkeypatch):
    from tunehost import store as store_module

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(5000))
    monkeypatch.setattr(store_module.records, "host_identity", lambda host=None: ({"cpu": "x"}, "fp1"))
    facts = HostFacts.of()  # the host's facts; host_identity above answers for them
    assert store_module.measured_on_host(model, facts=facts) is None  # no store yet: nothing, and no file is created
    assert not store_module.store_path().exists()
    with open_store() as store:
        for tg, fp in ((10.0, "fp1"), (12.0, "fp1"), (14.0, "fp1"), (99.0, "other-host")):
            run = _run(0, model=str(model), tg=tg)
            store.record(NewRun(**{**run.__dict__, "model_hash": model_hash(model), "host_fp": fp}))
    measured = store_module.measured_on_host(model, facts=facts)
    assert measured is not None and measured.runs == 3 and measured.tg_ts == 12.0
    assert measured.text(24.0).startswith("measured here: TG 12.00 t/s = 50% of the ceiling above (from 3 runs on "
                                          "this host, ")
    assert measured.to_json(24.0)["efficiency"] == 0.5


def _ceiling_doc(ram_bytes: int, layers: int = 32, gbps: float = 20.0) -> dict:
    """What tunehost.bench.runner.tg_ceiling records for a CPU placement."""
    return {"path": "cpu", "layers": layers, "moe": False, "ram_dimm_gbps": None, "tokens_per_s": gbps * 1e9 / ram_bytes,
            "parts": [{"memory": "RAM", "bytes_per_token": ram_bytes, "gbps": gbps}]}


def _calibration_store(model_hash_value: str) -> None:
    """Three runs on host fp1 (two model shapes), one on another host, one drift run, one without a ceiling."""
    with open_store() as store:
        for i, (digest, ram_bytes, layers, tg, fp, command) in enumerate((
                (model_hash_value, 1_000_000_000, 32, 11.5, "fp1", "bench"),
                ("h-other", 4_000_000_000, 40, 3.0, "fp1", "tune"),
                (model_hash_value, 1_000_000_000, 32, 11.0, "fp1", "bench"),
                (model_hash_value, 1_000_000_000, 32, 99.0, "other-host", "bench"),
                (model_hash_value, 1_000_000_000, 32, 5.0, "fp1", "drift"))):
            config = "winner" if command == "tune" else "baseline"
            store.record(NewRun(command=command, host={"cpu": "x"}, host_fp=fp, build="b1", model_path=f"/m/{i}.gguf",
                                model_hash=digest, model_name=f"model {i}",
                                results=(StoredResult(config, "k", ("-t", "2"), "tg128", "tg", tg, 5),),
                                summary={"ceiling": _ceiling_doc(ram_bytes, layers), "ceiling_config": config}))
        store.record(_run(7))  # no ceiling recorded: not a point


def test_calibration_points_are_this_hosts_bench_and_tune_runs(monkeypatch):
    from tunehost import store as store_module

    monkeypatch.setattr(store_module.records, "host_identity", lambda host=None: ({"cpu": "x"}, "fp1"))
    facts = HostFacts.of()  # the host's facts; host_identity above answers for them
    assert store_module.host_calibration(facts=facts) is None  # no store: nothing, and no file is made
    assert not store_path().exists()
    _calibration_store("h-m")
    points = store_module.calibration_points(store_module.runs_on_host(facts))  # host fp1's runs only
    assert sorted((p.command, p.tg_ts) for p in points) == [("bench", 11.0), ("bench", 11.5), ("tune", 3.0)]
    calibration = store_module.host_calibration(facts=facts)
    fit = calibration.get("cpu")
    assert fit.runs == 3 and fit.models == 2 and fit.layer_us_determined
    assert 0 < fit.eff <= 1 and fit.layer_us >= 0


def test_advise_uses_this_hosts_runs_for_the_band_and_calibrate_shows_them(cli, monkeypatch, tmp_path):
    from tests.advise.conftest import dense_tensors, write_gguf
    from tunehost import store as store_module

    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    monkeypatch.setattr(store_module.records, "host_identity", lambda host=None: ({"cpu": "x"}, "fp1"))
    before = json.loads(cli("advise", "--model", str(model), "--no-probe", "--format", "json").stdout)
    _calibration_store("h-m")
    after = json.loads(cli("advise", "--model", str(model), "--no-probe", "--format", "json").stdout)
    assert (before["ceiling"]["band"] or {}).get("source") in (None, "published llama.cpp measurements")
    band = after["ceiling"]["band"]
    assert band["source"].startswith("from 3 runs of 2 models on this host, last ")
    assert band["low_tokens_per_s"] < band["high_tokens_per_s"]
    human = cli("advise", "--model", str(model), "--no-probe")
    assert "from 3 runs of 2 models on this host" in human.stdout
    shown = cli("advise", "--calibrate")
    assert shown.exit_code == 0, shown.output
    assert "CPU dense" in shown.stdout and "GPU dense" in shown.stdout
    assert "no run on this host" in shown.stdout
    data = json.loads(cli("advise", "--calibrate", "--format", "json").stdout)
    assert data["classes"]["cpu"]["runs"] == 3 and data["classes"]["cpu"]["per_layer_determined"] is True
    refused = cli("advise", "--calibrate", "--snapshot", str(tmp_path))
    assert refused.exit_code == 1 and "cannot be used with --snapshot" in refused.stderr


def test_calibrate_shows_a_fit_per_cpu_thread_count(cli, monkeypatch):
    """Runs that recorded their -t (the ceiling's "threads") are fitted per thread count: `advise --calibrate` names
    each fit with its count, and its JSON keys say it."""
    from tunehost import store as store_module

    monkeypatch.setattr(store_module.records, "host_identity", lambda host=None: ({"cpu": "x"}, "fp1"))
    with open_store() as store:
        for i, (ram_bytes, tg, threads) in enumerate(((1_000_000_000, 11.5, 4), (3_000_000_000, 4.5, 4),
                                                      (1_000_000_000, 6.0, 2))):
            store.record(NewRun(command="bench", host={"cpu": "x"}, host_fp="fp1", build="b1",
                                model_path=f"/m/{i}.gguf", model_hash=f"h{ram_bytes}", model_name=f"model {i}",
                                results=(StoredResult("baseline", "k", ("-t", str(threads)), "tg128", "tg", tg, 5),),
                                summary={"ceiling": {**_ceiling_doc(ram_bytes), "threads": threads},
                                         "ceiling_config": "baseline"}))
    shown = cli("advise", "--calibrate")
    assert shown.exit_code == 0, shown.output
    assert "CPU dense, 4 threads: 2 runs of 2 models" in shown.stdout
    assert "CPU dense, 2 threads: 1 run of 1 model" in shown.stdout
    data = json.loads(cli("advise", "--calibrate", "--format", "json").stdout)["classes"]
    assert sorted(data) == ["cpu@2t", "cpu@4t"]
    assert (data["cpu@4t"]["threads"], data["cpu@4t"]["runs"], data["cpu@4t"]["per_layer_determined"]) == (4, 2, True)

def test_calibrate_on_an_empty_or_damaged_store(cli, monkeypatch, tmp_path):
    from tests.advise.conftest import dense_tensors, write_gguf

    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    empty = cli("advise", "--calibrate")
    assert empty.exit_code == 0 and "no usable run recorded on this host yet" in empty.stdout
    store_path().parent.mkdir(parents=True, exist_ok=True)
    store_path().write_bytes(b"this is not a database" * 100)
    damaged = cli("advise", "--calibrate")  # asked for the store itself: one clear line
    assert damaged.exit_code == 1 and "results.sqlite3" in damaged.stderr and "Traceback" not in damaged.output
    assert len(damaged.stderr.strip().splitlines()) == 1
    planned = cli("advise", "--model", str(model), "--no-probe")  # a plan never fails for its store
    assert planned.exit_code == 0 and "-t" in planned.stdout


def test_history_and_calibrate_print_a_hostile_store_as_single_plain_lines(cli, monkeypatch):
    from tunehost import store as store_module

    monkeypatch.setattr(store_module.records, "host_identity", lambda host=None: ({"cpu": "x"}, "fp1"))
    evil = "evil\x1b[31mRED\nline2 [bold]x[/bold]"
    with open_store() as store:
        for i, tg in enumerate((5000.0, 4000.0)):  # cache-resident: left out of the calibration, named
            store.record(NewRun(command="bench", host={"cpu": "x"}, host_fp="fp1", build="b1\nb2", model_path="/m.gguf",
                                model_hash="h", model_name=evil,
                                results=(StoredResult("baseline", "k", ("-t", "[red]2"), "tg32", "tg", tg, 5),),
                                summary={"rounds": 5, "ceiling": _ceiling_doc(4_000_000, 4, 10.0),
                                         "ceiling_config": "baseline"}))
    for args in (("history",), ("advise", "--calibrate")):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.stdout and "\nline2" not in result.stdout
        assert "evil?[31mRED?line2 [bold]x[/bold]" in result.stdout  # shown as text, never as markup
    assert "-t [red]2" in cli("history").stdout
