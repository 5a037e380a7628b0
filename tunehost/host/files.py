"""Reading (and, for tuning, writing) host files under a root: "/" for the live host, DIR/fs for a snapshot.

Every path given to these methods is the *host* absolute path ("/proc/meminfo"); the root is applied here and
nowhere else. Under a snapshot root a path that resolves outside the root (a link pointing out) reads as absent.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tunehost.inputs import _read_capped

# sysfs/procfs files are small; a cap keeps a mistaken read of a huge file from hurting
MAX_READ_BYTES = 4 * 1024 * 1024


class Refused(Exception):
    """A snapshot file that must not be read: it links out of the snapshot, or is not a regular file."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def confined_real(local: str | os.PathLike, root_real: str) -> str:
    """realpath(local) when it stays under the snapshot root `root_real` (itself a realpath); else Refused.
    docs/snapshot.md: a reader never follows a link out of DIR (`cmd/x -> /etc/shadow`, `fs -> /`, `../../..`)."""
    try:
        real = os.path.realpath(local)
    except (OSError, ValueError, RuntimeError):  # a link loop on old Pythons, a NUL byte
        raise Refused("cannot be resolved (a link loop?): not read") from None
    if not _inside(real, root_real):
        raise Refused(f"links out of the snapshot (to {real}): not read")
    return real


def read_confined(local: str | os.PathLike, root_real: str, limit: int = MAX_READ_BYTES) -> bytes | None:
    """The bytes of a snapshot file (at most `limit`), None when it is absent; Refused when it links out of the
    snapshot or is not a regular file (a FIFO or a device would block the reader or read live data)."""
    return open_regular(confined_real(local, root_real), limit)


def open_regular(real: str, limit: int = MAX_READ_BYTES) -> bytes | None:
    """The bytes of the regular file at the resolved path `real`, None when absent; Refused when it is not a
    regular file or cannot be opened."""
    try:
        # the resolved path, without following a link swapped in since, and without blocking on a FIFO
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise Refused(f"cannot be read: {(exc.strerror or exc.__class__.__name__).lower()}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return None  # a directory where a file was expected: absent, as on a live host
        if not stat.S_ISREG(mode):
            raise Refused("is not a regular file (a FIFO, socket or device): not read")
        return _read_capped(lambda n: os.read(fd, n), limit)
    except OSError as exc:
        raise Refused(f"cannot be read: {(exc.strerror or exc.__class__.__name__).lower()}") from None
    finally:
        os.close(fd)


@dataclass
class AccessLog:
    """What a run read, so `tunehost snapshot` can store exactly that."""

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: dict[str, list[str]] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)


