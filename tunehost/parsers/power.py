"""Parsers of power-manager command output: powerprofilesctl, tuned-adm, tlp-stat, systemctl is-active.

Pure `str -> dataclass` functions. They never raise: garbage gives an empty/unknown result.
Formats (real samples in tests/data/corpus/power/ and the tests of tests/system/):

    powerprofilesctl get       -> "balanced"
    powerprofilesctl [list]    -> "\\n  performance:\\n    CpuDriver:  amd_pstate\\n ...\\n* balanced:\\n ..."
    tuned-adm active           -> "Current active profile: throughput-performance"
                                  "No current active profile."
                                  "It seems that tuned daemon is not running, preset profile is not activated.\\nPreset profile: X"
    tlp-stat -s (<= 1.6)       -> "+++ TLP Status\\nState          = enabled\\n...Mode           = AC\\nPower source   = AC"
    tlp-stat -s (>= 1.7)       -> "+++ TLP Status\\ntlp            = enabled, last run: ...\\ntlp-pd         = enabled, running\\n
                                   TLP profile    = balanced/BAT\\nPower source   = battery"
    systemctl is-active a b c  -> one state per line, in the order asked ("active", "inactive", "failed", ...)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

PPD_PROFILES = ("performance", "balanced", "power-saver")
_PROFILE_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def parse_ppd_get(text: str | None) -> str | None:
    """`powerprofilesctl get`: one word ("balanced"); None for anything else (an error message, garbage)."""
    words = [w for w in (text or "").split() if w]
    if len(words) != 1:
        return None
    word = words[0].strip()
    return word if _PROFILE_WORD.match(word) else None


@dataclass(frozen=True)
class PpdList:
    """`powerprofilesctl` / `powerprofilesctl list`: the profiles, the active one, each profile's drivers."""

    active: str | None = None
    profiles: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> {"CpuDriver": "amd_pstate", ...}

    def driver(self, profile: str | None, key: str) -> str | None:
        return (self.profiles.get(profile or "") or {}).get(key)


def parse_ppd_list(text: str | None) -> PpdList:
    profiles: dict[str, dict[str, str]] = {}
    active = None
    current: dict[str, str] | None = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        header = re.match(r"^(\*)?\s*([A-Za-z][A-Za-z0-9_-]*):\s*$", line)
        if header and not raw.startswith("    "):
            name = header.group(2)
            current = profiles.setdefault(name, {})
            if header.group(1):
                active = name
            continue
        kv = re.match(r"^\s+([A-Za-z][A-Za-z ]*?):\s*(.*)$", line)
        if kv and current is not None:
            current[kv.group(1).strip()] = kv.group(2).strip()
    return PpdList(active, profiles)


@dataclass(frozen=True)
class TunedActive:
    """`tuned-adm active`. `profile` may hold several names ("virtual-guest optimize-serial-console")."""

    profile: str | None = None
    post_loaded: str | None = None
    no_profile: bool = False  # "No current active profile."
    daemon_running: bool | None = None  # False: "tuned daemon is not running, preset profile is not activated"

    @property
    def names(self) -> tuple[str, ...]:
        words = (self.profile or "").split() + (self.post_loaded or "").split()
        return tuple(dict.fromkeys(words))


def _uncomment(line: str) -> str:
    # README pastes prefix output with "# " (the corpus Strix Halo snippet); prompts may trail "(base)"
    return line.strip().lstrip("#").strip()


def parse_tuned_active(text: str | None) -> TunedActive:
    profile = post = None
    no_profile = False
    running: bool | None = None
    preset = None
    for raw in (text or "").splitlines():
        line = _uncomment(raw)
        m = re.match(r"^Current active profile:\s*(.+?)\s*$", line)
        if m:
            profile = m.group(1)
            running = True
            continue
        m = re.match(r"^Current post-loaded profile:\s*(.+?)\s*$", line)
        if m:
            post = m.group(1)
            continue
        if line.startswith("No current active profile"):
            no_profile = True
            continue
        if "tuned daemon is not running" in line:
            running = False
            continue
        m = re.match(r"^Preset profile:\s*(.+?)\s*$", line)
        if m:
            preset = m.group(1)
    if profile is None and preset is not None:
        profile = preset
    profile = _clean_profile(profile)
    post = _clean_profile(post)
    return TunedActive(profile, post, no_profile and profile is None, running)


def _clean_profile(value: str | None) -> str | None:
    if not value:
        return None
    words = [w for w in value.split() if _PROFILE_WORD.match(w)]
    return " ".join(words) or None


@dataclass(frozen=True)
class TlpStatus:
    """`tlp-stat -s`: whether TLP is enabled, its mode/profile and the power source."""

    version: str | None = None
    enabled: bool | None = None
    mode: str | None = None  # "AC", "battery", "battery (persistent)", or a 1.7+ profile "balanced/BAT"
    power_source: str | None = None
    tlp_pd: str | None = None  # TLP >= 1.9: "enabled, running"


def parse_tlp_status(text: str | None) -> TlpStatus:
    version = enabled = mode = source = tlp_pd = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        m = re.match(r"^---\s*TLP\s+(\S+)", line)
        if m:
            version = m.group(1)
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key in ("state", "tlp"):
            word = value.split(",")[0].strip().lower()
            enabled = True if word == "enabled" else False if word in ("disabled", "not enabled") else enabled
        elif key in ("mode", "tlp profile", "power profile"):
            mode = value or None
        elif key == "power source":
            source = value or None
        elif key == "tlp-pd":
            tlp_pd = value or None
    return TlpStatus(version, enabled, mode, source, tlp_pd)


def parse_tlp_conf(text: str | None) -> dict[str, str]:
    """/etc/tlp.conf (and /etc/tlp.d/*.conf): KEY=value lines; comments and quotes stripped."""
    settings: dict[str, str] = {}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, rest = line.partition("=")  # no regex: a lazy match here took 15 s on a 20 KB line
        key = key.rstrip()
        if not sep or not _TLP_KEY.fullmatch(key):
            continue
        value = rest.partition("#")[0].strip()
        value = value[1:] if value.startswith('"') else value
        value = value[:-1] if value.endswith('"') else value
        if '"' not in value:
            settings[key] = value.strip()
    return settings


_TLP_KEY = re.compile(r"[A-Z][A-Z0-9_]{0,127}")


SYSTEMD_STATES = ("active", "inactive", "failed", "activating", "deactivating", "reloading", "unknown", "maintenance",
                  "refreshing")


def parse_is_active(text: str | None, units: tuple[str, ...]) -> dict[str, str]:
    """`systemctl is-active u1 u2 ...`: unit -> state; {} when the output is not one known state per unit asked."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if len(lines) != len(units) or any(line not in SYSTEMD_STATES for line in lines):
        return {}
    return dict(zip(units, lines))
