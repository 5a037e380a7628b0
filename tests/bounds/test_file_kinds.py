"""Issue 22, class 5: a file tunehost is given or keeps is a regular file, or one clear line — never a hang (a FIFO),
never a write through a link, and the journal stays 0600."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, within
from tunehost.errors import TunehostError

KINDS = ["fifo", "directory", "device", "socket", "link-to-fifo", "absent"]
EXPECTED = {"fifo": "is a FIFO", "directory": "is a directory", "device": "is a character device",
            "socket": "cannot read", "link-to-fifo": "is a FIFO", "absent": "no such file"}


def make(kind: str, where: Path) -> Path:
    path = where / f"input-{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        return Path("/dev/null")
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif kind == "link-to-fifo":
        os.mkfifo(where / "target-fifo")
        path.symlink_to(where / "target-fifo")
    return path


def _read_model(path: Path) -> None:
    from tunehost.model import read_model

    read_model(path)


def _import(path: Path) -> None:
    from tunehost.bench.results import import_results

    import_results(path)


def _compare(path: Path) -> None:
    from tunehost.bench.results import load

    load(path)


def _mmproj(path: Path) -> None:
    from tunehost.inputs import input_file_size

    input_file_size(path, "a GGUF file")


READERS = {"--model/--draft": _read_model, "bench --import": _import, "bench --compare": _compare,
           "--mmproj": _mmproj}


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(KINDS), st.sampled_from(sorted(READERS)))
def test_an_input_that_is_not_a_regular_file_is_one_line(tmp_path_factory, kind: str, reader: str) -> None:
    """A FIFO given as --model, --draft, --import or --compare hung forever; --mmproj called it "no such file"."""
    path = make(kind, tmp_path_factory.mktemp("kinds"))
    with within(f"{reader} on a {kind}", seconds=2.0, peak_bytes=4 * MiB):
        with pytest.raises(TunehostError) as caught:
            READERS[reader](path)
    message = str(caught.value)
    assert EXPECTED[kind] in message and "\n" not in message, message


# --- the journal and the state directory -----------------------------------------------------------------------------

JOURNAL_KINDS = ["fifo", "symlink", "directory", "dir-symlink"]


def _journal_in(tmp_path: Path, kind: str):
    from tunehost.apply.journal import JOURNAL_NAME, Journal

    state = tmp_path / "state"
    state.mkdir()
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("")
    if kind == "fifo":
        os.mkfifo(state / JOURNAL_NAME)
    elif kind == "symlink":
        (state / JOURNAL_NAME).symlink_to(elsewhere)
    elif kind == "directory":
        (state / JOURNAL_NAME).mkdir()
    elif kind == "dir-symlink":
        real = tmp_path / "real-state"
        real.mkdir()
        state.rmdir()
        state.symlink_to(real)
    return Journal(state), elsewhere


def _operations(journal) -> dict:
    return {"read": journal.runs, "append": lambda: journal.append({"type": "begin", "run": "r", "profile": "x"}),
            "ensure_writable": journal.ensure_writable}


@settings(max_examples=16, deadline=None)
@given(st.sampled_from(JOURNAL_KINDS), st.sampled_from(["read", "append", "ensure_writable"]))
def test_a_journal_that_is_not_a_regular_file_is_refused(tmp_path_factory, kind: str, operation: str) -> None:
    """A FIFO at the journal path hung apply, status, verify and rollback; a symlinked journal was appended to
    through the link."""
    tmp_path = tmp_path_factory.mktemp("journal")
    journal, elsewhere = _journal_in(tmp_path, kind)
    with within(f"journal {operation} on a {kind}", seconds=2.0, peak_bytes=4 * MiB):
        try:
            _operations(journal)[operation]()
        except TunehostError as exc:
            assert "\n" not in str(exc) and ("refused" in str(exc) or "not writable" in str(exc)), str(exc)
        else:
            pytest.fail(f"the journal as a {kind} was accepted by {operation}")
    assert elsewhere.read_text() == ""  # nothing written through a link


def test_the_journal_mode_is_enforced(tmp_path: Path) -> None:
    from tunehost.apply.journal import Journal

    journal = Journal(tmp_path / "state")
    journal.ensure_writable()
    journal.append({"type": "begin", "run": "r1", "profile": "x"})
    journal.path.chmod(0o644)
    journal.append({"type": "end", "run": "r1", "status": "applied"})
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600


@pytest.mark.parametrize("command", ["status", "verify", "rollback"])
def test_cli_commands_on_a_fifo_journal_are_one_line(tmp_path: Path, cli, command: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "journal.jsonl")
    env = {"TUNEHOST_STATE_DIR": str(state), "TUNEHOST_ROOT": str(tmp_path)}
    with within(f"{command} on a FIFO journal", seconds=10.0, peak_bytes=64 * MiB):
        result = cli(command, env=env)
    assert result.exit_code == 1 and "is a FIFO, not a file tunehost wrote: refused" in result.stderr, result.output


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(sorted(READERS) + ["journal"]), st.sampled_from([0, 1, 4096, 17 * MiB, 65 * MiB, 1 << 36]))
def test_a_file_of_any_size_costs_the_cap_at_most(tmp_path_factory, reader: str, size: int) -> None:
    """Sizes up to what a disk holds (a sparse 64 GiB file): each reader stops at its cap, or refuses unread."""
    where = tmp_path_factory.mktemp("sizes")
    path = where / "journal.jsonl" if reader == "journal" else where / "input"
    with open(path, "wb") as fh:
        fh.truncate(size)
    if reader == "journal":
        from tunehost.apply.journal import Journal

        def read(_: Path) -> None:
            Journal(where).runs()
    else:
        read = READERS[reader]
    with within(f"{reader} on {size} bytes", seconds=5.0, peak_bytes=48 * MiB):
        try:
            read(path)
        except TunehostError as exc:
            assert "\n" not in str(exc)
