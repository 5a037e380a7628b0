"""Running checks over host facts and building the doctor report (data only; rendering lives in the CLI)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Iterable

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
        """The `doctor --json` document of SNAPSHOT.md, exactly."""
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


def run_check(check: Check, facts: HostFacts) -> list[Finding]:
    """A check's findings; a check that raises becomes one `error` finding, and one that says nothing a `skip`."""
    try:
        findings = list(check.run(facts))
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [Finding(check.id, Severity.ERROR, f"the check itself failed: {exc.__class__.__name__}: {exc}",
                        {"traceback": f"{where.filename}:{where.lineno} in {where.name}"})]
    if not findings:
        return [Finding(check.id, Severity.SKIP, "the check reported nothing")]
    return findings


def run_doctor(facts: HostFacts, checks: Iterable[Check], *, strict: bool = False,
               warnings: Iterable[str] = ()) -> Report:
    findings: list[Finding] = []
    for check in checks:
        findings.extend(run_check(check, facts))
    return Report(tuple(findings), snapshot=facts.source, strict=strict, warnings=tuple(warnings))
