"""Tuning profiles: TOML data with `include = [...]` inheritance, validated when loaded (see docs/profiles.md).

    profile = load_profile("throughput-quiet")      # includes merged, every key checked
    profile.settings                                 # {"governor": "performance", "boost": False, ...}

A profile names the state it wants, never how to reach it; the settings in tunehost.apply.settings do that.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from tunehost.errors import TunehostError
from tunehost.printable import one_line

PROFILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")

PROFILES_ENV = "TUNEHOST_PROFILES_DIR"  # an extra directory searched before the built-in profiles
MAX_INCLUDE_DEPTH = 32  # profiles included through profiles; the built-in ones use 1
MAX_PROFILE_BYTES = 1024 * 1024  # a profile is a dozen lines


@dataclass(frozen=True)
class KeySpec:
    """One profile key: its TOML type, the values it accepts, and what it means (shown by `tunehost profiles`)."""

    type: type
    meaning: str
    choices: tuple[Any, ...] = ()
    check: Callable[[Any], str | None] | None = None  # returns why a value is wrong, or None


def _swappiness_range(value: int) -> str | None:
    from tunehost.facts.memory import SWAPPINESS_RANGE

    low, high = SWAPPINESS_RANGE
    return None if low <= value <= high else f"must be between {low} and {high}"


def _word(value: str) -> str | None:
    return None if value and value.replace("_", "").replace("-", "").replace("+", "").isalnum() else "must be one word"


# the setting keys, in the order apply changes them (rollback goes the other way)
SETTING_KEYS: dict[str, KeySpec] = {
    "power_daemon": KeySpec(str, "which daemon answers power-profile requests: ppd (power-profiles-daemon) or "
                                 "tuned-ppd (TuneD's drop-in replacement)", ("ppd", "tuned-ppd")),
    "tuned_profile": KeySpec(str, "TuneD profile to activate where TuneD is installed", check=_word),
    "power_profile": KeySpec(str, "power-profiles-daemon profile (powerprofilesctl set)",
                             ("performance", "balanced", "power-saver")),
    "governor": KeySpec(str, "cpufreq scaling_governor on every online CPU", check=_word),
    "epp": KeySpec(str, "energy_performance_preference on every online CPU (intel_pstate / amd-pstate active)",
                   ("default", "performance", "balance_performance", "balance_power", "power")),
    "boost": KeySpec(bool, "turbo/boost (cpufreq/boost, or intel_pstate/no_turbo inverted)"),
    "thp": KeySpec(str, "transparent huge pages mode", ("always", "madvise", "never")),
    "thp_defrag": KeySpec(str, "transparent huge pages defrag mode",
                          ("always", "defer", "defer+madvise", "madvise", "never")),
    "swappiness": KeySpec(int, "vm.swappiness", check=_swappiness_range),
}
META_KEYS: dict[str, KeySpec] = {
    "description": KeySpec(str, "what the profile is for and what it trades away"),
    "include": KeySpec(list, "profiles this one starts from, merged in order; this profile's keys win"),
}


@dataclass(frozen=True)
class Profile:
    """A profile with its includes merged. `settings` holds only setting keys, in apply order."""

    name: str
    description: str
    settings: Mapping[str, Any]
    includes: tuple[str, ...] = ()  # every profile merged in, depth-first, this one excluded
    source: str = ""

    def targets(self) -> dict[str, str]:
        """Each setting's target as the text a setting reads and writes ("on"/"off" for booleans)."""
        return {k: format_value(v) for k, v in self.settings.items()}


@dataclass(frozen=True)
class RawProfile:
    name: str
    data: Mapping[str, Any]
    source: str = field(default="")


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def profile_dirs() -> list[Path]:
    """Where profiles are looked up: $TUNEHOST_PROFILES_DIR first (if set), then the built-in profiles."""
    dirs: list[Path] = []
    extra = os.environ.get(PROFILES_ENV)
    if extra:
        dirs.append(Path(extra))
    dirs.append(builtin_dir())
    return dirs


def builtin_dir() -> Path:
    from importlib.resources import files

    return Path(str(files("tunehost.profiles")))


def available_profiles(dirs: Iterable[Path] | None = None) -> list[str]:
    names: set[str] = set()
    for d in dirs if dirs is not None else profile_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.toml"))
    return sorted(names)


