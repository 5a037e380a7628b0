"""llama-build: the --version parser, build number -> date, backends, LlamaBuildFacts and the check.

Data: tests/system/data/llama-bench-b11312-cpu-{version,list-devices}.txt are the real outputs of the CPU
llama-bench that scripts/build_llama_cpp.py built on the CI machine (b11312, commit 0c1e570). The ROCm banner is
the real stderr of corpus/llama-bench/jsonl-rocm-strix-halo-*.txt (build 1c1409e1 / 6865). The CUDA banner lines
follow the real `llama-cli --version` output quoted in ggml-org/llama.cpp issue #15589, the old version format
common/arg.cpp's `fprintf(stderr, "version: %d (%s)\\n", ...)`. Composite snapshots: see tests/data/snapshots.
"""

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from tunehost.check import Severity
from tunehost.checks.llama_build import LlamaBuildCheck
from tunehost.facts import HostFacts
from tunehost.facts.llama import LlamaBuildFacts, gpu_views
from tunehost.host import open_host
from tunehost.host.samples import llama_search_dirs
from tunehost.parsers.llama_version import (backends_from_libs, build_date, cuda_architecture, parse_list_devices,
                                            parse_llama_version)

from tests.conftest import corpus
from tests.system.test_llama_exit import NON_AMX, _judge, _snapshot, fake, flags
from tests.system.test_running_servers import SERVER_EXE, VERSION, build_snapshot, running_server, sample_rows

DATA = Path(__file__).parents[1] / "system" / "data"
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


# ---- wrappers, tunehost's own built.json backend, $TUNEHOST_LLAMA_BIN_DIR (snapshot fixtures) ----

CPUINFO = Path(__file__).parents[1] / "data" / "cpuinfo"
SPR = "xeon-gold-6459c-sapphire-rapids-amx.txt"
B11312 = ("", 0, "version: 11312 (0c1e570)\nbuilt with GNU for Linux x86_64\n")


def _install_snapshot(make_snapshot, rows, *, cpu=SPR, cmd=None, fs=None, samples=None, search_dirs=()):
    return make_snapshot(fs={"/proc/cpuinfo": (CPUINFO / cpu).read_text(), **(fs or {})},
                         cmd={f"{r['path']} --version": B11312 for r in rows} | (cmd or {}),
                         samples={"llama_install": {"sampled_at": "2026-11-20T00:00:00Z",
                                                    "search_dirs": list(search_dirs), "binaries": rows},
                                  **(samples or {})})


def test_python_wrapper_named_llama_server_is_a_wrapper_not_an_amx_build(make_snapshot):
    # the case: a python3 script named llama-server on an AMX Xeon was judged "an AMX build on an AMX CPU"
    row = {"name": "llama-server", "path": "/usr/local/bin/llama-server", "from": "PATH",
           "file": {"format": "script", "shebang": "/usr/bin/env python3",
                    "wraps": ["/opt/llama.cpp/build/bin/llama-server"]}}
    [finding] = check(_install_snapshot(make_snapshot, [row]))
    assert finding.severity is Severity.INFO
    assert finding.summary == ("llama-server at /usr/local/bin/llama-server is a wrapper script (/usr/bin/env python3), "
                               "not a llama.cpp build; it runs /opt/llama.cpp/build/bin/llama-server: point "
                               "LLAMA_CPP_DIR at that build's directory to have it judged")
    assert "AMX" not in finding.summary and finding.evidence["#!"] == "/usr/bin/env python3"


def test_wrapper_without_a_program_path_and_a_hostile_shebang(make_snapshot):
    row = {"name": "llama-server", "path": "/usr/local/bin/llama-server", "from": "PATH",
           "file": {"format": "script", "shebang": "/bin/sh\x1b[2J\n#evil", "wraps": "not a list"}}
    [finding] = check(_install_snapshot(make_snapshot, [row]))
    assert "which build it runs could not be told" in finding.summary
    assert "\x1b" not in finding.summary and "\n" not in finding.summary and "wrapper script (/bin/sh?[2J?#evil)" in finding.summary


def test_wrapper_beside_a_real_build_is_named_and_the_build_still_judged(make_snapshot):
    rows = [{"name": "llama-server", "path": "/opt/ll/llama-server", "from": "PATH",
             "file": {"format": "script", "shebang": "/bin/bash", "wraps": ["/opt/ll/real/llama-server"]}},
            {"name": "llama-bench", "path": "/opt/ll/llama-bench", "from": "PATH", "file": {"format": "elf"}}]
    findings = check(_install_snapshot(make_snapshot, rows))
    assert [f.severity for f in findings] == [Severity.INFO, Severity.WARN]
    assert "wrapper script (/bin/bash)" in findings[0].summary
    assert findings[1].summary.startswith("llama-bench b11312") and "AMX build on an AMX CPU" in findings[1].summary


