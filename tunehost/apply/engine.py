"""Plan (a ChangePlan), apply, verify and roll back a profile. Returns data; the CLI renders it.

    plan = build_plan(host, load_profile("throughput"), persist=False, findings=doctor_findings(host))
    outcome = apply_plan(host, plan, Journal(), root="/")      # journalled; reverts itself if a step fails
    verify(host, Journal(), root="/")                           # drift since the last apply
    rollback(host, Journal(), root="/")                         # undo the last apply, leaving others' changes

Safety rules: every change is journalled (fsync'd) before it is made; a failing step reverts the steps already made, in
reverse order; rollback restores a value only while it is still what tunehost set.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from tunehost.errors import TunehostError
from tunehost.apply.journal import Journal, JournalUnwritable, Run, new_run_id
from tunehost.apply.persist import config_files
from tunehost.apply.profiles import Profile
from tunehost.apply.settings import SETTINGS, Knob, PowerDaemonBootKnob, PowerDaemonKnob, Skip, knob_from_record

if TYPE_CHECKING:
    from tunehost.check import Finding
    from tunehost.host import Host

MAX_BACKUP_BYTES = 16 * 1024 * 1024  # a configuration file tunehost replaced (sysctl.d, tmpfiles.d): a few KB

# doctor checks whose findings a setting of the plan may fix; any other fail/warn finding is a manual step
RELATED_CHECKS: dict[str, tuple[str, ...]] = {
    "cpu-governor": ("governor",),
    "cpu-epp": ("epp",),
    "cpu-frequency": ("boost",),
    "thp": ("thp", "thp_defrag"),
    "swap": ("swappiness",),
    "power-manager": ("power_daemon", "tuned_profile", "power_profile"),
}


# --- the plan ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    knob: Knob
    current: str | None
    target: str

    @property
    def needed(self) -> bool:
        return self.current != self.target


@dataclass(frozen=True)
class FileChange:
    path: str
    content: str
    previous: str | None  # None: the file does not exist

    @property
    def needed(self) -> bool:
        return self.previous != self.content


@dataclass(frozen=True)
class DoctorItem:
    """A fail/warn doctor finding: `fixed_by` names the plan's settings that address it; empty = a manual step."""

    check: str
    severity: str
    summary: str
    fix: str | None
    commands: tuple[str, ...]
    fixed_by: tuple[str, ...] = ()
    intended: tuple[str, ...] = ()  # the profile holds this state on purpose (boost off in `benchmark`)


