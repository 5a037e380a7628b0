"""`advise --write DIR`: the files advise hands out (a unit, a router preset, Modelfiles, a README.txt) written as
real files: every target checked before any is written (an existing one is an error unless `force`), each written
atomically (a temporary file in DIR, then linked or renamed into place), names made safe first (`file_name`).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tunehost.errors import TunehostError
from tunehost.printable import one_line, require_printable

MAX_NAME = 80


@dataclass(frozen=True)
class Artifact:
    """One file to write: its name inside DIR, its text, its mode."""

    name: str
    text: str
    mode: int = 0o644


def model_slug(text: str) -> str:
    """A model's name (from GGUF metadata or a file name: hostile) as an Ollama model name and a file-name part:
    lower case letters, digits, '.', '_' and '-' only, no leading or trailing '.'/'-' (so never '..' alone, never a
    path separator or a control character), at most 80 characters; "model" when nothing is left."""
    name = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    return name.strip("-.")[:MAX_NAME].strip("-.") or "model"


def unique_slugs(names: list[str]) -> list[str]:
    """model_slug of each name; a slug already taken gets -2, -3, ... (two names may clean to the same)."""
    out: list[str] = []
    for name in names:
        slug = base = model_slug(name)
        n = 2
        while slug in out:
            slug = f"{base}-{n}"
            n += 1
        out.append(slug)
    return out


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name or name != one_line(name) \
            or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise TunehostError(f"internal: unsafe file name {one_line(name)!r}")


def _make_dirs(directory: Path) -> None:
    """`directory` and any missing parent, each created 0755 whatever the umask (mkdir's mode is masked by it: a
    umask of 077 would make them 0700, and the unit's user could not read what is written there). A directory
    that already exists keeps its mode."""
    missing = []
    here = Path(os.path.abspath(directory.expanduser()))
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:  # made meanwhile by someone else: not ours to chmod
            continue
        os.chmod(path, 0o755)


def write_artifacts(directory: Path, artifacts: list[Artifact], *, force: bool = False) -> list[Path]:
    """Write every artifact into `directory` (created with its missing parents, mode 0755 whatever the umask; each
    file gets its artifact's mode, umask or not). Nothing is written when one target
    exists and `force` is not set, or when a target is not a regular file: one TunehostError naming them."""
    require_printable(str(directory), "--write")
    if directory.exists() and not directory.is_dir():
        raise TunehostError(f"--write {directory}: not a directory")
    names = [a.name for a in artifacts]
    for name in names:
        _check_name(name)
    if len(set(names)) != len(names):
        raise TunehostError("internal: two artifacts share a file name")
    targets = [directory / n for n in names]
    taken = [t for t in targets if os.path.lexists(t)]
    odd = [t for t in taken if t.is_symlink() or not t.is_file()]
    if odd:
        raise TunehostError(f"--write {directory}: {', '.join(t.name for t in odd)} exists and is not a regular file; "
                            "nothing written")
    if taken and not force:
        raise TunehostError(f"--write {directory}: {', '.join(t.name for t in taken)} already exist"
                            f"{'s' if len(taken) == 1 else ''}; nothing written (--force replaces them)")
    _make_dirs(directory)
    written = []
    for artifact, target in zip(artifacts, targets):
        fd, tmp = tempfile.mkstemp(prefix=".tunehost-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(artifact.text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, artifact.mode)
            if force:
                os.replace(tmp, target)
            else:
                try:  # never over a file that appeared since the check
                    os.link(tmp, target)
                except FileExistsError:
                    raise TunehostError(f"--write {directory}: {target.name} appeared while writing; "
                                        f"written so far: {', '.join(p.name for p in written) or 'nothing'}") from None
                except OSError:  # a file system without hard links: rename, after one more look
                    if os.path.lexists(target):
                        raise TunehostError(f"--write {directory}: {target.name} appeared while writing") from None
                    os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        written.append(target)
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass
    return written


__all__ = ["Artifact", "model_slug", "unique_slugs", "write_artifacts"]