NVML = json.loads((SNAPS / "desktop-12700f-rtx3060" / "samples" / "nvml.json").read_text())


def _cache_row(backend: str) -> tuple[dict, dict]:
    row = {"name": "llama-server", "path": "/root/.cache/tunehost/llama.cpp/0.3.36/bin/llama-server",
           "from": "tunehost cache (scripts/build_llama_cpp.py)", "marker": "/root/.cache/tunehost/llama.cpp/0.3.36/built.json",
           "file": {"format": "elf"}}
    marker = {"llama_cpp_build_number": 11312, "llama_cpp_commit": "0c1e570", "variant": "native", "backend": backend,
              "isa": ["avx2", "fma", "f16c", "sse4_2"]}
    return row, {row["marker"]: json.dumps(marker)}


def test_tunehost_cpu_build_on_an_nvidia_host_says_so_and_builds_cuda(make_snapshot):
    row, fs = _cache_row("cpu")
    # nothing in --version says the backend: built.json does
    snap = _install_snapshot(make_snapshot, [row], cpu="core-i7-12700f-alder-lake-avx2.txt", fs=fs,
                             cmd={f"{row['path']} --version": ("", 0, "version: 11312 (0c1e570)\n")},
                             samples={"nvml": NVML})
    gpus, why = gpu_views(HostFacts(open_host(snap)))
    if not gpus:
        pytest.skip(f"the GPU group's facts do not read this NVML sample: {why}")
    facts = LlamaBuildFacts.gather(open_host(snap))
    assert facts.binaries[0].backends == ("CPU",)
    assert facts.binaries[0].backend_source == "built.json: scripts/build_llama_cpp.py --backend cpu"
    [finding] = check(snap)
    assert finding.severity is Severity.WARN and "built without CUDA on a host with an NVIDIA GPU" in finding.summary
    assert finding.evidence["backend"] == "CPU (from built.json: scripts/build_llama_cpp.py --backend cpu)"
    assert finding.fix.commands == ("python scripts/build_llama_cpp.py --backend cuda --cuda-arch 86",)


def test_tunehost_cuda_build_is_read_from_built_json(make_snapshot):
    row, fs = _cache_row("cuda")
    snap = _install_snapshot(make_snapshot, [row], cpu="core-i7-12700f-alder-lake-avx2.txt", fs=fs,
                             cmd={f"{row['path']} --version": ("", 0, "version: 11312 (0c1e570)\n")})
    assert LlamaBuildFacts.gather(open_host(snap)).binaries[0].backends == ("CUDA",)
    [finding] = check(snap)
    assert "backend CUDA" in finding.summary and "without CUDA" not in finding.summary


@pytest.mark.parametrize("exists, says", [(False, "which is not a directory"), (True, "which has no llama-bench")])
def test_tunehost_llama_bin_dir_pointing_nowhere_is_a_warning_beside_the_build_found(make_snapshot, exists, says):
    row = {"name": "llama-server", "path": "/usr/bin/llama-server", "from": "PATH", "file": {"format": "elf"}}
    snap = _install_snapshot(make_snapshot, [row], cpu="epyc-kvm-guest-avx2.txt",
                             search_dirs=[{"dir": "/opt/gone", "from": "$TUNEHOST_LLAMA_BIN_DIR", "exists": exists}])
    findings = check(snap)
    assert [f.severity for f in findings] == [Severity.WARN, Severity.OK]
    assert findings[0].summary.startswith(f"TUNEHOST_LLAMA_BIN_DIR is set to /opt/gone, {says}: tunehost bench")
    assert findings[0].evidence == {"TUNEHOST_LLAMA_BIN_DIR": "/opt/gone"}


