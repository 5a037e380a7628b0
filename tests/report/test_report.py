"""`tunehost report`: the page from a snapshot and a store (every finding, the plan, the intervals, the charts'
data, the hardware), what a hostile snapshot or store cannot do to it, what it leaves out to be shareable, the
operation's pieces (thinning, host changes, intervals) and the CLI's writing and opening of the file."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from pathlib import Path

import pytest

from tests.report.conftest import HOSTILE_BIOS, HOSTILE_CPU
from tests.report.fixtures import HOSTILE_CONFIG, HOSTILE_MODEL, HOSTILE_USER, SECRET

DATA_BLOCK = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.DOTALL)


def _findings(snapshot: Path):
    from tunehost.doctor.registry import load_checks
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops.doctor import DoctorRequest, diagnose

    return diagnose(HostFacts(open_host(snapshot)), DoctorRequest(tuple(load_checks().checks))).report


def _page(cli, tmp_path: Path, *args: str) -> str:
    out = tmp_path / "page.html"
    result = cli("report", "--output", str(out), *args)
    assert result.exit_code == 0, result.output
    return out.read_text()


def test_the_page_holds_every_finding_the_plan_the_results_and_the_hardware(cli, tmp_path, hostile_snapshot,
                                                                            fixture_store, tiny_gguf):
    page = _page(cli, tmp_path, "--snapshot", str(hostile_snapshot), "--store", str(fixture_store),
                 "--model", str(tiny_gguf))
    report = _findings(hostile_snapshot)
    articles = re.findall(r'<article class="finding sev-(\w+)" data-check="([^"]+)"', page)
    assert len(articles) == len(report.findings) > 10
    assert sorted(c for _, c in articles) == sorted(f.check for f in report.findings)
    assert f'class="verdict {report.verdict}"' in page
    # the worst first
    ranks = {"fail": 5, "error": 4, "warn": 3, "skip": 2, "info": 1, "ok": 0}
    assert [ranks[s] for s, _ in articles] == sorted((ranks[s] for s, _ in articles), reverse=True)
    # a fix and its commands
    fixed = next(f for f in report.findings if f.fix and f.fix.commands)
    from markupsafe import escape

    assert str(escape(fixed.fix.commands[0].split("\n")[0])) in page
    # advise's plan with its memory bars: VRAM of the RTX 3060 and RAM
    assert "tiny-test-model.gguf" in page and 'class="fits"' in page
    assert "VRAM (NVIDIA GeForce RTX 3060" in page and ">RAM: " in page
    assert re.search(r'class="seg c0" style="width: [0-9.]+%" title="weights: ', page)
    # advise's expected TG, and what it becomes when a slot's context fills (the KV cache a token then reads)
    band = re.search(r'expect <span class="band">(\d+)–(\d+) t/s</span> \(<span class="band-full">(\d+)–(\d+) '
                     r"t/s</span> when a slot's (\d+)-token context fills\)", page)
    assert band is not None and int(band[3]) <= int(band[1]) and int(band[4]) < int(band[2]) and int(band[5]) > 0
    # the latest bench with the interval of its level, the tune with its confirmation interval
    assert re.search(r"<td class=\"num\" data-label=\"interval\">[0-9.]+ – [0-9.]+</td>", page)
    assert "+5.2 % [+2.1 %, +8.4 %] against advise&#39;s plan" in page
    # the newest drift re-measure: then -> now with the change's interval
    assert re.search(r"slower beyond the noise since run #\d+; tg128 118.20 -&gt; 9\d.\d\d t/s, -1\d.\d % "
                     r"\[-21.0 %, -17.0 %\] slower", page)
    # the charts' data: two models, their points and marks
    data = json.loads(DATA_BLOCK.search(page).group(1))
    assert len(data["series"]) == 2 and all(len(s["x"]) == len(s["y"]) == 20 for s in data["series"])
    tones = {m["tone"] for s in data["series"] for m in s["marks"]}
    assert {"change", "slower", "neutral"} <= tones
    # host changes annotated: kernel, BIOS and RAM speed, the llama.cpp build
    for change in ("kernel 6.8.0-1-amd64 -&gt; 6.11.0-1-amd64", "@ 4800 MT/s", "bios version 1602 -&gt; 1813",
                   "llama.cpp build b4100 (abc1234) -&gt; b4500 (def5678)"):
        assert change in page
    # the hardware summary
    assert re.search(r"<th>CPU</th><td>Evil&lt;/script&gt;", page)
    assert "NVIDIA GeForce RTX 3060" in page


def test_a_hostile_snapshot_and_store_inject_nothing(cli, tmp_path, hostile_snapshot, fixture_store):
    for args in ((), ("--full",)):
        page = _page(cli, tmp_path, "--snapshot", str(hostile_snapshot), "--store", str(fixture_store), *args)
        assert "\x1b" not in page and "\x07" not in page  # ANSI and OSC sequences: shown as "?"
        # the only script elements are the page's: the data block, uPlot, charts.js
        assert len(re.findall(r"<script", page, re.IGNORECASE)) == 3
        assert len(re.findall(r"</script", page, re.IGNORECASE)) == 3
        assert len(re.findall(r"</title", page, re.IGNORECASE)) == 1
        for raw in ("<img", "<b onmouseover", "onerror=alert(6)>", "<script>alert"):
            assert raw not in page
        assert "evil&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;?[31m&lt;img src=x" in page
        assert "cfg&lt;b onmouseover=alert(3)&gt;?]0;title?" in page
        assert "Evil&lt;/script&gt;&lt;script&gt;alert(5)&lt;/script&gt;?[2J CPU" in page
        # the JSON data block holds no markup at all
        block = DATA_BLOCK.search(page).group(1)
        assert "<" not in block and ">" not in block and "&" not in block
        # the scripts run by their hashes only (Content-Security-Policy): nothing else could run or load
        csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1))
        assert "default-src 'none'" in csp and "unsafe-inline" not in csp.split("style-src")[0]
        scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
        for script in scripts:
            digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
            assert f"'sha256-{digest}'" in csp
    assert HOSTILE_CPU not in page and HOSTILE_BIOS not in page and HOSTILE_MODEL not in page
    assert HOSTILE_CONFIG not in page


def test_shareable_by_default_full_keeps_paths(cli, tmp_path, hostile_snapshot, fixture_store):
    page = _page(cli, tmp_path, "--snapshot", str(hostile_snapshot), "--store", str(fixture_store))
    assert HOSTILE_USER not in page and "/home/" not in page
    assert SECRET not in page and "&lt;redacted&gt;" in page
    assert "shareable: paths, user names and secrets left out" in page
    full = _page(cli, tmp_path, "--snapshot", str(hostile_snapshot), "--store", str(fixture_store), "--full")
    assert f"/home/{HOSTILE_USER}/models/llama-3.1-8b-Q4_K_M.gguf" in full
    assert "shareable:" not in full


def test_from_a_snapshot_alone_the_runs_come_from_its_results_sample(cli, tmp_path, hostile_snapshot):
    from tunehost.store import doctor_sample
    from tests.report.fixtures import make_store

    make_store(tmp_path / "s" / "results.sqlite3")
    sample = doctor_sample(environ={"TUNEHOST_STATE_DIR": str(tmp_path / "s")})
    (hostile_snapshot / "samples" / "results.json").write_text(json.dumps(sample))
    page = _page(cli, tmp_path, "--snapshot", str(hostile_snapshot))
    assert "snapshot results sample (TG medians only" in page
    data = json.loads(DATA_BLOCK.search(page).group(1))
    assert len(data["series"]) == 2 and sum(len(s["x"]) for s in data["series"]) == 40
    assert "no plan" not in page and "give --model PATH.gguf" in page


def test_a_snapshot_without_runs_says_why(cli, tmp_path, hostile_snapshot):
    page = _page(cli, tmp_path, "--snapshot", str(hostile_snapshot))
    assert "no samples/results.json in the snapshot" in page
    assert "no run with a TG result yet" in page


def test_the_live_host_reads_the_users_store_and_plans_its_models(cli, tmp_path, tiny_gguf):
    import sqlite3

    from tests.report.fixtures import MODELS, make_store

    store = make_store(Path(os.environ["TUNEHOST_STATE_DIR"]) / "results.sqlite3", runs=8)
    with sqlite3.connect(str(store)) as db:  # the first model's file is on this machine, the other's is not
        db.execute("UPDATE runs SET model_path = ? WHERE model_hash = ?", (str(tiny_gguf), MODELS[0][2]))
    page = _page(cli, tmp_path, "--quick")
    assert "tunehost report: this host" in page
    assert "8 runs read" in page
    plans = re.findall(r'<div class="card plan" data-model="([^"]*)">', page)
    assert plans == ["tiny-test-model.gguf"]
    assert ">RAM: " in page


def test_thinning_keeps_the_ends_and_the_marks():
    from tunehost.ops.report import Point, thin

    points = [Point(f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z", float(i), i, "bench") for i in range(3000)]
    marked = {points[1234].at}
    kept = thin(points, 100, marked)
    assert len(kept) <= 102
    assert kept[0] == points[0] and kept[-1] == points[-1] and points[1234] in kept
    assert thin(points[:50], 100, set()) == points[:50]


def test_big_stores_are_thinned_and_the_page_says_so(tmp_path):
    from tests.report.fixtures import make_store
    from tunehost.doctor.registry import load_checks
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops.report import ReportRequest, build_report
    from tunehost.store import open_store
    from tests.conftest import SNAPSHOTS

    make_store(tmp_path / "big.sqlite3", runs=600)
    facts = HostFacts(open_host(SNAPSHOTS / "ci-vm"))
    with open_store(tmp_path / "big.sqlite3") as store:
        report = build_report(facts, ReportRequest(checks=tuple(load_checks().checks), max_points=50,
                                                   max_runs=500), store)
    assert report.runs_read == 500 and "the newest 500 runs" in (report.runs_note or "")
    assert all(len(s.points) <= 50 + len(s.marks) for s in report.series)
    assert any("thinned evenly" in n for n in report.notes)


def test_intervals_come_from_the_recorded_rounds():
    from tunehost.ops.report import level_interval

    low, high, rounds = level_interval([99.0, 100.0, 101.0, 100.5, 99.5])
    assert rounds == 5 and low < 100.0 < high and high - low < 5
    assert level_interval([100.0]) == (None, None, 1)
    assert level_interval("x") == (None, None, None)
    assert level_interval([float("nan"), -1, True, "a"]) == (None, None, None)


def test_host_changes_name_what_changed():
    from tunehost.facts.identity import HostIdentity
    from tunehost.ops.report import RunView, host_changes

    def run(i: int, kernel: str, build: str) -> RunView:
        return RunView(i, f"2026-01-0{i}T00:00:00Z", "bench", "m", "h", build, HostIdentity(kernel=kernel), 10.0)

    marks = host_changes([run(1, "6.8", "b1"), run(2, "6.8", "b1"), run(3, "6.11", "b2")])
    assert [(m.at, m.tone) for m in marks] == [("2026-01-03T00:00:00Z", "change")]
    assert marks[0].text == "kernel 6.8 -> 6.11; llama.cpp build b1 -> b2"


def test_share_text_hides_homes_users_and_secrets():
    from tunehost.ops.report import share_text

    text = "/home/bob/models/x.gguf --api-key sk-abcdefghijklmnopqrstu owner bob /root/y"
    shown = share_text(text, ["bob"])
    assert shown == "~/models/x.gguf --api-key <redacted> owner <user> ~/y"


def test_the_vendored_chart_library_and_its_license_ship_with_the_page():
    from importlib import resources

    base = resources.files("tunehost.formats").joinpath("report")
    assert "MIT License" in base.joinpath("uPlot.LICENSE").read_text()
    for name in ("uPlot.iife.min.js", "charts.js"):
        text = base.joinpath(name).read_text()
        assert not re.search(r"</script|<!--", text, re.IGNORECASE)
        assert not re.search(r"https?://(?!github\.com/leeoniya)", text)  # nothing it could fetch


def test_output_errors_are_one_line(cli, tmp_path, hostile_snapshot):
    result = cli("report", "--snapshot", str(hostile_snapshot), "--output", "-", "--open")
    assert result.exit_code == 1 and "--open opens the written file" in result.output
    result = cli("report", "--snapshot", str(hostile_snapshot), "--store", str(tmp_path / "none.sqlite3"))
    assert result.exit_code == 1 and "no such results store file" in result.output
    result = cli("report", "--snapshot", str(hostile_snapshot), "--output", str(tmp_path / "no" / "x.html"))
    assert result.exit_code == 1 and "no such directory" in result.output


def test_stdout_gets_the_page(cli, hostile_snapshot):
    result = cli("report", "--snapshot", str(hostile_snapshot), "--output", "-")
    assert result.exit_code == 0 and result.stdout.startswith("<!DOCTYPE html>")


# ---------------------------------------------------------------- writing and opening the file


def test_write_page_is_atomic_and_readable(tmp_path):
    from tunehost.cli.report import DEFAULT_OUTPUT, write_page

    target = write_page(tmp_path, "<p>x</p>", environ={})
    assert target == tmp_path / DEFAULT_OUTPUT and target.read_text() == "<p>x</p>"
    assert target.stat().st_mode & 0o777 == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tunehost-report-")]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_run_through_sudo_the_file_belongs_to_the_user(tmp_path):
    from tunehost.cli.report import write_page

    target = write_page(tmp_path / "r.html", "x", environ={"SUDO_UID": "4321", "SUDO_GID": "4322"})
    assert (target.stat().st_uid, target.stat().st_gid) == (4321, 4322)


def test_open_never_starts_a_browser_as_root(tmp_path, monkeypatch):
    from tunehost.cli import report as cli_report

    started = []
    monkeypatch.setattr(cli_report.os, "geteuid", lambda: 0)
    page = tmp_path / "r.html"
    said = cli_report.open_in_browser(page, {}, launch=lambda argv, env: started.append(argv))
    assert started == [] and "not opening a browser as root" in said
    env = {"SUDO_USER": "carol", "SUDO_UID": "1000", "SUDO_GID": "1000", "DISPLAY": ":0",
           "XDG_RUNTIME_DIR": "/run/user/1000", "WAYLAND_DISPLAY": "bad\nvalue"}
    said = cli_report.open_in_browser(page, env, launch=lambda argv, env: started.append(argv),
                                      as_user=lambda program: True)
    assert said is None
    assert started == [["sudo", "-u", "carol", "--", "env", "DISPLAY=:0", "XDG_RUNTIME_DIR=/run/user/1000",
                        "xdg-open", str(page)]]
    for bad in ("-oops", "root", "x\ny"):
        said = cli_report.open_in_browser(page, {**env, "SUDO_USER": bad}, launch=lambda a, e: started.append(a),
                                          as_user=lambda program: True)
        assert said and "not opening a browser as root" in said and len(started) == 1


def test_open_as_a_user_uses_their_browser(tmp_path, monkeypatch):
    from tunehost.cli import report as cli_report

    started = []
    monkeypatch.setattr(cli_report.os, "geteuid", lambda: 1000)
    assert cli_report.open_in_browser(tmp_path / "r.html", {}, launch=lambda a, e: started.append(a)) is None
    assert started == [["xdg-open", str(tmp_path / "r.html")]]


def test_drift_marks_one_per_change_of_verdict():
    from tunehost.ops.report import RunView, drift_marks

    verdicts = ["no clear change"] * 3 + ["slower beyond the noise"] * 2 + ["no clear change"]
    runs = [RunView(i, f"2026-01-{i + 1:02d}T00:00:00Z", "drift", "m", "h", None, None, 10.0, verdict=v)
            for i, v in enumerate(verdicts)]
    marks = drift_marks(runs)
    assert [(m.at[:10], m.tone, m.text) for m in marks] == [
        ("2026-01-01", "neutral", "drift: no clear change (3 re-measures to 2026-01-03)"),
        ("2026-01-04", "slower", "drift: slower beyond the noise (2 re-measures to 2026-01-05)"),
        ("2026-01-06", "neutral", "drift: no clear change")]


def test_stored_times_and_values_the_charts_cannot_use_are_left_out():
    from tunehost.formats.report_html import chart_data, epoch
    from tunehost.ops.report import HostReport, Point, Series

    assert epoch("2026-03-02T10:00:00Z") == epoch("2026-03-02 10:00:00") == epoch("2026-03-02T10:00") == 1772445600
    assert epoch("2026-03-02") == 1772409600
    assert epoch("</script>") is None and epoch("") is None
    points = (Point("2026-03-02T10:00:00Z", 5.0, 1, "bench"), Point("yesterday<", 6.0, 2, "bench"),
              Point("2026-03-03T10:00:00Z", float("inf"), 3, "bench"))
    report = HostReport("now", "0", "this host", "ready", (), (), (), (), (Series("m", "h", points, (), 3),),
                        "store", 3)
    assert chart_data(report)["series"] == [{"x": [1772445600], "y": [5.0], "marks": []}]


@pytest.mark.parametrize("summary", ['[1, 2]', '"text"', 'null', '{"rounds_ts": {"baseline": "x"}, "verdicts": "v"}',
                                     '{"best": ["x"], "winner_rounds": "abc", "improved": true, '
                                     '"confirmation": {"ratio": "1.2", "low": null}, "changed": [1, {"a": 2}]}',
                                     '{"rounds_ts": {"baseline": {"tg128": [1e309, -5, "a", null, 3, 4]}}}'])
def test_a_store_of_odd_documents_still_gives_a_page(tmp_path, summary):
    import sqlite3

    from tests.conftest import SNAPSHOTS
    from tests.report.fixtures import make_store
    from tunehost.facts import HostFacts
    from tunehost.formats.report_html import render
    from tunehost.host import open_host
    from tunehost.ops.report import ReportRequest, build_report
    from tunehost.store import open_store

    path = make_store(tmp_path / "odd.sqlite3", runs=12)
    with sqlite3.connect(str(path)) as db:
        db.execute("UPDATE runs SET summary_json = ?, host_json = ? WHERE id % 2 = 0", (summary, summary))
        db.execute("UPDATE runs SET created = 'not a date <b>' WHERE id = 3")
    with open_store(path) as store:
        report = build_report(HostFacts(open_host(SNAPSHOTS / "ci-vm")), ReportRequest(checks=()), store)
    page = render(report)
    # the store's read layer leaves out the even rows when their documents are not what tunehost writes (the
    # host document of each is one of these too), and the page says how many
    assert "<b>" not in page and "not a date &lt;b&gt;" in page
    assert report.runs_read in (6, 12), report.runs_read
    if report.runs_read == 6:
        assert "6 stored rows left out as not valid runs" in page