@dataclass(frozen=True)
class ChangePlan:
    profile: Profile
    changes: tuple[Change, ...]
    skipped: tuple[Skip, ...]
    files: tuple[FileChange, ...] = ()
    doctor: tuple[DoctorItem, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def to_change(self) -> list[Change]:
        return [c for c in self.changes if c.needed]

    @property
    def already(self) -> list[Change]:
        return [c for c in self.changes if not c.needed]

    @property
    def files_to_write(self) -> list[FileChange]:
        return [f for f in self.files if f.needed]

    @property
    def manual(self) -> list[DoctorItem]:
        return [d for d in self.doctor if not d.fixed_by and not d.intended]

    @property
    def empty(self) -> bool:
        return not self.to_change and not self.files_to_write


def build_plan(host: "Host", profile: Profile, *, persist: bool = False,
               findings: Iterable["Finding"] | None = None, doctor_note: str | None = None) -> ChangePlan:
    """Every knob of the profile on this host with its current value; reads only."""
    changes: list[Change] = []
    skipped: list[Skip] = []
    for key, target in profile.targets().items():
        for item in SETTINGS[key].expand(host, target):
            if isinstance(item, Skip):
                skipped.append(item)
            else:
                changes.append(Change(item, item.get(host), target))
    files: list[FileChange] = []
    notes: list[str] = []
    if doctor_note:
        notes.append(doctor_note)
    if persist:
        for cf in config_files(profile.name, [(c.knob, c.target) for c in changes]):
            files.append(FileChange(cf.path, cf.content, host.files.read(cf.path)))
        if any(c.knob.key in ("tuned_profile", "power_profile") for c in changes):
            notes.append("TuneD and power-profiles-daemon keep their active profile across reboots themselves")
        for change in [c for c in changes if isinstance(c.knob, PowerDaemonKnob)]:
            boot = PowerDaemonBootKnob(f"{change.knob.key}_boot")  # the same daemon at the next boot
            enabled = boot.get(host)
            if enabled is not None:
                changes.append(Change(boot, enabled, change.target))
    changing = {c.knob.key for c in changes if c.needed}
    # keys the profile deliberately holds below "fastest" (boost off): a finding about them is the profile's choice
    deliberate = {c.knob.key for c in changes if not c.needed and c.knob.key == "boost" and c.target == "off"}
    doctor: list[DoctorItem] = []
    for f in findings or ():
        if f.severity.value not in ("fail", "warn"):
            continue
        related = RELATED_CHECKS.get(f.check, ())
        fixed_by = tuple(k for k in related if k in changing)
        intended = tuple(k for k in related if k in deliberate) if not fixed_by else ()
        doctor.append(DoctorItem(f.check, f.severity.value, f.summary, f.fix.text if f.fix else None,
                                 tuple(f.fix.commands) if f.fix else (), fixed_by, intended))
    return ChangePlan(profile, tuple(changes), tuple(skipped), tuple(files), tuple(doctor), tuple(notes))


def doctor_findings(host: "Host") -> tuple[list["Finding"], str | None]:
    """The doctor's findings on this host (for manual steps); never raises: a broken doctor is a note."""
    try:
        from tunehost.doctor import run_doctor
        from tunehost.facts import HostFacts
        from tunehost.doctor.registry import load_checks

        loaded = load_checks()
        return list(run_doctor(HostFacts(host), loaded.checks).findings), None
    except Exception as exc:  # the plan must still be shown
        return [], f"tunehost doctor could not run, so manual steps are not listed: {exc.__class__.__name__}: {exc}"


# --- apply -------------------------------------------------------------------------------------------------------------

@dataclass
class ApplyOutcome:
    run: str | None
    changed: list[tuple[str, str | None, str]] = field(default_factory=list)  # (name, before, after)
    already: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    failed: str | None = None  # what failed, when the apply was reverted
    undo: list[dict[str, Any]] = field(default_factory=list)  # the revert's outcomes, when it failed
    unrecorded: list[str] = field(default_factory=list)  # journal records of the revert that could not be written

    @property
    def ok(self) -> bool:
        return self.failed is None


def _record(journal: Journal, record: dict[str, Any], outcome: "ApplyOutcome | RollbackOutcome") -> None:
    """Append a record that follows a change already made (a result, an undo, an end): when the journal cannot
    take it, the change stands and `outcome.unrecorded` says what the journal is missing."""
    try:
        journal.append(record)
    except JournalUnwritable as exc:
        outcome.unrecorded.append(f"{record['type']} record: {exc}")


class StepFailed(Exception):
    pass


def sha256(data: str | bytes | None) -> str | None:
    if data is None:
        return None
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def apply_plan(host: "Host", plan: ChangePlan, journal: Journal, *, root: str) -> ApplyOutcome:
    """Make the plan's changes, each journalled before it is made. A failing step reverts all of them.

    Call `journal.ensure_writable()` first (the CLI does). Nothing is recorded when there is nothing to change.
    """
    if plan.empty:
        return ApplyOutcome(None, already=[c.knob.name for c in plan.changes])
    with journal.lock():
        return _apply_locked(host, plan, journal, root=root)


def _apply_locked(host: "Host", plan: ChangePlan, journal: Journal, *, root: str) -> ApplyOutcome:
    run = new_run_id()
    try:
        journal.append({
            "type": "begin", "run": run, "time": time.time(), "profile": plan.profile.name, "root": root,
            "settings": plan.profile.targets(),
            "expect": [{"knob": c.knob.to_record(), "target": c.target} for c in plan.changes],
            "files": [{"path": f.path, "sha256": sha256(f.content)} for f in plan.files],
            "skipped": [{"key": sk.key, "unit": sk.unit, "reason": sk.reason} for sk in plan.skipped],
        })
    except JournalUnwritable as exc:
        raise TunehostError(f"{exc}: nothing was changed") from None
    outcome = ApplyOutcome(run)
    step = 0
    intents: list[dict[str, Any]] = []  # kept in memory: the revert must not depend on reading the journal back
    pending: int | None = None  # a step whose intent is written and whose result is not
    try:
        for change in plan.changes:
            knob = change.knob
            previous = knob.get(host)  # now, not at plan time: an earlier step may have changed it (shared policy)
            if previous == change.target:
                outcome.already.append(knob.name)
                continue
            if previous is None:
                raise StepFailed(f"{knob.name}: {knob.where} can no longer be read")
            step += 1
            intent = {"type": "intent", "run": run, "step": step, "kind": "setting",
                      "knob": knob.to_record(), "target": change.target, "previous": previous}
            journal.append(intent)  # durable before the host is changed; JournalUnwritable: not changed at all
            intents.append(intent)
            pending = step
            wrote = knob.set(host, change.target)
            after = knob.get(host)
            if after != change.target:
                raise StepFailed(f"{knob.name}: wrote {wrote!r} to {knob.where} but it reads back {after!r}")
            journal.append({"type": "result", "run": run, "step": step, "ok": True, "wrote": wrote, "after": after})
            pending = None
            outcome.changed.append((knob.name, previous, after))
        for fc in plan.files:
            current = host.files.read_bytes(fc.path)
            if current is not None and current == fc.content.encode():
                continue
            step += 1
            backup = _save_backup(journal, run, step, fc.path, current)
            parent = fc.path.rsplit("/", 1)[0]
            created = _missing_dirs(host, parent)
            intent = {"type": "intent", "run": run, "step": step, "kind": "file", "path": fc.path,
                      "target_sha256": sha256(fc.content), "previous_sha256": sha256(current),
                      "backup": backup, "created_dirs": created}
            journal.append(intent)
            intents.append(intent)
            pending = step
            if created:
                host.files.make_dirs(parent)
            host.files.write(fc.path, fc.content)
            journal.append({"type": "result", "run": run, "step": step, "ok": True, "wrote": fc.path,
                            "after": sha256(host.files.read_bytes(fc.path))})
            pending = None
            outcome.files.append(fc.path)
    except (Exception, KeyboardInterrupt) as exc:
        why = str(exc) if isinstance(exc, (StepFailed, JournalUnwritable)) else f"{exc.__class__.__name__}: {exc}"
        if isinstance(exc, JournalUnwritable):
            why += " (so that change was not made)"
        if pending is not None:
            _record(journal, {"type": "result", "run": run, "step": pending, "ok": False, "error": why}, outcome)
        outcome.failed = why
        outcome.undo = undo_steps(host, journal, run, intents[::-1], force=True)
        outcome.unrecorded.extend(u["unrecorded"] for u in outcome.undo if "unrecorded" in u)
        status = "reverted" if all(u["outcome"] != "failed" for u in outcome.undo) else "revert-incomplete"
        _record(journal, {"type": "end", "run": run, "status": status, "time": time.time()}, outcome)
        return outcome
    _record(journal, {"type": "end", "run": run, "status": "applied", "time": time.time()}, outcome)
    return outcome


def _missing_dirs(host: "Host", directory: str) -> list[str]:
    """The directories that writing into `directory` creates, outermost first ([] when it exists)."""
    missing = []
    while directory and directory != "/" and not host.files.is_dir(directory):
        missing.append(directory)
        directory = directory.rsplit("/", 1)[0]
    return missing[::-1]


def _save_backup(journal: Journal, run: str, step: int, path: str, content: bytes | None) -> str | None:
    """Keep a copy of a configuration file before it is replaced (fsync'd); None when there was no file."""
    if content is None:
        return None
    import os

    directory = journal.dir / "backups" / run
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / f"{step}{path.replace('/', '_')}"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    try:
        os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    return str(target)


# --- undo (revert after a failure, and rollback) ---------------------------------------------------------------------

def undo_steps(host: "Host", journal: Journal, run: str, intents: list[dict[str, Any]], *,
               force: bool) -> list[dict[str, Any]]:
    """Undo intents in the order given. force=False (rollback): only where the value is still what tunehost set."""
    outcomes = []
    for intent in intents:
        try:
            out = _undo_one(host, intent, force=force)
        except (Exception, KeyboardInterrupt) as exc:  # keep going: every other step still deserves its undo
            out = {"outcome": "failed", "error": f"{exc.__class__.__name__}: {exc}"}
        out = {"type": "undo", "run": run, "step": intent["step"], "name": _intent_name(intent), **out}
        try:
            journal.append(out)
        except JournalUnwritable as exc:  # the value is restored all the same: say what the journal lacks
            out = {**out, "unrecorded": f"undo of {out['name']}: {exc}"}
        outcomes.append(out)
    return outcomes


def _intent_name(intent: dict[str, Any]) -> str:
    if intent.get("kind") == "file":
        return str(intent.get("path"))
    try:
        return knob_from_record(intent["knob"]).name
    except (KeyError, TypeError):
        return "?"


def _undo_one(host: "Host", intent: dict[str, Any], *, force: bool) -> dict[str, Any]:
    if intent.get("kind") == "file":
        return _undo_file(host, intent, force=force)
    knob = knob_from_record(intent["knob"])
    previous, target = intent["previous"], intent["target"]
    current = knob.get(host)
    if current == previous:
        return {"outcome": "unchanged", "value": current}
    if current != target and not force:
        return {"outcome": "left", "value": current, "target": target, "previous": previous}
    knob.set(host, previous)
    after = knob.get(host)
    if after != previous:
        return {"outcome": "failed", "error": f"wrote {previous!r} but it reads back {after!r}", "value": after}
    return {"outcome": "restored", "value": previous, "was": current}


def _undo_file(host: "Host", intent: dict[str, Any], *, force: bool) -> dict[str, Any]:
    path = intent["path"]
    current = sha256(host.files.read_bytes(path))
    if current == intent["previous_sha256"]:
        if current is None:  # an apply interrupted between creating the directories and writing the file
            _remove_created_dirs(host, intent)
        return {"outcome": "unchanged"}
    if current != intent["target_sha256"] and not force:
        return {"outcome": "left", "value": f"sha256 {current}" if current else "(removed)"}
    backup = intent.get("backup")
    if backup is None:
        if current is not None:
            host.files.remove(path)
        _remove_created_dirs(host, intent)
        return {"outcome": "restored", "value": "(removed)"}
    from tunehost.inputs import read_input_file

    data = read_input_file(backup, "a backup tunehost wrote", limit=MAX_BACKUP_BYTES)  # a FIFO planted: one line
    if len(data) > MAX_BACKUP_BYTES:
        raise TunehostError(f"the backup {backup} is larger than {MAX_BACKUP_BYTES >> 20} MiB: not tunehost's")
    host.files.write(path, data.decode())
    return {"outcome": "restored", "value": f"restored from {backup}"}


def _remove_created_dirs(host: "Host", intent: dict[str, Any]) -> None:
    """Remove the directories the apply created for a file, innermost first, while they are empty (a directory
    someone has since put files in is kept)."""
    for directory in reversed(intent.get("created_dirs") or []):
        if not host.files.is_dir(directory):
            continue
        try:
            host.files.remove_dir(directory)
        except OSError:
            return


@dataclass
class RollbackOutcome:
    run: Run | None
    undo: list[dict[str, Any]] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)  # records the journal could not take (a full disk)
    still_active: list[Run] = field(default_factory=list)  # earlier applies still in effect (stacked), oldest first

    @property
    def complete(self) -> bool:
        return all(u["outcome"] != "failed" for u in self.undo)


