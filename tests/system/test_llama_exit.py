"""A llama.cpp process that dies by a signal is explained (tunehost.facts.llama_exit), wherever tunehost runs one.

Fake binaries (shell scripts that `kill -SEGV $$` / `kill -ILL $$`) go through the real code paths; the CPU is
always a captured one (tests/data/cpuinfo, see its README), never this machine's.
"""

import json
import os
from pathlib import Path

import pytest

from tunehost.check import Severity
from tunehost.checks.llama_build import LlamaBuildCheck
from tunehost.errors import TunehostError
from tunehost.facts import HostFacts
from tunehost.facts.llama_exit import exit_status, explain_exit, no_amx_build, signal_name
from tunehost.host import open_host
from tunehost.host.cpuinfo import parse_cpu_flags

CPUINFO = Path(__file__).parents[1] / "data" / "cpuinfo"
SPR = "xeon-gold-6459c-sapphire-rapids-amx.txt"
NON_AMX = ("epyc-kvm-guest-avx2.txt", "epyc-9654-genoa-avx512.txt", "core-i7-12700f-alder-lake-avx2.txt")


def flags(name: str) -> frozenset[str]:
    parsed = parse_cpu_flags((CPUINFO / name).read_text())
    assert parsed
    return parsed


def fake(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


# ---- the explanation itself ----

def test_segv_on_sapphire_rapids_names_amx_and_the_way_out_per_program():
    cpu = flags(SPR)
    bench = explain_exit("llama-bench", -11, cpu)
    assert "SIGSEGV" in bench and "AMX (amx_tile, amx_int8, amx_bf16)" in bench
    assert "-DGGML_NATIVE=OFF" in bench and "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" in bench
    assert "-DGGML_AVX512=ON" in bench and "-DGGML_AVX2=ON" in bench  # keeps the ISA this CPU has
    assert "llama-bench has no -nr" in bench and "--repack 0" in bench
    server = explain_exit("llama-server", -11, cpu)
    assert "--no-repack (-nr)" in server and "has no -nr" not in server
    assert "--no-repack (-nr)" in explain_exit("llama-fit-params", -11, cpu)
    assert "\n" not in bench


@pytest.mark.parametrize("cpu", NON_AMX)
def test_segv_without_amx_gives_no_amx_advice(cpu):
    text = explain_exit("llama-bench", -11, flags(cpu))
    assert "SIGSEGV" in text and "AMX" not in text and "repack" not in text


def test_segv_with_unknown_cpu_gives_no_amx_advice():
    assert "AMX" not in explain_exit("llama-server", -11, None)


@pytest.mark.parametrize("cpu", [SPR, *NON_AMX])
def test_sigill_says_built_for_another_cpu_and_how_to_rebuild(cpu):
    text = explain_exit("llama-bench", -4, flags(cpu))
    assert "SIGILL" in text and "built for another CPU" in text and "-march=native" in text
    assert "cmake -B build -DGGML_NATIVE=ON" in text and "build_llama_cpp.py --force" in text
    assert "AMX" not in text  # no AMX advice for a SIGILL


def test_sigill_names_what_an_avx2_cpu_lacks():
    assert "this CPU has no avx512f" in explain_exit("llama-bench", -4, flags("epyc-kvm-guest-avx2.txt"))


def test_ordinary_exits_need_no_explanation_and_other_signals_are_named():
    assert explain_exit("llama-bench", 0, flags(SPR)) is None
    assert explain_exit("llama-bench", 1, flags(SPR)) is None
    assert "out-of-memory" in explain_exit("llama-server", -9)
    assert explain_exit("llama-server", -200) == "llama-server was killed by signal 200."
    assert (signal_name(-11), signal_name(139), signal_name(3)) == ("SIGSEGV", "SIGSEGV", None)
    assert (exit_status(-4), exit_status(2)) == ("killed by SIGILL", "exit 2")


def test_no_amx_build_for_an_avx2_cpu_turns_avx512_off():
    line = no_amx_build(flags("core-i7-12700f-alder-lake-avx2.txt"))
    assert "-DGGML_AVX2=ON" in line and "-DGGML_AVX512=OFF" in line and "-DGGML_AVX_VNNI=ON" in line


# ---- through the real code paths, with fake binaries ----

def test_llama_bench_dying_by_sigsegv_on_amx_is_explained(tmp_path):
    from tunehost.bench.llama_bench import run_llama_bench

    binary = fake(tmp_path, "llama-bench", "echo 'load_tensors: AMX model buffer size = 1.0 MiB' >&2\nkill -SEGV $$")
    with pytest.raises(TunehostError) as amx:
        run_llama_bench(binary, ["-m", "x.gguf"], timeout=30, cpu_flags=flags(SPR))
    assert "SIGSEGV" in str(amx.value) and "AMX" in str(amx.value) and "AMX model buffer" in str(amx.value)
    with pytest.raises(TunehostError) as epyc:
        run_llama_bench(binary, ["-m", "x.gguf"], timeout=30, cpu_flags=flags("epyc-9654-genoa-avx512.txt"))
    assert "SIGSEGV" in str(epyc.value) and "AMX (" not in str(epyc.value)


def test_llama_bench_dying_by_sigill_is_explained(tmp_path):
    from tunehost.bench.llama_bench import run_llama_bench

    binary = fake(tmp_path, "llama-bench", "kill -ILL $$")
    with pytest.raises(TunehostError, match="SIGILL.*built for another CPU"):
        run_llama_bench(binary, [], timeout=30, cpu_flags=flags("epyc-kvm-guest-avx2.txt"))


def test_llama_fit_params_dying_by_sigsegv_is_explained(tmp_path, monkeypatch):
    import tunehost.host.cpuinfo
    from tunehost.advise.flags import run_fit_params

    monkeypatch.setattr(tunehost.host.cpuinfo, "cpu_flags", lambda host: flags(SPR))
    binary = fake(tmp_path, "llama-fit-params", "kill -SEGV $$")
    probe, why = run_fit_params(open_host(), str(binary), ["-m", "x.gguf"])
    assert probe is None and "SIGSEGV" in why and "--no-repack (-nr)" in why


# ---- doctor's llama-build from a snapshot (replays the crash and the CPU) ----

def _snapshot(make_snapshot, cpu: str, *, rc: int = 0, marker: dict | None = None, path: str = "/opt/ll/llama-server"):
    row = {"name": os.path.basename(path), "path": path, "from": "PATH"}
    fs = {"/proc/cpuinfo": (CPUINFO / cpu).read_text()}
    if marker is not None:
        row.update({"from": "tunehost cache", "marker": "/cache/built.json"})
        fs["/cache/built.json"] = json.dumps(marker)
    return make_snapshot(fs=fs, cmd={f"{path} --version": ("", rc, "version: 11312 (0c1e570)\nbuilt with GNU for Linux x86_64\n")},
                         samples={"llama_install": {"sampled_at": "2026-11-20T00:00:00Z", "binaries": [row]}})


def _judge(snap):
    return list(LlamaBuildCheck().run(HostFacts(open_host(snap))))


def test_advise_says_why_llama_server_help_crashed(make_snapshot, cli, tmp_path):
    from tests.conftest import write_tiny_gguf

    model = write_tiny_gguf(tmp_path / "m.gguf")
    snap = make_snapshot(fs={"/proc/cpuinfo": (CPUINFO / SPR).read_text()},
                         cmd={"/opt/ll/llama-server --help": ("", -11)},
                         samples={"which": {"llama-server": "/opt/ll/llama-server"}})
    result = cli("advise", "--model", str(model), "--snapshot", str(snap), "--format", "json")
    assert result.exit_code == 0, result.output
    assert "could not read `/opt/ll/llama-server --help` (llama-server was killed by SIGSEGV" in result.stdout
    assert "--no-repack (-nr)" in result.stdout
