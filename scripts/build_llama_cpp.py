#!/usr/bin/env python3
"""Build llama-bench, llama-fit-params and llama-server (Release) once per machine, and prove them.

The default build is CPU only (``--backend cpu``): it runs every layer on the CPU, whatever GPU
the machine has. For a GPU pass ``--backend cuda`` (NVIDIA), ``--backend vulkan`` (any Vulkan GPU)
or ``--backend hip`` (AMD ROCm). The sources are the llama.cpp tree vendored inside the pinned
llama-cpp-python source distribution on PyPI, so the only network access needed is the Python
package index.

    python scripts/build_llama_cpp.py                  # CPU only: builds (about 7 minutes on 2 quiet cores) or reuses the cache
    python scripts/build_llama_cpp.py --backend cuda   # NVIDIA: architectures from nvidia-smi (or --cuda-arch 86)
    python scripts/build_llama_cpp.py --backend vulkan # needs glslc, the Vulkan and SPIRV headers
    python scripts/build_llama_cpp.py --backend hip    # AMD ROCm 6.1+: targets from amdgpu-arch/rocminfo (or --gpu-targets)
    python scripts/build_llama_cpp.py --force          # rebuild even if cached
    python scripts/build_llama_cpp.py --portable       # only the portable build (no AMX)

The binaries land in ``${TUNEHOST_CACHE_DIR:-~/.cache/tunehost}/llama.cpp/<version>/bin/`` (CPU)
or ``.../llama.cpp/<version>-<backend>/bin/`` (a GPU backend; tunehost searches those first);
the last line on stdout is that directory. Progress goes to stderr (a line per tenth of the
compile steps).

GPU backends (the CMake options of the vendored ggml/CMakeLists.txt)
- cuda: ``-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=<arch>``; the architectures come from
  ``nvidia-smi --query-gpu=compute_cap --format=csv,noheader`` (8.6 -> 86), or ``--cuda-arch``.
  Needs the CUDA toolkit (nvcc on PATH, or in /usr/local/cuda/bin).
- vulkan: ``-DGGML_VULKAN=ON``. Needs glslc and the Vulkan and SPIRV headers (Debian/Ubuntu:
  ``apt-get install libvulkan-dev glslc spirv-headers``); the script checks them first.
- hip: ``-DGGML_HIP=ON -DGPU_TARGETS=<gfx...>`` with HIPCXX/HIP_PATH from ``hipconfig``; the targets
  come from ``amdgpu-arch`` or ``rocminfo``, or ``--gpu-targets``.
A missing toolchain or an unknown GPU architecture is one error line saying what to install or
pass, before anything is downloaded or compiled.

Build choices
- On a CPU with AMX, straight to the portable build (below): the native one is known to crash
  there (llama.cpp's AMX weight repacking; measured on a Xeon: a native build of 1098 s, SIGSEGV
  in its smoke run, then the portable rebuild: 31.7 minutes in all).
- Elsewhere first ``GGML_NATIVE=ON`` (llama.cpp's own default): a benchmark must show what this
  CPU can do, as the user's own llama.cpp build would.
- Every build proves itself before it is cached: a smoke run of each binary on the tiny test
  model (``llama-bench`` runs a short pp/tg, ``llama-fit-params`` fits the model, ``llama-server``
  starts on a free loopback port, answers ``/health`` and generates a few tokens). A native build
  that fails it (on a CPU with AMX, llama.cpp's AMX weight repacking is known to crash llama-bench
  with SIGSEGV) is rebuilt *portable*: ``GGML_NATIVE=OFF`` with the ISA options this CPU has
  (SSE4.2/AVX/AVX2/FMA/F16C/BMI2, AVX-512 only where the CPU has all of F/CD/VL/DQ/BW) and the
  AMX options off. The portable build is smoke-run too; ``built.json`` records which was kept
  and why.
- The cache is keyed by everything that changes the binary: the llama-cpp-python version and the
  llama.cpp commit, the backend and the CMake options of each variant (GPU architectures
  included), this script's build revision and the CPU's model and ISA flags. A cache copied to another CPU, or left by another revision of this script,
  is rebuilt instead of trusted.
- ``BUILD_SHARED_LIBS=OFF``: the binaries are self-contained, so ``bin/`` can be copied.
- ``LLAMA_OPENSSL=OFF``, ``LLAMA_BUILD_UI=OFF``, ``LLAMA_USE_PREBUILT_UI=OFF``: benchmarks read local
  files only; the server is built without its web UI (no npm, no download at build time).
- The sdist holds a shallow submodule checkout, whose git history says "build 1"; the real
  commit and build number are pinned below and passed to CMake.

Environment
- ``TUNEHOST_BUILD_SMOKE_FAIL=native`` makes the native build's smoke run count as failed, to
  exercise the portable rebuild (``=all`` fails both: the build then stops with an error).

Importable: ``ensure_built() -> Path`` returns the bin directory, building if needed
(``ensure_built(backend=resolve_backend("cuda"))`` for a GPU build).
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
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

try:
    from tunehost.facts.llama_exit import ISA_FLAGS, exit_status, has_amx, portable_isa, portable_options
    from tunehost.host.proc import run_bounded
    from tunehost.parsers.llama_version import cuda_architecture
except ImportError:  # run with a Python that has not installed tunehost: the repository's own copy
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tunehost.facts.llama_exit import ISA_FLAGS, exit_status, has_amx, portable_isa, portable_options
    from tunehost.host.proc import run_bounded
    from tunehost.parsers.llama_version import cuda_architecture

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


def version_dir(version: str = LLAMA_CPP_PYTHON_VERSION, backend: str = "cpu") -> Path:
    """``llama.cpp/<version>`` for the CPU build, ``llama.cpp/<version>-<backend>`` for a GPU backend's."""
    return cache_root() / "llama.cpp" / (version if backend == "cpu" else f"{version}-{backend}")


