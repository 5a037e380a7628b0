#!/usr/bin/env python3
"""Build llama-bench, llama-fit-params and llama-server (CPU backend, Release) once per machine, and prove them.

The sources are the llama.cpp tree vendored inside the pinned llama-cpp-python source
distribution on PyPI, so the only network access needed is the Python package index.

    python scripts/build_llama_cpp.py            # builds (about 15 minutes on 2 cores) or reuses the cache
    python scripts/build_llama_cpp.py --force    # rebuild even if cached
    python scripts/build_llama_cpp.py --portable # only the portable build (no AMX), e.g. where native crashes

The binaries land in ``${TUNEHOST_CACHE_DIR:-~/.cache/tunehost}/llama.cpp/<version>/bin/``;
the last line on stdout is that directory. Progress goes to stderr (a line per tenth of the
compile steps).

Build choices
- First ``GGML_NATIVE=ON`` (llama.cpp's own default): a benchmark must show what this CPU can
  do, as the user's own llama.cpp build would.
- Every build proves itself before it is cached: a smoke run of each binary on the tiny test
  model (``llama-bench`` runs a short pp/tg, ``llama-fit-params`` fits the model, ``llama-server``
  starts on a free loopback port, answers ``/health`` and generates a few tokens). A native build
  that fails it (on a CPU with AMX, llama.cpp's AMX weight repacking is known to crash llama-bench
  with SIGSEGV) is rebuilt *portable*: ``GGML_NATIVE=OFF`` with the ISA options this CPU has
  (SSE4.2/AVX/AVX2/FMA/F16C/BMI2, AVX-512 only where the CPU has all of F/CD/VL/DQ/BW) and the
  AMX options off. The portable build is smoke-run too; ``built.json`` records which was kept
  and why.
- The cache is keyed by everything that changes the binary: the llama-cpp-python version and the
  llama.cpp commit, the CMake options of each variant, this script's build revision and the CPU's
  model and ISA flags. A cache copied to another CPU, or left by another revision of this script,
  is rebuilt instead of trusted.
- ``BUILD_SHARED_LIBS=OFF``: the binaries are self-contained, so ``bin/`` can be copied.
- ``LLAMA_OPENSSL=OFF``, ``LLAMA_BUILD_UI=OFF``, ``LLAMA_USE_PREBUILT_UI=OFF``: benchmarks read local
  files only; the server is built without its web UI (no npm, no download at build time).
- The sdist holds a shallow submodule checkout, whose git history says "build 1"; the real
  commit and build number are pinned below and passed to CMake.

Environment
- ``TUNEHOST_BUILD_SMOKE_FAIL=native`` makes the native build's smoke run count as failed, to
  exercise the portable rebuild (``=all`` fails both: the build then stops with an error).

Importable: ``ensure_built() -> Path`` returns the bin directory, building if needed.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

try:
    from tunehost.facts.llama_exit import ISA_FLAGS, exit_status, has_amx, portable_isa, portable_options
except ImportError:  # run with a Python that has not installed tunehost: the repository's own copy
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tunehost.facts.llama_exit import ISA_FLAGS, exit_status, has_amx, portable_isa, portable_options

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
TARGETS = ("llama-bench", "llama-fit-params", "llama-server")
MARKER_NAME = "built.json"
# Bump when the build options or the smoke run change: an older cache is then rebuilt.
BUILD_REVISION = 2
SMOKE_FAIL_ENV = "TUNEHOST_BUILD_SMOKE_FAIL"
# One smoke step may take this long (the tiny model loads and runs in about a second).
SMOKE_TIMEOUT_S = 120.0


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


class SmokeError(Exception):
    """A one-line reason a built binary failed its smoke run."""


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


def _cpuinfo_lines() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            text = handle.read(4 << 20)
    except OSError:
        return []
    wanted = [line for line in text.splitlines() if line.startswith(("flags", "model name", "Features"))]
    return sorted(set(wanted))


def cpu_flags() -> frozenset[str]:
    """The ISA flags of this CPU from /proc/cpuinfo (the first ``flags`` line; all CPUs share them)."""
    for line in _cpuinfo_lines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def cpu_fingerprint() -> str:
    """A hash of the CPU model and ISA flags: native binaries are only valid on an equal CPU."""
    distinct = _cpuinfo_lines()
    if not distinct:
        return "unknown"
    return hashlib.sha256("\n".join(distinct).encode()).hexdigest()[:16]


def built_isa(variant: "Variant", flags: frozenset[str]) -> list[str]:
    """The /proc/cpuinfo flags a variant's binaries use: a native build may use all of this CPU's ISA."""
    if variant.name == "native":
        return sorted(flag for flag in flags if flag in ISA_FLAGS)
    return portable_isa(flags)


@dataclass(frozen=True)
class Variant:
    """One way to build: its name and the CMake options that make it differ."""

    name: str
    options: tuple[str, ...]
    why: str


def variants(flags: frozenset[str]) -> tuple[Variant, ...]:
    """The builds to try in order: native first, then portable for this CPU's ISA without AMX."""
    native = Variant("native", ("-DGGML_NATIVE=ON",), "llama.cpp's default: optimised for this CPU")
    portable = Variant(
        "portable",
        tuple(portable_options(flags)),
        "GGML_NATIVE=OFF, this CPU's ISA without AMX" if has_amx(flags) else "GGML_NATIVE=OFF, this CPU's ISA",
    )
    return native, portable