def _check_root(run: Run, root: str) -> None:
    if run.begin_damaged:
        return  # the root it acted on is lost with its begin line: the one this command runs on is the only guess
    if run.root != root:
        raise TunehostError(f"the last apply ({run.profile}, run {run.id}) acted on root {run.root}, not {root}: "
                            f"run this with TUNEHOST_ROOT={run.root}" if run.root != "/" else
                            f"the last apply ({run.profile}, run {run.id}) acted on the live host: unset TUNEHOST_ROOT")


def rollback(host: "Host", journal: Journal, *, root: str) -> RollbackOutcome:
    """Undo the most recent active apply (an interrupted one included), newest step first."""
    with journal.lock():
        active = journal.active_runs()
        if not active:
            return RollbackOutcome(None)
        run = active[-1]
        _check_root(run, root)
        intents = [run.intents[s] for s in reversed(run.steps())]
        outcome = RollbackOutcome(run, undo_steps(host, journal, run.id, intents, force=False))
        outcome.unrecorded.extend(u["unrecorded"] for u in outcome.undo if "unrecorded" in u)
        _record(journal, {"type": "rolled-back", "run": run.id, "time": time.time(), "complete": outcome.complete},
                outcome)
        outcome.still_active = active[:-1]  # applied before this one: their changes are still on the host
        return outcome


