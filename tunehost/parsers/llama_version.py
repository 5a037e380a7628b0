"""Parsing llama.cpp's `--version` / `--list-devices` output, backend libraries, and build number -> date.

`llama-server --version` (common/arg.cpp) prints to *stderr*:

    version: 6865 (1c1409e1)
    built with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu

and builds from late 2026 (also llama-bench, real output of the b11312 CPU build on the CI machine):

    version: 0.5.0-dev (build 11312, commit 0c1e570)
    built with GNU 12.2.0 for Linux x86_64

preceded, on builds that load backends before parsing arguments, by backend lines such as
"ggml_cuda_init: found 1 CUDA devices:" / "  Device 0: NVIDIA GeForce RTX 3060, compute capability 8.6, VMM: yes",
"ggml_cuda_init: found 1 ROCm devices:", "ggml_vulkan: Found 1 Vulkan devices:",
"load_backend: loaded CUDA backend from /opt/llama/libggml-cuda.so". `llama-bench --list-devices` prints
"Available devices:\\n  CUDA0: NVIDIA GeForce RTX 3060 (12288 MiB, 11730 MiB free)".
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

# backend names as llama.cpp itself spells them (llama-bench's "backends" column)
CUDA, ROCM, VULKAN, METAL, SYCL, CPU = "CUDA", "ROCm", "Vulkan", "Metal", "SYCL", "CPU"
GPU_BACKENDS = (CUDA, ROCM, VULKAN, METAL, SYCL, "MUSA", "CANN", "OpenCL")

_LIB_BACKENDS = (
    ("libggml-cuda", CUDA), ("libggml-hip", ROCM), ("libggml-vulkan", VULKAN), ("libggml-metal", METAL),
    ("libggml-sycl", SYCL), ("libggml-musa", "MUSA"), ("libggml-cann", "CANN"), ("libggml-opencl", "OpenCL"),
    ("libggml-blas", "BLAS"), ("libggml-rpc", "RPC"), ("libggml-cpu", CPU),
)
_DEVICE_WORDS = {"cuda": CUDA, "rocm": ROCM, "musa": "MUSA", "vulkan": VULKAN, "sycl": SYCL, "metal": METAL,
                 "mtl": METAL, "cpu": CPU, "blas": "BLAS", "opencl": "OpenCL", "cann": "CANN", "hip": ROCM}


@dataclass(frozen=True)
class LlamaVersion:
    build_number: int | None = None
    commit: str | None = None
    compiler: str | None = None
    target: str | None = None
    backends: tuple[str, ...] = ()  # seen in the output, in order
    devices: tuple[str, ...] = ()  # "NVIDIA GeForce RTX 3060, compute capability 8.6, VMM: yes", "gfx1151" lines
    compute_capabilities: tuple[str, ...] = ()  # "8.6" (CUDA devices)
    gfx_targets: tuple[str, ...] = ()  # "gfx1151" (ROCm devices)
    release: str | None = None  # "0.5.0-dev" on builds that print a release version

    @property
    def known(self) -> bool:
        return self.build_number is not None or self.commit is not None


def parse_llama_version(text: str | None) -> LlamaVersion:
    """The build, commit, compiler and any backend/device lines of `--version` (stdout and stderr joined)."""
    build = commit = compiler = target = release = None
    backends: list[str] = []
    devices: list[str] = []
    ccs: list[str] = []
    gfx: list[str] = []

    def add(backend: str) -> None:
        if backend not in backends:
            backends.append(backend)

    for raw in (text or "").splitlines():
        line = raw.strip()
        m = re.match(r"^version:\s*(\d{1,9})\s*\(([^)]*)\)", line)
        if m:  # up to 2026: "version: 6865 (1c1409e1)"
            build = int(m.group(1))
            commit = m.group(2).strip() or None
            continue
        m = re.match(r"^version:\s*(\S+)\s*\(build (\d{1,9}), commit ([^)\s]*)\)", line)
        if m:  # later: "version: 0.5.0-dev (build 11312, commit 0c1e570)"
            release, build, commit = m.group(1), int(m.group(2)), m.group(3) or None
            continue
        m = re.match(r"^built with (.+) for (.+?)\s*$", line)
        if m:  # the compiler may itself contain " for ": split at the last one
            head, _, tail = line[len("built with "):].rpartition(" for ")
            compiler, target = head.strip() or None, tail.strip() or None
            continue
        m = re.search(r"ggml_cuda_init: found \d+ (CUDA|ROCm|MUSA) devices", line)
        if m:
            add({"CUDA": CUDA, "ROCm": ROCM, "MUSA": "MUSA"}[m.group(1)])
            continue
        if line.startswith("ggml_cuda_init:") and "failed to initialize" in line:
            add(ROCM if "ROCm" in line or "HIP" in line else CUDA)
            continue
        if re.search(r"ggml_vulkan: Found \d+ Vulkan devices", line):
            add(VULKAN)
            continue
        if line.startswith("ggml_metal_init"):
            add(METAL)
            continue
        m = re.search(r"(?:loaded|registered backend) (\w+) backend from|registered backend (\w+) \(", line)
        if m:
            word = (m.group(1) or m.group(2) or "").lower()
            if word in _DEVICE_WORDS:
                add(_DEVICE_WORDS[word])
            continue
        m = re.match(r"^Device \d+: (.+)$", line)
        if m:
            devices.append(m.group(1))
            cc = re.search(r"compute capability (\d+\.\d+)", line)
            if cc:
                ccs.append(cc.group(1))
            g = re.search(r"\b(gfx[0-9a-f]{3,4})\b", line)
            if g:
                gfx.append(g.group(1))
    if commit == "unknown":
        commit = None
    return LlamaVersion(build, commit, compiler, target, tuple(backends), tuple(devices), tuple(ccs), tuple(gfx),
                        release)


def parse_list_devices(text: str | None) -> tuple[str, ...]:
    """Backends named by `--list-devices` ("  CUDA0: NVIDIA ... (12288 MiB, ...)"), in order; () when none."""
    found: list[str] = []
    for raw in (text or "").splitlines():
        m = re.match(r"^\s+([A-Za-z]+)\d+:\s+\S", raw)
        if m:
            backend = _DEVICE_WORDS.get(m.group(1).lower())
            if backend and backend not in found:
                found.append(backend)
    return tuple(found)


def backends_from_libs(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Backends of the ggml shared libraries next to a binary (libggml-cuda.so, libggml-cpu-haswell.so, ...)."""
    found: list[str] = []
    for name in names:
        for prefix, backend in _LIB_BACKENDS:
            if name.startswith(prefix) and (".so" in name or name.endswith(".dylib")):
                if backend not in found:
                    found.append(backend)
    order = {b: i for i, (_, b) in enumerate(_LIB_BACKENDS)}
    return tuple(sorted(found, key=lambda b: order.get(b, 99)))


