"""llama-build: the --version parser, build number -> date, backends, LlamaBuildFacts and the check.

Data: tests/system/data/llama-bench-b11312-cpu-{version,list-devices}.txt are the real outputs of the CPU
llama-bench that scripts/build_llama_cpp.py built on the CI machine (b11312, commit 0c1e570). The ROCm banner is
the real stderr of corpus/llama-bench/jsonl-rocm-strix-halo-*.txt (build 1c1409e1 / 6865). The CUDA banner lines
follow the real `llama-cli --version` output quoted in ggml-org/llama.cpp issue #15589, the old version format
common/arg.cpp's `fprintf(stderr, "version: %d (%s)\\n", ...)`. Composite snapshots: see tests/data/snapshots.
"""

import datetime as dt
import os
from pathlib import Path

import pytest

from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.facts.llama import LlamaBuildFacts, gpu_views
from tunehost.host import open_host
from tunehost.host.samples import llama_search_dirs
from tunehost.checks.llama_build import LlamaBuildCheck
from tunehost.parsers.llama_version import (backends_from_libs, build_date, cuda_architecture, parse_list_devices,
                                            parse_llama_version)

from tests.conftest import corpus

DATA = Path(__file__).parent / "data"
SNAPS = Path(__file__).parents[1] / "data" / "snapshots"
A100_BANNER = ("ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    no\nggml_cuda_init: GGML_CUDA_FORCE_CUBLAS: no\n"
               "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA A100-SXM4-80GB, compute capability 8.0, VMM: yes\n")


def check(snap):
    return list(LlamaBuildCheck().run(HostFacts(open_host(snap))))


def test_version_format_changed_to_release_plus_build_in_2026():
    v = parse_llama_version((DATA / "llama-bench-b11312-cpu-version.txt").read_text())
    assert (v.build_number, v.commit, v.release) == (11312, "0c1e570", "0.5.0-dev")
    assert (v.compiler, v.target) == ("GNU 12.2.0", "Linux x86_64")


def test_classic_version_format_on_stderr():
    v = parse_llama_version(A100_BANNER + "version: 6123 (79c1160b)\n"
                            "built with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu\n")
    assert (v.build_number, v.commit, v.target) == (6123, "79c1160b", "x86_64-linux-gnu")
    assert v.backends == ("CUDA",) and v.compute_capabilities == ("8.0",)


def test_rocm_build_reports_through_ggml_cuda_init():
    banner = "\n".join(corpus("llama-bench/jsonl-rocm-strix-halo-radeon8060s-llama3.2-1b-with-stderr-banner.txt")
                       .splitlines()[:4])
    v = parse_llama_version(banner)
    assert v.backends == ("ROCm",) and v.gfx_targets == ("gfx1151",) and v.compute_capabilities == ()


def test_version_0_unknown_commit():
    # a build without git metadata (llama.cpp issue #14160): "version: 0 (unknown)"
    v = parse_llama_version("load_backend: loaded CPU backend from /x/libggml-cpu.so\nversion: 0 (unknown)\n")
    assert v.build_number == 0 and v.commit is None and v.backends == ("CPU",)
    assert build_date(0) is None


@pytest.mark.parametrize("text", ["", "\x00\xff", "version: x (y)\nbuilt with\n", "Device 0:\n" * 3])
def test_version_garbage(text):
    assert not parse_llama_version(text).known


def test_list_devices():
    assert parse_list_devices((DATA / "llama-bench-b11312-cpu-list-devices.txt").read_text()) == ()
    assert parse_list_devices("Available devices:\n  CUDA0: NVIDIA GeForce RTX 3090 (24135 MiB, 23811 MiB free)\n"
                              "  Vulkan0: NVIDIA GeForce RTX 3090 (24576 MiB)\n") == ("CUDA", "Vulkan")


def test_backends_from_libs():
    assert backends_from_libs(["libggml-cpu-haswell.so", "libggml-cuda.so", "libggml-base.so", "libllama.so"]) == (
        "CUDA", "CPU")
    assert backends_from_libs(["libggml-hip.so.0", "libggml-vulkan.so"]) == ("ROCm", "Vulkan")
    assert backends_from_libs([]) == ()


@pytest.mark.parametrize("build, month", [(1275, "2023-09"), (5163, "2025-04"), (6865, "2025-10"), (10864, "2026-09")])
def test_build_dates_match_real_anchors(build, month):
    assert build_date(build).isoformat().startswith(month)


def test_build_date_strix_halo_run_is_after_its_build():
    # the corpus ROCm run of b6865 was taken 2025-10-28 (test_time): the estimated release date precedes it
    assert build_date(6865) <= dt.date(2025, 10, 28)


@pytest.mark.parametrize("cc, arch", [("8.6", "86"), ("12.0", "120"), ("7.5", "75"), ("garbage", None), (None, None)])
def test_cuda_architecture(cc, arch):
    assert cuda_architecture(cc) == arch


def test_search_dirs_from_environment(tmp_path):
    dirs = llama_search_dirs({"TUNEHOST_LLAMA_BIN_DIR": "/opt/lb", "LLAMA_CPP_DIR": "/src/llama.cpp",
                              "TUNEHOST_CACHE_DIR": str(tmp_path)})
    assert [d["dir"] for d in dirs] == ["/opt/lb", "/src/llama.cpp", "/src/llama.cpp/build/bin", "/src/llama.cpp/bin"]


