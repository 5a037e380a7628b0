"""Who may reach a path on the host: the owner and mode bits of a path and of every directory above it, and the
accounts (uid, groups) a service may run as. Read on the live host only: a snapshot records neither modes nor the
account database, so there every answer is None ("not checked"), never a guess.

Used by `advise` to say, before it hands out a systemd unit, whether the unit's user can run its llama-server and
read its model (tunehost.advise.unit_access). POSIX ACLs and security modules (SELinux, AppArmor) are not read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.host import Host

MAX_DEPTH = 64  # path components followed; a deeper path is reported as not checked


@dataclass(frozen=True)
class PathEntry:
    """One directory (or the file itself) on the way to a path, as stat() sees it (links followed).
    `mode` None: it does not exist (or tunehost itself cannot look: `error` says which)."""

    path: str
    mode: int | None
    uid: int | None = None
    gid: int | None = None
    error: str | None = None

    @property
    def is_dir(self) -> bool:
        return self.mode is not None and stat.S_ISDIR(self.mode)


@dataclass(frozen=True)
class Account:
    """A user a unit may run as: its uid and every group it is in (primary and supplementary)."""

    name: str
    uid: int
    gids: frozenset[int]


def _entry(path: str) -> PathEntry:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return PathEntry(path, None, error="does not exist")
    except NotADirectoryError:
        return PathEntry(path, None, error="does not exist (a file stands where a directory should be)")
    except OSError as exc:
        return PathEntry(path, None, error=f"tunehost cannot look: {(exc.strerror or type(exc).__name__).lower()}")
    return PathEntry(path, st.st_mode, st.st_uid, st.st_gid)


def _chain(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    return ["/"] + ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def path_chain(host: "Host", path: str) -> list[PathEntry] | None:
    """Every directory from / down to `path`, and `path` itself, as the kernel walks them when a process opens it:
    the path as written and, where links lead elsewhere, the resolved one. None on a snapshot (no modes recorded)
    or for a relative or too deep path."""
    if not host.live or not path.startswith("/") or path.count("/") > MAX_DEPTH:
        return None
    names = _chain(os.path.normpath(path))
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        real = path
    for extra in _chain(real):
        if extra not in names:
            names.append(extra)
    out = []
    for name in names:
        entry = _entry(name)
        out.append(entry)
        if entry.mode is None and name in _chain(os.path.normpath(path)):
            break  # nothing below a missing directory of the written path can be reached
    return out


def account(host: "Host", name: str) -> Account | None:
    """The account `name` (its groups from the group database), or None: unknown, or a snapshot."""
    if not host.live:
        return None
    import pwd

    try:
        pw = pwd.getpwnam(name)
        gids = os.getgrouplist(name, pw.pw_gid)
    except (KeyError, OSError, ValueError):
        return None
    return Account(name, pw.pw_uid, frozenset(gids))


def current_account(host: "Host") -> Account | None:
    """The account tunehost runs as (what a `systemctl --user` unit runs as), or None on a snapshot."""
    if not host.live:
        return None
    import pwd

    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return Account(name, uid, frozenset((os.getegid(), *os.getgroups())))


def group_id(host: "Host", name: str) -> int | None:
    """The gid of group `name`, or None: no such group, or a snapshot (then: not known)."""
    if not host.live:
        return None
    import grp

    try:
        return grp.getgrnam(name).gr_gid
    except (KeyError, OSError, ValueError):
        return None


__all__ = ["Account", "PathEntry", "account", "current_account", "group_id", "path_chain"]