# --- verify and status -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Drift:
    name: str
    where: str
    target: str
    current: str | None


@dataclass
class VerifyReport:
    run: Run
    held: list[str] = field(default_factory=list)
    drift: list[Drift] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # back at the value the apply found (a rollback, maybe unjournalled)

    @property
    def ok(self) -> bool:
        return not self.drift and not self.run.interrupted

    @property
    def undone_on_host(self) -> bool:
        """The host holds none of the run and every changed setting is back at its value before the apply: a
        rollback happened that the journal could not record (a full disk). Read from the host, not the journal."""
        return bool(self.restored) and not self.held and len(self.restored) == len(self.drift)


def verify(host: "Host", journal: Journal, *, root: str) -> VerifyReport:
    """Compare the live state with what the last apply set. TunehostError when nothing is applied."""
    active = journal.active_runs()
    if not active:
        raise TunehostError("no profile is applied by tunehost: nothing to verify (see `tunehost status`)")
    run = active[-1]
    _check_root(run, root)
    return host_state(host, run)


def host_state(host: "Host", run: Run) -> VerifyReport:
    """What the host holds of `run`, read from the host: each expected setting held, drifted, or back at the value
    the apply recorded as `previous` (restored: a rollback the journal may not know about)."""
    report = VerifyReport(run)
    before = {}
    for intent in run.intents.values():
        if intent.get("kind") == "setting":
            before[repr(sorted(intent["knob"].items()))] = intent["previous"]
        elif intent.get("kind") == "file":
            before[intent["path"]] = intent.get("previous_sha256")
    for item in run.begin.get("expect", []):
        knob = knob_from_record(item["knob"])
        current = knob.get(host)
        key = repr(sorted(item["knob"].items()))
        if current == item["target"]:
            report.held.append(knob.name)
            continue
        report.drift.append(Drift(knob.name, knob.where, item["target"], current))
        if key in before and current == before[key]:
            report.restored.append(knob.name)
    for item in run.begin.get("files", []):
        current = sha256(host.files.read_bytes(item["path"]))
        if current == item["sha256"]:
            report.held.append(item["path"])
            continue
        report.drift.append(Drift(item["path"], item["path"], "as written by tunehost",
                                  "changed" if current else "missing"))
        if item["path"] in before and current == before[item["path"]]:
            report.restored.append(item["path"])
    return report


