"""Running checks over host facts and building the doctor report (data only; rendering lives in the CLI)."""

from __future__ import annotations

import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Iterable

from tunehost import __version__
from tunehost.check import Check, Finding, Severity
from tunehost.errors import TunehostError
from tunehost.facts import HostFacts

EXIT_READY = 0
EXIT_ERROR = 1
EXIT_NOT_READY = 2


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    snapshot: str | None = None
    strict: bool = False
    warnings: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())  # what the guarded run of third-party checks noticed (docs/plugins.md)

    @property
    def ready(self) -> bool:
        blocking = {Severity.FAIL}
        if self.strict:
            blocking |= {Severity.WARN, Severity.ERROR}
        return not any(f.severity in blocking for f in self.findings)

    @property
    def verdict(self) -> str:
        return "ready" if self.ready else "not-ready"

    @property
    def exit_code(self) -> int:
        return EXIT_READY if self.ready else EXIT_NOT_READY

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    def by_check(self, check_id: str) -> list[Finding]:
        return [f for f in self.findings if f.check == check_id]

    def to_json(self) -> dict:
        """The `doctor --json` document of docs/snapshot.md, exactly."""
        return {
            "tunehost": __version__,
            "snapshot": self.snapshot,
            "findings": [f.to_json() for f in self.findings],
            "verdict": self.verdict,
        }


