"""The Check interface, findings and severities.

A check is a pure function of the host facts: it never reads the machine itself.

    class ThpCheck(Check):
        id = "thp"
        title = "Transparent huge pages"
        judges = "the transparent huge pages mode"

        def run(self, facts):
            mem = facts.get(MemoryFacts)
            ...
            yield self.warn("THP is off", evidence={...}, fix=Fix("...", ("echo always > ...",)))
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Iterable, Mapping

if TYPE_CHECKING:
    from tunehost.facts import HostFacts


class Severity(str, enum.Enum):
    """ok < info < skip < warn < fail; error means the check itself broke."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __str__(self) -> str:
        return self.value


_RANK = {Severity.OK: 0, Severity.INFO: 1, Severity.SKIP: 2, Severity.WARN: 3, Severity.ERROR: 4, Severity.FAIL: 5}


@dataclass(frozen=True)
class Fix:
    """What to do: a sentence, and the exact commands that do it (empty when it is a manual step)."""

    text: str
    commands: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"text": self.text, "commands": list(self.commands)}


@dataclass(frozen=True)
class Finding:
    """One judgement of one check: severity, a one-line summary, the raw evidence and the fix."""

    check: str
    severity: Severity
    summary: str
    evidence: Mapping[str, str] = field(default_factory=dict)
    fix: Fix | None = None
    detail: str | None = None  # why it matters, in a sentence or two (shown in the human report)

    def to_json(self) -> dict:
        # exactly the keys of the contract in docs/snapshot.md; `detail` is for the human report only
        return {
            "check": self.check,
            "severity": self.severity.value,
            "summary": self.summary,
            "evidence": {str(k): str(v) for k, v in self.evidence.items()},
            "fix": self.fix.to_json() if self.fix else None,
        }


class Check:
    """Base class of every check. Subclasses set `id`, `title`, `judges` and implement `run`."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    judges: ClassVar[str] = ""  # what it judges, one line (shown by --list-checks and docs/checks.md)

    def run(self, facts: "HostFacts") -> Iterable[Finding]:
        raise NotImplementedError

    def finding(self, severity: Severity, summary: str, evidence: Mapping[str, object] | None = None,
                fix: Fix | None = None, detail: str | None = None) -> Finding:
        return Finding(self.id, severity, summary, {str(k): _evidence_text(v) for k, v in (evidence or {}).items()},
                       fix, detail)

    def ok(self, summary: str, evidence: Mapping[str, object] | None = None, **kw) -> Finding:
        return self.finding(Severity.OK, summary, evidence, **kw)

    def info(self, summary: str, evidence: Mapping[str, object] | None = None, **kw) -> Finding:
        return self.finding(Severity.INFO, summary, evidence, **kw)

    def warn(self, summary: str, evidence: Mapping[str, object] | None = None, **kw) -> Finding:
        return self.finding(Severity.WARN, summary, evidence, **kw)

    def fail(self, summary: str, evidence: Mapping[str, object] | None = None, **kw) -> Finding:
        return self.finding(Severity.FAIL, summary, evidence, **kw)

    def skip(self, reason: str, evidence: Mapping[str, object] | None = None) -> Finding:
        """Could not tell (missing data, not applicable): the reason is the summary. Never a guess."""
        return self.finding(Severity.SKIP, reason, evidence)


def _evidence_text(value: object) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value).rstrip("\n")