def bin_dir(version: str = LLAMA_CPP_PYTHON_VERSION, backend: str = "cpu") -> Path:
    """Where the binaries of ``version`` (and ``backend``) live once built (they may not exist yet)."""
    return version_dir(version, backend) / "bin"


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


# --- backends ------------------------------------------------------------------------------

BACKENDS = ("cpu", "cuda", "vulkan", "hip")
DEFAULT_BACKEND = "cpu"
# where the Vulkan and SPIRV headers are looked for (plus $VULKAN_SDK/include)
INCLUDE_DIRS = ("/usr/include", "/usr/local/include")
CUDA_HOME_NVCC = "/usr/local/cuda/bin/nvcc"
ROCM_BIN = "/opt/rocm/bin"
ROCM_LLVM_BIN = "/opt/rocm/llvm/bin"
# how long one detection command (nvidia-smi, amdgpu-arch, rocminfo, hipconfig) may take
DETECT_TIMEOUT_S = 30.0
_CUDA_ARCH = re.compile(r"[0-9]{2,3}[a-z]?(-real|-virtual)?")
_GFX = re.compile(r"gfx[0-9a-f]{3,5}(:[a-z]+[+-])*")


@dataclass(frozen=True)
class Backend:
    """The GPU backend of a build: its CMake options and the environment its configure step needs."""

    name: str = DEFAULT_BACKEND
    options: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # HIPCXX and HIP_PATH for hip
    detail: str = "CPU only: no GPU backend"


CPU_BACKEND = Backend()


def _detect(argv: list[str]) -> str | None:
    """stdout of a detection command, or None when it is missing, fails, hangs or says too much (bounded, no shell)."""
    done = run_bounded(argv, timeout_s=DETECT_TIMEOUT_S, max_stdout=1 << 16, max_stderr=1 << 16, max_line=4096)
    return done.stdout if done.ok else None


def _which(name: str, *extra_dirs: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in extra_dirs:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def cuda_archs_from_nvidia_smi(text: str) -> list[str]:
    """CMAKE_CUDA_ARCHITECTURES from ``nvidia-smi --query-gpu=compute_cap --format=csv,noheader``: one
    compute capability per GPU ("8.6" -> "86"), distinct, ascending; a line that is not one is ignored."""
    archs = [cuda_architecture(line.strip()) for line in text.splitlines()[:64]]
    return sorted({a for a in archs if a}, key=int)


def _split_list(value: str) -> list[str]:
    return [part.strip() for part in re.split(r"[;,\s]+", value) if part.strip()]


def _cuda_backend(cuda_arch: str | None) -> Backend:
    if cuda_arch:
        archs = [cuda_architecture(a) or a for a in _split_list(cuda_arch)]
        if not archs or not all(_CUDA_ARCH.fullmatch(a) for a in archs):
            raise BuildError(f"--cuda-arch {cuda_arch[:60]!r}: give CUDA architectures such as 86 or 86;89 "
                             "(compute capability 8.6 is 86)")
        source = "--cuda-arch"
    else:
        smi = _which("nvidia-smi")
        if smi is None:
            raise BuildError("--backend cuda: nvidia-smi not found, so the GPU's CUDA architecture is unknown; "
                             "install the NVIDIA driver, or pass --cuda-arch (e.g. 86 for compute capability 8.6)")
        archs = cuda_archs_from_nvidia_smi(_detect([smi, "--query-gpu=compute_cap", "--format=csv,noheader"]) or "")
        if not archs:
            raise BuildError("--backend cuda: `nvidia-smi --query-gpu=compute_cap --format=csv,noheader` named no "
                             "GPU compute capability; pass --cuda-arch (e.g. 86 for compute capability 8.6)")
        source = "nvidia-smi"
    options = ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}"]
    if not os.environ.get("CUDACXX") and shutil.which("nvcc") is None:
        if not (os.path.isfile(CUDA_HOME_NVCC) and os.access(CUDA_HOME_NVCC, os.X_OK)):
            raise BuildError("--backend cuda: nvcc (the CUDA toolkit) not found on PATH or in /usr/local/cuda/bin; "
                             "install the CUDA toolkit (Debian/Ubuntu: apt-get install nvidia-cuda-toolkit, or "
                             "NVIDIA's cuda-toolkit) and put nvcc on PATH")
        options.append(f"-DCMAKE_CUDA_COMPILER={CUDA_HOME_NVCC}")
    return Backend("cuda", tuple(options), (), f"CUDA architectures {';'.join(archs)} (from {source})")


