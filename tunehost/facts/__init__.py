"""Typed, immutable facts about a host, gathered once per run.

A facts class is a frozen dataclass with `@classmethod gather(cls, host) -> Self` that never raises for missing
data (unknown is None plus a reason). `HostFacts(host).get(CpuFacts)` gathers a domain the first time it is asked
for and caches it, so a run reads each thing once and checks stay pure functions of the facts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from tunehost.host import Host

T = TypeVar("T")


class Gatherable(Protocol):
    @classmethod
    def gather(cls, host: "Host") -> Any: ...


class HostFacts:
    """The facts of one host for one run. Without a host (tests) only the facts given to `of()` exist."""

    def __init__(self, host: "Host | None"):
        self.host = host
        self._facts: dict[type, Any] = {}

    @classmethod
    def of(cls, *facts: Any) -> "HostFacts":
        """Facts built by hand (tests): asking for a domain that was not given raises LookupError."""
        made = cls(None)
        for fact in facts:
            made._facts[type(fact)] = fact
        return made

    def get(self, kind: type[T]) -> T:
        if kind not in self._facts:
            if self.host is None:
                raise LookupError(f"no {kind.__name__} given")
            self._facts[kind] = kind.gather(self.host)  # type: ignore[attr-defined]
        return self._facts[kind]

    def provide(self, fact: Any) -> None:
        """A fact the caller gathered by its own rules (LlamaBuildFacts.gather_named for a binary the user named),
        used instead of gathering its domain; ignored when the domain was gathered already."""
        self._facts.setdefault(type(fact), fact)

    @property
    def live(self) -> bool:
        return self.host is not None and self.host.live

    @property
    def source(self) -> str | None:
        """The snapshot directory the facts come from, or None for the live host."""
        if self.host is None or self.host.snapshot_dir is None:
            return None
        return str(self.host.snapshot_dir)