class HostFiles:
    """Files of one host. `root` is "/" for the live host; `confined` refuses reads that escape the root."""

    def __init__(self, root: str | os.PathLike = "/", *, confined: bool = False, log: AccessLog | None = None,
                 within: str | os.PathLike | None = None):
        """`within`: the snapshot directory that holds `root` (DIR for DIR/fs); when `root` itself links out of it
        (`fs -> /`), nothing is read at all."""
        self.root = Path(root)
        self.confined = confined
        self.log = log
        self._real_root = os.path.realpath(self.root) if confined else None
        self._real_dirs: dict[str, str] = {}
        self.refused: dict[str, str] = {}  # host path -> why it was not read (a snapshot's link out, a FIFO)
        self.refused_root: str | None = None
        if confined and within is not None and not _inside(self._real_root, os.path.realpath(within)):
            self.refused_root = (f"{self.root.name}/ links out of the snapshot (to {self._real_root}): "
                                 "nothing under it is read")

    def __repr__(self) -> str:
        return f"HostFiles(root={str(self.root)!r})"

    def local(self, path: str) -> str | None:
        """The local filesystem path that stands for host `path`, or None if it would escape a confined root."""
        if not path.startswith("/"):
            raise ValueError(f"host paths are absolute: {path!r}")
        if str(self.root) == "/":
            return path
        local = os.path.join(self.root, path.lstrip("/"))
        if self.confined and self._confined_real(path, local) is None:
            return None
        return local

    def _confined_real(self, path: str, local: str) -> str | None:
        """The resolved local path of host `path` under a confined root; None (and why, in `refused`) when it
        links out of the snapshot."""
        if self.refused_root is not None:
            self.refused.setdefault(path, self.refused_root)
            return None
        real = self._resolve(local)
        if not _inside(real, self._real_root):
            self.refused.setdefault(path, f"links out of the snapshot (to {real}): not read")
            return None
        return real

    def _resolve(self, local: str, *, is_dir: bool = False) -> str:
        """realpath(local), caching each directory's realpath: a snapshot of a 384-CPU host reads thousands of files."""
        if is_dir and local in self._real_dirs:
            return self._real_dirs[local]
        parent, _, name = local.rpartition("/")
        if not parent or name in ("", ".", "..") or os.path.islink(local):
            real = os.path.realpath(local)
        else:
            real = self._resolve(parent, is_dir=True) + "/" + name
        if is_dir:
            self._real_dirs[local] = real
        return real

    def read_bytes(self, path: str) -> bytes | None:
        if self.confined:
            if not path.startswith("/"):
                raise ValueError(f"host paths are absolute: {path!r}")
            real = self._confined_real(path, os.path.join(self.root, path.lstrip("/")))
            if real is None:
                return None
            try:
                return open_regular(real)
            except Refused as exc:
                self.refused.setdefault(path, exc.reason)
                return None
        local = self.local(path)
        if local is None:
            return None
        try:
            with open(local, "rb") as fh:
                data = _read_capped(fh.read, MAX_READ_BYTES)
        except (OSError, ValueError):
            if self.log is not None:
                self.log.absent.add(path)
            return None
        if self.log is not None:
            self.log.files[path] = data
        return data

    def read(self, path: str) -> str | None:
        """The file's text, or None when it is absent or unreadable (no root, no driver, not this hardware)."""
        data = self.read_bytes(path)
        if data is None:
            return None
        return data.decode("utf-8", errors="replace")

    def read_value(self, path: str) -> str | None:
        """A one-value sysfs file, stripped; None when absent or empty."""
        text = self.read(path)
        if text is None:
            return None
        text = text.strip()
        return text or None

    def read_int(self, path: str) -> int | None:
        value = self.read_value(path)
        if value is None:
            return None
        try:
            return int(value.split()[0])
        except (ValueError, IndexError):
            return None

    def exists(self, path: str) -> bool:
        local = self.local(path)
        found = local is not None and os.path.exists(local)
        if self.log is not None and not found:
            self.log.absent.add(path)
        if self.log is not None and found and os.path.isdir(local):
            self.log.dirs.setdefault(path, [])
        elif self.log is not None and found and os.path.isfile(local):
            self.read_bytes(path)  # a snapshot must answer exists() the same way: keep the file
        return found

    def is_dir(self, path: str) -> bool:
        local = self.local(path)
        found = local is not None and os.path.isdir(local)
        if self.log is not None and found:
            self.log.dirs.setdefault(path, [])
        return found

    def listdir(self, path: str) -> list[str]:
        """Sorted entry names; [] when the directory is absent or unreadable."""
        local = self.local(path)
        if local is None:
            return []
        try:
            names = sorted(os.listdir(local))
        except OSError:
            if self.log is not None:
                self.log.absent.add(path)
            return []
        if self.log is not None:
            self.log.dirs[path] = names
        return names

    def glob(self, pattern: str) -> list[str]:
        """Host paths matching a pattern whose wildcards are in path components ("/sys/class/drm/card*/device")."""
        parts = pattern.strip("/").split("/")
        found = ["/"]
        for part in parts:
            nxt: list[str] = []
            for base in found:
                if any(ch in part for ch in "*?["):
                    nxt.extend(os.path.join(base, n) for n in self.listdir(base) if fnmatch.fnmatchcase(n, part))
                else:
                    candidate = os.path.join(base, part)
                    local = self.local(candidate)
                    if local is not None and os.path.lexists(local):
                        nxt.append(candidate)
            found = nxt
        return sorted(found)

    def readlink(self, path: str) -> str | None:
        """The target of a link as stored (e.g. "../../../bus/pci/drivers/nvidia"), or None."""
        if self.confined:  # the link itself is read, not followed: only its directory must be inside
            parent = self.local(os.path.dirname(path.rstrip("/")) or "/")
            local = None if parent is None else os.path.join(parent, os.path.basename(path.rstrip("/")))
        else:
            local = self.local(path)
        if local is None:
            return None
        try:
            target = os.readlink(local)
        except (OSError, ValueError):
            return None
        if self.log is not None:
            self.log.links[path] = target
        return target

    def write(self, path: str, text: str) -> None:
        """Write a value (tuning only). Raises OSError so the caller can journal and roll back."""
        local = self.local(path)
        if local is None:
            raise PermissionError(f"{path}: outside the host root")
        with open(local, "w") as fh:
            fh.write(text)

    def remove(self, path: str) -> None:
        """Delete a file (tuning only: undoing a configuration file tunehost created). Raises OSError."""
        local = self.local(path)
        if local is None:
            raise PermissionError(f"{path}: outside the host root")
        os.unlink(local)

    def remove_dir(self, path: str) -> None:
        """Remove an empty directory (tuning only: undoing one tunehost created). Raises OSError, also when not empty."""
        local = self.local(path)
        if local is None:
            raise PermissionError(f"{path}: outside the host root")
        os.rmdir(local)

    def make_dirs(self, path: str, mode: int = 0o755) -> None:
        """Create a directory and its parents if missing (tuning only: /etc/sysctl.d on a minimal host)."""
        local = self.local(path)
        if local is None:
            raise PermissionError(f"{path}: outside the host root")
        os.makedirs(local, mode=mode, exist_ok=True)