def _vulkan_backend() -> Backend:
    include_dirs = list(INCLUDE_DIRS)
    if os.environ.get("VULKAN_SDK"):
        include_dirs.insert(0, os.path.join(os.environ["VULKAN_SDK"], "include"))
    missing = [] if _which("glslc") else ["glslc"]
    for header in ("vulkan/vulkan.h", "spirv/unified1/spirv.hpp"):
        if not any(os.path.isfile(os.path.join(d, header)) for d in include_dirs):
            missing.append(header)
    if missing:
        raise BuildError(f"--backend vulkan needs glslc and the Vulkan and SPIRV headers; missing: "
                         f"{', '.join(missing)}. Debian/Ubuntu: apt-get install libvulkan-dev glslc spirv-headers; "
                         "Fedora: dnf install vulkan-headers glslc spirv-headers-devel (or set VULKAN_SDK)")
    return Backend("vulkan", ("-DGGML_VULKAN=ON",), (), "Vulkan")


def _hip_targets(gpu_targets: str | None) -> tuple[list[str], str]:
    if gpu_targets:
        return _split_list(gpu_targets), "--gpu-targets"
    arch = _which("amdgpu-arch", ROCM_LLVM_BIN)
    if arch is not None:
        found = _split_list(_detect([arch]) or "")
        if found:
            return list(dict.fromkeys(found)), "amdgpu-arch"
    info = _which("rocminfo", ROCM_BIN)
    if info is not None:
        found = re.findall(r"^\s*Name:\s*(gfx[0-9a-f]+)\s*$", _detect([info]) or "", re.MULTILINE)
        if found:
            return list(dict.fromkeys(found)), "rocminfo"
    raise BuildError("--backend hip: no AMD GPU target found (amdgpu-arch, rocminfo); pass --gpu-targets "
                     "(e.g. gfx1030)")


def _hip_backend(gpu_targets: str | None) -> Backend:
    hipconfig = _which("hipconfig", ROCM_BIN)
    if hipconfig is None:
        raise BuildError("--backend hip: hipconfig not found (on PATH or in /opt/rocm/bin); install ROCm 6.1 or "
                         "newer (https://rocm.docs.amd.com), or build with --backend vulkan")
    llvm = (_detect([hipconfig, "-l"]) or "").strip()
    rocm = (_detect([hipconfig, "-R"]) or "").strip()
    if not llvm.startswith("/") or not rocm.startswith("/") or "\n" in llvm + rocm:
        raise BuildError(f"--backend hip: `{hipconfig} -l` and `-R` did not name ROCm's clang and root directories")
    targets, source = _hip_targets(gpu_targets)
    if not targets or not all(_GFX.fullmatch(t) for t in targets):
        raise BuildError(f"--backend hip: {' '.join(targets)[:80]!r} from {source} is not a list of GPU targets "
                         "such as gfx1030 or gfx1100;gfx90a")
    # llama.cpp's docs/build.md: HIPCXX="$(hipconfig -l)/clang" HIP_PATH="$(hipconfig -R)"
    env = (("HIPCXX", f"{llvm.rstrip('/')}/clang"), ("HIP_PATH", rocm))
    return Backend("hip", ("-DGGML_HIP=ON", f"-DGPU_TARGETS={';'.join(targets)}"), env,
                   f"HIP targets {';'.join(targets)} (from {source})")


