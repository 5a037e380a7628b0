"""Reports fit an 80-column terminal: doctor's findings, evidence and fixes, `doctor --list-checks` and
`advise --calibrate` are folded at whole words (never inside a number), with hanging indentation; a fix command is
folded with line continuations that a shell still runs as the one command."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunehost.cli import app
from tunehost.formats.fold import fold, fold_command

SNAPSHOTS = sorted(p for p in (Path(__file__).parents[1] / "data" / "snapshots").iterdir() if p.is_dir())


def _run(*args: str, width: int = 80):
    return CliRunner().invoke(app, list(args), terminal_width=width, env={"COLUMNS": str(width)})


def _too_long(text: str, width: int = 80) -> list[str]:
    """Lines over `width`, except a fix command's word that no line could hold (a long quoted argument)."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            continue
        body = line.strip().removeprefix("$ ").removesuffix(" \\")
        if line.lstrip().startswith(("$ ", "'", '"')) and " " not in body.split("'", 1)[-1].rsplit("'", 1)[0] \
                and any(len(w) > width - 14 for w in body.split(" ")):
            continue  # one word too long for any line: kept whole so the command still runs
        out.append(line)
    return out


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=lambda p: p.name)
def test_doctor_report_fits_80_columns(snapshot):
    for extra in ([], ["--verbose"]):
        result = _run("doctor", "--snapshot", str(snapshot), *extra)
        assert result.exit_code in (0, 2), result.output
        assert not _too_long(result.stdout), _too_long(result.stdout)


def test_doctor_evidence_is_folded_under_its_source_never_cut_inside_a_number():
    server = next(p for p in SNAPSHOTS if p.name == "server-epyc9654-2s")
    lines = _run("doctor", "--snapshot", str(server), "--check", "core-topology").stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "thread_siblings_list:" in line)
    assert lines[start].startswith("      /sys/devices/system/cpu/cpu*/topology/thread_siblings_list: 0,192,")
    folded = []
    for line in lines[start + 1:]:
        if not line.startswith("        "):
            break
        folded.append(line)
    assert 1 <= len(folded) <= 3 and folded[-1].endswith(" ...")  # 4 lines at most without --verbose
    pairs = " ".join([lines[start].split(": ", 1)[1]] + [line.strip() for line in folded]).removesuffix(" ...")
    assert all(re.fullmatch(r"\d+,\d+,?", pair) for pair in pairs.split()), pairs  # whole "N,M" pairs only
    verbose = _run("doctor", "--snapshot", str(server), "--check", "core-topology", "--verbose").stdout
    assert "191,383" in verbose  # the whole value with --verbose


def test_doctor_summary_fix_and_commands_fold_with_indentation():
    desktop = next(p for p in SNAPSHOTS if p.name == "desktop-12700f-rtx3060")
    out = _run("doctor", "--snapshot", str(desktop), "--check", "cpu-epp").stdout
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("FAIL  cpu-epp  "))
    assert lines[head + 1].startswith("      ") and not lines[head + 1].startswith("       ")
    at = lines.index("        $ echo performance | sudo tee \\")  # continued, not cut
    assert lines[at + 1] == "            /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
    fix = next(i for i, line in enumerate(lines) if line.startswith("      fix: "))
    assert fix < at and all(line.startswith("      ") for line in lines[fix:at])


def test_list_checks_fits_80_columns():
    out = _run("doctor", "--list-checks").stdout
    assert not _too_long(out)
    assert out.splitlines()[0].startswith("ram-speed ")


def test_advise_calibrate_fits_80_columns(monkeypatch):
    from tests.store.test_store import _calibration_store
    from tunehost import store as store_module

    empty = _run("advise", "--calibrate")
    assert empty.exit_code == 0 and not _too_long(empty.stdout), empty.stdout
    monkeypatch.setattr(store_module.records, "host_identity", lambda host=None: ({"cpu": "x"}, "fp1"))
    _calibration_store("h-m")
    shown = _run("advise", "--calibrate")
    assert shown.exit_code == 0, shown.output
    assert not _too_long(shown.stdout), shown.stdout
    assert re.search(r"^class\s+runs\s+efficiency\s+per layer\s+published", shown.stdout, re.M)
    assert re.search(r"^CPU dense\s+3\s", shown.stdout, re.M)


def test_fold_breaks_between_words_and_marks_what_it_left_out():
    text = "cpu0=964, cpu1=1067, cpu2=1067, cpu3=1067, cpu4=1067, cpu5=1067, cpu6=1067, cpu7=1067"
    lines = fold(text, 30, "  ", "    ")
    assert all(len(line) <= 30 for line in lines)
    assert " ".join(line.strip() for line in lines) == text
    cut = fold(text, 30, "  ", "    ", max_lines=2)
    assert len(cut) == 2 and cut[-1].endswith(" ...") and len(cut[-1]) <= 30
    assert all(re.fullmatch(r"cpu\d+=\d+,?|\.\.\.", w) for line in cut for w in line.split())
    # a word longer than a line is split after a separator, else before a run of digits, never inside one
    long = fold("/sys/devices/system/cpu/cpu12/cpufreq/energy_performance_preference", 24)
    assert all(len(line) <= 24 for line in long) and "".join(long).startswith("/sys/devices/system/cpu/")
    digits = fold("abcdefghij1234567890", 14)
    assert digits == ["abcdefghij", "1234567890"]


@pytest.mark.parametrize("command", [
    "printf '%s|' alpha 'two words' \"$(echo three four)\" five six seven eight nine ten eleven twelve",
    "printf '%s|' one two three four five six seven eight nine ten   # a comment with many words in it",
    "echo performance | tee /dev/null /dev/null /dev/null /dev/null /dev/null /dev/null /dev/null",
])
def test_a_folded_command_runs_as_the_one_command(command):
    lines = fold_command(command, 40, "$ ", "    ")
    assert len(lines) > 1 and all(line.endswith(" \\") for line in lines[:-1])
    assert all(len(line) <= 40 for line in lines)
    script = "\n".join(lines)[2:]  # as pasted after the prompt
    folded = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
    whole = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10)
    assert folded.returncode == whole.returncode == 0 and folded.stdout == whole.stdout


def test_advise_report_fits_80_columns(tmp_path):
    from tests.advise.conftest import dense_tensors, write_gguf

    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    for snapshot in SNAPSHOTS:
        result = _run("advise", "--model", str(model), "--no-probe", "--snapshot", str(snapshot))
        assert result.exit_code in (0, 2), result.output
        command = result.stdout.split("\ncommand\n", 1)[1].split("\n\n", 1)[0]  # the command: whole, with "\"
        text = result.stdout.replace(command, "")
        assert not _too_long(text), (snapshot.name, _too_long(text))
        assert re.search(r"^  -t \d+  \S", result.stdout, re.M)  # each flag, then its reason
