"""llama-build — llama.cpp binaries found (the running servers' own executables first, from /proc/PID/exe), their
build number/commit, backend, and whether a rebuild would help."""

from __future__ import annotations

import os
import shlex

from tunehost.check import Check, Fix
from tunehost.facts.llama import GpuView, LlamaBinary, LlamaBuildFacts, gpu_views
from tunehost.facts.llama_exit import (AMX_FLAGS, TUNEHOST_NO_AMX_REBUILD, TUNEHOST_REBUILD, has_amx,
                                       no_amx_build)
from tunehost.parsers.llama_version import CPU, CUDA, ROCM, VULKAN, cuda_architecture
from tunehost.printable import one_line

BUILD = "cmake --build build --config Release -j \"$(nproc)\""
# the ggml AMX backend arrived in October 2024 (about b3900); no fix of its crash as of b11312 (ggml-org/llama.cpp#20824)
AMX_SINCE_BUILD = 3900
OLD_AFTER_DAYS = 90  # llama.cpp ships several builds a day; a few months means many backend speed-ups missed


class LlamaBuildCheck(Check):
    id = "llama-build"
    title = "llama.cpp build"
    judges = "llama.cpp binaries found (a running server's own executable first), their build and backend"

    def run(self, facts):
        build = facts.get(LlamaBuildFacts)
        if not build.binaries:
            ev = {"searched": "PATH" + "".join(f"; {d}" for d in build.search_dirs)}
            if build.reason:
                ev["llama_install sample"] = build.reason
            if build.hidden_servers:
                ev["running"] = ", ".join(build.hidden_servers) + ": executable not readable (/proc/PID/exe)"
                yield self.skip(f"{build.hidden_servers[0]} is running but its executable cannot be read without "
                                "root, and no llama.cpp was found on PATH; run tunehost as root (sudo) or set "
                                "LLAMA_CPP_DIR to its build directory", ev)
                return
            setting = next((d.rsplit(" (from ", 1) for d in build.search_dirs
                            if " (from $LLAMA_CPP_DIR" in d or " (from $TUNEHOST_LLAMA_BIN_DIR" in d), None)
            if setting:  # the user has set it: say where it points, not "set LLAMA_CPP_DIR"
                where, source = setting[0], setting[1].split(",")[0].rstrip(")")
                yield self.skip(f"no llama.cpp binary found: {source} is set to {where}, but neither it (nor its "
                                f"build/bin, bin) nor PATH has llama-server or llama-bench; point {source} at a "
                                "llama.cpp build directory", ev)
                return
            yield self.skip("llama.cpp not found on PATH; set LLAMA_CPP_DIR (or TUNEHOST_LLAMA_BIN_DIR) to its "
                            "build directory", ev)
            return
        problem = build.bin_dir_problem
        if problem is not None:
            where = one_line(build.configured_bin_dir[0], 300) if build.configured_bin_dir else "?"
            yield self.warn(f"TUNEHOST_LLAMA_BIN_DIR is set to {where}, {problem}: tunehost bench, tune and bench "
                            "--serve stop with an error until it points at a llama.cpp build (the builds judged "
                            "here are others)", {"TUNEHOST_LLAMA_BIN_DIR": where},
                            fix=Fix("Point TUNEHOST_LLAMA_BIN_DIR at the bin directory of a llama.cpp build, or "
                                    "unset it.", ("unset TUNEHOST_LLAMA_BIN_DIR",)))
        # a script named llama-server is a wrapper: named as one, never judged as the build it may start
        # (one whose --version died is judged with the builds: the crash is what it runs doing on this CPU)
        wrappers = [b for b in build.binaries if b.file_format == "script" and b.crash is None]
        for wrapper in wrappers:
            yield self._wrapper(wrapper)
        gpus, gpu_reason = gpu_views(facts)
        groups: dict[tuple, list[LlamaBinary]] = {}
        # the build that is serving now comes first (the list starts with running servers' executables)
        for binary in (b for b in build.binaries if b not in wrappers):
            key = (os.path.dirname(binary.path),)  # one directory = one build (llama-bench may not print a version)
            groups.setdefault(key, []).append(binary)
        for binaries in groups.values():
            yield self._judge(build, binaries, gpus, gpu_reason)

    def _wrapper(self, binary: LlamaBinary):
        path, shebang = one_line(binary.path, 300), one_line(binary.script or "?", 200)
        ev: dict[str, object] = {binary.name: f"{path} (found via {binary.found_in})", "#!": shebang}
        if binary.wraps:
            ev["programs it names"] = ", ".join(one_line(w, 300) for w in binary.wraps)
            runs = f"; it runs {one_line(binary.wraps[0], 300)}"
        else:
            runs = "; which build it runs could not be told (no llama.cpp program path in it)"
        return self.info(f"{binary.name} at {path} is a wrapper script ({shebang}), not a llama.cpp build{runs}: "
                         "point LLAMA_CPP_DIR at that build's directory to have it judged", ev)

    def _judge(self, build: LlamaBuildFacts, binaries: list[LlamaBinary], gpus, gpu_reason):
        lead = next((b for b in binaries if b.version.known), binaries[0])
        names = ", ".join(b.name for b in binaries)
        v = lead.version
        ident = (f"b{v.build_number}" if v.build_number else "unknown build") + (f" ({v.commit})" if v.commit else "")
        backends = tuple(dict.fromkeys(b for x in binaries for b in x.backends))
        ev: dict[str, object] = {f"{b.name}": f"{b.path} (found via {b.found_in})" for b in binaries}
        serving = next((b for b in binaries if b.running), None)
        if serving is not None:
            ev[f"{serving.name}"] = f"{serving.path} (running now: pid {', '.join(map(str, serving.running))})"
            if serving.started_with:
                ev["started with"] = serving.started_with
            if serving.version_not_run:
                ev[f"{serving.path} --version"] = f"not run: {serving.version_not_run}"
        if lead.version_command:
            ev[lead.version_command] = lead.version_raw or "(no version line)"
        ev["backend"] = (", ".join(backends) + f" (from {lead.backend_source or next((b.backend_source for b in binaries if b.backend_source), '?')})"
                         if backends else "unknown")
        if lead.libs:
            ev["libraries"] = ", ".join(lead.libs)
        age_days = None
        if lead.built and build.reference_date:
            age_days = (build.reference_date - lead.built).days
            ev["built"] = f"about {lead.built.isoformat()} (from the {lead.built_source}), {age_days} days before {build.reference_date}"

        nvidia_ccs = _nvidia_ccs(gpus, binaries)
        has_nvidia = bool(nvidia_ccs) or any(g.vendor == "nvidia" for g in gpus or ())
        # an AMD iGPU of an ordinary APU rarely beats the CPU at token generation; discrete cards and the big
        # unified-memory APUs (which llama.cpp itself reports with a gfx target) are worth a GPU backend
        has_amd = any(g.vendor == "amd" and g.integrated is False for g in gpus or ()) or any(
            x.version.gfx_targets for x in binaries)
        if gpus is None and gpu_reason:
            ev["GPU facts"] = gpu_reason
        archs = sorted({a for a in (cuda_architecture(cc) for cc in nvidia_ccs) if a}, key=int)
        if archs:
            ev["CMAKE_CUDA_ARCHITECTURES"] = ";".join(archs) + " (compute capability " + ", ".join(sorted(set(nvidia_ccs))) + ")"
        gfx = sorted({g for x in binaries for g in x.version.gfx_targets})
        rebuild = _rebuild(lead, archs, gfx, want=CUDA if has_nvidia else ROCM if has_amd and ROCM in backends
                           else VULKAN if VULKAN in backends else backends[0] if backends else CPU)
        what = f"{names} {ident}, backend {', '.join(backends) or 'unknown'}"
        if serving is not None:
            what = f"{what} (serving now, pid {serving.running[0]})"
        if serving is not None and serving.deleted:
            return self.info(f"{serving.name} (pid {serving.running[0]}) runs a file that was deleted or replaced "
                             "after it started: it still serves the old build; restart it to serve the one on disk",
                             ev, fix=Fix("Restart the server so it runs the build now on disk.",
                                         (f"kill {serving.running[0]}",)))

        cpu = _cpu_judgement(self, build, binaries, lead, what, ev)
        if cpu is not None:
            return cpu
        if has_nvidia and backends and CUDA not in backends:
            if VULKAN in backends:
                return self.info(f"{what}: on an NVIDIA GPU a CUDA build is usually faster than Vulkan", ev,
                                 fix=_rebuild(lead, archs, gfx, want=CUDA))
            return self.warn(f"{what}: built without CUDA on a host with an NVIDIA GPU", ev,
                             fix=_rebuild(lead, archs, gfx, want=CUDA),
                             detail="A CPU-only build leaves the GPU idle: every layer runs on the CPU.")
        if has_amd and backends == (CPU,):
            return self.warn(f"{what}: built without a GPU backend on a host with an AMD GPU", ev,
                             fix=_rebuild(lead, archs, gfx, want=ROCM))
        if not backends:
            return self.info(f"{what}: could not tell which backend it was built with", ev)
        if age_days is not None and age_days > OLD_AFTER_DAYS:
            return self.info(f"{what} is about {age_days // 30} months old: a rebuild picks up months of backend "
                             "speed-ups", ev, fix=rebuild)
        if not v.known:
            return self.info(f"{names}: backend {', '.join(backends)}, build unknown (--version gave no version line)", ev)
        return self.ok(what, ev)


