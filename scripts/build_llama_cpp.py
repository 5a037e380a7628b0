#!/usr/bin/env python3
"""Build llama-bench and llama-fit-params (CPU backend, Release) once per machine.

The sources are the llama.cpp tree vendored inside the pinned llama-cpp-python source
distribution on PyPI, so the only network access needed is the Python package index.

    python scripts/build_llama_cpp.py            # builds (~7 min on 2 cores) or reuses the cache
    python scripts/build_llama_cpp.py --force    # rebuild even if cached

The binaries land in ``${TUNEHOST_CACHE_DIR:-~/.cache/tunehost}/llama.cpp/<version>/bin/``;
the last line on stdout is that directory. Progress goes to stderr.

Build choices
- ``GGML_NATIVE=ON`` (llama.cpp's own default): the binaries only ever run on the machine
  that built them (the cache is per machine), and a benchmark must show what this CPU can do,
  as the user's own llama.cpp build would. The marker records the CPU's ISA flags; a cache
  copied to a different CPU is rebuilt instead of dying with SIGILL.
- ``BUILD_SHARED_LIBS=OFF``: the two binaries are self-contained, so ``bin/`` can be copied.
- ``LLAMA_OPENSSL=OFF`` (``LLAMA_CURL`` is deprecated and ignored in this llama.cpp):
  benchmarks read local files only, and no TLS headers are needed to build.
- The sdist holds a shallow submodule checkout, whose git history says "build 1"; the real
  commit and build number are pinned below and passed to CMake.

Importable: ``ensure_built() -> Path`` returns the bin directory, building if needed.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
TARGETS = ("llama-bench", "llama-fit-params")
MARKER_NAME = "built.json"


@dataclass(frozen=True)
class VendoredLlamaCpp:
    """The llama.cpp revision vendored in one llama-cpp-python release."""

    commit: str
    build_number: int


# The sdist's submodule is a one-commit shallow clone, so the build number cannot be derived
# from git there; b11312 is the upstream release tag of commit 0c1e57098.
VENDORED = {
    "0.3.36": VendoredLlamaCpp(commit="0c1e570", build_number=11312),
}


class BuildError(Exception):
    """A one-line reason the build failed."""


Log = Callable[[str], None]


def _log_to_stderr(message: str) -> None:
    print(f"build_llama_cpp: {message}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    """``$TUNEHOST_CACHE_DIR`` or ``~/.cache/tunehost``."""
    configured = os.environ.get("TUNEHOST_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tunehost"


def version_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return cache_root() / "llama.cpp" / version


def bin_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Where the binaries of ``version`` live once built (they may not exist yet)."""
    return version_dir(version) / "bin"