def resolve_backend(name: str = DEFAULT_BACKEND, *, cuda_arch: str | None = None,
                    gpu_targets: str | None = None) -> Backend:
    """The backend to build, with what this machine's GPU and toolchain say; BuildError (one line) when its
    toolchain is missing or the GPU's architecture cannot be told."""
    if name not in BACKENDS:
        raise BuildError(f"unknown backend {name[:40]!r}: one of {', '.join(BACKENDS)}")
    if cuda_arch and name != "cuda":
        raise BuildError("--cuda-arch is for --backend cuda")
    if gpu_targets and name != "hip":
        raise BuildError("--gpu-targets is for --backend hip")
    if name == "cuda":
        return _cuda_backend(cuda_arch)
    if name == "vulkan":
        return _vulkan_backend()
    if name == "hip":
        return _hip_backend(gpu_targets)
    return CPU_BACKEND


def variants(flags: frozenset[str], backend: Backend = CPU_BACKEND) -> tuple[Variant, ...]:
    """The builds to try in order: native first, then portable for this CPU's ISA without AMX. On a CPU with AMX
    only the portable one: the native build is known to crash there (see the module docstring)."""
    native = Variant("native", ("-DGGML_NATIVE=ON", *backend.options), "llama.cpp's default: optimised for this CPU")
    portable = Variant(
        "portable",
        (*portable_options(flags), *backend.options),
        "GGML_NATIVE=OFF, this CPU's ISA without AMX" if has_amx(flags) else "GGML_NATIVE=OFF, this CPU's ISA",
    )
    return (portable,) if has_amx(flags) else (native, portable)


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


def cache_key(version: str, variant: Variant, cpu: str | None = None, backend: str = "cpu") -> str:
    """Everything that changes the binary: source version and commit, backend and options (a GPU backend's
    architectures are among them), script revision, CPU."""
    vendored = VENDORED.get(version)
    fields = {
        "llama_cpp_python": version,
        "commit": vendored.commit if vendored else None,
        "cmake": _recorded_cmake(vendored, variant),
        "revision": BUILD_REVISION,
        "targets": list(TARGETS),
        "cpu": cpu or cpu_fingerprint(),
    }
    if backend != "cpu":  # a CPU build keeps the key it had before backends existed: its cache stays valid
        fields["backend"] = backend
    material = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def cached_bin_dir(version: str = LLAMA_CPP_PYTHON_VERSION, backend: Backend = CPU_BACKEND) -> Path | None:
    """The bin directory if a proven build for this CPU, this backend, these options and this script is cached,
    else None. Never builds."""
    marker = version_dir(version, backend.name) / MARKER_NAME
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("cpu") != cpu_fingerprint():
        return None
    by_name = {v.name: v for v in variants(cpu_flags(), backend)}
    kept = by_name.get(str(recorded.get("variant")))
    if kept is None or recorded.get("key") != cache_key(version, kept, backend=backend.name):
        return None
    binaries = bin_dir(version, backend.name)
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


def _run(argv: list[str], log_file: Path, *, quote_last_error: bool = False, progress: Log | None = None,
         env: tuple[tuple[str, str], ...] = ()) -> None:
    """Run one build step, appending its output to the log; a failure quotes the step's first
    error line (a compiler's first error is the cause), or its last one (pip ends with the cause).
    With ``progress``, ninja/make's ``[n/m]`` counters are reported every tenth of the way.
    """
    with log_file.open("a") as log:
        log.write(f"\n$ {' '.join([*(f'{k}={v}' for k, v in env), *argv])}\n")
        log.flush()
        step_starts_at = log.tell()
        try:
            process = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                text=True, errors="replace", bufsize=1, env={**os.environ, **dict(env)} if env else None,
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
                 portable: bool = False, backend: Backend = CPU_BACKEND) -> Path:
    """Return the bin directory holding the proven binaries, building them if needed.

    Safe to call concurrently: a file lock makes the second caller wait for the first build.
    Raises BuildError with a one-line reason on failure.
    """
    if not force and (cached := cached_bin_dir(version, backend)) is not None:
        return cached
    root = version_dir(version, backend.name)
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another process may have finished the build while this one waited for the lock.
        if not force and (cached := cached_bin_dir(version, backend)) is not None:
            return cached
        return _build(version, root, log, portable=portable, backend=backend)


