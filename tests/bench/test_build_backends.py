"""scripts/build_llama_cpp.py --backend cpu|cuda|vulkan|hip with fake toolchains: a fake `cmake` (records its
command lines and leaves fake binaries), `nvidia-smi`, `nvcc`, `glslc`, `hipconfig`, `amdgpu-arch` and `rocminfo`
on a PATH of their own, so the CMake command lines each backend produces are checked without a GPU or a compiler.
The download, the unpacking and the server's smoke step are stubbed; llama-bench's and llama-fit-params' smoke
steps run the fake binaries."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

build = load_script("build_llama_cpp")
CPUINFO = Path(__file__).parents[1] / "data" / "cpuinfo"

FAKE_CMAKE = """#!{python}
import json, os, pathlib, sys
argv = sys.argv[1:]
with open({calls!r}, "a") as calls:
    calls.write(json.dumps({{"argv": argv, "env": {{k: os.environ.get(k) for k in ("HIPCXX", "HIP_PATH")}}}}) + "\\n")
if argv[:1] == ["--build"]:
    out = pathlib.Path(argv[1]) / "bin"
    out.mkdir(parents=True, exist_ok=True)
    bodies = {{
        "llama-bench": "echo '[{{\\"n_prompt\\": 16, \\"n_gen\\": 0, \\"avg_ts\\": 900.0}}]'",
        "llama-fit-params": "echo '-c 256 -ngl 99'",
        "llama-server": "exit 0",
    }}
    for name, body in bodies.items():
        (out / name).write_text("#!/bin/sh\\n" + body + "\\n")
        (out / name).chmod(0o755)
