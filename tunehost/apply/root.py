"""The host that apply / verify / rollback act on: the live machine, or a writable root directory.

`TUNEHOST_ROOT=DIR` makes tuning act on DIR as if it were "/" (DIR/sys/..., DIR/proc/...): a testing and containers
aid. Under a root no host command runs (like python-distro's root_dir), so power-profiles-daemon and TuneD are
"unsupported" there, and root privileges are not required.
"""

from __future__ import annotations

import os
from pathlib import Path

from tunehost.errors import TunehostError
from tunehost.facts.memory import selector_options
from tunehost.host import Host
from tunehost.host.commands import CommandResult, LiveCommands
from tunehost.host.files import HostFiles

ROOT_ENV = "TUNEHOST_ROOT"


class NoCommands:
    """Commands of a root directory: none is available."""

    def which(self, name: str) -> str | None:
        return None

    def run(self, argv, timeout: float = 10.0) -> CommandResult | None:
        return None


class RootFiles(HostFiles):
    """Files of a writable root directory. A selector file ("always [madvise] never") keeps its format on write,
    as the kernel keeps it, so everything that reads the root afterwards (doctor, verify) sees a real-format file."""

    def write(self, path: str, text: str) -> None:
        current = self.read(path) if path.startswith("/sys/") else None
        if current is not None and "[" in current:
            options = selector_options(current)
            word = text.strip()
            if word in options:
                text = " ".join(f"[{o}]" if o == word else o for o in options) + "\n"
        super().write(path, text)


def open_writable_root(path: str | os.PathLike, commands=None) -> Host:
    """A Host whose files are a writable directory standing for "/". Samples read DIR/samples/ (usually absent)."""
    root = Path(path)
    if not root.is_dir():
        raise TunehostError(f"{ROOT_ENV}={root} is not a directory")
    return Host(RootFiles(root), commands if commands is not None else NoCommands(), snapshot_dir=root)


def root_from_env() -> str | None:
    return os.environ.get(ROOT_ENV) or None


def open_tuning_host() -> tuple[Host, str]:
    """(host, root label): $TUNEHOST_ROOT when set, else the live machine with uncached commands."""
    root = root_from_env()
    if root:
        return open_writable_root(root), str(Path(root).resolve())
    # cache=False: a value is read back right after it is changed
    return Host(HostFiles("/"), LiveCommands(cache=False)), "/"


def require_root(action: str) -> None:
    """Live changes need root; a $TUNEHOST_ROOT directory does not."""
    if root_from_env():
        return
    if os.geteuid() != 0:
        raise TunehostError(f"{action} changes the live host and needs root: run it with sudo "
                            f"(nothing was changed)")