def select_checks(checks: Iterable[Check], only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[Check]:
    """The checks to run. Unknown ids are a TunehostError (a typo must not silently run nothing)."""
    checks = list(checks)
    known = {c.id for c in checks}
    only, skip = [s for s in only if s], [s for s in skip if s]
    unknown = sorted({*only, *skip} - known)
    if unknown:
        raise TunehostError(f"unknown check id: {', '.join(unknown)} (see `tunehost doctor --list-checks`)")
    if only:
        checks = [c for c in checks if c.id in set(only)]
    selected = [c for c in checks if c.id not in set(skip)]
    if not selected and (only or skip):  # "ready ()" from running nothing would be a lie
        both = sorted(set(only) & set(skip))
        why = f"--skip {', '.join(both)} removes what --check asked for" if both else "every check is skipped"
        raise TunehostError(f"no check left to run: {why} (see `tunehost doctor --list-checks`)")
    return selected


# A third-party check runs in a worker thread with this deadline (seconds; TUNEHOST_CHECK_DEADLINE_S overrides it,
# docs/plugins.md). A thread cannot be killed: one that overruns is left behind (a daemon thread, gone when tunehost
# exits) and its results are ignored.
CHECK_DEADLINE_S = 30.0
DEADLINE_ENV = "TUNEHOST_CHECK_DEADLINE_S"
MAX_FINDINGS = 200  # per check: a generator that never ends is cut here, not read into memory


def is_builtin(check: Check) -> bool:
    """tunehost's own checks (the `tunehost.checks` package) run in the calling thread; every other is a guest."""
    return type(check).__module__.startswith("tunehost.checks.")


def check_deadline_s() -> float:
    import math
    import os

    try:
        value = float(os.environ.get(DEADLINE_ENV, CHECK_DEADLINE_S))
    except ValueError:
        return CHECK_DEADLINE_S
    return value if math.isfinite(value) and value > 0 else CHECK_DEADLINE_S


def _text(value: object, limit: int = 200) -> str:
    """str(value) for a message, even when its __str__ raises or never ends in a sane length."""
    try:
        text = str(value)
    except BaseException:  # noqa: BLE001 - an exception that cannot be printed is still reported
        text = f"<{type(value).__name__} that cannot be printed>"
    return text[:limit]


def _error(check: Check, summary: str, evidence: dict[str, str] | None = None) -> Finding:
    return Finding(check.id, Severity.ERROR, summary, evidence or {})


def _invalid(check: Check, item: object) -> str | None:
    """Why `item` is not a valid finding of `check`, or None."""
    from collections.abc import Mapping

    from tunehost.check import Fix

    if not isinstance(item, Finding):
        return f"it yielded a {type(item).__name__}, not a Finding"
    if item.check != check.id:
        return f"it reported under the id {_text(item.check, 60)!r}, not its own"
    if not isinstance(item.severity, Severity):
        return f"a finding's severity is {_text(item.severity, 40)!r}, not a Severity"
    if not isinstance(item.summary, str) or not item.summary.strip():
        return "a finding has no summary text"
    if not isinstance(item.evidence, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                          for k, v in item.evidence.items()):
        return "a finding's evidence is not a mapping of text to text"
    if item.detail is not None and not isinstance(item.detail, str):
        return "a finding's detail is not text"
    fix = item.fix
    if fix is not None and (not isinstance(fix, Fix) or not isinstance(fix.text, str)
                            or not isinstance(fix.commands, (tuple, list))
                            or not all(isinstance(c, str) for c in fix.commands)):
        return "a finding's fix is not a Fix with a text and a list of command strings"
    return None


def _collect(check: Check, facts: HostFacts) -> list[Finding]:
    """The check's findings, validated; one `error` finding when it raises, exits or returns garbage."""
    import itertools

    try:
        items = list(itertools.islice(iter(check.run(facts)), MAX_FINDINGS + 1))
    except (Exception, SystemExit) as exc:  # SystemExit too: a check's sys.exit(0) must not end doctor "ready"
        try:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            evidence = {"traceback": f"{where.filename}:{where.lineno} in {where.name}"}
        except Exception:  # noqa: BLE001
            evidence = {}
        kind = "called sys.exit" if isinstance(exc, SystemExit) else "failed"
        return [_error(check, f"the check itself {kind}: {type(exc).__name__}: {_text(exc)}", evidence)]
    if len(items) > MAX_FINDINGS:
        return [_error(check, f"the check yielded more than {MAX_FINDINGS} findings: ignored")]
    for item in items:
        why = _invalid(check, item)
        if why is not None:
            return [_error(check, f"the check returned an invalid result: {why}")]
    if not items:
        return [Finding(check.id, Severity.SKIP, "the check reported nothing")]
    return items


def run_check(check: Check, facts: HostFacts, notes: list[str] | None = None) -> list[Finding]:
    """A check's findings. A check that raises (anything, SystemExit included) or returns what is not a valid
    Finding becomes one `error` finding; one that says nothing a `skip`. A third-party check also runs with its
    output captured and a deadline (CHECK_DEADLINE_S): what it printed is one line in `notes`, never on stdout."""
    if is_builtin(check):
        return _collect(check, facts)
    return _guarded(check, facts, notes if notes is not None else [])


def _guarded(check: Check, facts: HostFacts, notes: list[str]) -> list[Finding]:
    done: list[list[Finding]] = []
    captured = _Captured()

    def work() -> None:
        try:
            done.append(_collect(check, facts))
        finally:
            captured.release()  # an overrun guest that ends after all gives the streams back

    worker = threading.Thread(target=work, daemon=True, name=f"tunehost-check-{check.id}")
    with captured:
        captured.watch(worker)
        worker.start()
        deadline = check_deadline_s()
        worker.join(deadline)
    if captured.chars:
        notes.append(f"check {check.id!r} printed {captured.chars} characters while it ran: not shown (a check "
                     "reports through its findings)")
    if not done:
        return [_error(check, f"the check did not finish within {deadline:g} s ({DEADLINE_ENV}): its results are "
                              "ignored")]
    return done[0]


_RELEASE = threading.Lock()


class _Captured:
    """While a guest check runs, sys.stdout and sys.stderr writes from its thread are counted, not shown; every
    other thread writes through. Left in place while a guest that overran its deadline may still print. (A thread
    the guest starts itself, or a write to fd 1 below Python, is not caught: docs/plugins.md.)"""

    def __init__(self) -> None:
        self.chars = 0
        self.thread: Any = None

    def watch(self, thread: Any) -> None:
        self.thread = thread

    def __enter__(self) -> "_Captured":
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Router(sys.stdout, self), _Router(sys.stderr, self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.exited = True
        if self.thread is not None and self.thread.is_alive():
            return  # it may still print: keep routing its writes away from the report (release() ends it)
        self.release()

    def release(self) -> None:
        """Put the streams back once the block is left and the guest has ended (whichever comes last)."""
        with _RELEASE:
            if not getattr(self, "exited", False):
                return
            if isinstance(sys.stdout, _Router) and sys.stdout.owner is self:
                sys.stdout, sys.stderr = self._saved

    def captures(self) -> bool:
        return threading.current_thread() is self.thread


class _Router:
    """A text stream that sends the guest thread's writes to a counter and everyone else's to `real`."""

    def __init__(self, real: Any, owner: _Captured):
        self.real, self.owner = real, owner

    def write(self, text: str) -> int:
        if self.owner.captures():
            self.owner.chars += len(text) if isinstance(text, str) else 0
            return len(text) if isinstance(text, str) else 0
        return self.real.write(text)

    def flush(self) -> None:
        if not self.owner.captures():
            self.real.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def run_doctor(facts: HostFacts, checks: Iterable[Check], *, strict: bool = False,
               warnings: Iterable[str] = ()) -> Report:
    findings: list[Finding] = []
    notes: list[str] = []
    for check in checks:
        findings.extend(run_check(check, facts, notes))
    return Report(tuple(findings), snapshot=facts.source, strict=strict, warnings=tuple(warnings),
                  notes=tuple(notes))