def _cpu_judgement(check: Check, build: LlamaBuildFacts, binaries: list[LlamaBinary], lead: LlamaBinary, what: str,
                   ev: dict[str, object]):
    """A build that dies on this CPU (fail) or is known to crash on it (warn); None when neither."""
    flags = build.cpu_flags
    crashed = next((b for b in binaries if b.crash), None)
    if crashed is not None:
        ev[f"{crashed.path} --version"] = crashed.crash
        return check.fail(f"{what}: {crashed.name} --version dies on this CPU", ev, fix=_cpu_fix(lead, flags),
                          detail=crashed.crash)
    isa = next((b.build_isa for b in binaries if b.build_isa is not None), None)
    if isa is not None:
        ev["compiled for"] = " ".join(isa) + " (built.json)"
    if isa is not None and flags is not None:
        lacking = [f for f in isa if f not in flags]
        if lacking:
            return check.fail(f"{what}: built for instructions this CPU lacks ({', '.join(lacking)}); it dies with "
                              "SIGILL (built on another CPU and copied here)", ev, fix=_cpu_fix(lead, flags))
    if not has_amx(flags):
        return None
    variant = next((b.build_variant for b in binaries if b.build_variant), None)
    number = lead.version.build_number
    known_crash = number is None or number == 0 or number >= AMX_SINCE_BUILD
    if variant == "portable" or (isa is not None and not has_amx(isa)) or not known_crash:
        return None
    ev["CPU"] = "AMX (" + ", ".join(f for f in AMX_FLAGS if f in (flags or ())) + ")"
    ev["build"] = (f"tunehost's {variant} build" if variant else "GGML_NATIVE=ON assumed (llama.cpp's default; the "
                   "release binaries load an AMX variant too)")
    return check.warn(f"{what}: an AMX build on an AMX CPU; llama.cpp's AMX path is known to crash (SIGSEGV) with "
                      "some models here", ev, fix=_cpu_fix(lead, flags, amx=True),
                      detail="Weights repacked into the AMX buffer type crash llama.cpp on some models "
                             "(ggml-org/llama.cpp#20824, open since b8458). A build without AMX, or llama-server's "
                             "--no-repack (-nr), avoids that path.")


