"""Loading checks through the `tunehost.checks` entry-point group — built-ins and third-party plugins alike.

A plugin that fails to load becomes one warning; it never stops the other checks. One of tunehost's own checks that
fails to load is also an `error` finding under its stable id (docs/snapshot.md: a check that breaks becomes an
`error` finding), so a broken install is never a silent "ready" with checks missing from the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tunehost.check import Check, Finding, Fix, Severity

ENTRY_POINT_GROUP = "tunehost.checks"

# the stable ids of docs/snapshot.md, in report order; third-party checks follow alphabetically
BUILTIN_ORDER = (
    "ram-speed", "memory-bandwidth", "cpu-governor", "cpu-epp", "cpu-frequency", "cpu-clocks", "power-limits",
    "power-manager", "thp", "swap", "core-topology", "numa", "pcie-link", "resizable-bar", "apu-memory",
    "gpu-memory", "gpu-power-cap", "thermals", "cpu-hogs", "headless", "llama-exposure", "llama-build", "speed-drift",
)


_BUILTIN_RANK = {cid: i for i, cid in enumerate(BUILTIN_ORDER)}


def report_order(check_id: str) -> tuple[int, str]:
    """Sort key of a check id in reports: the built-ins in BUILTIN_ORDER, then third-party ids alphabetically."""
    return _BUILTIN_RANK.get(check_id, len(_BUILTIN_RANK)), check_id


def _builtin_entry(value: str) -> bool:
    """An entry point (or module) of tunehost's own checks package."""
    return value.startswith("tunehost.checks.")


class UnloadableCheck(Check):
    """One of tunehost's own checks whose module could not be imported: it judges nothing, it says why."""

    title = "A built-in check that could not be loaded"
    judges = "nothing: its module could not be imported (see the finding)"

    def __init__(self, check_id: str, reason: str):
        self.id = check_id  # the instance's id: the stable id of the check that is missing
        self.reason = reason

    def run(self, facts: object) -> list[Finding]:
        return [Finding(self.id, Severity.ERROR, f"this built-in check could not be loaded: {self.reason}",
                        fix=Fix(install_hint(self.reason), ("pip install --force-reinstall --no-deps .",)))]


def install_hint(reason: str) -> str:
    """What to do about a built-in check that cannot be imported: which tunehost was imported, and the way out."""
    import tunehost

    where = next(iter(getattr(tunehost, "__path__", [])), "?")
    hint = f"tunehost was imported from {where}. "
    if "tunehost.checks" in reason:
        hint += ("A source checkout's tunehost/ has no checks/ inside it (setup installs checks/ as tunehost.checks): "
                 "run the installed `tunehost` command from outside the checkout, or install it editable "
                 "(pip install -e .). ")
    return hint + "Otherwise reinstall tunehost from its checkout, in the same environment."


@dataclass
class LoadedChecks:
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    def unloadable(self) -> list[UnloadableCheck]:
        """The built-in checks that could not be imported (each stands in the list as its `error` finding)."""
        return [c for c in self.checks if isinstance(c, UnloadableCheck)]

    def usable(self) -> bool:
        """Whether at least one check can judge anything (else doctor has nothing to say: a broken install)."""
        return len(self.checks) > len(self.unloadable())

    def ids(self) -> list[str]:
        return [c.id for c in self.checks]


def load_checks(extra: list[type[Check]] | None = None) -> LoadedChecks:
    """Every installed check, instantiated, in report order. `extra` adds check classes (tests, embedding)."""
    from importlib.metadata import entry_points

    loaded = LoadedChecks()
    seen: set[str] = set()
    # tunehost's own entry points first: a plugin never takes a built-in id, whatever order the metadata lists
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: not _builtin_entry(e.value)):
        try:
            cls = ep.load()
            check = cls()
            if not isinstance(check, Check) or not check.id:
                raise TypeError(f"{ep.value} is not a tunehost Check with an id")
        except Exception as exc:  # a broken plugin is one warning, not a crash
            reason = f"{exc.__class__.__name__}: {exc}"
            loaded.warnings.append(f"check plugin {ep.name!r} ({ep.value}) could not be loaded: {reason}")
            if _builtin_entry(ep.value) and ep.name in _BUILTIN_RANK and ep.name not in seen:
                seen.add(ep.name)  # a built-in's absence is a finding too, under its own id
                loaded.checks.append(UnloadableCheck(ep.name, reason))
            continue
        if not _builtin_entry(ep.value) and check.id in _BUILTIN_RANK:
            loaded.warnings.append(f"check plugin {ep.name!r} ({ep.value}) is refused: it claims the built-in check "
                                   f"id {check.id!r}; give it an id of its own")
            continue
        if check.id in seen:
            loaded.warnings.append(f"check id {check.id!r} is registered twice; {ep.value} ignored")
            continue
        seen.add(check.id)
        loaded.checks.append(check)
    for cls in extra or []:
        check = cls()
        if check.id in _BUILTIN_RANK and not _builtin_entry(type(check).__module__ + ":"):
            loaded.warnings.append(f"check {check.id!r} ({type(check).__module__}) is refused: it claims a built-in id")
            continue
        if check.id not in seen:
            seen.add(check.id)
            loaded.checks.append(check)
    loaded.checks.sort(key=lambda c: report_order(c.id))
    return loaded