def cmake_configure_args(
    source: Path, build: Path, vendored: VendoredLlamaCpp | None, variant: Variant | None = None
) -> list[str]:
    """The CMake configure command line (see the module docstring for why each option)."""
    variant = variant or variants(cpu_flags())[0]
    argv = [
        "cmake", "-S", str(source), "-B", str(build),
        "-DCMAKE_BUILD_TYPE=Release",
        *variant.options,
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
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


def _recorded_cmake(vendored: VendoredLlamaCpp | None, variant: Variant) -> list[str]:
    """The configure options without the machine's paths or generator: what the cache key covers."""
    return [arg for arg in cmake_configure_args(Path("SRC"), Path("BUILD"), vendored, variant)[5:] if arg not in ("-G", "Ninja")]


def cache_key(version: str, variant: Variant, cpu: str | None = None) -> str:
    """Everything that changes the binary: source version and commit, options, script revision, CPU."""
    vendored = VENDORED.get(version)
    material = json.dumps(
        {
            "llama_cpp_python": version,
            "commit": vendored.commit if vendored else None,
            "cmake": _recorded_cmake(vendored, variant),
            "revision": BUILD_REVISION,
            "targets": list(TARGETS),
            "cpu": cpu or cpu_fingerprint(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def cached_bin_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path | None:
    """The bin directory if a proven build for this CPU, these options and this script is cached,
    else None. Never builds."""
    marker = version_dir(version) / MARKER_NAME
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("cpu") != cpu_fingerprint():
        return None
    by_name = {v.name: v for v in variants(cpu_flags())}
    kept = by_name.get(str(recorded.get("variant")))
    if kept is None or recorded.get("key") != cache_key(version, kept):
        return None
    binaries = bin_dir(version)
    if not all(os.access(binaries / target, os.X_OK) for target in TARGETS):
        return None
    return binaries


def script_llama_bench() -> Path:
    """llama-bench for the scripts in scripts/: ``$TUNEHOST_LLAMA_BIN_DIR`` wins, as in the CLI, whatever the cache
    holds; without it the proven cached build, else the CLI's own search ($LLAMA_CPP_DIR, PATH). TunehostError when
    none is found."""
    from tunehost.bench.runner import resolve_binary  # noqa: PLC0415 (the scripts that need it have tunehost)

    if os.environ.get("TUNEHOST_LLAMA_BIN_DIR"):
        return resolve_binary(None)
    return resolve_binary(cached_bin_dir())


def _run(argv: list[str], log_file: Path, *, quote_last_error: bool = False, progress: Log | None = None) -> None:
    """Run one build step, appending its output to the log; a failure quotes the step's first
    error line (a compiler's first error is the cause), or its last one (pip ends with the cause).
    With ``progress``, ninja/make's ``[n/m]`` counters are reported every tenth of the way.
    """
    with log_file.open("a") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        step_starts_at = log.tell()
        try:
            process = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                text=True, errors="replace", bufsize=1,
            )
        except FileNotFoundError:
            raise BuildError(f"{argv[0]} not found; install it (e.g. apt-get install cmake g++)") from None
        assert process.stdout is not None
        reported = 0
        started = time.monotonic()
        for line in process.stdout:
            log.write(line)
            if progress is not None:
                reported = _report_progress(line, reported, started, progress)
        returncode = process.wait()
    if returncode != 0:
        with log_file.open(errors="replace") as log:
            log.seek(step_starts_at)
            output = [line.strip() for line in log if line.strip()]
        errors = [line for line in output if "error" in line.lower()]
        candidates = errors or output or ["no output"]
        reason = (candidates[-1] if quote_last_error else candidates[0])[:300]
        step = " ".join(Path(argv[0]).name.split() + argv[1:3])
        raise BuildError(f"`{step} ...` failed (exit {returncode}): {reason} — full log: {log_file}")


def _report_progress(line: str, reported: int, started: float, progress: Log) -> int:
    """``[123/456] Building ...`` (ninja) or ``[ 42%] Building ...`` (make): a line per 10 %."""
    text = line.lstrip()
    if not text.startswith("["):
        return reported
    counter = text[1 : text.find("]")] if "]" in text[:16] else ""
    percent = None
    if "/" in counter:
        done, _, total = counter.partition("/")
        if done.strip().isdigit() and total.strip().isdigit() and 0 <= int(done) <= int(total) and int(total) > 0:
            percent = 100 * int(done) // int(total)
    elif counter.strip().endswith("%") and counter.strip()[:-1].strip().isdigit():
        percent = int(counter.strip()[:-1])
    if percent is None or percent > 100 or percent < reported + 10:
        return reported
    step = percent // 10 * 10
    progress(f"compiled {step} % ({time.monotonic() - started:.0f} s)")
    return step


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
    missing = [t for t in ("llama-bench", "fit-params", "server") if not (source / "tools" / t / "CMakeLists.txt").is_file()]
    if missing:
        raise BuildError(f"the llama.cpp vendored in {sdist.name} lacks tools/{', tools/'.join(missing)}")
    return source


# --- the smoke run -------------------------------------------------------------------------


def _smoke_exec(argv: list[str], log_file: Path, timeout: float = SMOKE_TIMEOUT_S) -> str:
    with log_file.open("a") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        try:
            completed = subprocess.run(
                argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, timeout=timeout,
                check=False, start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise SmokeError(f"{Path(argv[0]).name} did not finish within {timeout:.0f} s") from None
        except OSError as error:
            raise SmokeError(f"{Path(argv[0]).name} cannot run: {error.strerror or error}") from None
        stdout = completed.stdout.decode("utf-8", "replace")
        log.write(stdout[:20000])
    if completed.returncode != 0:
        raise SmokeError(f"{Path(argv[0]).name} {exit_status(completed.returncode)}")
    return stdout


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _http_json(url: str, body: dict | None = None, timeout: float = 10.0) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (loopback only)
        payload = json.loads(response.read(1 << 20))
    return payload if isinstance(payload, dict) else {}


def _smoke_server(server: Path, model: Path, log_file: Path) -> str:
    port = _free_loopback_port()
    argv = [str(server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "256",
            "-np", "1", "-t", "1", "--no-webui"]
    with log_file.open("a") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        process = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SMOKE_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise SmokeError(f"llama-server {exit_status(process.returncode)} while loading the model")
            try:
                if _http_json(f"{base}/health", timeout=2.0).get("status") == "ok":
                    break
            except (OSError, ValueError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise SmokeError(f"llama-server did not answer /health within {SMOKE_TIMEOUT_S:.0f} s")
            time.sleep(0.2)
        try:
            answer = _http_json(f"{base}/completion", {"prompt": "hello", "n_predict": 4, "seed": 1}, timeout=60.0)
        except (OSError, ValueError, urllib.error.URLError) as error:
            if process.poll() is not None:
                raise SmokeError(f"llama-server {exit_status(process.returncode)} while generating") from None
            raise SmokeError(f"llama-server /completion failed: {error}") from None
        predicted = (answer.get("timings") or {}).get("predicted_n")
        if not isinstance(predicted, int) or predicted < 1:
            raise SmokeError("llama-server /completion generated no token")
        return f"llama-server: /health ok, /completion generated {predicted} tokens"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def tiny_model() -> Path:
    """The tiny test model (scripts/make_test_model.py), written if needed."""
    scripts = str(Path(__file__).resolve().parent)
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import make_test_model  # noqa: PLC0415 (needs gguf, so only when a smoke run happens)

    return make_test_model.ensure_model("tiny")


def smoke_run(binaries: Path, model: Path, log_file: Path, *, variant: str = "") -> list[str]:
    """Run every built binary on the tiny model; a line of evidence per binary, or SmokeError."""
    forced = os.environ.get(SMOKE_FAIL_ENV, "")
    if forced and (forced == "all" or forced == variant):
        raise SmokeError(f"failure forced by {SMOKE_FAIL_ENV}={forced}")
    evidence = []
    out = _smoke_exec([str(binaries / "llama-bench"), "-m", str(model), "-p", "16", "-n", "4", "-r", "1",
                       "-t", "1", "-o", "json"], log_file)
    try:
        rows = json.loads(out)
        rates = ", ".join(f"{'pp' if r['n_prompt'] else 'tg'} {r['avg_ts']:.0f} t/s" for r in rows)
    except (ValueError, KeyError, TypeError):
        raise SmokeError("llama-bench printed no JSON result") from None
    evidence.append(f"llama-bench: {rates}")
    out = _smoke_exec([str(binaries / "llama-fit-params"), "-m", str(model), "-c", "256"], log_file)
    if "-ngl" not in out:
        raise SmokeError("llama-fit-params printed no fitted arguments")
    evidence.append(f"llama-fit-params: {out.strip()[:80]}")
    evidence.append(_smoke_server(binaries / "llama-server", model, log_file))
    return evidence


# --- building ------------------------------------------------------------------------------


def ensure_built(version: str = LLAMA_CPP_PYTHON_VERSION, *, force: bool = False, log: Log = _log_to_stderr,
                 portable: bool = False) -> Path:
    """Return the bin directory holding the proven binaries, building them if needed.

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
        return _build(version, root, log, portable=portable)


def _compile(source: Path, build: Path, vendored: VendoredLlamaCpp | None, variant: Variant, log_file: Path, log: Log) -> None:
    jobs = len(os.sched_getaffinity(0)) or 1  # like nproc: the CPUs this process may run on
    log(f"configuring the {variant.name} build ({variant.why})")
    _run(cmake_configure_args(source, build, vendored, variant), log_file)
    log(f"compiling {', '.join(TARGETS)} with -j {jobs} (about 15 minutes on 2 cores; log: {log_file})")
    _run(["cmake", "--build", str(build), "--config", "Release", "-j", str(jobs), "--target", *TARGETS],
         log_file, progress=log)


def _install(build: Path, binaries: Path, log_file: Path) -> None:
    if binaries.exists():
        shutil.rmtree(binaries)
    binaries.mkdir(parents=True)
    for target in TARGETS:
        built = next((p for p in (build / "bin" / target, build / target) if p.is_file()), None)
        if built is None:
            raise BuildError(f"the build finished but {target} is missing — full log: {log_file}")
        shutil.copy2(built, binaries / target)


def _build(version: str, root: Path, log: Log, *, portable: bool = False) -> Path:
    marker = root / MARKER_NAME
    marker.unlink(missing_ok=True)
    log_file = root / "build.log"
    log_file.write_text(f"building llama.cpp from llama-cpp-python {version}\n")
    started = time.monotonic()

    cached_sdist = root / "downloads" / f"llama_cpp_python-{version}.tar.gz"
    log(f"using the downloaded llama-cpp-python {version} sdist" if cached_sdist.is_file()
        else f"downloading the llama-cpp-python {version} sdist from PyPI")
    sdist = _download_sdist(version, root / "downloads", log_file)
    log(f"unpacking vendor/llama.cpp from {sdist.name}")
    work = root / "work"
    source = _unpack_vendored_llama_cpp(sdist, work)
    vendored = VENDORED.get(version)
    model = tiny_model()
    binaries = bin_dir(version)
    flags = cpu_flags()

    tried: list[dict] = []
    kept: Variant | None = None
    evidence: list[str] = []
    for variant in variants(flags)[1:] if portable else variants(flags):
        _compile(source, work / f"build-{variant.name}", vendored, variant, log_file, log)
        _install(work / f"build-{variant.name}", binaries, log_file)
        log(f"smoke run of the {variant.name} build on {model.name}")
        try:
            evidence = smoke_run(binaries, model, log_file, variant=variant.name)
        except SmokeError as error:
            reason = str(error)
            if "SIGSEGV" in reason and has_amx(flags):
                reason += " (this CPU has AMX: llama.cpp's AMX path is known to crash here)"
            elif "SIGILL" in reason:
                reason += " (an instruction this CPU lacks)"
            log(f"the {variant.name} build failed its smoke run: {reason}")
            tried.append({"variant": variant.name, "smoke": "failed", "reason": reason})
            continue
        for line in evidence:
            log(f"  {line}")
        tried.append({"variant": variant.name, "smoke": "passed"})
        kept = variant
        break
    if kept is None:
        raise BuildError(
            "every build failed its smoke run: "
            + "; ".join(f"{t['variant']}: {t['reason']}" for t in tried)
            + f" — full log: {log_file}"
        )
    # The sources and objects are only needed to build; the bin directory is what is cached.
    shutil.rmtree(work)

    seconds = round(time.monotonic() - started, 1)
    record = {
        "llama_cpp_python": version,
        "llama_cpp_commit": vendored.commit if vendored else None,
        "llama_cpp_build_number": vendored.build_number if vendored else None,
        "targets": list(TARGETS),
        "variant": kept.name,
        "variant_why": kept.why,
        "tried": tried,
        "cmake": _recorded_cmake(vendored, kept),
        "build_revision": BUILD_REVISION,
        "cpu": cpu_fingerprint(),
        "cpu_amx": has_amx(flags),
        "isa": built_isa(kept, flags),
        "key": cache_key(version, kept),
        "smoke": evidence,
        "build_seconds": seconds,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # Written last, atomically: its presence means a complete, proven build.
    partial = marker.with_suffix(".tmp")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(marker)
    log(f"built and proven in {seconds:.0f} s; kept the {kept.name} build")
    return binaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--version", default=LLAMA_CPP_PYTHON_VERSION, help="llama-cpp-python sdist version to build from"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if a cached build exists")
    parser.add_argument("--portable", action="store_true",
                        help="build only the portable variant (GGML_NATIVE=OFF, this CPU's ISA, no AMX); implies --force")
    args = parser.parse_args(argv)
    try:
        binaries = ensure_built(args.version, force=args.force or args.portable, portable=args.portable)
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
