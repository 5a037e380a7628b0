"""A file a command writes for the user (`report --output`, `export --textfile`): replaced atomically, and only
when it is a regular file or absent.

`os.replace` never follows a link, so a link planted at the path is replaced, never written through; but it also
replaces whatever else is there: `sudo tunehost report -o /dev/null` would put a regular file in place of the
device and `-o /dev/stdout` would replace that link. So what is there is looked at first (lstat): a FIFO, a device,
a socket or a link is refused with one line, nothing written. A directory named by the user is followed when it
is a link only if the link belongs to root, to the user running tunehost or to the user who ran sudo (the
kernel's protected_symlinks rule): a link another user planted in /tmp is not followed.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from tunehost.errors import TunehostError
from tunehost.inputs import file_kind
from tunehost.printable import one_line

STALE_TEMPORARY_S = 3600  # a temporary file of ours older than this was left by a killed run: removed


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def trusted_uids(environ: Mapping[str, str] | None = None) -> set[int]:
    """Whose links are followed: root, the user running tunehost and, under sudo, the user who ran it."""
    env = os.environ if environ is None else environ
    uids = {0, os.geteuid()}
    sudo_uid = env.get("SUDO_UID", "")
    if sudo_uid.isdigit():
        uids.add(int(sudo_uid))
    return uids


def directory_link_allowed(path: Path, option: str, environ: Mapping[str, str] | None = None) -> None:
    """TunehostError when `path` is a link owned by someone tunehost does not trust (see trusted_uids)."""
    info = _lstat(path)
    if info is not None and stat.S_ISLNK(info.st_mode) and info.st_uid not in trusted_uids(environ):
        raise TunehostError(f"{option} {one_line(path, 200)}: a link owned by uid {info.st_uid} (not you, not "
                            "root): not followed; give the directory it points to")


def replaceable(path: Path, option: str, hint: str = "") -> Path:
    """`path` when it is absent or a regular file; else one TunehostError line (nothing is replaced)."""
    info = _lstat(path)
    if info is None or stat.S_ISREG(info.st_mode):
        return path
    shown = one_line(path, 200)
    if stat.S_ISLNK(info.st_mode):
        raise TunehostError(f"{option} {shown}: is a symbolic link: not replaced and not followed; give the file "
                            "it points to")
    raise TunehostError(f"{option} {shown}: is {file_kind(info.st_mode)}, not a file: not replaced{hint}")


def replace_file(target: Path, text: str, *, option: str, owner: tuple[int, int] | None = None) -> None:
    """`text` as `target` (absent or a regular file, checked again here): a temporary file in the same directory
    (a dot name ending in .tmp, never read by a collector), flushed to disk, readable by all, owned by `owner` when
    given, then renamed over `target` in one step. Temporary files of ours that a killed run left are removed."""
    replaceable(target, option)
    _sweep(target)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o644)
        if owner is not None:
            os.chown(temporary, *owner)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _sweep(target: Path) -> None:
    prefix, now, uid = f".{target.name}.", time.time(), os.geteuid()
    try:
        names = [n for n in os.listdir(target.parent) if n.startswith(prefix) and n.endswith(".tmp")][:100]
    except OSError:
        return
    for name in names:
        path = target.parent / name
        info = _lstat(path)
        if info is not None and stat.S_ISREG(info.st_mode) and info.st_uid == uid and \
                now - info.st_mtime > STALE_TEMPORARY_S:
            try:
                os.unlink(path)
            except OSError:
                pass