def _compile(source: Path, build: Path, vendored: VendoredLlamaCpp | None, variant: Variant, log_file: Path, log: Log,
             backend: Backend = CPU_BACKEND) -> None:
    jobs = len(os.sched_getaffinity(0)) or 1  # like nproc: the CPUs this process may run on
    log(f"configuring the {variant.name} {backend.name} build ({variant.why}; {backend.detail})")
    _run(cmake_configure_args(source, build, vendored, variant), log_file, env=backend.env)
    took = "about 7 minutes on 2 quiet cores" if backend.name == "cpu" else "a GPU backend takes longer than the CPU build"
    log(f"compiling {', '.join(TARGETS)} with -j {jobs} ({took}; log: {log_file})")
    _run(["cmake", "--build", str(build), "--config", "Release", "-j", str(jobs), "--target", *TARGETS],
         log_file, progress=log, env=backend.env)


def _install(build: Path, binaries: Path, log_file: Path) -> None:
    if binaries.exists():
        shutil.rmtree(binaries)
    binaries.mkdir(parents=True)
    for target in TARGETS:
        built = next((p for p in (build / "bin" / target, build / target) if p.is_file()), None)
        if built is None:
            raise BuildError(f"the build finished but {target} is missing — full log: {log_file}")
        shutil.copy2(built, binaries / target)


def _build(version: str, root: Path, log: Log, *, portable: bool = False, backend: Backend = CPU_BACKEND) -> Path:
    marker = root / MARKER_NAME
    marker.unlink(missing_ok=True)
    log_file = root / "build.log"
    log_file.write_text(f"building llama.cpp ({backend.name}: {backend.detail}) from llama-cpp-python {version}\n")
    started = time.monotonic()

    downloads = version_dir(version) / "downloads"  # one sdist for every backend
    cached_sdist = downloads / f"llama_cpp_python-{version}.tar.gz"
    log(f"using the downloaded llama-cpp-python {version} sdist" if cached_sdist.is_file()
        else f"downloading the llama-cpp-python {version} sdist from PyPI")
    sdist = _download_sdist(version, downloads, log_file)
    log(f"unpacking vendor/llama.cpp from {sdist.name}")
    work = root / "work"
    source = _unpack_vendored_llama_cpp(sdist, work)
    vendored = VENDORED.get(version)
    model = tiny_model()
    binaries = bin_dir(version, backend.name)
    flags = cpu_flags()

    tried: list[dict] = []
    kept: Variant | None = None
    evidence: list[str] = []
    if has_amx(flags) and not portable:
        log("this CPU has AMX: building the portable variant only (the native one is known to crash here)")
    for variant in variants(flags, backend)[-1:] if portable else variants(flags, backend):
        _compile(source, work / f"build-{variant.name}", vendored, variant, log_file, log, backend)
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
        "backend": backend.name,
        "backend_detail": backend.detail,
        "tried": tried,
        "cmake": _recorded_cmake(vendored, kept),
        "build_revision": BUILD_REVISION,
        "cpu": cpu_fingerprint(),
        "cpu_amx": has_amx(flags),
        "isa": built_isa(kept, flags),
        "key": cache_key(version, kept, backend=backend.name),
        "smoke": evidence,
        "build_seconds": seconds,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # Written last, atomically: its presence means a complete, proven build.
    partial = marker.with_suffix(".tmp")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(marker)
    log(f"built and proven in {seconds:.0f} s; kept the {kept.name} {backend.name} build")
    return binaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="The default, --backend cpu, builds for the CPU only: a GPU stays idle. Pick cuda, vulkan or hip "
               "for a GPU. The last line printed is the bin directory.")
    parser.add_argument(
        "--version", default=LLAMA_CPP_PYTHON_VERSION, help="llama-cpp-python sdist version to build from"
    )
    parser.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                        help="cpu (default: CPU only, no GPU), cuda (NVIDIA), vulkan, hip (AMD ROCm)")
    parser.add_argument("--cuda-arch", metavar="ARCH",
                        help="CMAKE_CUDA_ARCHITECTURES, e.g. 86 or 86;89 (default: from nvidia-smi)")
    parser.add_argument("--gpu-targets", metavar="GFX",
                        help="AMD GPU_TARGETS, e.g. gfx1030 (default: from amdgpu-arch or rocminfo)")
    parser.add_argument("--force", action="store_true", help="rebuild even if a cached build exists")
    parser.add_argument("--portable", action="store_true",
                        help="build only the portable variant (GGML_NATIVE=OFF, this CPU's ISA, no AMX); "
                             "implies --force")
    args = parser.parse_args(argv)
    try:
        backend = resolve_backend(args.backend, cuda_arch=args.cuda_arch, gpu_targets=args.gpu_targets)
        binaries = ensure_built(args.version, force=args.force or args.portable, portable=args.portable,
                                backend=backend)
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
