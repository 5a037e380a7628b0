"""Live samplers: observations that need time or live APIs (process CPU, swap activity, sockets, NVML).

Each sampler returns JSON-able data. `tunehost snapshot` stores it as samples/<name>.json and a snapshot replays it,
so the same facts come out live and from the snapshot. Samplers record no secrets: for other processes only the
executable name, and for inference servers only the flags tunehost judges (host, port, whether an API key is set).
See docs/snapshot.md for each sample's format.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Callable

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
        if len(parts) == 2 and parts[1].isdigit():
            counters[parts[0]] = int(parts[1])
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
        elif key in ("--api-key", "--api-key-file", "--api_key"):
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
    # OLLAMA_HOST is an address, not a secret; nothing else of the environment is kept
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