# ---- the check on snapshots ----

def test_12700f_cuda_b6865_is_old_and_names_the_cuda_architecture():
    [finding] = check(SNAPS / "desktop-12700f-rtx3060")
    assert finding.severity is Severity.INFO and "b6865 (1c1409e1)" in finding.summary and "CUDA" in finding.summary
    assert finding.evidence["CMAKE_CUDA_ARCHITECTURES"].startswith("86")
    assert "cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86 -DCMAKE_BUILD_TYPE=Release" in finding.fix.commands


def test_llama_bench_of_2025_has_no_version_flag():
    # its sibling llama-server in the same directory tells the build: one finding for the directory
    [finding] = check(SNAPS / "desktop-12700f-rtx3060")
    assert "llama-bench" in finding.summary


def test_5090_recent_cuda_build_is_ok():
    [finding] = check(SNAPS / "desktop-9950x3d-rtx5090")
    assert finding.severity is Severity.OK
    assert finding.evidence["CMAKE_CUDA_ARCHITECTURES"].startswith("120")


def test_strix_halo_rocm_rebuild_targets_gfx1151():
    [finding] = check(SNAPS / "strix-halo-395")
    assert finding.severity is Severity.INFO
    assert finding.fix.commands[0] == "cd /home/lhl/llama.cpp && git pull"
    assert any("-DGGML_HIP=ON -DGPU_TARGETS=gfx1151" in c for c in finding.fix.commands)


def test_cpu_build_on_host_with_nvidia_gpu_warns(make_snapshot):
    snap = make_snapshot(cmd={"/opt/ll/llama-server --version": ("", 0, "version: 10800 (abc1234)\nbuilt with cc for x86_64-linux-gnu\n"),
                              "nvidia-smi -q": (SNAPS / "desktop-12700f-rtx3060/cmd/nvidia-smi_-q").read_text()},
                         samples={"llama_install": {"sampled_at": "2026-09-20T00:00:00Z", "search_dirs": [],
                                                    "binaries": [{"name": "llama-server", "path": "/opt/ll/llama-server",
                                                                  "from": "PATH", "libs": ["libggml-cpu.so"]}]}})
    gpus, why = gpu_views(HostFacts(open_host(snap)))
    if not gpus:
        pytest.skip(f"the GPU group's facts do not read this nvidia-smi yet: {why}")
    [finding] = check(snap)
    assert finding.severity is Severity.WARN and "without CUDA" in finding.summary
    # nvidia-smi -q of this driver does not print the compute capability: CMake's default ("native") then applies
    assert "cmake -B build -DGGML_CUDA=ON -DCMAKE_BUILD_TYPE=Release" in finding.fix.commands


def test_not_found_is_skip_with_dirs_searched():
    [finding] = check(SNAPS / "laptop-5800u-apu")
    assert finding.severity is Severity.SKIP and "LLAMA_CPP_DIR" in finding.summary
    assert finding.evidence["searched"] == "PATH"


def test_which_json_only_snapshot(make_snapshot):
    snap = make_snapshot(cmd={"/usr/bin/llama-server --version": ("", 0, "version: 9000 (deadbee)\nbuilt with cc for x86_64-linux-gnu\n")},
                         samples={"which": {"llama-server": "/usr/bin/llama-server"}})
    facts = LlamaBuildFacts.gather(open_host(snap))
    assert [b.path for b in facts.binaries] == ["/usr/bin/llama-server"]
    assert facts.binaries[0].backends == ("CPU",)  # a static build naming no GPU backend
    [finding] = check(snap)
    assert finding.severity in (Severity.OK, Severity.INFO)


def test_garbage_version_and_install_sample(make_snapshot):
    snap = make_snapshot(cmd={"/x/llama-server --version": ("\x00\xff junk", 139)},
                         samples={"llama_install": {"binaries": [{"name": "llama-server", "path": "/x/llama-server",
                                                                  "mtime": "not a date", "libs": [3, None]}, "junk"]}})
    [finding] = check(snap)
    assert finding.severity is Severity.INFO and "could not tell" in finding.summary


def test_nothing_recorded_is_skip(make_snapshot):
    assert [f.severity for f in check(make_snapshot())] == [Severity.SKIP]


@pytest.mark.live
def test_live_ci_cpu_build_from_the_cache():
    facts = LlamaBuildFacts.gather(open_host())
    # scripts/test exports TUNEHOST_LLAMA_BIN_DIR (the cache dir); run alone, the cache itself is searched
    cached = [b for b in facts.binaries if os.path.basename(b.path) == "llama-bench"
              and ("tunehost cache" in b.found_in or "$TUNEHOST_LLAMA_BIN_DIR" in b.found_in)]
    if not cached:
        if os.environ.get("CI"):
            pytest.fail("no llama-bench built by scripts/build_llama_cpp.py: CI must run ./scripts/test")
        pytest.skip("scripts/build_llama_cpp.py has not built llama-bench on this machine")
    bench = cached[0]
    assert bench.version.build_number and bench.backends == ("CPU",)
    assert os.path.basename(bench.path) == "llama-bench"
