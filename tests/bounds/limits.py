"""Bounds the tests of issue 22 hold every input to: wall time (with a hard SIGALRM limit, so a hang fails instead of
holding CI) and the peak of Python allocations (tracemalloc), and helpers that build hostile inputs."""

from __future__ import annotations

import stat
import struct
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.fuzz.profiles import time_limit

MiB = 1024 * 1024


@contextmanager
def within(target: str, *, seconds: float, peak_bytes: int) -> Iterator[None]:
    """The block must finish within `seconds` (asserted; a hard limit at 3x fails a hang) with a peak of Python
    allocations under `peak_bytes`. Bounds are ~10x what the bounded code needs, never what this machine does."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        with time_limit(target, seconds * 3):
            yield
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < seconds, f"{target}: took {elapsed:.2f} s (bound {seconds} s)"
    assert peak < peak_bytes, f"{target}: peak {peak / MiB:.1f} MiB of allocations (bound {peak_bytes / MiB:.0f} MiB)"


# --- GGUF files with shapes llama.cpp never writes (ggml/src/gguf.cpp refuses them) -------------------------------------

GGUF_STRING, GGUF_ARRAY, GGUF_UINT32 = 8, 9, 4


def _key(name: str) -> bytes:
    raw = name.encode()
    return struct.pack("<Q", len(raw)) + raw


def _string(value: str) -> bytes:
    return struct.pack("<I", GGUF_STRING) + _key(value)


def write_raw_gguf(path: Path, kvs: list[bytes]) -> Path:
    """A GGUF v3 file with no tensors and the given encoded key/value pairs."""
    with open(path, "wb") as fh:
        fh.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)))
        for kv in kvs:
            fh.write(kv)
    return path


def nested_arrays_kv(name: str, count: int) -> bytes:
    """`name` = an array of `count` empty arrays (12 bytes each: 1,000,000 of them is a 12 MB file)."""
    return _key(name) + struct.pack("<IIQ", GGUF_ARRAY, GGUF_ARRAY, count) + struct.pack("<IQ", GGUF_UINT32, 0) * count


def string_kv(name: str, value: str) -> bytes:
    return _key(name) + _string(value)


def program(path: Path, body: str) -> Path:
    """An executable /bin/sh script at `path` running `body` (a fake llama-bench, llama-server, wrapper)."""
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie counts as gone), from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z"


def group_alive(pgid: int) -> bool:
    """Whether any running process (zombies count as gone) is left in process group `pgid`."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False