"""


def _flags(name: str) -> frozenset[str]:
    from tunehost.host.cpuinfo import parse_cpu_flags

    return parse_cpu_flags((CPUINFO / name).read_text())


class Toolchain:
    """A PATH holding only the fake tools a test puts there."""

    def __init__(self, root: Path):
        self.bin = root / "bin"
        self.bin.mkdir()
        self.include = root / "include"
        self.calls = root / "cmake.calls"
        self.tool("cmake", FAKE_CMAKE.format(python=sys.executable, calls=str(self.calls)), raw=True)

    def tool(self, name: str, body: str, *, raw: bool = False) -> None:
        path = self.bin / name
        path.write_text(body if raw else f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def header(self, rel: str) -> None:
        (self.include / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.include / rel).write_text("/* fake */\n")

    def cmake_calls(self) -> list[dict]:
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines()]

    def configure(self) -> list[str]:
        return next(c["argv"] for c in self.cmake_calls() if c["argv"][:1] == ["-S"])


@pytest.fixture
def tools(tmp_path, monkeypatch) -> Toolchain:
    chain = Toolchain(tmp_path)
    monkeypatch.setenv("PATH", str(chain.bin))
    monkeypatch.setenv("TUNEHOST_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("CUDACXX", "VULKAN_SDK", build.SMOKE_FAIL_ENV):
        monkeypatch.delenv(name, raising=False)
    # nothing of this machine's own toolchain is seen (a GPU box has /usr/local/cuda, /opt/rocm, /usr/include/vulkan)
    monkeypatch.setattr(build, "CUDA_HOME_NVCC", str(tmp_path / "no-cuda" / "nvcc"))
    monkeypatch.setattr(build, "ROCM_BIN", str(tmp_path / "no-rocm"))
    monkeypatch.setattr(build, "ROCM_LLVM_BIN", str(tmp_path / "no-rocm-llvm"))
    monkeypatch.setattr(build, "INCLUDE_DIRS", (str(chain.include),))
    monkeypatch.setattr(build, "_download_sdist", lambda *a: tmp_path / "sdist.tar.gz")
    monkeypatch.setattr(build, "_unpack_vendored_llama_cpp", lambda sdist, work: work.mkdir(parents=True) or work)
    monkeypatch.setattr(build, "tiny_model", lambda: tmp_path / "tiny.gguf")
    monkeypatch.setattr(build, "cpu_flags", lambda: _flags("epyc-9654-genoa-avx512.txt"))
    monkeypatch.setattr(build, "_smoke_server", lambda *a: "llama-server: /health ok (fake)")
    return chain


def _main(capsys, *args: str) -> tuple[int, list[str], list[str]]:
    code = build.main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def _options(argv: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("-D").split("=", 1) for a in argv if a.startswith("-D"))


def test_default_backend_is_cpu_only(tools, capsys):
    code, out, err = _main(capsys)
    assert code == 0, err
    options = _options(tools.configure())
    assert not {"GGML_CUDA", "GGML_VULKAN", "GGML_HIP"} & set(options)
    assert options["GGML_NATIVE"] == "ON"
    assert out[-1] == str(build.bin_dir()) and out[-1].endswith("/llama.cpp/0.3.36/bin")
    record = json.loads((build.version_dir() / build.MARKER_NAME).read_text())
    assert record["backend"] == "cpu" and "CPU only" in record["backend_detail"]


def test_help_says_the_default_builds_for_the_cpu_only(capsys):
    with pytest.raises(SystemExit):
        build.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--backend {cpu,cuda,vulkan,hip}" in text and "cpu (default: CPU only, no GPU)" in text
    assert "The default, --backend cpu, builds for the CPU only" in text
    assert "The default build is CPU only" in build.__doc__


def test_cuda_architectures_come_from_nvidia_smi(tools, capsys):
    tools.tool("nvidia-smi", 'test "$1 $2" = "--query-gpu=compute_cap --format=csv,noheader" || exit 9\n'
                             'printf "8.6\\n8.9\\n8.6\\n"')
    tools.tool("nvcc", "exit 0")
    code, out, err = _main(capsys, "--backend", "cuda")
    assert code == 0, err
    argv = tools.configure()
    assert "-DGGML_CUDA=ON" in argv and "-DCMAKE_CUDA_ARCHITECTURES=86;89" in argv
    assert _options(argv)["GGML_NATIVE"] == "ON" and "-DBUILD_SHARED_LIBS=OFF" in argv
    built = [c["argv"] for c in tools.cmake_calls() if c["argv"][:1] == ["--build"]]
    assert built and built[0][-3:] == list(build.TARGETS)  # only what the tests run
    # its own cache directory, beside the CPU build's, keyed by the backend and its architectures
    assert out[-1] == str(build.bin_dir(backend="cuda")) and out[-1].endswith("/llama.cpp/0.3.36-cuda/bin")
    record = json.loads((build.version_dir(backend="cuda") / build.MARKER_NAME).read_text())
    assert record["backend"] == "cuda" and record["backend_detail"] == "CUDA architectures 86;89 (from nvidia-smi)"
    assert "-DCMAKE_CUDA_ARCHITECTURES=86;89" in record["cmake"]
    assert not build.version_dir().exists()  # the CPU build is left alone
    assert build.cached_bin_dir(backend=build.resolve_backend("cuda")) == Path(out[-1])
    assert build.cached_bin_dir() is None
    tools.tool("nvidia-smi", 'echo "12.0"')  # another GPU: the cached build is not this GPU's
    assert build.cached_bin_dir(backend=build.resolve_backend("cuda")) is None


def test_cuda_arch_option_without_nvidia_smi(tools, capsys):
    tools.tool("nvcc", "exit 0")
    code, _, err = _main(capsys, "--backend", "cuda", "--cuda-arch", "8.6")
    assert code == 0, err
    assert "-DCMAKE_CUDA_ARCHITECTURES=86" in tools.configure()


@pytest.mark.parametrize(("setup", "args", "says"), [
    ({"nvcc": "exit 0"}, ("--backend", "cuda"), "nvidia-smi not found, so the GPU's CUDA architecture is unknown"),
    ({"nvcc": "exit 0", "nvidia-smi": 'echo "[N/A]"; echo "8.6; rm -rf /"'}, ("--backend", "cuda"),
     "named no GPU compute capability; pass --cuda-arch"),
    ({"nvcc": "exit 0", "nvidia-smi": "exit 6"}, ("--backend", "cuda"), "named no GPU compute capability"),
    ({"nvidia-smi": 'echo "8.6"'}, ("--backend", "cuda"), "nvcc (the CUDA toolkit) not found"),
    ({"nvcc": "exit 0"}, ("--backend", "cuda", "--cuda-arch", "86;$(reboot)"), "give CUDA architectures such as 86"),
    ({}, ("--backend", "vulkan"), "missing: glslc, vulkan/vulkan.h, spirv/unified1/spirv.hpp. Debian/Ubuntu: "
                                  "apt-get install libvulkan-dev glslc spirv-headers"),
    ({"glslc": "exit 0"}, ("--backend", "vulkan"), "missing: vulkan/vulkan.h, spirv/unified1/spirv.hpp."),
    ({}, ("--backend", "hip"), "hipconfig not found (on PATH or in /opt/rocm/bin); install ROCm 6.1"),
    ({"hipconfig": 'case "$1" in -l) echo /opt/rocm/llvm/bin;; -R) echo /opt/rocm;; esac'}, ("--backend", "hip"),
     "no AMD GPU target found (amdgpu-arch, rocminfo); pass --gpu-targets"),
    ({"hipconfig": 'case "$1" in -l) echo /opt/rocm/llvm/bin;; -R) echo /opt/rocm;; esac', "amdgpu-arch": "echo gfx1030"},
     ("--backend", "hip", "--gpu-targets", "gfx1030;$(reboot)"), "is not a list of GPU targets"),
    ({}, ("--backend", "cpu", "--cuda-arch", "86"), "--cuda-arch is for --backend cuda"),
], ids=["cuda-no-nvidia-smi", "cuda-junk-compute-cap", "cuda-nvidia-smi-fails", "cuda-no-nvcc", "cuda-hostile-arch",
        "vulkan-nothing", "vulkan-no-headers", "hip-no-rocm", "hip-no-target", "hip-hostile-target",
        "cuda-arch-on-cpu"])
def test_a_missing_toolchain_or_unknown_gpu_is_one_error_line_before_anything_is_built(tools, capsys, setup, args,
                                                                                       says):
    for name, body in setup.items():
        tools.tool(name, body)
    code, out, err = _main(capsys, *args)
    assert code == 1 and out == []
    assert len(err) == 1 and err[0].startswith("build_llama_cpp: error: ") and says in err[0], err
    assert tools.cmake_calls() == []
    assert not (Path(build.cache_root()) / "llama.cpp").exists()  # nothing downloaded, unpacked or built


def test_vulkan_with_its_tools_and_headers(tools, capsys):
    tools.tool("glslc", "exit 0")
    tools.header("vulkan/vulkan.h")
    tools.header("spirv/unified1/spirv.hpp")
    code, out, err = _main(capsys, "--backend", "vulkan")
    assert code == 0, err
    argv = tools.configure()
    assert "-DGGML_VULKAN=ON" in argv and not any("CUDA" in a or "HIP" in a for a in argv)
    assert out[-1].endswith("/llama.cpp/0.3.36-vulkan/bin")


@pytest.mark.parametrize(("detector", "body"), [
    ("amdgpu-arch", "echo gfx1100; echo gfx1100; echo gfx90a:xnack-"),
    ("rocminfo", 'echo "  Name:                    AMD Ryzen 9 7950X"; echo "  Name:                    gfx1100";'
                 'echo "  Marketing Name:          Radeon RX 7900 XTX"; echo "  Name:                    gfx90a"'),
])
def test_hip_targets_from_amdgpu_arch_or_rocminfo(tools, capsys, detector, body):
    tools.tool("hipconfig", 'case "$1" in -l) echo /opt/rocm-6.2/llvm/bin;; -R) echo /opt/rocm-6.2;; esac')
    tools.tool(detector, body)
    code, out, err = _main(capsys, "--backend", "hip")
    assert code == 0, err
    configure = next(c for c in tools.cmake_calls() if c["argv"][:1] == ["-S"])
    expected = "gfx1100;gfx90a:xnack-" if detector == "amdgpu-arch" else "gfx1100;gfx90a"
    assert "-DGGML_HIP=ON" in configure["argv"] and f"-DGPU_TARGETS={expected}" in configure["argv"]
    # llama.cpp's docs/build.md: HIPCXX="$(hipconfig -l)/clang" HIP_PATH="$(hipconfig -R)"
    assert configure["env"] == {"HIPCXX": "/opt/rocm-6.2/llvm/bin/clang", "HIP_PATH": "/opt/rocm-6.2"}
    assert out[-1].endswith("/llama.cpp/0.3.36-hip/bin")


def test_a_gpu_backend_on_an_amx_cpu_is_built_portable_only(tools, capsys, monkeypatch):
    monkeypatch.setattr(build, "cpu_flags", lambda: _flags("xeon-gold-6459c-sapphire-rapids-amx.txt"))
    tools.tool("nvcc", "exit 0")
    code, _, err = _main(capsys, "--backend", "cuda", "--cuda-arch", "90")
    assert code == 0, err
    configures = [c["argv"] for c in tools.cmake_calls() if c["argv"][:1] == ["-S"]]
    assert len(configures) == 1  # no native build first
    options = _options(configures[0])
    assert options["GGML_NATIVE"] == "OFF" and options["GGML_AMX_INT8"] == "OFF" and options["GGML_CUDA"] == "ON"
    assert "building the portable variant only" in " ".join(err)


def test_nvidia_smi_parser_keeps_only_compute_capabilities():
    assert build.cuda_archs_from_nvidia_smi("8.6\n 12.0 \n8.6\n[N/A]\n\x1b[31m7.5\nnot a gpu\n") == ["86", "120"]
    assert build.cuda_archs_from_nvidia_smi("") == []
