"""Reading a file a user named (--model, --import, --compare, a profile): regular files only, bounded.

The lowest layer (beside tunehost.bounds): tunehost.model reads GGUF headers through it, and the host layer
(tunehost.host.files) re-exports it. A FIFO, a device or a directory is one TunehostError line, never a hang.
"""

from __future__ import annotations

import os
import stat
from typing import Callable

READ_CHUNK = 64 * 1024


def _read_capped(read: Callable[[int], bytes], limit: int) -> bytes:
    # one read() of MAX_READ_BYTES fails with ENOMEM on /proc/sys files (the kernel allocates a buffer of the
    # requested size), so read in small chunks up to the cap
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = read(min(READ_CHUNK, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


# what a path is when it is not a regular file, for one clear line ("is a FIFO, not a GGUF file")
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_kind(mode: int) -> str:
    """"a regular file", "a directory", "a FIFO", ... for an st_mode."""
    return next((name for test, name in _KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode) else
                "not a regular file")


def open_input(path: str | os.PathLike[str], what: str) -> tuple[int, os.stat_result]:
    """An fd on the regular file a user named, and its stat: opened O_NONBLOCK (a FIFO never blocks the open) and
    judged by fstat of what was opened. Links are followed: a model in a Hugging Face cache is a link. The caller
    closes the fd (a GGUF is mapped through it, never read whole)."""
    from tunehost.errors import TunehostError
    from tunehost.printable import one_line

    shown = one_line(str(path), 160)  # a 5,000-character path (ENAMETOOLONG) stays one short line
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise TunehostError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise TunehostError(f"{shown}: is a directory, not {what}") from None
    except PermissionError:
        raise TunehostError(f"cannot read {shown}: permission denied") from None
    except (OSError, ValueError) as exc:  # ELOOP, ENAMETOOLONG, a NUL byte, ENXIO (a socket)
        raise TunehostError(f"cannot read {shown}: {getattr(exc, 'strerror', None) or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise TunehostError(f"{shown}: is {file_kind(info.st_mode)}, not {what}")
    kernel = _kernel_file(fd)
    if kernel:  # /proc/kmsg is "regular" and a read of it drains the kernel log; none of these is a user's file
        os.close(fd)
        raise TunehostError(f"{shown}: is a kernel interface file under {kernel}, not {what}")
    return fd, info


KERNEL_TREES = ("/proc", "/sys")  # procfs and sysfs: files whose read has effects (kmsg) or no fixed content


def _kernel_file(fd: int) -> str | None:
    """The kernel tree (/proc, /sys) the opened file lies in, by the path the kernel gives for the fd (links and
    bind paths followed), or None."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc mounted: nothing under it can have been opened through it either
        return None
    return next((tree for tree in KERNEL_TREES if real == tree or real.startswith(tree + "/")), None)


def input_file_size(path: str | os.PathLike[str], what: str) -> int:
    """The size of the regular file a user named (--mmproj); one TunehostError line for anything else."""
    fd, info = open_input(path, what)
    os.close(fd)
    return info.st_size


def read_input_file(path: str | os.PathLike[str], what: str, *, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the regular file a user named (--model's header, --import, --compare), so the
    caller can tell "larger than the limit"; a FIFO, a device or a directory is one TunehostError line, never a
    hang. The one way tunehost reads a file given on its command line."""
    from tunehost.errors import TunehostError
    from tunehost.printable import one_line

    fd, _ = open_input(path, what)
    try:
        return _read_capped(lambda n: os.read(fd, n), limit + 1)
    except OSError as exc:  # EIO on a failing disk, EISDIR on odd filesystems
        raise TunehostError(f"cannot read {one_line(str(path), 160)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