def test_llama_install_sample_records_what_each_file_is(tmp_path, monkeypatch):
    from tunehost.host.samples import sample_llama_install

    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "llama-server").write_text('#!/usr/bin/env python3\nimport os\nos.execv("/srv/llama/bin/llama-server", '
                                         '["llama-server", "--api-key", "sk-secret-1234"])\n')
    (folder / "llama-bench").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 64)
    for name in ("llama-server", "llama-bench"):
        (folder / name).chmod(0o755)
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(folder))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("TUNEHOST_CACHE_DIR", str(tmp_path / "cache"))
    rows = {r["name"]: r for r in sample_llama_install(open_host())["binaries"]}
    assert rows["llama-server"]["file"] == {"format": "script", "shebang": "/usr/bin/env python3",
                                            "wraps": ["/srv/llama/bin/llama-server"]}
    assert rows["llama-bench"]["file"] == {"format": "elf"}
    assert "sk-secret" not in json.dumps(rows)  # paths only, never the script's text


def test_llama_server_list_devices_tells_an_unknown_builds_backend(make_snapshot):
    # version 0 (a build without its number), no libraries beside it: `llama-server --list-devices` (common/arg.cpp)
    row = {"name": "llama-server", "path": "/opt/ll/llama-server", "from": "PATH", "file": {"format": "elf"}}
    listed = "Available devices:\n  CUDA0: NVIDIA GeForce RTX 3060 (12288 MiB, 11000 MiB free)\n"
    snap = _install_snapshot(make_snapshot, [row], cpu="core-i7-12700f-alder-lake-avx2.txt",
                             cmd={"/opt/ll/llama-server --version": ("", 0, "version: 0 (unknown)\n"),
                                  "/opt/ll/llama-server --list-devices": listed})
    binary = LlamaBuildFacts.gather(open_host(snap)).binaries[0]
    assert binary.backends == ("CUDA",) and binary.backend_source == "--list-devices"


def test_advise_says_tunehost_llama_bin_dir_points_nowhere(make_snapshot, cli, tmp_path):
    from tests.conftest import write_tiny_gguf

    row = {"name": "llama-server", "path": "/usr/bin/llama-server", "from": "PATH", "file": {"format": "elf"}}
    snap = _install_snapshot(make_snapshot, [row], cpu="epyc-kvm-guest-avx2.txt",
                             search_dirs=[{"dir": "/opt/gone", "from": "$TUNEHOST_LLAMA_BIN_DIR", "exists": False}])
    result = cli("advise", "--model", str(write_tiny_gguf(tmp_path / "m.gguf")), "--snapshot", str(snap),
                 "--format", "json")
    assert result.exit_code == 0, result.output
    assert ("TUNEHOST_LLAMA_BIN_DIR is set to /opt/gone, which is not a directory: not used here (bench and tune "
            "stop with an error on it)") in result.stdout


def test_llama_build_judges_the_running_server_when_nothing_is_on_path(make_snapshot):
    # issue 13: "llama.cpp not found" while a llama-server was running
    snap = build_snapshot(make_snapshot, running_server())
    [finding] = LlamaBuildCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is not Severity.SKIP
    assert "b6865 (1c1409e1)" in finding.summary and "serving now, pid 2288" in finding.summary
    assert finding.evidence["llama-server"] == f"{SERVER_EXE} (running now: pid 2288)"
    assert finding.evidence["started with"] == "--host 127.0.0.1 --port 10001 --n-gpu-layers 99"
    assert finding.fix.commands[0] == "cd /home/user/IA/llama.cpp && git pull"


def test_running_build_comes_first_before_other_builds_found(make_snapshot):
    snap = make_snapshot(manifest={"format": 1, "uid": 0},
                         cmd={f"{SERVER_EXE} --version": VERSION,
                              "/usr/local/bin/llama-server --version": ("", 0, "version: 9000 (deadbee)\n")},
                         samples={"processes": sample_rows([running_server()]),
                                  "llama_install": {"sampled_at": "2026-11-20T00:00:00Z", "binaries": [
                                      {"name": "llama-server", "path": "/usr/local/bin/llama-server", "from": "PATH"}]}})
    facts = LlamaBuildFacts.gather(open_host(snap))
    assert [(b.path, b.running) for b in facts.binaries] == [(SERVER_EXE, (2288,)), ("/usr/local/bin/llama-server", ())]
    first, second = LlamaBuildCheck().run(HostFacts(open_host(snap)))
    assert "serving now" in first.summary and "serving now" not in second.summary


def test_another_users_binary_is_never_run_as_root(make_snapshot):
    # even with a recorded answer present, --version of a file uid 1000 can change is not asked for
    snap = build_snapshot(make_snapshot, running_server(uid=1000))
    facts = LlamaBuildFacts.gather(open_host(snap))
    [binary] = facts.binaries
    assert binary.version_command is None and not binary.version.known
    assert "belongs to uid 1000" in binary.version_not_run
    assert binary.backends == ("CUDA", "CPU") or binary.backends == ("CUDA",)  # from the libraries beside it
    [finding] = LlamaBuildCheck().run(HostFacts(open_host(snap)))
    assert "not run: the file belongs to uid 1000" in finding.evidence[f"{SERVER_EXE} --version"]


