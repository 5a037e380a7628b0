"""A damaged journal (issue 12): status, verify and rollback through the real CLI report "journal damaged at line N:
why" in one line, never a traceback, change nothing they should not, and rollback still undoes every intact step."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.apply.fakehost import build_root, tree
from tunehost.apply.engine import apply_plan, build_plan
from tunehost.apply.journal import Journal, parse_record
from tunehost.apply.profiles import builtin_dir, load_profile
from tunehost.apply.root import open_writable_root

SWAPPINESS = "proc/sys/vm/swappiness"


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = build_root(tmp_path / "root", "intel_pstate", cpus=2)
    monkeypatch.setenv("TUNEHOST_ROOT", str(r))
    return r


def applied(root) -> tuple[Journal, list[bytes], dict]:
    """Apply `throughput` to the root (as `tunehost apply` does); the journal, its lines and the tree before."""
    before = tree(root)
    host = open_writable_root(root)
    journal = Journal()
    journal.ensure_writable()
    outcome = apply_plan(host, build_plan(host, load_profile("throughput", [builtin_dir()])), journal,
                         root=str(root.resolve()))
    assert outcome.ok and outcome.changed
    return journal, journal.path.read_bytes().splitlines(), before


def line_of(lines: list[bytes], **match) -> int:
    """The index of the first intact record whose fields match."""
    return next(i for i, raw in enumerate(lines)
                if all(json.loads(raw).get(k) == v for k, v in match.items()))


def swappiness_intent(lines: list[bytes]) -> int:
    return next(i for i, raw in enumerate(lines) if json.loads(raw).get("kind") == "setting"
                and json.loads(raw)["knob"]["key"] == "swappiness")


def one_error_line(result) -> str:
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("tunehost: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def _edit(lines, index, change):
    rec = json.loads(lines[index])
    change(rec)
    return lines[:index] + [json.dumps(rec).encode()] + lines[index + 1:]


DAMAGE = {
    "non-utf8": (lambda lines, i: lines[:i] + [b'{"type": "intent", "\xff\xfe": 1}'] + lines[i + 1:], "not UTF-8"),
    "wrong-type-step": (lambda lines, i: _edit(lines, i, lambda r: r.update(step="one")),
                        "intent record without a step number"),
    "missing-step": (lambda lines, i: _edit(lines, i, lambda r: r.pop("step")), "intent record without a step number"),
    "unknown-knob-kind": (lambda lines, i: _edit(lines, i, lambda r: r["knob"].update(kind="bogus")),
                          "unknown knob kind 'bogus'"),
    "wrong-type-knob": (lambda lines, i: _edit(lines, i, lambda r: r.update(knob=["x"])), "knob is not an object"),
    "run-id-a-list": (lambda lines, i: _edit(lines, i, lambda r: r.update(run=[1])), "without a run id"),
    "not-json": (lambda lines, i: lines[:i] + [b'{"type": "intent", "run": '] + lines[i + 1:], "not JSON"),
    "nan": (lambda lines, i: lines[:i] + [lines[i].replace(b'"previous"', b'"x": NaN, "previous"')] + lines[i + 1:],
            "not JSON"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_step_is_reported_and_every_intact_step_is_rolled_back(cli, root, case):
    journal, lines, before = applied(root)
    damage, why = DAMAGE[case]
    index = swappiness_intent(lines)
    journal.path.write_bytes(b"\n".join(damage(lines, index)) + b"\n")
    damaged_bytes, changed_tree = journal.path.read_bytes(), tree(root)

    for command in ("status", "verify"):
        result = cli(command)
        assert result.exit_code == 1, (command, result.output)
        error = one_error_line(result)
        assert f"journal damaged at line {index + 1}: " in error and why in error, error
        assert journal.path.read_bytes() == damaged_bytes and tree(root) == changed_tree

    result = cli("rollback")
    assert result.exit_code == 1, result.output
    error = one_error_line(result)
    assert f"journal damaged at line {index + 1}: " in error and why in error
    assert "every intact step was rolled back" in error
    assert "restored  governor[cpu0]" in result.stdout
    # every step but the damaged one is undone: only swappiness keeps the value the apply set
    after = tree(root)
    assert after[SWAPPINESS] == b"10\n"
    assert {k: v for k, v in after.items() if k != SWAPPINESS} == {k: v for k, v in before.items() if k != SWAPPINESS}

    again = cli("rollback")  # nothing intact is left to undo; the damage is still said, in one line
    assert again.exit_code == 1 and "journal damaged at line" in one_error_line(again)
    apply = cli("apply", "--profile", "throughput", "--yes")  # never appends to a damaged safety net
    assert apply.exit_code == 1 and "nothing was changed" in one_error_line(apply)


def test_a_damaged_begin_line_still_rolls_back_its_steps(cli, root):
    journal, lines, before = applied(root)
    index = line_of(lines, type="begin")
    journal.path.write_bytes(b"\n".join(lines[:index] + [b"\x00garbage"] + lines[index + 1:]) + b"\n")
    result = cli("rollback")
    assert result.exit_code == 1
    assert f"journal damaged at line {index + 1}: not JSON" in one_error_line(result)
    assert tree(root) == before


def test_a_last_line_cut_short_by_a_crash_is_a_warning_and_rollback_completes(cli, root):
    journal, lines, before = applied(root)
    with open(journal.path, "ab") as fh:
        fh.write(b'{"type": "intent", "run": "x", "st')
    status = cli("status")
    assert status.exit_code == 0 and "throughput: applied" in status.stdout
    assert f"tunehost: warning: journal damaged at line {len(lines) + 1}: cut short" in status.stderr
    result = cli("rollback")
    assert result.exit_code == 0, result.output
    assert "rollback complete" in result.stdout and tree(root) == before
    # the next record starts on a line of its own: the cut line does not swallow it
    assert all(parse_record(raw)[0] is not None for raw in journal.path.read_bytes().splitlines()[:-len(lines)]
               if not raw.startswith(b'{"type": "intent", "run": "x"'))
    assert cli("status").stdout.startswith("no profile applied")


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_an_empty_journal_is_a_clean_one(cli, root, content, tmp_path):
    path = tmp_path / "state" / "journal.jsonl"
    path.parent.mkdir()
    path.write_bytes(content)
    for command, code, text in (("status", 0, "no profile applied"), ("rollback", 0, "nothing to roll back"),
                                ("verify", 1, "nothing to verify")):
        result = cli(command)
        assert result.exit_code == code and text in result.output and "Traceback" not in result.output
    assert path.read_bytes() == content


def test_garbage_only_journal_says_where(cli, root, tmp_path):
    path = tmp_path / "state" / "journal.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00[1, 2]\n")
    for command in ("status", "verify", "rollback"):
        result = cli(command)
        assert result.exit_code == 1
        assert "journal damaged at line 1: not UTF-8" in one_error_line(result)
    assert path.read_bytes() == b"\x89PNG\r\n\x1a\n\x00\x00[1, 2]\n"


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_the_journal_is_created_0600_whatever_the_umask(root, umask):
    old = os.umask(umask)
    try:
        journal, _, _ = applied(root)
    finally:
        os.umask(old)
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(journal.dir.stat().st_mode) == 0o700


def test_nothing_to_change_writes_no_journal(cli, root, tmp_path):
    journal = tmp_path / "state" / "journal.jsonl"
    assert cli("apply", "--profile", "throughput", "--yes").exit_code == 0 and journal.exists()
    journal.unlink()
    second = cli("apply", "--profile", "throughput", "--yes")
    assert second.exit_code == 0 and "nothing to change" in second.stdout
    assert not journal.exists()


def test_a_state_dir_that_is_a_file_says_so(cli, root, tmp_path, monkeypatch):
    blocker = tmp_path / "state-file"
    blocker.write_text("keep")
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(blocker))
    before = tree(root)
    result = cli("apply", "--profile", "throughput", "--yes")
    assert result.exit_code == 1
    assert one_error_line(result) == (f"tunehost: error: the journal directory {blocker} is a file, not a directory; "
                                      "nothing was changed (set TUNEHOST_STATE_DIR to a directory)")
    assert tree(root) == before and blocker.read_text() == "keep"


def test_status_with_a_state_dir_that_is_a_file_says_so(cli, tmp_path, monkeypatch):
    blocker = tmp_path / "state-file"
    blocker.write_text("keep")
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(blocker))
    for command in ("status", "verify"):
        assert "is a file, not a directory" in one_error_line(cli(command))
    assert blocker.read_text() == "keep"