def _cpu_fix(binary: LlamaBinary, flags: frozenset[str] | None, *, amx: bool = False) -> Fix:
    if "tunehost cache" in binary.found_in:
        if amx:
            return Fix("Rebuild tunehost's cached llama.cpp without AMX (its portable build), or start llama-server "
                       "with --no-repack (-nr).", (TUNEHOST_NO_AMX_REBUILD,))
        return Fix("Rebuild tunehost's cached llama.cpp on this machine.", (TUNEHOST_REBUILD,))
    src = _source_dir(binary)
    fetch = (f"cd {shlex.quote(src)}",) if src else ("git clone https://github.com/ggml-org/llama.cpp && cd llama.cpp",)
    if amx:
        return Fix("Build llama.cpp without AMX for this CPU's other instructions (or start llama-server with "
                   "--no-repack (-nr), which keeps the weights out of the AMX buffer).",
                   fetch + (no_amx_build(flags or ()), BUILD))
    return Fix("Rebuild llama.cpp on this machine (a GGML_NATIVE=ON build only runs on CPUs like the one that "
               "compiled it).", fetch + ("cmake -B build -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release", BUILD))


def _nvidia_ccs(gpus: tuple[GpuView, ...] | None, binaries: list[LlamaBinary]) -> list[str]:
    ccs = [g.compute_capability for g in gpus or () if g.vendor == "nvidia" and g.compute_capability]
    return ccs or [cc for b in binaries for cc in b.version.compute_capabilities]