def cpu_fingerprint() -> str:
    """A hash of the CPU model and ISA flags: native binaries are only valid on an equal CPU."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    wanted = [line for line in cpuinfo.splitlines() if line.startswith(("flags", "model name", "Features"))]
    # Every CPU repeats the same lines; hash the distinct ones.
    distinct = sorted(set(wanted))
    return hashlib.sha256("\n".join(distinct).encode()).hexdigest()[:16]


def cached_bin_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path | None:
    """The bin directory if a finished build for this CPU is cached, else None. Never builds."""
    marker = version_dir(version) / MARKER_NAME
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    binaries = bin_dir(version)
    if recorded.get("cpu") != cpu_fingerprint():
        return None
    if not all(os.access(binaries / target, os.X_OK) for target in TARGETS):
        return None
    return binaries


def _run(argv: list[str], log_file: Path, *, quote_last_error: bool = False) -> None:
    """Run one build step, appending its output to the log; a failure quotes the step's first
    error line (a compiler's first error is the cause), or its last one (pip ends with the cause).
    """
    with log_file.open("a") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        step_starts_at = log.tell()
        try:
            completed = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
        except FileNotFoundError:
            raise BuildError(f"{argv[0]} not found; install it (e.g. apt-get install cmake g++)") from None
    if completed.returncode != 0:
        with log_file.open(errors="replace") as log:
            log.seek(step_starts_at)
            output = [line.strip() for line in log if line.strip()]
        errors = [line for line in output if "error" in line.lower()]
        candidates = errors or output or ["no output"]
        reason = (candidates[-1] if quote_last_error else candidates[0])[:300]
        step = " ".join(Path(argv[0]).name.split() + argv[1:3])
        raise BuildError(f"`{step} ...` failed (exit {completed.returncode}): {reason} — full log: {log_file}")


def _download_sdist(version: str, downloads: Path, log_file: Path) -> Path:
    wanted = downloads / f"llama_cpp_python-{version}.tar.gz"
    if wanted.is_file():
        return wanted
    downloads.mkdir(parents=True, exist_ok=True)
    _run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"llama-cpp-python=={version}", "--dest", str(downloads)],
        log_file,
        quote_last_error=True,
    )
    if not wanted.is_file():
        raise BuildError(f"pip download did not produce {wanted.name} — full log: {log_file}")
    return wanted


def _unpack_vendored_llama_cpp(sdist: Path, work: Path) -> Path:
    """Extract only vendor/llama.cpp from the sdist (a quarter of the archive)."""
    prefix = f"{sdist.name.removesuffix('.tar.gz')}/vendor/llama.cpp/"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
        if not members:
            raise BuildError(f"{sdist.name} has no vendor/llama.cpp directory")
        archive.extractall(work, members=members, filter="data")
    source = work / prefix.rstrip("/")
    missing = [t for t in ("llama-bench", "fit-params") if not (source / "tools" / t / "CMakeLists.txt").is_file()]
    if missing:
        raise BuildError(f"the llama.cpp vendored in {sdist.name} lacks tools/{', tools/'.join(missing)}")
    return source


def cmake_configure_args(source: Path, build: Path, vendored: VendoredLlamaCpp | None) -> list[str]:
    """The CMake configure command line (see the module docstring for why each option)."""
    argv = [
        "cmake", "-S", str(source), "-B", str(build),
        "-DCMAKE_BUILD_TYPE=Release",
        "-DGGML_NATIVE=ON",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
        "-DLLAMA_BUILD_APP=OFF",
    ]
    if shutil.which("ninja"):
        argv += ["-G", "Ninja"]
    if vendored is not None:
        argv += [f"-DLLAMA_BUILD_COMMIT={vendored.commit}", f"-DLLAMA_BUILD_NUMBER={vendored.build_number}"]
    else:
        # Unknown release: git still gives the right commit, but its count of 1 would be a lie; 0 = unknown.
        argv += ["-DLLAMA_BUILD_NUMBER=0"]
    return argv


def ensure_built(version: str = LLAMA_CPP_PYTHON_VERSION, *, force: bool = False, log: Log = _log_to_stderr) -> Path:
    """Return the bin directory holding llama-bench and llama-fit-params, building them if needed.

    Safe to call concurrently: a file lock makes the second caller wait for the first build.
    Raises BuildError with a one-line reason on failure.
    """
    if not force and (cached := cached_bin_dir(version)) is not None:
        return cached
    root = version_dir(version)
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another process may have finished the build while this one waited for the lock.
        if not force and (cached := cached_bin_dir(version)) is not None:
            return cached
        return _build(version, root, log)


def _build(version: str, root: Path, log: Log) -> Path:
    marker = root / MARKER_NAME
    marker.unlink(missing_ok=True)
    log_file = root / "build.log"
    log_file.write_text(f"building llama.cpp from llama-cpp-python {version}\n")
    started = time.monotonic()

    log(f"downloading the llama-cpp-python {version} sdist from PyPI")
    sdist = _download_sdist(version, root / "downloads", log_file)
    log(f"unpacking vendor/llama.cpp from {sdist.name}")
    work = root / "work"
    source = _unpack_vendored_llama_cpp(sdist, work)
    build = work / "build"
    vendored = VENDORED.get(version)
    # Like nproc: the CPUs this process may run on, not all CPUs of the machine.
    jobs = len(os.sched_getaffinity(0)) or 1

    log("configuring (CMake, Release, CPU backend, native ISA)")
    _run(cmake_configure_args(source, build, vendored), log_file)
    log(f"compiling {' and '.join(TARGETS)} with -j {jobs} (several minutes; log: {log_file})")
    _run(["cmake", "--build", str(build), "--config", "Release", "-j", str(jobs), "--target", *TARGETS], log_file)

    binaries = bin_dir(version)
    if binaries.exists():
        shutil.rmtree(binaries)
    binaries.mkdir(parents=True)
    for target in TARGETS:
        built = next((p for p in (build / "bin" / target, build / target) if p.is_file()), None)
        if built is None:
            raise BuildError(f"the build finished but {target} is missing — full log: {log_file}")
        shutil.copy2(built, binaries / target)
    _run([str(binaries / "llama-bench"), "--help"], log_file)
    # The sources and objects are only needed to build; the bin directory is what is cached.
    shutil.rmtree(work)

    seconds = round(time.monotonic() - started, 1)
    record = {
        "llama_cpp_python": version,
        "llama_cpp_commit": vendored.commit if vendored else None,
        "llama_cpp_build_number": vendored.build_number if vendored else None,
        "targets": list(TARGETS),
        "cmake": cmake_configure_args(Path("SRC"), Path("BUILD"), vendored)[5:],
        "cpu": cpu_fingerprint(),
        "build_seconds": seconds,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # Written last, atomically: its presence means a complete, usable build.
    partial = marker.with_suffix(".tmp")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(marker)
    log(f"built in {seconds} s")
    return binaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--version", default=LLAMA_CPP_PYTHON_VERSION, help="llama-cpp-python sdist version to build from"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if a cached build exists")
    args = parser.parse_args(argv)
    try:
        binaries = ensure_built(args.version, force=args.force)
    except BuildError as error:
        print(f"build_llama_cpp: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("build_llama_cpp: error: interrupted", file=sys.stderr)
        return 130
    print(binaries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
