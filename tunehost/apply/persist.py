"""Boot-time configuration for `apply --persist`: a sysctl.d file for swappiness, a tmpfiles.d file for sysfs knobs.

The files are plain data built from the plan (pure functions); the engine writes them through the host layer,
journalled with a backup of whatever was there, so rollback removes or restores them.
TuneD and power-profiles-daemon keep their own active profile across reboots, so they need no file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from tunehost.apply.settings import CPU_DIR, FileKnob, Knob

SYSCTL_FILE = "/etc/sysctl.d/90-tunehost.conf"
TMPFILES_FILE = "/etc/tmpfiles.d/tunehost.conf"
SYSCTL_NAMES = {"swappiness": "vm.swappiness"}


@dataclass(frozen=True)
class ConfigFile:
    path: str
    content: str


def _header(profile: str) -> str:
    return (f"# Written by `tunehost apply --profile {profile} --persist`.\n"
            f"# `tunehost rollback` removes it (or restores the file it replaced).\n")


def _tmpfiles_path(knob: FileKnob) -> str:
    # every CPU, including ones brought online later, through the glob tmpfiles.d's "w" accepts
    if knob.unit.startswith("cpu"):
        return knob.path.replace(f"/{knob.unit}/", "/cpu[0-9]*/")
    return knob.path


def config_files(profile: str, knobs: Iterable[tuple[Knob, str]]) -> list[ConfigFile]:
    """The files that make (knob, target) pairs hold after a reboot."""
    sysctl: list[str] = []
    tmpfiles: dict[str, str] = {}
    for knob, target in knobs:
        if not isinstance(knob, FileKnob):
            continue
        if knob.key in SYSCTL_NAMES:
            sysctl.append(f"{SYSCTL_NAMES[knob.key]} = {target}")
        elif knob.path.startswith(("/sys/", CPU_DIR)):
            tmpfiles.setdefault(_tmpfiles_path(knob), knob.encode(target))
    files = []
    if sysctl:
        files.append(ConfigFile(SYSCTL_FILE, _header(profile) + "\n".join(sorted(set(sysctl))) + "\n"))
    if tmpfiles:
        lines = [f"w {path} - - - - {value}" for path, value in tmpfiles.items()]
        files.append(ConfigFile(TMPFILES_FILE, _header(profile) + "# type path mode user group age argument\n"
                                + "\n".join(lines) + "\n"))
    return files