@dataclass(frozen=True)
class SettingState:
    """What an apply did with one key of its profile, from its journal records (`tunehost status`).

    state: "changed" (tunehost set it on at least one unit: rollback restores it), "already" (every unit already
    held the target: the apply changed nothing, rollback leaves it), "skipped" (unsupported on this host: nothing
    was set; `reasons` says why, when the journal recorded it)."""

    key: str
    target: Any
    state: str
    reasons: tuple[str, ...] = ()  # why it (or some of its units) was skipped, one per distinct reason
    skipped_units: tuple[str, ...] = ()  # the units skipped while others were set ("" = the whole setting)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def applied_settings(run: Run) -> tuple[SettingState, ...]:
    """Each key of the run's profile as the apply left it: changed, already so, or skipped as unsupported here.

    Journals written before tunehost recorded the skipped keys: a key with no expected knob was skipped, reason
    unknown. Journal fields are hostile: a malformed skipped entry is ignored (it only explains a skip)."""
    settings = run.begin.get("settings")
    if not isinstance(settings, dict):
        return ()
    expected = {item["knob"].get("key") for item in run.begin.get("expect", []) if isinstance(item, dict)
                and isinstance(item.get("knob"), dict)}
    changed = {intent["knob"].get("key") for intent in run.intents.values()
               if intent.get("kind") == "setting" and isinstance(intent.get("knob"), dict)}
    skips: dict[str, list[tuple[str, str]]] = {}
    recorded = run.begin.get("skipped")
    for item in recorded if isinstance(recorded, list) else []:
        if isinstance(item, dict) and _text(item.get("key")) and _text(item.get("reason")) is not None:
            skips.setdefault(item["key"], []).append((_text(item.get("unit")) or "", item["reason"]))
    states = []
    for key, target in settings.items():
        reasons = tuple(dict.fromkeys(reason for _, reason in skips.get(key, [])))
        units = tuple(unit for unit, _ in skips.get(key, []))
        if key in changed:
            states.append(SettingState(key, target, "changed", reasons, units))
        elif key in expected:
            states.append(SettingState(key, target, "already", reasons, units))
        else:
            states.append(SettingState(key, target, "skipped", reasons, units))
    return tuple(states)