# llama.cpp release tags b<N> and the day they were published, from real references: the corpus
# (b1275 2023-09-23, b5163 2025-04-24) and dated GitHub pull requests that bumped llama.cpp to a tag that day
# (ollama/ollama, containers/ramalama, xorbitsai/xllamacpp, bernardladenthin/java-llama.cpp, ...); see
# docs/checks.d/llama-build.md. Between anchors the date is interpolated; it is only ever "about".
BUILD_DATES: tuple[tuple[int, str], ...] = (
    (1275, "2023-09-23"),
    (2793, "2024-05-06"),
    (5163, "2025-04-24"),
    (6451, "2025-09-13"),
    (7815, "2026-01-23"),
    (8611, "2026-04-01"),
    (8779, "2026-04-13"),
    (9174, "2026-05-16"),
    (9701, "2026-06-18"),
    (9975, "2026-07-12"),
    (10092, "2026-07-23"),
    (10760, "2026-09-02"),
    (10864, "2026-09-08"),
)


MAX_BUILD = 1_000_000  # llama.cpp is near b11000; a larger build number is a fork's own numbering or garbage


def build_date(build_number: int | None) -> _dt.date | None:
    """The approximate release date of llama.cpp build b<N>; None for unknown or implausible numbers (0, forks)."""
    if build_number is None or not 100 <= build_number <= MAX_BUILD:
        return None
    points = [(n, _dt.date.fromisoformat(d)) for n, d in BUILD_DATES]
    if build_number <= points[0][0]:
        lo, hi = points[0], points[1]
    elif build_number >= points[-1][0]:
        lo, hi = points[-4], points[-1]  # extrapolate with the recent pace
    else:
        lo, hi = next((a, b) for a, b in zip(points, points[1:]) if a[0] <= build_number <= b[0])
    per_build = (hi[1] - lo[1]).days / (hi[0] - lo[0])
    return lo[1] + _dt.timedelta(days=round((build_number - lo[0]) * per_build))


def cuda_architecture(compute_capability: str | None) -> str | None:
    """CMAKE_CUDA_ARCHITECTURES for a compute capability: "8.6" -> "86", "12.0" -> "120"."""
    m = re.match(r"^\s*(\d{1,3})\.(\d{1,3})\s*$", compute_capability or "")
    return f"{int(m.group(1))}{int(m.group(2))}" if m else None