def _source_dir(binary: LlamaBinary) -> str | None:
    # <src>/build/bin/llama-server: rebuild in place
    parts = binary.path.rstrip("/").split("/")
    if len(parts) >= 4 and parts[-3:-1] == ["build", "bin"]:
        return "/".join(parts[:-3]) or "/"
    return None


# scripts/build_llama_cpp.py --backend for each backend the check may ask for
SCRIPT_BACKENDS = {CUDA: "cuda", ROCM: "hip", VULKAN: "vulkan"}


def _rebuild(binary: LlamaBinary, archs: list[str], gfx: list[str], want: str) -> Fix:
    if "tunehost cache" in binary.found_in:
        if want in SCRIPT_BACKENDS and want not in binary.backends:
            option = f"--backend {SCRIPT_BACKENDS[want]}"
            if want == CUDA and archs:
                option += f" --cuda-arch {shlex.quote(';'.join(archs))}"
            elif want == ROCM and gfx:
                option += f" --gpu-targets {shlex.quote(';'.join(gfx))}"
            return Fix(f"Build tunehost's llama.cpp with the {want} backend (the default build is CPU only).",
                       (f"python scripts/build_llama_cpp.py {option}",))
        return Fix("Rebuild tunehost's cached llama.cpp.", (TUNEHOST_REBUILD,))
    src = _source_dir(binary)
    fetch = (f"cd {shlex.quote(src)} && git pull",) if src else (
        "git clone https://github.com/ggml-org/llama.cpp && cd llama.cpp",)
    if want == CUDA:
        arch = f" -DCMAKE_CUDA_ARCHITECTURES={shlex.quote(';'.join(archs))}" if archs else ""  # ; ends a command
        configure = f"cmake -B build -DGGML_CUDA=ON{arch} -DCMAKE_BUILD_TYPE=Release"
        text = "Rebuild llama.cpp with CUDA for this GPU's architecture."
    elif want == ROCM:
        targets = f" -DGPU_TARGETS={shlex.quote(';'.join(gfx))}" if gfx else ""
        configure = (f"HIPCXX=\"$(hipconfig -l)/clang\" HIP_PATH=\"$(hipconfig -R)\" cmake -B build -DGGML_HIP=ON{targets} "
                     "-DCMAKE_BUILD_TYPE=Release")
        text = "Rebuild llama.cpp with ROCm (HIP) for this GPU."
    elif want == VULKAN:
        configure = "cmake -B build -DGGML_VULKAN=ON -DCMAKE_BUILD_TYPE=Release"
        text = "Rebuild llama.cpp (Vulkan)."
    else:
        configure = "cmake -B build -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release"
        text = "Rebuild llama.cpp for this CPU."
    return Fix(text, fetch + (configure, BUILD))
