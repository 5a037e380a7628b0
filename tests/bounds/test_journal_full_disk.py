"""Issue 22, class 8: the journal is write-ahead and honest on a full disk. The k-th journal write fails with ENOSPC
(for every k an apply or rollback makes); whatever k is: the journal ends in no cut record, every change on the host
has its undo record in the journal (a change whose record could not be written was not made), a rollback restores
everything and says what it could not record, and status/verify read the host. One lock for apply/rollback."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bounds.limits import MiB, within
from tests.apply.fakehost import build_root, kernel_host, tree
from tunehost.errors import TunehostError
from tunehost.apply import journal as journal_module
from tunehost.apply.engine import apply_plan, build_plan, host_state, rollback
from tunehost.apply.journal import Journal
from tunehost.apply.profiles import builtin_dir, load_profile

ENOSPC = OSError(errno.ENOSPC, "No space left on device")
REAL_PWRITE = os.pwrite


class FullDisk:
    """Journal writes succeed `room` times, then the disk is full: the reservation fails, or (`short`) the
    filesystem has no fallocate and the write comes up short."""

    def __init__(self, room: int, short: bool):
        self.room, self.short, self.writes = room, short, 0

    def reserve(self, fd: int, offset: int, length: int) -> None:
        if not self.short and self.writes >= self.room:
            raise ENOSPC

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        self.writes += 1
        if self.writes > self.room:
            if not self.short:
                raise ENOSPC
            return REAL_PWRITE(fd, data[: len(data) // 2], offset)
        return REAL_PWRITE(fd, data, offset)


def _setup(tmp_path: Path):
    root = build_root(tmp_path / "root", "intel_pstate", cpus=2)
    host = kernel_host(root)
    journal = Journal(tmp_path / "state")
    journal.ensure_writable()
    return root, host, journal


def _journalled_targets(journal: Journal) -> set[str]:
    """The knobs whose undo record (intent) the journal holds."""
    return {repr(sorted(i["knob"].items())) for run in journal.runs() for i in run.intents.values()
            if i.get("kind") == "setting"}


def _changed_knobs(plan, host) -> set[str]:
    return {repr(sorted(c.knob.to_record().items())) for c in plan.changes if c.knob.get(host) != c.current}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 30), st.booleans())
def test_apply_on_a_full_disk_changes_nothing_unrecorded(tmp_path_factory, monkeypatch, room: int,
                                                         short: bool) -> None:
    tmp_path = tmp_path_factory.mktemp("apply")
    root, host, journal = _setup(tmp_path)
    before = tree(root)
    disk = FullDisk(room, short)
    plan = build_plan(host, load_profile("throughput", [builtin_dir()]))
    with monkeypatch.context() as patch:
        patch.setattr(journal_module, "_reserve", disk.reserve)
        patch.setattr(journal_module.os, "pwrite", disk.pwrite)
        with within(f"apply with room for {room} records", seconds=10.0, peak_bytes=16 * MiB):
            try:
                outcome = apply_plan(host, plan, journal, root=str(root))
            except TunehostError as exc:  # the begin record itself: nothing was changed
                assert "nothing was changed" in str(exc) and tree(root) == before
                outcome = None
    state = journal.read()
    assert state.damage == (), state.damage  # never a cut record
    assert _changed_knobs(plan, host) <= _journalled_targets(journal)  # write-ahead: no change without its record
    if outcome is not None and not outcome.ok:
        assert tree(root) == before  # the failed apply reverted what it had made
        assert all("no space left on device" in u or "wrote" in u for u in outcome.unrecorded)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 12), st.booleans())
def test_rollback_on_a_full_disk_restores_everything_and_says_what_it_could_not_record(
        tmp_path_factory, monkeypatch, room: int, short: bool) -> None:
    tmp_path = tmp_path_factory.mktemp("rollback")
    root, host, journal = _setup(tmp_path)
    before = tree(root)
    plan = build_plan(host, load_profile("throughput", [builtin_dir()]))
    assert apply_plan(host, plan, journal, root=str(root)).ok
    disk = FullDisk(room, short)
    with monkeypatch.context() as patch:
        patch.setattr(journal_module, "_reserve", disk.reserve)
        patch.setattr(journal_module.os, "pwrite", disk.pwrite)
        with within(f"rollback with room for {room} records", seconds=10.0, peak_bytes=16 * MiB):
            outcome = rollback(host, journal, root=str(root))
    assert tree(root) == before  # every value restored, journal or not
    assert journal.read().damage == ()
    [run] = [r for r in journal.runs() if r.id == outcome.run.id]
    if outcome.unrecorded:  # the journal still calls it active: the host says otherwise
        assert run.active and host_state(host, run).undone_on_host
        assert all("no space left on device" in u or "wrote" in u for u in outcome.unrecorded)
    else:
        assert not run.active
    again = rollback(host, journal, root=str(root))  # with space again: the rollback is recorded, nothing changes
    assert tree(root) == before and (again.run is None or not again.unrecorded)
    assert journal.active_runs() == []


def test_rollback_that_cannot_journal_is_honest_in_the_cli(tmp_path: Path, cli, monkeypatch) -> None:
    root, host, journal = _setup(tmp_path)
    plan = build_plan(host, load_profile("throughput", [builtin_dir()]))
    assert apply_plan(host, plan, journal, root=str(root)).ok
    env = {"TUNEHOST_ROOT": str(root), "TUNEHOST_STATE_DIR": str(journal.dir)}
    disk = FullDisk(0, False)
    with monkeypatch.context() as patch:
        patch.setattr(journal_module, "_reserve", disk.reserve)
        result = cli("rollback", env=env)
    assert result.exit_code == 1
    assert "the host is rolled back (" in result.stderr and "could not record it" in result.stderr
    status = cli("status", env=env)
    assert "rolled back on the host" in status.stdout and "in effect" not in status.stdout
    verify = cli("verify", env=env)
    assert verify.exit_code == 1 and "is not in effect" in verify.stderr and "DRIFT" not in verify.stdout


def test_one_apply_or_rollback_at_a_time(tmp_path: Path) -> None:
    root, host, journal = _setup(tmp_path)
    plan = build_plan(host, load_profile("throughput", [builtin_dir()]))
    with journal.lock():
        with pytest.raises(TunehostError, match="another tunehost apply or rollback is running"):
            apply_plan(host, plan, Journal(journal.dir), root=str(root))
        with pytest.raises(TunehostError, match="another tunehost apply or rollback is running"):
            rollback(host, Journal(journal.dir), root=str(root))
    assert journal.runs() == []
    assert apply_plan(host, plan, journal, root=str(root)).ok  # the lock is released
