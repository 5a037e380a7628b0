"""Why a llama.cpp process died: the signal by name, and what is known to cause it on this CPU.

Every place tunehost runs llama.cpp (llama-bench, llama-fit-params, `--version` probes, servers) passes the exit
status here; the sentence is pure (the CPU flags come from the host layer: tunehost.host.cpuinfo), so an AMX Xeon
and a Ryzen are both tested from captured /proc/cpuinfo lines.

Two causes are known well enough to name:
- SIGSEGV on a CPU with AMX: llama.cpp's AMX extra buffer type (weights repacked for AMX tiles) crashes on some
  models and machines (ggml-org/llama.cpp#20824, open as of b11312; ollama dropped its AMX build, ollama#9203).
  The way out is a build without AMX, or keeping the weights out of the extra buffer types: `-nr`/`--no-repack`
  (common/arg.cpp, every tool built on common: llama-server, llama-cli, llama-fit-params); llama-bench parses its
  own options and has no `-nr`; newer builds (b11312 does) take `--repack 0` (tools/llama-bench/llama-bench.cpp).
- SIGILL: an instruction this CPU lacks: the binary was built for another CPU (`GGML_NATIVE=ON` means
  `-march=native` on the machine that compiled it).
"""

from __future__ import annotations

import signal
from collections.abc import Iterable

AMX_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")  # /proc/cpuinfo names (arch/x86/include/asm/cpufeatures.h)
AMX_OPTIONS = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")  # ggml/CMakeLists.txt
# -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw (ggml/src/ggml-cpu/CMakeLists.txt, GGML_AVX512)
AVX512_BASE = ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")
# (CMake option of a GGML_NATIVE=OFF build, the /proc/cpuinfo flags its compiler switches need)
PORTABLE_ISA: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    ("GGML_AVX512", AVX512_BASE),
    # the extensions are only compiled on top of the AVX-512 base
    ("GGML_AVX512_VBMI", (*AVX512_BASE, "avx512vbmi")),
    ("GGML_AVX512_VNNI", (*AVX512_BASE, "avx512_vnni")),
    ("GGML_AVX512_BF16", (*AVX512_BASE, "avx512_bf16")),
)
# every ISA flag a llama.cpp build may be compiled for, as /proc/cpuinfo names them
ISA_FLAGS = tuple(dict.fromkeys([f for _, needs in PORTABLE_ISA for f in needs] + list(AMX_FLAGS)))
NATIVE_BUILD = "cmake -B build -DGGML_NATIVE=ON && cmake --build build --config Release -j"
TUNEHOST_REBUILD = "python scripts/build_llama_cpp.py --force"
# its portable build (no AMX), even where the native one passes the smoke run on the tiny model
TUNEHOST_NO_AMX_REBUILD = "python scripts/build_llama_cpp.py --portable"
# the programs that parse common/arg.cpp's options, where -nr/--no-repack exists
COMMON_ARG_PROGRAMS = ("llama-server", "llama-cli", "llama-fit-params", "llama-completion", "llama-mtmd-cli")


def portable_options(cpu_flags: Iterable[str]) -> list[str]:
    """CMake options of a GGML_NATIVE=OFF build for this CPU's ISA, AMX off: what runs where native crashes."""
    flags = frozenset(cpu_flags)
    options = ["-DGGML_NATIVE=OFF"]
    options += [f"-D{option}={'ON' if all(f in flags for f in needs) else 'OFF'}" for option, needs in PORTABLE_ISA]
    return options + [f"-D{option}=OFF" for option in AMX_OPTIONS]


def portable_isa(cpu_flags: Iterable[str]) -> list[str]:
    """The /proc/cpuinfo flags a portable_options() build is compiled for."""
    flags = frozenset(cpu_flags)
    return sorted({f for _, needs in PORTABLE_ISA if all(n in flags for n in needs) for f in needs})


