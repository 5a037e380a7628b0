"""llama.cpp build facts: which llama-server / llama-cli / llama-bench are installed, their build and backend.

Where tunehost looks: PATH (host.which), then $TUNEHOST_LLAMA_BIN_DIR, $LLAMA_CPP_DIR, $LLAMA_CPP_DIR/build/bin,
$LLAMA_CPP_DIR/bin and the tunehost cache (~/.cache/tunehost/llama.cpp/<ver>[-<backend>]/bin, built by
scripts/build_llama_cpp.py, whose built.json says the backend it was built with).
The live search is the `llama_install` sample (so a snapshot replays it); each binary's `<path> --version` is a
command (cmd/ in a snapshot). The backend comes from the version output's backend lines, else from tunehost's
built.json, else from the ggml libraries beside the binary; a script (a wrapper) is recorded as one, with the
llama.cpp programs it names; the build date from the build number (an approximate table of real release dates),
else from the file's mtime.

Also here: `gpu_views(facts)`, a tolerant view of tunehost.facts.gpu (written by another group) for the checks
that need to know about GPUs — it never fails when that module is missing or shaped differently.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from tunehost.facts.llama_exit import ISA_FLAGS, explain_exit
from tunehost.host.cpuinfo import cpu_flags
from tunehost.host.redact import REDACTED
from tunehost.parsers.llama_version import (CPU, CUDA, GPU_BACKENDS, ROCM, VULKAN, LlamaVersion, backends_from_libs,
                                            build_date, parse_list_devices, parse_llama_version)

if TYPE_CHECKING:
    from tunehost.facts import HostFacts
    from tunehost.host import Host

PROGRAMS = ("llama-server", "llama-cli", "llama-bench")
# built.json's "backend" (scripts/build_llama_cpp.py --backend) -> the backend names of the version parser
MARKER_BACKENDS = {"cpu": CPU, "cuda": CUDA, "vulkan": VULKAN, "hip": ROCM}


def build_label(number: object, commit: object) -> str | None:
    """The llama.cpp build as one label, "b4567 (0c1e570)" (the results store's `build`, tune's journal, drift's
    "llama.cpp build changed"): the build number alone or the commit alone when only one is known, None when
    neither is. One writer, so a label recorded then and one made now compare equal for the same build."""
    known_commit = bool(commit)
    if number is None:
        return str(commit) if known_commit else None
    return f"b{number} ({commit})" if known_commit else f"b{number}"


@dataclass(frozen=True)
class LlamaBinary:
    name: str
    path: str
    found_in: str  # "PATH", "$LLAMA_CPP_DIR/build/bin", ...
    version: LlamaVersion = field(default_factory=LlamaVersion)
    version_command: str | None = None
    version_raw: str | None = None  # first lines of the output, for evidence
    libs: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    backend_source: str | None = None  # "--version output", "libraries beside the binary", "--list-devices", ...
    built: _dt.date | None = None
    built_source: str | None = None  # "build number (approximate)", "file mtime"
    mtime: str | None = None
    running: tuple[int, ...] = ()  # pids of servers running this very file
    started_with: str | None = None  # the options tunehost read from the first one's command line (redacted)
    version_not_run: str | None = None  # why `--version` was not run (another user's file, deleted, a container's)
    deleted: bool = False  # the running server's file was deleted or replaced after it started
    crash: str | None = None  # why `--version` died by a signal (tunehost.facts.llama_exit), None when it did not
    build_variant: str | None = None  # tunehost's own build (built.json): "native" or "portable"
    build_isa: tuple[str, ...] | None = None  # the /proc/cpuinfo flags tunehost's build was compiled for
    file_format: str | None = None  # "elf", "script", "other", "unreadable" (the llama_install sample); None: unknown
    script: str | None = None  # a script's #! line ("/usr/bin/env python3"): a wrapper, not a llama.cpp build
    wraps: tuple[str, ...] = ()  # absolute paths of llama.cpp programs the script names (what it probably runs)

    @property
    def gpu_backends(self) -> tuple[str, ...]:
        return tuple(b for b in self.backends if b in GPU_BACKENDS)


@dataclass(frozen=True)
class LlamaBuildFacts:
    binaries: tuple[LlamaBinary, ...] = ()
    search_dirs: tuple[str, ...] = ()  # "dir (from $LLAMA_CPP_DIR)"; PATH is always searched
    reference_date: _dt.date | None = None  # "today" for age judgements: when the search was sampled
    reason: str | None = None  # why nothing could be searched
    hidden_servers: tuple[str, ...] = ()  # "llama-server (pid 812)": running, executable not readable (not root)
    cpu_flags: frozenset[str] | None = None  # this CPU's /proc/cpuinfo flags (None: unknown, not x86)
    # $TUNEHOST_LLAMA_BIN_DIR as searched: (directory, whether it existed); None when it was not set
    configured_bin_dir: tuple[str, bool] | None = None

    @property
    def bin_dir_problem(self) -> str | None:
        """What is wrong with $TUNEHOST_LLAMA_BIN_DIR as the search found it ("which is not a directory", "which has
        no llama-bench"), or None: unset, or it holds llama-bench. bench and tune refuse such a setting."""
        if self.configured_bin_dir is None:
            return None
        if not self.configured_bin_dir[1]:
            return "which is not a directory"
        if not any(b.name == "llama-bench" and b.found_in == "$TUNEHOST_LLAMA_BIN_DIR" for b in self.binaries):
            return "which has no llama-bench"
        return None

    @classmethod
    def gather(cls, host: "Host") -> "LlamaBuildFacts":
        return cls.gather_named(host, {})

    @classmethod
    def gather_named(cls, host: "Host", named: Mapping[str, str]) -> "LlamaBuildFacts":
        """gather, for a run where the user named the program to run (``{"llama-bench": "/abs/path"}`` from
        --llama-bench PATH): every other file of that name is listed but not run (not even `--version`): a root
        tool runs exactly what it was told."""
        install = host.sample("llama_install")
        install = install if isinstance(install, dict) else {}
        search = [f"{d.get('dir')} (from {d.get('from')}{'' if d.get('exists', True) else ', absent'})"
                  for d in install.get("search_dirs") or () if isinstance(d, dict) and d.get("dir")]
        reference = _date(install.get("sampled_at")) or _date(host.manifest.get("created"))
        if reference is None and host.live:
            reference = _dt.date.today()
        running, hidden = _running_servers(host)
        installed: list[dict[str, Any]] = [b for b in install.get("binaries") or ()
                                           if isinstance(b, dict) and isinstance(b.get("path"), str) and b.get("name")]
        for row in running:  # the same file found on PATH is run by the rules for found binaries
            if not row.get("deleted") and row["name"] in PROGRAMS and host.which(row["name"]) == row["path"]:
                row.update({"from": "PATH", "refusal": None})
        for row in installed:  # a found binary that is also running: one entry, judged first
            same = next((r for r in running if r["path"] == row["path"] and not r.get("deleted")), None)
            if same is not None:
                same.update({k: v for k, v in row.items() if k not in ("pids", "refusal")}, refusal=None)
        candidates = running + [b for b in installed if all(b["path"] != r["path"] or r.get("deleted")
                                                            for r in running)]
        known = {c["path"] for c in candidates}
        for name in PROGRAMS:  # PATH, also for snapshots that only recorded which.json
            path = host.which(name)
            if path and path not in known and all(c["name"] != name or c.get("from") != "PATH" for c in candidates):
                candidates.append({"name": name, "path": path, "from": "PATH"})
                known.add(path)
        candidates = [dict(row, refusal=f"another {row['name']} was named ({named[row['name']]}): no other file "
                           "of that name is run")
                      if row["name"] in named and os.path.realpath(str(row["path"])) != os.path.realpath(
                          named[row["name"]]) else row for row in candidates]
        flags = cpu_flags(host)
        binaries = tuple(_binary(host, c, flags) for c in candidates)
        reason = None if (install or host.live) else host.sample_errors.get("llama_install")
        configured = next(((str(d["dir"]), d.get("exists", True) is not False) for d in install.get("search_dirs") or ()
                           if isinstance(d, dict) and d.get("from") == "$TUNEHOST_LLAMA_BIN_DIR" and d.get("dir")), None)
        return cls(binaries, tuple(search), reference, reason, tuple(hidden), flags, configured)


# server kinds whose executable is a llama.cpp build (llama-build judges the one that is serving first)
RUNNING_LLAMA_KINDS = ("llama-server", "rpc-server")


def _running_servers(host: "Host") -> tuple[list[dict[str, Any]], list[str]]:
    """Rows like the llama_install sample's for the llama.cpp servers running now (from /proc/PID/exe), and the
    servers whose executable could not be read."""
    from tunehost.facts.processes import SERVER_KINDS, process_list

    processes, _ = process_list(host)
    run_uid = os.geteuid() if host.live else host.manifest.get("uid")
    rows: dict[str, dict[str, Any]] = {}
    hidden: list[str] = []
    for proc in processes or ():
        if proc.is_self or proc.server not in RUNNING_LLAMA_KINDS:
            continue
        if not proc.exe or not proc.exe.startswith("/"):
            hidden.append(f"{proc.server} (pid {proc.pid})")
            continue
        key = proc.exe + (" (deleted)" if proc.exe_deleted else "")
        if key in rows:
            rows[key]["pids"].append(proc.pid)
            continue
        kind = SERVER_KINDS[proc.server or ""]
        read = [*kind.host_options, *kind.port_options, *kind.key_options, "--rpc", "-ngl", "--n-gpu-layers",
                "--gpu-layers", "-dev", "--device"]
        started = " ".join(f"{n} {'(set)' if proc.options[n] == REDACTED else proc.options[n]}"
                           for n in dict.fromkeys(read) if n in proc.options)
        info = proc.exe_file
        libs = [str(x) for x in info.get("libs") or () if isinstance(x, str)] if isinstance(info.get("libs"), list) else []
        rows[key] = {"name": os.path.basename(proc.exe), "path": proc.exe, "from": "running process",
                     "pids": [proc.pid], "libs": libs, "started_with": started or None,
                     "mtime": info.get("mtime") if isinstance(info.get("mtime"), str) else None,
                     "deleted": proc.exe_deleted, "refusal": version_refusal(proc, run_uid)}
    return list(rows.values()), hidden


def version_refusal(proc: Any, run_uid: Any) -> str | None:
    """Why the running server's file must not be run with `--version`, or None when it is as safe as a found binary.

    tunehost often runs as root: executing a file another user can change would hand that user root.
    """
    info = proc.exe_file
    if proc.exe_deleted:
        return "the file it was started from was deleted or replaced since (the build it serves is not on disk)"
    if info.get("same_file") is not True:
        return "the path does not lead to the running file on this host (a container's filesystem?)"
    uid, mode = info.get("uid"), info.get("mode")
    if not isinstance(uid, int) or not isinstance(mode, int):
        return "its owner and permissions were not recorded"
    if uid not in (0, run_uid):
        return (f"the file belongs to uid {uid}: running another user's program as "
                f"{'root' if run_uid == 0 else f'uid {run_uid}'} would hand that user this account")
    if mode & 0o022:
        return f"the file is writable by group or others (mode {mode:o})"
    dir_uid, dir_mode = info.get("dir_uid"), info.get("dir_mode")
    if not isinstance(dir_uid, int) or not isinstance(dir_mode, int):
        return "its folder's owner and permissions were not recorded"
    if dir_uid not in (0, run_uid) or dir_mode & 0o022:
        return (f"its folder belongs to uid {dir_uid} (mode {dir_mode:o}): the file could be swapped before it runs")
    return None


def _date(value: Any) -> _dt.date | None:
    if not isinstance(value, str) or len(value) < 10:
        return None
    try:
        return _dt.date.fromisoformat(value[:10])
    except ValueError:
        return None


def _binary(host: "Host", row: Mapping[str, Any], flags: frozenset[str] | None) -> LlamaBinary:
    name, path = str(row["name"]), str(row["path"])
    libs = tuple(str(x) for x in row.get("libs") or () if isinstance(x, str))
    argv = [path, "--version"]
    refusal = row.get("refusal") if isinstance(row.get("refusal"), str) else None
    result = None if refusal else host.run(argv, timeout=15.0)
    text = "" if result is None else (result.stdout or "") + "\n" + (result.stderr or "")
    version = parse_llama_version(text)
    raw = "; ".join(line.strip() for line in text.splitlines()
                    if line.strip().startswith(("version:", "built with", "ggml_cuda_init: found", "Device ",
                                                "load_backend", "ggml_vulkan: Found")))[:400] or None
    backends, source = version.backends, "--version output"
    crash = explain_exit(name, result.rc, flags) if result is not None and result.rc < 0 else None
    marker = _marker(host, row["marker"]) if isinstance(row.get("marker"), str) else {}
    if not version.build_number:
        version = _with_marker(marker, version)
    kind = row.get("file") if isinstance(row.get("file"), dict) else {}
    file_kind = kind.get("format")
    built_with = MARKER_BACKENDS.get(marker.get("backend")) if isinstance(marker.get("backend"), str) else None
    if not backends and built_with:  # tunehost's own build: built.json says which --backend it was built with
        backends, source = (built_with,), f"built.json: scripts/build_llama_cpp.py --backend {marker['backend']}"
    lib_backends = backends_from_libs(libs)
    if not any(b in GPU_BACKENDS for b in backends) and any(b in GPU_BACKENDS for b in lib_backends):
        backends, source = lib_backends, "libraries beside the binary"
    elif not backends and lib_backends:
        backends, source = lib_backends, "libraries beside the binary"
    # llama-bench and, since common/arg.cpp has it, llama-server list the devices their backends see
    if not backends and name in ("llama-bench", "llama-server") and not refusal and file_kind != "script":
        listed = host.run([path, "--list-devices"], timeout=15.0)
        if listed is not None and listed.ok and "Available devices" in listed.stdout:
            devices = parse_list_devices(listed.stdout)
            backends, source = (devices or (CPU,)), "--list-devices"
    if not backends and version.known and not libs and (version.build_number or 0) >= 4500:
        # static build whose --version loads no GPU backend: since ~b4500 builds announce the GPU backends they
        # register (ggml_cuda_init / ggml_vulkan lines) before printing the version, so none means CPU only
        backends, source = (CPU,), "--version output names no GPU backend (static build)"
    built = build_date(version.build_number)
    built_source = "build number (approximate release date)" if built else None
    mtime = row.get("mtime") if isinstance(row.get("mtime"), str) else None
    if built is None and mtime:
        built, built_source = _date(mtime), "file modification time"
    pids = tuple(p for p in row.get("pids") or () if isinstance(p, int))
    started = row.get("started_with") if isinstance(row.get("started_with"), str) else None
    file_format = kind.get("format") if kind.get("format") in ("elf", "script", "other", "unreadable") else None
    script = None
    if file_format == "script":
        script = kind["shebang"][:200] if isinstance(kind.get("shebang"), str) else ""
    wraps = tuple(w[:300] for w in kind.get("wraps") or () if isinstance(w, str) and w.startswith("/"))[:5] \
        if isinstance(kind.get("wraps"), list) else ()
    return LlamaBinary(name, path, str(row.get("from") or "PATH"), version,
                       " ".join(argv) if result is not None else None, raw, libs, tuple(backends),
                       source if backends else None, built, built_source, mtime, pids, started, refusal,
                       row.get("deleted") is True, crash,
                       marker.get("variant") if isinstance(marker.get("variant"), str) else None, _isa(marker),
                       file_format, script, wraps if file_format == "script" else ())


def _marker(host: "Host", path: str) -> dict[str, Any]:
    """scripts/build_llama_cpp.py's <ver>/built.json: the pinned build number and commit, the variant kept
    (native/portable) and the ISA it was compiled for; {} when unreadable."""
    try:
        data = json.loads(host.files.read(path) or "")
    except (ValueError, RecursionError):  # a snapshot's file nested too deep is unreadable, never a traceback
        return {}
    return data if isinstance(data, dict) else {}


def _isa(marker: Mapping[str, Any]) -> tuple[str, ...] | None:
    isa = marker.get("isa")
    if not isinstance(isa, list):
        return None
    return tuple(sorted({f for f in isa if isinstance(f, str) and f in ISA_FLAGS}))


def _with_marker(data: Mapping[str, Any], version: LlamaVersion) -> LlamaVersion:
    number = data.get("llama_cpp_build_number")
    commit = data.get("llama_cpp_commit")
    if not isinstance(number, int):
        return version
    from dataclasses import replace

    return replace(version, build_number=number, commit=commit if isinstance(commit, str) else version.commit)


# ---- a tolerant view of the GPU facts (tunehost.facts.gpu belongs to the GPU group) ----

@dataclass(frozen=True)
class GpuView:
    vendor: str | None  # "nvidia", "amd", "intel"
    name: str | None
    compute_capability: str | None = None  # NVIDIA "8.6"
    memory_total_mib: float | None = None
    processes: tuple[tuple[int | None, str, float | None], ...] = ()  # (pid, name, MiB used)
    display_active: bool | None = None
    integrated: bool | None = None  # an iGPU/APU sharing system RAM


def gpu_views(facts: "HostFacts") -> tuple[tuple[GpuView, ...] | None, str | None]:
    """(GPUs, None), or (None, why unknown). Never raises, whatever tunehost.facts.gpu looks like."""
    try:
        from tunehost.facts import gpu as gpu_module  # noqa: PLC0415 - optional, written by another group
    except Exception as exc:  # absent or broken module
        return None, f"GPU facts unavailable ({exc.__class__.__name__})"
    kind = next((getattr(gpu_module, n) for n in ("GpuFacts", "GPUFacts", "GpuDevices") if hasattr(gpu_module, n)), None)
    if kind is None:
        return None, "GPU facts unavailable (no GpuFacts)"
    try:
        gathered = facts.get(kind)
        items = next((getattr(gathered, n) for n in ("gpus", "devices", "cards") if hasattr(gathered, n)), None)
        if items is None:
            return None, "GPU facts unavailable (no GPU list)"
        return tuple(_gpu_view(g) for g in items or ()), None
    except LookupError:
        return None, "GPU facts not gathered"
    except Exception as exc:
        return None, f"GPU facts unavailable ({exc.__class__.__name__}: {exc})"


def _attr(obj: Any, *names: str) -> Any:
    for n in names:
        value = obj.get(n) if isinstance(obj, dict) else getattr(obj, n, None)
        if value is not None:
            return value
    return None


def _gpu_view(gpu: Any) -> GpuView:
    vendor = _attr(gpu, "vendor", "driver")
    vendor = str(vendor).lower() if vendor is not None else None
    if vendor:
        vendor = "nvidia" if "nvidia" in vendor or vendor == "0x10de" else "amd" if any(
            w in vendor for w in ("amd", "amdgpu", "0x1002", "radeon")) else "intel" if any(
            w in vendor for w in ("intel", "i915", "xe", "0x8086")) else vendor
    cc = _attr(gpu, "compute_capability", "cuda_compute_capability", "cc")
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        cc = f"{cc[0]}.{cc[1]}"
    procs = []
    for p in _attr(gpu, "processes", "compute_processes") or ():
        mib = _attr(p, "used_mib", "used_memory_mib", "memory_mib", "vram_mib")
        if mib is None:
            used_bytes = _attr(p, "used_bytes", "used_memory_bytes", "memory_bytes")
            mib = used_bytes / 2**20 if isinstance(used_bytes, (int, float)) else None
        pid = _attr(p, "pid")
        procs.append((pid if isinstance(pid, int) else None, str(_attr(p, "name", "process_name") or ""),
                      float(mib) if isinstance(mib, (int, float)) else None))
    total = _attr(gpu, "memory_total_mib", "vram_total_mib", "total_mib")
    display = _attr(gpu, "display_active", "display_attached", "display")
    integrated = _attr(gpu, "integrated")
    return GpuView(vendor, _attr(gpu, "name", "product_name"), str(cc) if cc else None,
                   float(total) if isinstance(total, (int, float)) else None, tuple(procs),
                   display if isinstance(display, bool) else None, integrated if isinstance(integrated, bool) else None)