def read_raw(name: str, dirs: Iterable[Path] | None = None) -> RawProfile:
    """One profile file, parsed and checked on its own (includes not followed)."""
    dirs = list(dirs if dirs is not None else profile_dirs())
    if not PROFILE_NAME.fullmatch(name):  # also keeps the file name within NAME_MAX
        raise TunehostError(f"invalid profile name {one_line(repr(name), 80)}: letters, digits, '-', '_' and '.', "
                            "not starting with '.', at most 64 characters")
    for d in dirs:
        path = d / f"{name}.toml"
        if path.exists() or path.is_symlink():
            from tunehost.inputs import read_input_file

            try:
                raw = read_input_file(path, "a profile", limit=MAX_PROFILE_BYTES)  # a FIFO: one line, never a hang
                if len(raw) > MAX_PROFILE_BYTES:
                    raise TunehostError(f"profile {name!r} ({path}) is larger than 1 MiB: not a profile")
                data = tomllib.loads(raw.decode("utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise TunehostError(f"profile {name!r} ({path}) is not valid TOML: {exc}") from None
            except RecursionError:
                raise TunehostError(f"profile {name!r} ({path}) is not valid TOML: nested too deeply") from None
            except UnicodeDecodeError as exc:
                raise TunehostError(f"profile {name!r} ({path}) is not UTF-8 text (byte {exc.start + 1})") from None
            except OSError as exc:
                raise TunehostError(f"profile {name!r} ({path}) cannot be read: "
                                    f"{(exc.strerror or str(exc)).lower()}") from None
            validate(name, data, str(path))
            return RawProfile(name, data, str(path))
    known = ", ".join(available_profiles(dirs)) or "none"
    raise TunehostError(f"no profile named {name!r} (available: {known})")


def validate(name: str, data: Mapping[str, Any], source: str = "") -> None:
    """Raise TunehostError naming the first bad key: unknown, wrong type, or a value it does not accept."""
    where = f"profile {name!r}" + (f" ({source})" if source else "")
    for key, value in data.items():
        spec = SETTING_KEYS.get(key) or META_KEYS.get(key)
        if spec is None:
            known = ", ".join([*META_KEYS, *SETTING_KEYS])
            raise TunehostError(f"{where}: unknown key {key!r} (known keys: {known})")
        # bool is an int in Python: `swappiness = true` must not pass as 1
        if not isinstance(value, spec.type) or (spec.type is int and isinstance(value, bool)):
            raise TunehostError(f"{where}: {key} must be {_type_name(spec.type)}, not {_type_name(type(value))} "
                                f"({value!r})")
        if key == "include":
            bad = [v for v in value if not isinstance(v, str)]
            if bad:
                raise TunehostError(f"{where}: include must be a list of profile names, not {bad[0]!r}")
            continue
        if spec.choices and value not in spec.choices:
            raise TunehostError(f"{where}: {key} = {value!r} is not one of {', '.join(map(str, spec.choices))}")
        if spec.check is not None:
            why = spec.check(value)
            if why:
                raise TunehostError(f"{where}: {key} = {value!r} {why}")


def _type_name(t: type) -> str:
    return {str: "a string", int: "an integer", bool: "true or false", list: "a list", float: "a number",
            dict: "a table"}.get(t, t.__name__)


def merge(chain: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Pure merger: later mappings win key by key; `include` and `description` are not inherited.

    The result keeps SETTING_KEYS order so apply and rollback order never depends on how a profile was written.
    """
    merged: dict[str, Any] = {}
    for data in chain:
        for key, value in data.items():
            if key in SETTING_KEYS:
                merged[key] = value
    return {k: merged[k] for k in SETTING_KEYS if k in merged}


def resolve_chain(name: str, read: Callable[[str], RawProfile]) -> list[RawProfile]:
    """The profiles to merge, includes first (depth-first, each once), `name` last. Cycles are an error."""
    order: list[RawProfile] = []
    done: set[str] = set()

    def visit(n: str, stack: tuple[str, ...]) -> None:
        if n in stack:
            cycle = " -> ".join([*stack[stack.index(n):], n])
            raise TunehostError(f"profile include cycle: {cycle}")
        if n in done:
            return
        if len(stack) > MAX_INCLUDE_DEPTH:
            raise TunehostError(f"profile includes nest deeper than {MAX_INCLUDE_DEPTH}: {_chain_text([*stack, n])}")
        raw = read(n)
        for inc in raw.data.get("include", []):
            try:
                visit(inc, (*stack, n))
            except TunehostError as exc:
                if str(exc).startswith("no profile named"):
                    raise TunehostError(f"profile {n!r} includes {inc!r}, which does not exist") from None
                raise
        done.add(n)
        order.append(raw)

    visit(name, ())
    return order


def _chain_text(chain: list[str]) -> str:
    """An include chain for a message; a long one shows its two ends."""
    if len(chain) <= 8:
        return " -> ".join(chain)
    return " -> ".join(chain[:3]) + f" -> ... ({len(chain) - 6} more) -> " + " -> ".join(chain[-3:])


def load_profile(name: str, dirs: Iterable[Path] | None = None) -> Profile:
    """A profile by name with its includes merged; TunehostError for any problem (nothing is changed by loading)."""
    dirs = list(dirs if dirs is not None else profile_dirs())
    chain = resolve_chain(name, lambda n: read_raw(n, dirs))
    own = chain[-1]
    return Profile(name, str(own.data.get("description", "")), merge(r.data for r in chain),
                   tuple(r.name for r in chain[:-1]), own.source)


def load_all(dirs: Iterable[Path] | None = None) -> list[Profile]:
    dirs = list(dirs if dirs is not None else profile_dirs())
    return [load_profile(n, dirs) for n in available_profiles(dirs)]


def override(profile: Profile, **settings: Any) -> Profile:
    """The profile with some setting keys replaced (CLI options such as --power-daemon), validated like a file."""
    validate(profile.name, settings, "command-line option")
    merged = merge([profile.settings, settings])
    return Profile(profile.name, profile.description, merged, profile.includes, profile.source)