def no_amx_build(cpu_flags: Iterable[str]) -> str:
    """The configure line of a build without AMX for this CPU."""
    return "cmake -B build " + " ".join(portable_options(cpu_flags)) + " -DCMAKE_BUILD_TYPE=Release"


_CAUSES = {
    "SIGKILL": "killed from outside: often the kernel's out-of-memory killer (see `sudo dmesg | grep -i oom`)",
    "SIGBUS": "the model file was truncated or changed while mapped, or the disk failed a read",
    "SIGABRT": "llama.cpp stopped itself (a GGML_ASSERT or an uncaught error): its last output lines say why",
    "SIGTERM": "stopped from outside (another program or a service manager)",
    "SIGINT": "interrupted (Ctrl-C)",
    "SIGFPE": "an arithmetic fault inside llama.cpp: a bug of this build or a damaged model file",
}


def has_amx(cpu_flags: Iterable[str] | None) -> bool:
    return any(flag.startswith("amx") for flag in cpu_flags or ())


def signal_name(returncode: int) -> str | None:
    """"SIGSEGV" for a process killed by signal 11 (subprocess: -11; a shell: 139); None for an ordinary exit."""
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 128 + 65 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_status(returncode: int) -> str:
    """'exit 3' or 'killed by SIGSEGV'."""
    if returncode < 0:
        return f"killed by {signal_name(returncode)}"
    return f"exit {returncode}"


def explain_exit(program: str, returncode: int, cpu_flags: Iterable[str] | None = None) -> str | None:
    """One line saying why `program` (llama-bench, llama-server, ...) ended with `returncode`, and the way out;
    None when the exit needs no explanation (success, or an ordinary error status whose output says why).

    `returncode` is subprocess's: negative for a signal. `cpu_flags` are this CPU's /proc/cpuinfo flags (None:
    unknown, so no CPU-specific cause is named).
    """
    if returncode >= 0:
        return None
    name = signal_name(returncode) or f"signal {-returncode}"
    flags = frozenset(cpu_flags) if cpu_flags is not None else None
    if name == "SIGSEGV":
        if flags is not None and has_amx(flags):
            amx = ", ".join(f for f in AMX_FLAGS if f in flags)
            if program == "llama-bench":
                switch = ("llama-bench has no -nr; if `llama-bench --help` lists --repack, `--repack 0` keeps the "
                          "weights out of the AMX buffer")
            elif program in COMMON_ARG_PROGRAMS:
                switch = f"or run {program} with --no-repack (-nr), which keeps the weights out of the AMX buffer"
            else:
                switch = "llama-server and llama-cli take --no-repack (-nr), which keeps the weights out of it"
            return (f"{program} was killed by SIGSEGV (a crash). This CPU has AMX ({amx}): llama.cpp's AMX path "
                    "(weights repacked into the AMX buffer type) is known to crash on such CPUs "
                    f"(ggml-org/llama.cpp#20824). Way out: a build without AMX: {no_amx_build(flags)} (tunehost's cache: "
                    f"{TUNEHOST_NO_AMX_REBUILD}); {switch}.")
        return (f"{program} was killed by SIGSEGV (a crash inside llama.cpp): a damaged or unsupported model file, "
                "or a bug of this build; try a newer llama.cpp build, and the model with another program.")
    if name == "SIGILL":
        lacking = ""
        if flags is not None:
            wanted = [f for f in ("avx2", "avx512f", *AMX_FLAGS) if f not in flags]
            lacking = f" (this CPU has no {', '.join(wanted[:3])}: a build that uses them dies here)" if wanted else ""
        return (f"{program} was killed by SIGILL (illegal instruction): it uses an instruction this CPU lacks"
                f"{lacking}, so it was built for another CPU, e.g. a GGML_NATIVE=ON (-march=native) build copied "
                f"from another machine. Rebuild it on this machine: {NATIVE_BUILD}; for tunehost's cache: "
                f"{TUNEHOST_REBUILD}.")
    cause = _CAUSES.get(name)
    return f"{program} was killed by {name}" + (f": {cause}." if cause else ".")
