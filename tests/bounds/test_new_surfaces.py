"""Red team 1 on the surfaces of issues 34 and 35 (report, export, the new doctor checks' readers, the role's
options): a stranger's snapshot and store, and the paths the user names for output. Each class as found:
1. a value's length: `one_line` classified the whole value before cutting it (a 1 MB model name: export 22 s);
2. a store row with bytes that are not UTF-8 made the whole store unreadable (report exit 1, export no speeds);
3. a stored summary nested too deep raised RecursionError (a traceback in report and export);
4. `report --output` / `export --textfile` replaced whatever was at the path: a FIFO, a device (`-o /dev/null` as
   root), a link (`-o /dev/stdout`), and followed a directory link another user planted;
5. GPU memory files: "used" above "total" (or above 1 PiB) taken as fact ("GTT is full: 93132257 GiB of 62.7");
   a Resizable BAR bitmap offering 8 EiB; `ttm.pages_limit=------` taken as an option;
6. one chart per model: a store of 10,000 models made a 3.6 MB page of 10,000 charts.
The role's `$`-anchored checks are in tests/fleet/test_export_role.py (they run ansible-playbook)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, within
from tests.conftest import SNAPSHOTS
from tunehost.errors import TunehostError
from tunehost.printable import one_line

SNAP = SNAPSHOTS / "ci-vm"


# ---- class 1: a long value costs what is shown ----

def _one_line_reference(value: object, limit: int | None) -> str:  # the definition before the fix
    from tunehost.printable import _shown

    text = "".join(_shown(ch) for ch in str(value))
    return text if limit is None or len(text) <= limit else text[: max(limit - 1, 0)] + "…"


@settings(max_examples=300)
@example("a\x1b[31mb\u202ec\u2028d" * 3, 5)
@example("", 0)
@example("ab", 1)
@given(st.text(max_size=60), st.one_of(st.none(), st.integers(0, 70)))
def test_one_line_is_what_it_was_only_cheaper(text: str, limit: int | None) -> None:
    assert one_line(text, limit) == _one_line_reference(text, limit)


def test_a_4_mb_value_shown_in_80_characters_costs_80() -> None:
    value = "\x1b" + "A" * (4 * MiB)
    with within("one_line of 4 MB", seconds=0.05, peak_bytes=1 * MiB):
        for _ in range(50):
            shown = one_line(value, 80)
    assert len(shown) == 80 and shown.startswith("?A")


# ---- classes 2 and 3: a store row is read or left out, never the whole store ----

def _store(tmp_path: Path) -> Path:
    from tests.report.fixtures import make_store

    return make_store(tmp_path / "results.sqlite3", 12)


def _sql(path: Path, statement: str, args: tuple = ()) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(statement, args)
    db.close()


def test_bytes_that_are_not_utf8_are_one_odd_character(tmp_path, cli) -> None:
    from tunehost.store import open_store

    path = _store(tmp_path)
    _sql(path, "UPDATE runs SET model_name = CAST(X'ff3c62' AS TEXT) || '.gguf', build = CAST(X'c3' AS TEXT)")
    _sql(path, "UPDATE results SET config = CAST(X'80ff' AS TEXT) || config")
    with open_store(path) as store:
        runs = store.runs(limit=100)
    assert len(runs) == 12 and all("\ufffd" in r.model_name for r in runs)
    out = tmp_path / "page.html"
    r = cli("report", "--quick", "--snapshot", str(SNAP), "--store", str(path), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "\ufffd&lt;b.gguf" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("summary", ["[" * 100_000 + "]" * 100_000, '{"a": NaN}', '{"rounds_ts": Infinity}',
                                     '{"a": -Infinity}', "\x00", "{" * 5000])
def test_a_stored_summary_that_is_no_document_is_one_empty_summary(tmp_path, cli, summary: str) -> None:
    from tunehost.store import open_store

    path = _store(tmp_path)
    _sql(path, "UPDATE runs SET summary_json = ?, host_json = ?", (summary, summary))
    with within("runs with hostile JSON", seconds=5, peak_bytes=64 * MiB):
        with open_store(path) as store:
            runs, skipped = store.run_rows(limit=100)
    # the store's read layer (tunehost.store.rows) leaves each such run out with its reason, never a traceback
    assert not runs and len(skipped) == 12 and all("left out" in why for why in skipped), skipped
    r = cli("report", "--quick", "--snapshot", str(SNAP), "--store", str(path), "-o", str(tmp_path / "p.html"))
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output


@settings(max_examples=200)
@given(st.text(alphabet='[]{}",:0123456789.eE+-NaInfity \\u', max_size=200))
def test_the_store_loader_never_raises(text: str) -> None:
    from tunehost.bounds import strict_json

    try:  # the store's one JSON reader: a document, or ValueError (the row is left out with it), nothing else
        value = strict_json(text)
    except ValueError:
        return
    assert json.dumps(value, allow_nan=False) is not None  # no NaN or infinity comes back


# ---- class 4: a path the user names for output is replaced only when it is a regular file ----

def _make(kind: str, where: Path, name: str) -> Path:
    path = where / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif kind == "link-to-file":
        (where / "victim").write_text("keep\n")
        path.symlink_to(where / "victim")
    elif kind == "link-to-device":
        path.symlink_to("/dev/null")
    elif kind == "link-to-stdout":
        path.symlink_to("/proc/self/fd/1")
    elif kind == "dangling-link":
        path.symlink_to(where / "nowhere")
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    return path


KINDS = ["fifo", "socket", "link-to-file", "link-to-device", "link-to-stdout", "dangling-link", "device"]


def _snapshot_of(where: Path) -> dict[str, tuple[int, str | None]]:
    return {p.name: (os.lstat(p).st_mode, os.readlink(p) if p.is_symlink() else None) for p in where.iterdir()}


@pytest.mark.parametrize("kind", KINDS)
def test_the_report_page_never_replaces_what_is_not_a_file(tmp_path, kind: str) -> None:
    from tunehost.cli.report import write_page

    out = tmp_path / "out"
    out.mkdir()
    target = _make(kind, out, "tunehost-report.html")
    before = _snapshot_of(out)
    for given_path in (target, out):  # the file itself, and its directory (the default name in it)
        with pytest.raises(TunehostError) as e:
            write_page(given_path, "<html></html>")
        assert "\n" not in str(e.value) and "not replaced" in str(e.value)
    assert _snapshot_of(out) == before  # the node is as it was, and no temporary file is left


@pytest.mark.parametrize("kind", KINDS + ["directory"])
def test_the_textfile_never_replaces_what_is_not_a_file(tmp_path, kind: str) -> None:
    from tunehost.cli.export import _target, write_atomically

    _make(kind, tmp_path, "tunehost.prom")
    before = _snapshot_of(tmp_path)
    with pytest.raises(TunehostError) as e:
        write_atomically(_target(tmp_path, "tunehost.prom"), "x 1\n")
    assert "\n" not in str(e.value) and "not replaced" in str(e.value)
    assert _snapshot_of(tmp_path) == before


def test_report_refuses_a_fifo_before_building_the_page(tmp_path, cli) -> None:
    fifo = _make("fifo", tmp_path, "page.html")
    started = time.monotonic()
    r = cli("report", "--snapshot", str(SNAP), "-o", str(fifo))
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "is a FIFO" in r.stderr, r.output
    assert time.monotonic() - started < 5 and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown of a link needs root")
def test_a_directory_link_of_another_user_is_not_followed(tmp_path) -> None:
    from tunehost.cli.export import _target
    from tunehost.cli.report import write_page

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = tmp_path / "planted"
    planted.symlink_to(elsewhere)
    os.lchown(planted, 65534, 65534)
    with pytest.raises(TunehostError, match="not followed"):
        write_page(planted, "<html></html>", environ={})
    with pytest.raises(TunehostError, match="not followed"):
        _target(planted, "tunehost.prom")
    assert list(elsewhere.iterdir()) == []


def test_a_stale_temporary_is_swept_a_fresh_one_kept(tmp_path) -> None:
    from tunehost.cli.export import write_atomically

    stale, fresh = tmp_path / ".tunehost.prom.old.tmp", tmp_path / ".tunehost.prom.new.tmp"
    stale.write_text("half")
    fresh.write_text("another run, writing now")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    write_atomically(tmp_path / "tunehost.prom", "x 1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tunehost.prom.new.tmp", "tunehost.prom"]


# ---- class 5: GPU memory and BAR files are bounded facts ----

CARD = "/sys/class/drm/card1/device"
sysfs_number = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from(["nan", "-0", "1e999", "0x10", "9" * 30, ""]))


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@example(total=64206 * MiB, used=99999999999999999)
@example(total=2**60, used=1)
@given(total=sysfs_number, used=sysfs_number)
def test_gtt_used_fits_in_gtt_total(make_snapshot, total, used) -> None:
    from tunehost.facts import HostFacts
    from tunehost.facts.gpu import GpuFacts
    from tunehost.host import open_host

    fs = {f"{CARD}/vendor": "0x1002\n", f"{CARD}/device": "0x1586\n", f"{CARD}/uevent": "PCI_SLOT_NAME=0000:c6:00.0\n",
          f"{CARD}/mem_info_vram_total": "536870912\n", f"{CARD}/mem_info_gtt_total": f"{total}\n",
          f"{CARD}/mem_info_gtt_used": f"{used}\n", f"{CARD}/mem_info_vram_used": f"{used}\n"}
    [g] = HostFacts(open_host(make_snapshot(fs=fs))).get(GpuFacts).gpus
    for size in (g.gtt_total_mib, g.gtt_used_mib, g.memory_total_mib, g.memory_used_mib):
        assert size is None or 0 <= size < 2**30  # MiB: under 1 PiB
    if g.gtt_used_mib is not None and g.gtt_total_mib is not None:
        assert g.gtt_used_mib <= g.gtt_total_mib
    if g.memory_used_mib is not None and g.memory_total_mib is not None:
        assert g.memory_used_mib <= g.memory_total_mib


@settings(max_examples=300)
@example("ffffffffffffffff")
@example("0x40000000")
@given(st.integers(0, 2**64 - 1).map(lambda n: f"{n:016x}"))
def test_a_resize_bitmap_offers_no_bar_above_1_pib(text: str) -> None:
    from tunehost.parsers.pci_bar import MAX_BAR_BYTES, parse_resize

    assert all(size * MiB <= MAX_BAR_BYTES for size in parse_resize(text))


@settings(max_examples=300)
@example("ttm.pages_limit=-------------------- amdgpu.gttsize=99999999999999999999 ttm.page_pool_size=1-2")
@example("ttm.pages_limit=-5")
@given(st.lists(st.sampled_from(["ttm.pages_limit", "amdgpu.gttsize", "ttm.page_pool_size", "amdgpu.gtt_size"]).flatmap(
    lambda k: st.text(alphabet="0123456789-\x1b ", max_size=22).map(lambda v: f"{k}={v}")), max_size=6).map(" ".join))
def test_a_gtt_option_on_the_command_line_is_a_count_or_minus_one(cmdline: str) -> None:
    import re

    from tunehost.facts.apu_memory import parse_cmdline_options

    for value in parse_cmdline_options(cmdline).values():
        assert re.fullmatch(r"-1|[0-9]{1,19}", value), value


# ---- class 6: the page has a bounded number of charts ----

def test_ten_thousand_models_make_a_bounded_page(tmp_path, cli) -> None:
    from tunehost.ops.report import MAX_SERIES

    path = _store(tmp_path)
    _sql(path, """INSERT INTO runs (created, command, host_fp, host_json, build, model_path, model_hash, model_name,
                  label, summary_json)
                  WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 9999)
                  SELECT strftime('%Y-%m-%dT%H:%M:%SZ', 1772000000 + i * 60, 'unixepoch'), 'bench', 'fp',
                         '{"kernel": "6.' || i || '.0"}', 'b1', '/m/x.gguf', 'h' || i, 'm-' || i || '.gguf', NULL,
                         '{}' FROM c""")
    _sql(path, "INSERT INTO results SELECT id, 'baseline', 'k', '[]', 'tg128', 'tg', 100.0, 5 FROM runs "
               "WHERE model_path = '/m/x.gguf'")
    out = tmp_path / "page.html"
    with within("report of 10,000 models", seconds=30, peak_bytes=400 * MiB):
        r = cli("report", "--quick", "--snapshot", str(SNAP), "--store", str(path), "-o", str(out))
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")
    assert page.count('class="chart" id="chart-') == MAX_SERIES and len(page) < 1_000_000
    assert f"TG charts for the {MAX_SERIES} most recently measured of" in page


# ---- class 7: a command that only reads never writes the store it was given ----

@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00"])
def test_report_and_export_leave_a_file_that_is_no_store_as_it_was(tmp_path, cli, content: bytes) -> None:
    given_file = tmp_path / "empty.db"
    given_file.write_bytes(content)
    r = cli("report", "--quick", "--snapshot", str(SNAP), "--store", str(given_file), "-o", str(tmp_path / "p.html"))
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "not a tunehost" in r.stderr, r.output
    state = tmp_path / "state"
    state.mkdir()
    (state / "results.sqlite3").write_bytes(content)
    r = cli("export", "--quick", env={"TUNEHOST_STATE_DIR": str(state)})
    assert r.exit_code == 0 and "not a tunehost" in r.stderr, r.output
    assert given_file.read_bytes() == content and (state / "results.sqlite3").read_bytes() == content
    assert sorted(p.name for p in state.iterdir()) == ["results.sqlite3"]  # no -wal, no -shm


# ---- class 8: an nvidia-smi figure is the number shown, or none (BAR1 "1e999 MiB" was 1 MiB) ----

@settings(max_examples=300)
@example("1e999")
@example("0x10")
@example("12,288")
@example("1.5e3")
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers(-10**20, 10**20).map(hex),
                 st.integers(0, 10**9).map(lambda n: f"{n:,}"), st.integers(0, 10**15).map(str)))
def test_an_nvidia_smi_figure_is_the_whole_number_or_none(shown: str) -> None:
    import math

    from tunehost.parsers.nvidia_smi import num

    value = num(f"{shown} MiB")
    if value is not None:
        assert math.isclose(value, float(shown.replace(",", "")), rel_tol=1e-9), (shown, value)


# ---- class 9: the line root is told to run instead of --open is one shell word per argument ----

@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="the root branch of --open")
@pytest.mark.parametrize("name", ["a;rm -rf ~;.html", "a b.html", "$(id).html", "`id`.html", "a'b.html"])
def test_the_xdg_open_line_shown_to_root_quotes_the_path(tmp_path, name: str) -> None:
    import shlex

    from tunehost.cli.report import open_in_browser

    path = tmp_path / name
    said = open_in_browser(path, {}, launch=lambda argv, env: pytest.fail("a browser started as root"))
    assert said is not None
    line = said[said.rindex("(xdg-open ") + 1:-1]
    assert shlex.split(line) == ["xdg-open", str(path)]


def test_a_megabyte_name_in_the_store_is_cut_before_python_holds_it(tmp_path) -> None:
    from tunehost.store import open_store

    path = _store(tmp_path)
    _sql(path, "UPDATE runs SET model_name = ?, build = ?, model_path = ? WHERE id % 2 = 0",
         ("A" * MiB, "B" * MiB, "/" + "C" * MiB))
    _sql(path, "UPDATE results SET config = ? || config", ("D" * MiB,))
    with within("12 runs with 1 MB names", seconds=5, peak_bytes=8 * MiB):
        with open_store(path) as store:
            runs, skipped = store.run_rows(limit=100)
    # SQLite cuts each name one past its cap, so the read layer sees it was too long and leaves the row out
    assert len(runs) == 6 and all(not r.results for r in runs)
    assert len([w for w in skipped if w.startswith("run ") and "result row" not in w]) == 6, skipped


# ---- class 10: what one run holds cannot blow up a scrape or a page ----

def test_a_run_with_100000_results_is_a_bounded_textfile(tmp_path, cli) -> None:
    from tunehost.ops.export import MAX_TESTS

    path = _store(tmp_path)
    db = sqlite3.connect(path)
    with db:
        run_id = db.execute("SELECT id FROM runs WHERE command = 'bench' ORDER BY id DESC LIMIT 1").fetchone()[0]
        db.executemany("INSERT INTO results VALUES (?, 'baseline', 'k', '[]', ?, 'tg', 100.0, 5)",
                       [(run_id, f"tg{i}") for i in range(100_000)])
    db.close()
    state = path.parent
    with within("export of a run with 100,000 results", seconds=20, peak_bytes=96 * MiB):
        r = cli("export", "--quick", env={"TUNEHOST_STATE_DIR": str(state)})
    assert r.exit_code == 0, r.output
    speeds = [line for line in r.stdout.splitlines() if line.startswith("tunehost_bench_tokens_per_second{")]
    assert 0 < len(speeds) <= 4 * MAX_TESTS and len(r.stdout) < 200_000
    # every reader reads at most MAX_RESULTS_READ of one run's results (export reads the store twice: its speeds and
    # doctor's sample; at 100,000 rows a read took 6-13 s on a 2-core VM, 26.7 s for the export under tracemalloc)
    from tunehost.store import open_store
    from tunehost.store.repository import MAX_RESULTS_READ

    with open_store(path, create=False) as store:
        [run] = [run for run in store.runs(limit=50) if run.id == run_id]
    assert len(run.results) == MAX_RESULTS_READ == 10_000


# ---- class 11: the shareable page redacts a secret whatever the text around it ----

@settings(max_examples=200)
@example(450, " ", "--api-key")
@example(3, "\n", "--hf-token")
@given(st.integers(0, 3000), st.sampled_from([" ", "\n", "\t", "  ", " \n "]),
       st.sampled_from(["--api-key", "--hf-token", "--api-key-file", "-hft"]))
def test_a_secret_flag_is_redacted_in_a_text_of_any_length(before: int, gap: str, flag: str) -> None:
    from tunehost.ops.report import share_text

    secret = "sk-0123456789abcdefSECRET"
    text = gap.join(["-x"] * before + [flag, secret, "-ngl", "99"])
    assert secret not in share_text(text)


def test_a_long_stored_flag_list_leaves_no_secret_on_the_page(tmp_path, cli) -> None:
    path = _store(tmp_path)
    flags = (["x"] * 150 + ["x\n"]) * 3 + ["--api-key", "sk-LEAKYSECRET0123456789", "--hf-token", "hf_LEAKYabcdefghij"]
    _sql(path, "UPDATE results SET flags_json = ?", (json.dumps(flags),))
    out = tmp_path / "page.html"
    r = cli("report", "--quick", "--snapshot", str(SNAP), "--store", str(path), "-o", str(out))
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")
    assert "LEAKY" not in page and "--api-key &lt;redacted&gt;" in page


# ---- class 12: a snapshot listing thousands of DRM cards is read in bounded time ----

def test_5000_drm_cards_are_judged_in_bounded_time(make_snapshot) -> None:
    from tunehost.facts import HostFacts
    from tunehost.facts.gpu import MAX_DRM_CARDS, GpuFacts
    from tunehost.host import open_host

    fs = {}
    for i in range(5000):
        card = f"/sys/class/drm/card{i}/device"
        fs.update({f"{card}/vendor": "0x1002\n", f"{card}/device": "0x1586\n",
                   f"{card}/uevent": f"PCI_SLOT_NAME=0000:{i >> 8 & 255:02x}:{i & 31:02x}.{i % 8}\n",
                   f"{card}/mem_info_gtt_total": f"{64 << 30}\n"})
    snap = make_snapshot(fs=fs)
    with within("GPU facts of 5,000 DRM cards", seconds=10, peak_bytes=64 * MiB):
        gpus = HostFacts(open_host(snap)).get(GpuFacts).gpus
    assert 0 < len(gpus) <= MAX_DRM_CARDS
