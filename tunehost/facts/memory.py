"""Memory facts: /proc/meminfo, transparent huge pages."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from tunehost.host import Host

THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
THP_DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"


def selected_mode(text: str | None) -> str | None:
    """The bracketed choice of a sysfs selector file: "always [madvise] never" -> "madvise"."""
    if not text:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else None


@dataclass(frozen=True)
class ThpFacts:
    enabled: str | None  # always | madvise | never | None (unknown)
    defrag: str | None
    evidence: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def gather(cls, host: "Host") -> "ThpFacts":
        raw_enabled = host.files.read_value(THP_ENABLED)
        raw_defrag = host.files.read_value(THP_DEFRAG)
        evidence = {p: v for p, v in ((THP_ENABLED, raw_enabled), (THP_DEFRAG, raw_defrag)) if v is not None}
        return cls(selected_mode(raw_enabled), selected_mode(raw_defrag), evidence)
