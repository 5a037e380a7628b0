"""`tunehost export` (issue 35 §2): the node_exporter textfile from the six snapshots and from a store with hostile
names, read back by the official client's parser (prometheus_client) and, where Debian's prometheus package is
installed, by `promtool check metrics`; the atomic write (a temporary file in DIR, renamed)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS
from tunehost.formats.quoting import PROM_LABEL_MAX, prom_label_value
from tunehost.store.repository import StoredResult, StoredRun

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus-client is in the test extra")
SIX = sorted(p.name for p in SNAPSHOTS.iterdir() if (p / "manifest.json").is_file())
HOSTILE = ["\x1b[31mred\x1b[0m.gguf", 'q"uote.gguf', "back\\slash.gguf", "new\nline.gguf", "x" * 1000 + ".gguf",
           "}{=,\u2028\u202e.gguf", "model ", "模型.gguf"]


def families(text: str) -> dict:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def promtool(path: Path) -> subprocess.CompletedProcess | None:
    binary = shutil.which("promtool")
    if binary is None:
        return None
    return subprocess.run([binary, "check", "metrics"], stdin=path.open("rb"), capture_output=True, text=True,
                          timeout=60)


def test_six_snapshots() -> None:
    assert len(SIX) == 6, SIX


@pytest.mark.parametrize("name", SIX)
def test_each_snapshot_exports_a_file_the_client_parser_reads(cli, tmp_path, name) -> None:
    r = cli("export", "--snapshot", str(SNAPSHOTS / name), "--textfile", str(tmp_path))
    assert r.exit_code == 0, r.output
    text = (tmp_path / "tunehost.prom").read_text()
    assert r.stdout == "" and os.listdir(tmp_path) == ["tunehost.prom"]  # no temporary file left
    got = families(text)
    doctor = json.loads(cli("doctor", "--json", "--snapshot", str(SNAPSHOTS / name)).stdout)
    ready = got["tunehost_doctor_ready"].samples[0].value
    assert ready == (1 if doctor["verdict"] == "ready" else 0)
    worst = {}
    order = ("ok", "info", "skip", "warn", "error", "fail")
    for f in doctor["findings"]:
        worst[f["check"]] = max(worst.get(f["check"], "ok"), f["severity"], key=order.index)
    status = {(s.labels["check"], s.labels["severity"]): s.value for s in got["tunehost_check_status"].samples}
    for check, severity in worst.items():
        assert status[(check, severity)] == 1 and sum(status[(check, s)] for s in order) == 1
    for family in got.values():
        assert family.name.startswith("tunehost_")
        for sample in family.samples:
            assert math.isfinite(sample.value) and sample.timestamp is None  # the collector refuses timestamps
    checked = promtool(tmp_path / "tunehost.prom")
    if checked is not None:
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_ram_below_rated_and_the_pcie_link_are_in_the_metrics(cli) -> None:
    r = cli("export", "--snapshot", str(SNAPSHOTS / "desktop-12700f-rtx3060"))
    got = families(r.stdout)
    configured = got["tunehost_ram_configured_transfers_per_second"].samples[0]
    rated = got["tunehost_ram_rated_transfers_per_second"].samples[0]
    assert configured.value == 2133e6 and rated.value == 3600e6 and configured.labels == {"type": "DDR4"}
    links = {(s.labels["gpu"], s.labels["state"]): s.value for s in got["tunehost_gpu_pcie_link_width_lanes"].samples}
    assert links == {("0", "current"): 16, ("0", "max"): 16}


def _stored(run_id: int, name: str, created: str, tg: float, pp: float, rounds: list[float] | None) -> StoredRun:
    summary = {"best": "plan", "rounds_ts": {"plan": {"tg128": rounds}} if rounds else {}}
    return StoredRun(run_id, created, "bench", "fp", {}, "b6000", f"/home/alice/models/{name}", f"sha256:{run_id:04d}",
                     name, None, summary, (StoredResult("plan", "k", ("-t", "8"), "tg128", "tg", tg, 5),
                                           StoredResult("plan", "k", ("-t", "8"), "pp512", "pp", pp, 5)))


def _export(runs, snapshot: str = "ci-vm"):
    from tunehost.facts import HostFacts
    from tunehost.formats.prometheus import render_metrics
    from tunehost.host import open_host
    from tunehost.ops.export import ExportRequest, export

    from tunehost.doctor.registry import load_checks

    facts = HostFacts(open_host(SNAPSHOTS / snapshot))
    return render_metrics(export(facts, ExportRequest(tuple(load_checks().checks), runs=runs)))


def test_latest_speed_per_model_with_its_interval_and_time() -> None:
    runs = [_stored(2, "a.gguf", "2026-11-20T10:00:00Z", 50.0, 900.0, [49.0, 50.0, 51.0, 50.5]),
            _stored(1, "a.gguf", "2026-11-01T10:00:00Z", 40.0, 800.0, None)]  # older: not the latest
    got = families(_export(runs))
    tg = [s for s in got["tunehost_bench_tokens_per_second"].samples if s.labels["kind"] == "tg"]
    assert [(s.labels["model"], s.labels["config"], s.labels["test"], s.value) for s in tg] == [
        ("a.gguf", "plan", "tg128", 50.0)]
    low = got["tunehost_bench_low_tokens_per_second"].samples[0].value
    high = got["tunehost_bench_high_tokens_per_second"].samples[0].value
    assert low < 50.0 < high and high / 50.0 == pytest.approx(50.0 / low)
    pp = [s for s in got["tunehost_bench_tokens_per_second"].samples if s.labels["kind"] == "pp"]
    assert pp[0].value == 900.0
    when = {s.labels["kind"]: s.value for s in got["tunehost_bench_timestamp_seconds"].samples}
    assert when["tg"] == when["pp"] == 1795168800  # 2026-11-20T10:00:00Z
    assert "/home/alice" not in _export(runs)  # a file name, never a path of the user's


def test_hostile_model_names_stay_inside_their_label(tmp_path) -> None:
    runs = [_stored(i + 1, name, f"2026-11-{10 + i:02d}T10:00:00Z", 10.0 + i, 100.0, None)
            for i, name in enumerate(HOSTILE)]
    text = _export(runs)
    assert "\x1b" not in text and "\u2028" not in text and "\u202e" not in text
    got = families(text)
    models = {s.labels["model"] for s in got["tunehost_bench_tokens_per_second"].samples}
    assert len(models) == len(HOSTILE)
    assert all(len(m) <= PROM_LABEL_MAX and m.isprintable() for m in models)
    assert 'q"uote.gguf' in models and "back\\slash.gguf" in models and "new?line.gguf" in models
    path = tmp_path / "hostile.prom"
    path.write_text(text)
    checked = promtool(path)
    if checked is not None:
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_last_drift_verdict_per_model_from_a_snapshot(tmp_path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOTS / "ci-vm", snap, symlinks=True)
    drift = {"id": 9, "created": "2026-11-21T08:00:00Z", "command": "drift", "host": {}, "build": "b6000",
             "model": {"name": "a.gguf", "hash": "sha256:0001"}, "tg": {"plan": 40.0}, "best": "plan",
             "drift": {"verdict": "slower beyond the noise", "since_run": 2, "changed": ["kernel 6.8 -> 6.11"],
                       "rows": [{"test": "tg128", "then": 50.0, "now": 40.0, "change_percent": -20.0, "low": 0.75,
                                 "high": 0.85, "verdict": "slower"}]}}
    bench = {"id": 2, "created": "2026-11-20T10:00:00Z", "command": "bench", "host": {}, "build": "b6000",
             "model": {"name": "a.gguf", "hash": "sha256:0001"}, "tg": {"plan": 50.0}, "best": "plan"}
    (snap / "samples" / "results.json").write_text(json.dumps({"format": 1, "runs": [drift, bench]}))
    from tunehost.facts import HostFacts
    from tunehost.formats.prometheus import render_metrics
    from tunehost.host import open_host
    from tunehost.ops.export import ExportRequest, export
    from tunehost.doctor.registry import load_checks

    text = render_metrics(export(HostFacts(open_host(snap)), ExportRequest(tuple(load_checks().checks))))
    got = families(text)
    status = {s.labels["verdict"]: s.value for s in got["tunehost_drift_status"].samples}
    assert status == {"slower": 1, "faster": 0, "no_change": 0}
    assert got["tunehost_drift_change_ratio"].samples[0].value == pytest.approx(0.8)
    assert got["tunehost_bench_tokens_per_second"].samples[0].value == 50.0  # the sample's TG (no PP recorded)


@pytest.mark.parametrize("value, shown", [('a"b', 'a\\"b'), ("a\\b", "a\\\\b"), ("a\nb", "a?b"),
                                          ("x" * 500, "x" * (PROM_LABEL_MAX - 1) + "…")])
def test_label_value_escaping(value, shown) -> None:
    assert prom_label_value(value) == shown


def test_the_write_is_atomic(tmp_path, monkeypatch, cli) -> None:
    target = tmp_path / "tunehost.prom"
    target.write_text("old\n")
    import tunehost.cli.output_file as writer  # export's atomic write (shared with report --output)

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer.os, "replace", broken)
    r = cli("export", "--snapshot", str(SNAPSHOTS / "ci-vm"), "--textfile", str(tmp_path))
    assert r.exit_code == 1 and "no space left" in r.stderr
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["tunehost.prom"]
    monkeypatch.undo()
    assert cli("export", "--snapshot", str(SNAPSHOTS / "ci-vm"), "--textfile", str(tmp_path)).exit_code == 0
    assert oct(target.stat().st_mode & 0o777) == "0o644" and target.read_text().startswith("# HELP tunehost_info")


@pytest.mark.parametrize("args, message", [(("--textfile", "/nonexistent-dir-i35"), "not a directory"),
                                           (("--name", "x.txt"), "ending in .prom"),
                                           (("--name", "../x.prom"), "ending in .prom")])
def test_refusals(cli, tmp_path, args, message) -> None:
    if args[0] == "--name":
        args = (*args, "--textfile", str(tmp_path))
    r = cli("export", "--snapshot", str(SNAPSHOTS / "ci-vm"), *args)
    assert r.exit_code == 1 and message in r.stderr and r.stderr.count("\n") == 1, r.output


def test_the_alert_rules_in_docs_fleet_md_pass_promtool(tmp_path) -> None:
    """The documented rules name metrics the export writes, and promtool accepts them (skipped without promtool)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "fleet.md").read_text()
    rules = text.split("Alert rules", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    exported = families(_export([_stored(1, "a.gguf", "2026-11-20T10:00:00Z", 5.0, 9.0, None)]))
    for name in ("tunehost_ram_configured_transfers_per_second", "tunehost_drift_status",
                 "tunehost_bench_tokens_per_second"):
        assert name in rules
    assert "tunehost_bench_tokens_per_second" in exported
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    (tmp_path / "rules.yml").write_text(rules)
    done = subprocess.run([binary, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_store_rows_of_the_wrong_type_are_left_out_not_a_traceback() -> None:
    bad = [StoredRun(1, "not a date", "bench", "fp", {}, None, "/m/a.gguf", "sha256:1", None, None, ["not", "a", "map"],
                     (StoredResult("plan", "k", (), "tg128", "tg", "fast", 3),  # type: ignore[arg-type]
                      StoredResult(None, "k", (), "tg128", "tg", 5.0, 3),  # type: ignore[arg-type]
                      StoredResult("plan", "k", (), "pp512", "pp", math.inf, 3),
                      StoredResult("plan", "k", (), "tg64", "tg", 1e308, True))),  # type: ignore[arg-type]
           StoredRun(2, "2026-11-20T10:00:00Z", "bench", "fp", {}, None, "/m/b.gguf", 7, None, None, {},  # type: ignore
                     (StoredResult("plan", "k", (), "tg128", "tg", 5.0, 3),)),
           StoredRun(3, "2026-11-20T10:00:00Z", "bench", "fp", {}, None, "/m/c.gguf", "sha256:3", None, None,
                     {"rounds_ts": {"plan": {"tg128": ["x", None, math.nan, 1e309, -1]}}},
                     (StoredResult("plan", "k", (), "tg128", "tg", 7.0, 3),))]
    got = families(_export(bad))
    speeds = [(s.labels["model"], s.value) for s in got["tunehost_bench_tokens_per_second"].samples]
    assert speeds == [("c.gguf", 7.0)]  # the others: no finite median in range, no model hash
    assert "tunehost_bench_low_tokens_per_second" not in got  # no two valid rounds: no interval