def test_a_running_server_whose_file_was_replaced(make_snapshot):
    proc = running_server()
    proc["exe"] = SERVER_EXE + " (deleted)"
    [finding] = LlamaBuildCheck().run(HostFacts(open_host(build_snapshot(make_snapshot, proc))))
    assert finding.severity is Severity.INFO and "deleted or replaced" in finding.summary
    assert finding.fix.commands == ("kill 2288",)


def test_a_running_server_whose_executable_is_not_readable(make_snapshot):
    proc = dict(running_server(), exe=None, exe_file=None)
    snap = make_snapshot(manifest={"format": 1, "uid": 1000}, samples={"processes": sample_rows([proc])})
    [finding] = LlamaBuildCheck().run(HostFacts(open_host(snap)))
    assert finding.severity is Severity.SKIP and "llama-server (pid 2288) is running" in finding.summary
    assert "root" in finding.summary


def test_version_probe_dying_by_sigill_fails_llama_build(tmp_path, monkeypatch):
    fake(tmp_path, "llama-server", "kill -ILL $$")
    fake(tmp_path, "llama-bench", "exit 0")  # a bin directory without llama-bench would be a finding of its own
    monkeypatch.setenv("TUNEHOST_LLAMA_BIN_DIR", str(tmp_path))
    # (the fakes are shell scripts: the one that does not crash is named as a wrapper script, on its own)
    findings = [f for f in LlamaBuildCheck().run(HostFacts(open_host())) if str(tmp_path) in json.dumps(f.evidence)
                and "wrapper script" not in f.summary]
    assert [f.severity for f in findings] == [Severity.FAIL]
    assert "dies on this CPU" in findings[0].summary and "SIGILL" in findings[0].detail


def test_native_build_on_amx_cpu_warns_with_the_no_amx_fix(make_snapshot):
    [finding] = _judge(_snapshot(make_snapshot, SPR))
    assert finding.severity is Severity.WARN and "AMX" in finding.summary
    assert any("-DGGML_AMX_INT8=OFF" in c for c in finding.fix.commands) and "-nr" in finding.fix.text


@pytest.mark.parametrize("cpu", NON_AMX)
def test_same_build_without_amx_is_not_warned(make_snapshot, cpu):
    [finding] = _judge(_snapshot(make_snapshot, cpu))
    assert finding.severity is Severity.OK and "AMX" not in finding.summary


def test_tunehost_portable_build_on_amx_cpu_is_ok(make_snapshot):
    marker = {"llama_cpp_build_number": 11312, "variant": "portable", "isa": ["avx2", "avx512f", "sse4_2"]}
    [finding] = _judge(_snapshot(make_snapshot, SPR, marker=marker))
    assert finding.severity is Severity.OK


def test_tunehost_native_build_on_amx_cpu_fix_forces_the_portable_build(make_snapshot):
    marker = {"llama_cpp_build_number": 11312, "variant": "native", "isa": ["amx_int8", "amx_tile", "avx2"]}
    [finding] = _judge(_snapshot(make_snapshot, SPR, marker=marker))
    assert finding.severity is Severity.WARN
    assert finding.fix.commands == ("python scripts/build_llama_cpp.py --portable",)


def test_build_whose_isa_the_cpu_lacks_fails(make_snapshot):
    # tunehost's native build from a Sapphire Rapids copied onto the CI's EPYC guest
    marker = {"llama_cpp_build_number": 11312, "variant": "native",
              "isa": sorted(f for f in flags(SPR) if f.startswith(("avx", "amx", "sse4_2", "fma", "f16c", "bmi2")))}
    [finding] = _judge(_snapshot(make_snapshot, "epyc-kvm-guest-avx2.txt", marker=marker))
    assert finding.severity is Severity.FAIL and "avx512f" in finding.summary and "amx_int8" in finding.summary
    assert finding.fix.commands == ("python scripts/build_llama_cpp.py --force",)


def test_version_probe_killed_by_sigsegv_replays_from_a_snapshot(make_snapshot):
    [finding] = _judge(_snapshot(make_snapshot, SPR, rc=-11))
    assert finding.severity is Severity.FAIL and "AMX" in finding.detail and "SIGSEGV" in finding.detail
