"""Live samplers: observations that need time or live APIs (process CPU, swap activity, sockets, NVML).

Each sampler returns JSON-able data. `tunehost snapshot` stores it as samples/<name>.json and a snapshot replays it,
so the same facts come out live and from the snapshot. Samplers record no secrets: for other processes only the
executable name, and for inference servers only the flags tunehost judges (host, port, whether an API key is set).
See docs/snapshot.md for each sample's format.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from tunehost.bounds import whole_text

if TYPE_CHECKING:
    from tunehost.host import Host

SAMPLERS: dict[str, Callable[["Host"], Any]] = {}

ACTIVITY_WINDOW_S = 0.5
VMSTAT_COUNTERS = ("pswpin", "pswpout", "pgmajfault")

# executable name -> kind of inference server whose flags tunehost reads
SERVER_EXECUTABLES = {
    "llama-server": "llama-server",
    "llama-server.exe": "llama-server",
    "ollama": "ollama",
    "lms": "lmstudio",
    "lm-studio": "lmstudio",
    "koboldcpp": "koboldcpp",
    "llamafile": "llamafile",
}


def sampler(name: str) -> Callable[[Callable[["Host"], Any]], Callable[["Host"], Any]]:
    """Register a live sampler under `name` (its snapshot file is samples/<name>.json)."""

    def register(fn: Callable[["Host"], Any]) -> Callable[["Host"], Any]:
        SAMPLERS[name] = fn
        return fn

    return register


def parse_vmstat(text: str | None) -> dict[str, int]:
    counters: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        value = whole_text(parts[1]) if len(parts) == 2 else None
        if value is not None:
            counters[parts[0]] = value
    return counters


def server_kind(name: str, cmdline: list[str]) -> str | None:
    """Which inference server a process is, from its executable name and command line; None if it is none."""
    if name in SERVER_EXECUTABLES:
        return SERVER_EXECUTABLES[name]
    joined = " ".join(cmdline[:4])
    if "vllm" in joined and ("serve" in joined or "api_server" in joined):
        return "vllm"
    if "llama_cpp.server" in joined:
        return "llama-cpp-python"
    if name.startswith("LM Studio") or name == "LM-Studio":
        return "lmstudio"
    return None


def server_flags(cmdline: list[str]) -> dict[str, Any]:
    """The flags tunehost judges, never their secret values: host, port, and whether an API key is given."""
    flags: dict[str, Any] = {"host": None, "port": None, "api_key": False}
    for i, arg in enumerate(cmdline):
        key, _, inline = arg.partition("=")
        value = inline if _ else (cmdline[i + 1] if i + 1 < len(cmdline) else None)
        if key in ("--host", "--bind"):
            flags["host"] = value
        elif key == "--port":
            flags["port"] = value
        elif key in ("--api-key", "--api-key-file", "--api_key", "--password"):  # --password: koboldcpp
            flags["api_key"] = True
    return flags


def _process_rows(psutil: Any) -> dict[int, dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    for proc in psutil.process_iter(["pid", "ppid", "name", "username", "memory_info", "cmdline"]):
        info = proc.info
        name = info.get("name") or ""
        cmdline = info.get("cmdline") or []
        row: dict[str, Any] = {
            "pid": info["pid"],
            "ppid": info.get("ppid"),
            "name": name,
            "username": info.get("username"),
            "rss_bytes": getattr(info.get("memory_info"), "rss", None),
        }
        kind = server_kind(name, cmdline)
        if kind:
            row["server"] = kind
            row["flags"] = server_flags(cmdline)
            if kind == "llama-server" or kind == "llamafile":
                row["api_key_env"] = _has_env(proc, "LLAMA_API_KEY")
                # llama-server also reads --host/--port from LLAMA_ARG_HOST/LLAMA_ARG_PORT (addresses, not secrets)
                row["host_env"] = _env_value(proc, "LLAMA_ARG_HOST")
                row["port_env"] = _env_value(proc, "LLAMA_ARG_PORT")
            if kind == "ollama":
                row["ollama_host_env"] = _env_value(proc, "OLLAMA_HOST")
        rows[info["pid"]] = row
    return rows


def _environ(proc: Any) -> dict[str, str]:
    try:
        return proc.environ()
    except Exception:  # other users' processes: not readable without root
        return {}


def _has_env(proc: Any, name: str) -> bool | None:
    env = _environ(proc)
    return (name in env) if env else None


def _env_value(proc: Any, name: str) -> str | None:
    # OLLAMA_HOST / LLAMA_ARG_HOST / LLAMA_ARG_PORT are addresses, not secrets; nothing else of the environment is kept
    return _environ(proc).get(name)


@sampler("processes")
def sample_processes(host: "Host") -> list[dict[str, Any]]:
    import psutil

    own = os.getpid()
    rows = _process_rows(psutil)
    for row in rows.values():
        row["self"] = row["pid"] == own or row.get("ppid") == own
    return sorted(rows.values(), key=lambda r: r["pid"])


@sampler("activity")
def sample_activity(host: "Host") -> dict[str, Any]:
    """CPU use per process and swap/major-fault counts over a short window."""
    import psutil

    own = os.getpid()
    procs = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            proc.cpu_percent(None)
            procs.append(proc)
        except Exception:
            continue
    before = parse_vmstat(host.files.read("/proc/vmstat"))
    started = time.monotonic()
    time.sleep(ACTIVITY_WINDOW_S)
    after = parse_vmstat(host.files.read("/proc/vmstat"))
    interval = time.monotonic() - started
    busy = []
    for proc in procs:
        try:
            pct = proc.cpu_percent(None)
        except Exception:
            continue
        if pct <= 0:
            continue
        pid = proc.info["pid"]
        try:
            ppid = proc.ppid()
        except Exception:
            ppid = None
        busy.append({"pid": pid, "name": proc.info.get("name") or "", "cpu_percent": round(pct, 1),
                     "self": pid == own or ppid == own})
    busy.sort(key=lambda r: -r["cpu_percent"])
    return {
        "interval_s": round(interval, 3),
        "vmstat_delta": {k: after[k] - before[k] for k in VMSTAT_COUNTERS if k in after and k in before},
        "cpu_count": psutil.cpu_count() or 1,
        "cpu_percent_total": round(sum(r["cpu_percent"] for r in busy if not r["self"]), 1),
        "processes": busy,
    }


def process_cpu_seconds(exclude: set[int] | frozenset[int] = frozenset()) -> dict[int, tuple[str, float]]:
    """pid -> (name, user+system CPU seconds) of every live process except tunehost, its children and `exclude`.

    Not a cached sample: the bench watcher diffs two calls taken minutes apart.
    """
    import psutil

    own = os.getpid()
    try:
        ours = {own, *(c.pid for c in psutil.Process(own).children(recursive=True))} | set(exclude)
    except Exception:
        ours = {own} | set(exclude)
    found: dict[int, tuple[str, float]] = {}
    for proc in psutil.process_iter(["pid", "name", "cpu_times"]):
        info = proc.info
        times = info.get("cpu_times")
        if info["pid"] in ours or times is None:
            continue
        found[info["pid"]] = (info.get("name") or "?", times.user + times.system)
    return found


@sampler("listeners")
def sample_listeners(host: "Host") -> list[dict[str, Any]]:
    """Listening TCP sockets: address, port, owning pid (None when not visible without root)."""
    import psutil

    rows = []
    try:
        conns = psutil.net_connections(kind="tcp")
    except Exception:
        return []
    for conn in conns:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr:
            continue
        rows.append({"address": conn.laddr.ip, "port": conn.laddr.port, "pid": conn.pid})
    rows.sort(key=lambda r: (r["port"], r["address"]))
    # de-duplicate (SO_REUSEPORT workers)
    unique = []
    for row in rows:
        if not unique or unique[-1] != row:
            unique.append(row)
    return unique


try:  # the NVML sampler registers itself; pynvml is imported only when it runs live
    import tunehost.host.nvml  # noqa: E402,F401 (imported for its @sampler registration)
except ImportError:  # pragma: no cover - a partial install must not break the other samplers
    pass
import tunehost.host.measure  # noqa: E402,F401 (imported for its @sampler registration)


# llama.cpp programs tunehost looks for, and the search-directory label of its own build cache
LLAMA_PROGRAMS = ("llama-server", "llama-cli", "llama-bench")
CACHE_SOURCE = "tunehost cache (scripts/build_llama_cpp.py)"


def llama_search_dirs(environ: dict[str, str] | None = None) -> list[dict[str, str]]:
    """Directories searched for llama.cpp besides PATH, each with the setting it comes from (in search order)."""
    env = os.environ if environ is None else environ
    dirs: list[dict[str, str]] = []

    def add(path: str, source: str) -> None:
        path = os.path.abspath(os.path.expanduser(path))
        if all(d["dir"] != path for d in dirs):
            dirs.append({"dir": path, "from": source})

    if env.get("TUNEHOST_LLAMA_BIN_DIR"):
        add(env["TUNEHOST_LLAMA_BIN_DIR"], "$TUNEHOST_LLAMA_BIN_DIR")
    if env.get("LLAMA_CPP_DIR"):
        base = env["LLAMA_CPP_DIR"]
        add(base, "$LLAMA_CPP_DIR")
        add(os.path.join(base, "build", "bin"), "$LLAMA_CPP_DIR/build/bin")
        add(os.path.join(base, "bin"), "$LLAMA_CPP_DIR/bin")
    cache = env.get("TUNEHOST_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tunehost")
    cache_builds = os.path.join(cache, "llama.cpp")
    try:
        versions = sorted(os.listdir(cache_builds), reverse=True)
    except OSError:
        versions = []
    for version in versions:
        add(os.path.join(cache_builds, version, "bin"), CACHE_SOURCE)
    return dirs


def llama_program_candidates(name: str, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(path, where it was found) of every executable `name`, in the one search order all of tunehost uses:
    $TUNEHOST_LLAMA_BIN_DIR, $LLAMA_CPP_DIR (itself, build/bin, bin), PATH, then tunehost's build cache."""
    import shutil

    env = os.environ if environ is None else environ
    dirs = llama_search_dirs(dict(env))
    configured = [d for d in dirs if d["from"] != CACHE_SOURCE]
    cached = [d for d in dirs if d["from"] == CACHE_SOURCE]
    found: list[tuple[str, str]] = []
    for entry in configured:
        path = os.path.join(entry["dir"], name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            found.append((path, entry["from"]))
    on_path = shutil.which(name, path=env.get("PATH", os.defpath))
    if on_path:
        found.append((on_path, "PATH"))
    for entry in cached:
        path = os.path.join(entry["dir"], name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            found.append((path, entry["from"]))
    return found


def _ggml_libs(binary: str) -> list[str]:
    """ggml/llama shared libraries next to a binary, or in ../lib of its install prefix."""
    real = os.path.realpath(binary)
    names: set[str] = set()
    for folder in {os.path.dirname(real), os.path.join(os.path.dirname(os.path.dirname(real)), "lib")}:
        try:
            names.update(n for n in os.listdir(folder) if n.startswith(("libggml", "libllama")))
        except OSError:
            continue
    return sorted(names)


def _mtime(path: str) -> str | None:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.stat(path).st_mtime))
    except OSError:
        return None


@sampler("llama_install")
def sample_llama_install(host: "Host") -> dict[str, Any]:
    """Where llama.cpp programs are: PATH plus the configured directories, with the ggml libraries beside them.

    Stored so a snapshot replays the same search; the `--version` outputs themselves are commands (cmd/).
    """
    dirs = llama_search_dirs()
    binaries: list[dict[str, Any]] = []
    seen: set[str] = set()
    candidates = [(name, path, source) for name in LLAMA_PROGRAMS for path, source in llama_program_candidates(name)]
    for name, path, source in candidates:
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        row: dict[str, Any] = {"name": name, "path": path, "from": source, "mtime": _mtime(real),
                               "libs": _ggml_libs(path)}
        marker = os.path.join(os.path.dirname(os.path.dirname(real)), "built.json")
        if os.path.isfile(marker):
            row["marker"] = marker
        binaries.append(row)
    for entry in dirs:
        entry["exists"] = os.path.isdir(entry["dir"])
    return {"sampled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "path_searched": True,
            "search_dirs": dirs, "binaries": binaries}
