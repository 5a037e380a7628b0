"""Live samplers: observations that need time or live APIs (process CPU, swap activity, sockets, NVML).

Each sampler returns JSON-able data. `tunehost snapshot` stores it as samples/<name>.json and a snapshot replays it,
so the same facts come out live and from the snapshot. Samplers record no secrets: for most processes only the
executable name; for candidate inference servers the raw facts tunehost judges (executable, argv[0], the options it
reads, a few variables, its sockets), every word through tunehost.host.redact first: never a key or a password.
See docs/snapshot.md for each sample's format.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from tunehost.bounds import whole_text

if TYPE_CHECKING:
    from tunehost.host import Host

SAMPLERS: dict[str, Callable[["Host"], Any]] = {}

# the activity sample: two back-to-back windows (cpu-hogs counts only load seen in both: a verdict from one
# half-second flipped run to run on a busy desktop); doctor --quick takes QUICK_ACTIVITY_WINDOW_S windows
ACTIVITY_WINDOWS = 2
ACTIVITY_WINDOW_S = 0.75
QUICK_ACTIVITY_WINDOW_S = 0.25
VMSTAT_COUNTERS = ("pswpin", "pswpout", "pgmajfault")
CPU_TICK_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")  # /proc/stat, in order

# words in a process's names (kernel name, executable, argv[0], the script an interpreter runs) that make it worth
# recording raw facts for: every inference server and proxy tunehost knows, and their likely successors
CANDIDATE_WORDS = ("llama", "ollama", "kobold", "vllm", "lms", "lm studio", "lm-studio", "rpc-server")
PYTHON_INTERPRETERS = re.compile(r"^(python[0-9.]*|pypy[0-9.]*)$")
# python options that take a value (the script or module comes after them)
_PYTHON_VALUE_OPTIONS = ("-W", "-X", "-Q")
# options recorded from a candidate's command line (after redaction), each with the shape its value must have;
# options with a secret name (tunehost.host.redact.is_secret_name) are recorded too, their value as REDACTED
_ADDRESS = re.compile(r"^[A-Za-z0-9._:\[\]%*-]{0,255}$")
_PORT = re.compile(r"^[0-9]{1,5}$")
_LISTEN = re.compile(r"^(https?://)?[A-Za-z0-9._:\[\]%*-]{0,255}$")
_ADDRESS_LIST = re.compile(r"^[A-Za-z0-9._:\[\],%-]{1,2000}$")
_GPU_LAYERS = re.compile(r"^(-?[0-9]{1,6}|auto|all)$")
_DEVICES = re.compile(r"^[A-Za-z0-9_,/-]{1,200}$")
RECORDED_OPTIONS: dict[str, re.Pattern[str]] = {
    "--host": _ADDRESS, "-H": _ADDRESS, "--bind": _ADDRESS, "--port": _PORT, "-p": _PORT,
    "--listen": _LISTEN, "-listen": _LISTEN, "--rpc": _ADDRESS_LIST,
    "-ngl": _GPU_LAYERS, "--n-gpu-layers": _GPU_LAYERS, "--gpu-layers": _GPU_LAYERS, "--gpulayers": _GPU_LAYERS,
    "-dev": _DEVICES, "--device": _DEVICES,
}
# environment variables recorded for candidates: addresses (the value, credentials removed) and keys (only "set")
ADDRESS_VARIABLES = ("OLLAMA_HOST", "LLAMA_ARG_HOST", "LLAMA_ARG_PORT")
KEY_VARIABLES = ("LLAMA_API_KEY", "VLLM_API_KEY")
_PLAIN_WORD = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_TITLE = re.compile(r"^([^/\s:]+): .*$", re.DOTALL)


def sampler(name: str) -> Callable[[Callable[["Host"], Any]], Callable[["Host"], Any]]:
    """Register a live sampler under `name` (its snapshot file is samples/<name>.json)."""

    def register(fn: Callable[["Host"], Any]) -> Callable[["Host"], Any]:
        SAMPLERS[name] = fn
        return fn

    return register


def parse_cpu_line(text: str | None) -> dict[str, int] | None:
    """/proc/stat's aggregate "cpu" line as {field: ticks} (CPU_TICK_FIELDS); None when absent or malformed."""
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [whole_text(v) for v in parts[1:1 + len(CPU_TICK_FIELDS)]]
            if len(values) < 4 or any(v is None for v in values):
                return None
            return dict(zip(CPU_TICK_FIELDS, values))  # type: ignore[arg-type]
    return None


def parse_vmstat(text: str | None) -> dict[str, int]:
    counters: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        value = whole_text(parts[1]) if len(parts) == 2 else None
        if value is not None:
            counters[parts[0]] = value
    return counters


@dataclass(frozen=True)
class RawProcess:
    """What the sampler read of one process, before anything is kept (argv and environment still unredacted)."""

    pid: int
    name: str = ""
    argv: tuple[str, ...] | None = None  # None: not readable
    exe_link: str | None = None  # readlink /proc/PID/exe; None: not readable
    environ: Mapping[str, str] | None = None  # None: not readable (another user's process)
    listeners: tuple[tuple[str, int], ...] | None = None  # None: its sockets are not visible
    exe_file: Mapping[str, Any] | None = None  # owner uid, mode, mtime, same_file, libs of the executable
    other_netns: bool = False  # in another network namespace (a container): its sockets are not visible from here


def script_and_command(argv: list[str]) -> tuple[str | None, str | None]:
    """(what an interpreter runs, the first plain word after the program) of a redacted argv."""
    rest = argv[1:]
    script = None
    if PYTHON_INTERPRETERS.match(os.path.basename(argv[0]) if argv else ""):
        i = 0
        while i < len(rest):
            word = rest[i]
            if word == "-m" and i + 1 < len(rest):
                script, rest = rest[i + 1], rest[i + 2:]
                break
            if word == "-c":
                return None, None  # inline code: nothing to name, nothing kept
            if word in _PYTHON_VALUE_OPTIONS:
                i += 2
                continue
            if not word.startswith("-"):
                script, rest = os.path.basename(word), rest[i + 1:]
                break
            i += 1
        else:
            rest = []
    command = rest[0] if rest and _PLAIN_WORD.match(rest[0]) else None
    return script, command


def recorded_options(argv: list[str]) -> dict[str, str]:
    """The options tunehost reads, from a redacted argv: {option as written: value}; the last one given wins."""
    from tunehost.host.redact import REDACTED, is_secret_name

    options: dict[str, str] = {}
    for i, word in enumerate(argv[1:], start=1):
        if not word.startswith("-"):
            continue
        name, eq, inline = word.partition("=")
        following = argv[i + 1] if i + 1 < len(argv) else None
        value = inline if eq else (following if following is not None and not following.startswith("--") else "")
        if is_secret_name(name):
            options[name] = REDACTED
        elif name in RECORDED_OPTIONS and value is not None and RECORDED_OPTIONS[name].match(value):
            options[name] = value
    return options


def address_value(value: str) -> str:
    """An address variable as kept: redacted, then only scheme://host:port (no credentials, path or query)."""
    from tunehost.host.redact import redact

    text = redact([value])[0].strip()
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)?([^/?#]*)", text)
    scheme, authority = (m.group(1) or "", m.group(2)) if m else ("", "")
    return (scheme + authority.rsplit("@", 1)[-1])[:300]


def is_candidate(raw: RawProcess) -> bool:
    """Whether raw facts are kept for a process: its names look like an inference server, or it listens on TCP."""
    argv = list(raw.argv or ())
    script, _ = script_and_command(argv) if argv else (None, None)
    names = " ".join(x for x in (raw.name, os.path.basename(raw.exe_link or ""),
                                 os.path.basename(argv[0]) if argv else "", script or "") if x).lower()
    return bool(raw.listeners) or any(word in names for word in CANDIDATE_WORDS) or names.endswith(".llamafile")


def candidate_row(raw: RawProcess) -> dict[str, Any]:
    """The raw facts kept for a candidate process (docs/snapshot.md, `processes`), every word redacted first."""
    from tunehost.host.redact import REDACTED, redact

    row: dict[str, Any] = {}
    argv = redact(raw.argv) if raw.argv else None
    # a rewritten process title ("sshd: alice@pts/0", "postgres: checkpointer") keeps only the program's name
    row["argv0"] = (_TITLE.sub(r"\1", argv[0]) if argv else "")[:4096] or None
    script, command = script_and_command(argv) if argv else (None, None)
    row["script"] = script[:256] if script else None
    row["command"] = command
    row["options"] = recorded_options(argv) if argv else {}
    exe = raw.exe_link
    if exe is not None and exe.endswith(" (deleted)"):
        exe = exe[: -len(" (deleted)")]
        row["exe_deleted"] = True
    row["exe"] = redact([exe])[0][:4096] if exe else None
    if raw.exe_file:
        row["exe_file"] = dict(raw.exe_file)
    if raw.environ is None:
        row["env"] = None
    else:
        env = {k: address_value(raw.environ[k]) for k in ADDRESS_VARIABLES if k in raw.environ}
        env.update({k: REDACTED for k in KEY_VARIABLES if k in raw.environ})
        row["env"] = env
    row["listeners"] = (None if raw.listeners is None or raw.other_netns else
                        [{"address": a, "port": p} for a, p in sorted(set(raw.listeners), key=lambda x: (x[1], x[0]))])
    if raw.other_netns:
        row["other_netns"] = True
    return row


def _exe_file(exe_link: str | None, pid: int) -> dict[str, Any] | None:
    """Owner, mode and mtime of a running executable (and of its folder), whether the path is the same file the process runs
    (not inside a container's mount namespace, not replaced), and the ggml libraries beside it."""
    if not exe_link or exe_link.endswith(" (deleted)"):
        return None
    try:
        st = os.stat(exe_link)
    except OSError:
        return None
    try:
        running = os.stat(f"/proc/{pid}/exe")
        same = (running.st_dev, running.st_ino) == (st.st_dev, st.st_ino)
    except OSError:
        same = None
    try:
        folder = os.stat(os.path.dirname(exe_link) or "/")
        dir_uid, dir_mode = folder.st_uid, folder.st_mode & 0o7777
    except OSError:
        dir_uid = dir_mode = None
    return {"uid": st.st_uid, "mode": st.st_mode & 0o7777, "dir_uid": dir_uid, "dir_mode": dir_mode, "same_file": same,
            "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.st_mtime)), "libs": ggml_libs(exe_link)}


def _listeners_by_pid(listeners: Any) -> dict[int, list[tuple[str, int]]]:
    """The listeners sample (one system-wide socket scan per run) as {pid: [(address, port)]}."""
    found: dict[int, list[tuple[str, int]]] = {}
    for row in listeners if isinstance(listeners, list) else ():
        if isinstance(row, dict) and isinstance(row.get("pid"), int):
            found.setdefault(row["pid"], []).append((row["address"], row["port"]))
    return found


def _read_raw(proc: Any, info: Mapping[str, Any], listeners: Mapping[int, list[tuple[str, int]]]) -> RawProcess:
    pid = info["pid"]
    cmdline = info.get("cmdline")
    try:
        exe_link: str | None = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe_link = None
    try:
        environ: Mapping[str, str] | None = proc.environ()
    except Exception:  # other users' processes: not readable without root
        environ = None
    try:
        os.listdir(f"/proc/{pid}/fd")  # its sockets are visible only when its fds are
        sockets: tuple[tuple[str, int], ...] | None = tuple(listeners.get(pid, ()))
    except OSError:
        sockets = None
    try:
        other_netns = os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError:
        other_netns = False  # unknown: its sockets count as visible only when they were seen
    return RawProcess(pid, info.get("name") or "", tuple(cmdline) if cmdline else None, exe_link, environ,
                      sockets, _exe_file(exe_link, pid), other_netns)


def _process_rows(psutil: Any, listeners: Mapping[int, list[tuple[str, int]]]) -> dict[int, dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    for proc in psutil.process_iter(["pid", "ppid", "name", "username", "memory_info", "cmdline"]):
        info = proc.info
        pid = info["pid"]
        row: dict[str, Any] = {
            "pid": pid,
            "ppid": info.get("ppid"),
            "name": info.get("name") or "",
            "username": info.get("username"),
            "rss_bytes": getattr(info.get("memory_info"), "rss", None),
        }
        light = RawProcess(pid, row["name"], tuple(info.get("cmdline") or ()) or None,
                           listeners=tuple(listeners.get(pid, ())))
        if is_candidate(light):
            row.update(candidate_row(_read_raw(proc, info, listeners)))
        rows[pid] = row
    return rows


@sampler("processes")
def sample_processes(host: "Host") -> list[dict[str, Any]]:
    import psutil

    own = os.getpid()
    rows = _process_rows(psutil, _listeners_by_pid(host.sample("listeners")))
    for row in rows.values():
        row["self"] = row["pid"] == own or row.get("ppid") == own
    return sorted(rows.values(), key=lambda r: r["pid"])


@sampler("activity")
def sample_activity(host: "Host") -> dict[str, Any]:
    """CPU use per process and swap/major-fault counts over ACTIVITY_WINDOWS back-to-back windows.

    Raw facts only: each window's per-process CPU (``windows``), and over the whole span the same as one window
    (``processes``, ``cpu_percent_total``, ``interval_s``: the format older tunehost reads). Whether a process is a
    hog, and whether a load that shows in one window only counts, is judged in facts/checks (cpu-hogs)."""
    import psutil

    own = os.getpid()
    half = getattr(host, "activity_window_s", None) or ACTIVITY_WINDOW_S
    procs: dict[int, Any] = {}
    names: dict[int, str] = {}
    started_at: dict[int, int] = {}  # pid -> the window its CPU counting started in

    def prime(window: int) -> None:  # processes started since the last look: their counting starts now
        for proc in psutil.process_iter(["pid", "name"]):
            pid = proc.info["pid"]
            if pid in procs:
                continue
            try:
                proc.cpu_percent(None)
            except Exception:
                continue
            procs[pid] = proc
            names[pid] = proc.info.get("name") or ""
            started_at[pid] = window

    def machine() -> tuple[dict[str, int] | None, float]:  # /proc/stat's cpu line, and tunehost's own CPU seconds
        times = os.times()
        return parse_cpu_line(host.files.read("/proc/stat")), times.user + times.system + times.children_user \
            + times.children_system

    prime(0)
    before = parse_vmstat(host.files.read("/proc/vmstat"))
    started = time.monotonic()
    marks = [started]
    looks = [machine()]
    per_window: list[dict[int, float]] = []
    for window in range(ACTIVITY_WINDOWS):
        time.sleep(half)
        marks.append(time.monotonic())
        looks.append(machine())
        used: dict[int, float] = {}
        for pid, proc in list(procs.items()):
            try:
                used[pid] = proc.cpu_percent(None) if started_at[pid] <= window else 0.0
            except Exception:
                procs.pop(pid, None)
        per_window.append(used)
        if window + 1 < ACTIVITY_WINDOWS:
            prime(window + 1)
    after = parse_vmstat(host.files.read("/proc/vmstat"))
    lengths = [b - a for a, b in zip(marks, marks[1:])]
    interval = marks[-1] - started
    selves: dict[int, bool] = {}

    def is_self(pid: int) -> bool:
        if pid not in selves:
            try:
                ppid = procs[pid].ppid() if pid in procs else None
            except Exception:
                ppid = None
            selves[pid] = pid == own or ppid == own
        return selves[pid]

    def rows(used: Mapping[int, float]) -> list[dict[str, Any]]:
        out = [{"pid": pid, "name": names.get(pid, ""),
                "cpu_percent": round(pct, 1), "self": is_self(pid)} for pid, pct in used.items() if pct > 0]
        return sorted(out, key=lambda r: (-r["cpu_percent"], r["pid"]))

    whole: dict[int, float] = {}  # CPU over the whole span: each window's share weighted by its length
    for used, length in zip(per_window, lengths):
        for pid, pct in used.items():
            whole[pid] = whole.get(pid, 0.0) + pct * length / interval
    busy = rows(whole)
    windows = []
    for i, (used, length) in enumerate(zip(per_window, lengths)):
        listed = rows(used)
        window: dict[str, Any] = {
            "interval_s": round(length, 3), "processes": listed,
            "cpu_percent_total": round(sum(r["cpu_percent"] for r in listed if not r["self"]), 1)}
        (first, own_first), (last, own_last) = looks[i], looks[i + 1]
        if first is not None and last is not None:  # machine-wide: sees jobs that ended inside the window too
            window["cpu_ticks"] = {k: last[k] - first[k] for k in CPU_TICK_FIELDS if k in first and k in last}
            window["self_cpu_s"] = round(own_last - own_first, 4)
        windows.append(window)
    return {
        "interval_s": round(interval, 3),
        "vmstat_delta": {k: after[k] - before[k] for k in VMSTAT_COUNTERS if k in after and k in before},
        "cpu_count": psutil.cpu_count() or 1,
        "cpu_percent_total": round(sum(r["cpu_percent"] for r in busy if not r["self"]), 1),
        "processes": busy,
        "windows": windows,
        "ticks_per_s": os.sysconf("SC_CLK_TCK"),
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


def cpu_seconds_of(pids: set[int] | frozenset[int]) -> float:
    """user+system CPU seconds of the given live processes and their children (gone ones count 0)."""
    return sum(tree_cpu_seconds(pids).values())


def tree_cpu_seconds(pids: set[int] | frozenset[int]) -> dict[int, float]:
    """pid -> user+system CPU seconds of each given live process and each of its children (gone ones absent): what
    a server tunehost measures used, per process, so the bench watch can add up each one's own increase
    (tunehost.bench.server.cpu) instead of a total that drops when a child exits."""
    import psutil

    found: dict[int, float] = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            family = [proc, *proc.children(recursive=True)]
        except Exception:
            continue
        for member in family:
            try:
                times = member.cpu_times()
            except Exception:
                continue
            found[member.pid] = times.user + times.system
    return found


def listening_pids(ports: set[int]) -> set[int]:
    """The processes listening on these TCP ports on this host (those visible to this user)."""
    return {int(row["pid"]) for row in sample_listeners(None) if row.get("port") in ports and row.get("pid")}  # type: ignore[arg-type]


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


@sampler("nvml")
def sample_nvml(host: "Host") -> dict[str, Any]:
    """NVIDIA GPUs through NVML (tunehost.host.nvml, imported only when this live sampler runs)."""
    from tunehost.host.nvml import sample_nvml as read_nvml

    return read_nvml(host)


# The `measure` sampler lives in the probes layer (tunehost.probes.sampler), above the facts it uses: a run that
# measures imports it, and so declares that read to the host layer (host/ never imports what sits above it).


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


BIN_DIR_ENV = "TUNEHOST_LLAMA_BIN_DIR"


def llama_bin_dir_problem(environ: Mapping[str, str] | None = None, program: str = "llama-bench") -> str | None:
    """Why $TUNEHOST_LLAMA_BIN_DIR cannot be used for `program` (one line), or None when it is unset or holds an
    executable `program`. Set, it is the user's choice of build: tunehost never falls back to another one."""
    from tunehost.printable import one_line

    env = os.environ if environ is None else environ
    value = env.get(BIN_DIR_ENV)
    if not value:
        return None
    folder = os.path.abspath(os.path.expanduser(value))
    shown = one_line(value, 200)
    if not os.path.isdir(folder):
        return (f"{BIN_DIR_ENV} is set to {shown}, which is not a directory; point it at a llama.cpp build's bin "
                f"directory (scripts/build_llama_cpp.py prints one) or unset it")
    binary = os.path.join(folder, program)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        return (f"{BIN_DIR_ENV} is set to {shown}, which has no executable {program}; point it at a llama.cpp "
                f"build's bin directory (scripts/build_llama_cpp.py prints one) or unset it")
    return None


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


def ggml_libs(binary: str) -> list[str]:
    """ggml/llama shared libraries next to a binary, or in ../lib of its install prefix."""
    real = os.path.realpath(binary)
    names: set[str] = set()
    for folder in {os.path.dirname(real), os.path.join(os.path.dirname(os.path.dirname(real)), "lib")}:
        try:
            names.update(n for n in os.listdir(folder) if n.startswith(("libggml", "libllama")))
        except OSError:
            continue
    return sorted(names)


# an absolute path to a llama.cpp program inside a wrapper script (exec line, os.execv argument, ...)
_WRAPPED = re.compile(r"(?<![\w/.-])(/[^\s'\"()\[\];|&<>$`\\,]*/(?:llama-[\w.-]+|rpc-server))(?![\w/.-])")
SCRIPT_READ_BYTES = 16384


def _file_kind(path: str) -> dict[str, Any]:
    """What the file is, as read: {"format": "elf"|"script"|"other"|"unreadable"}; a script adds its #! line and
    the absolute paths of llama.cpp programs it names (what it probably wraps). Paths only, never the rest of the
    script (a wrapper may hold an API key)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SCRIPT_READ_BYTES)
    except OSError as exc:
        return {"format": "unreadable", "error": exc.strerror or exc.__class__.__name__}
    if head.startswith(b"\x7fELF"):
        return {"format": "elf"}
    if not head.startswith(b"#!"):
        return {"format": "other"}
    text = head.decode("utf-8", "replace")
    shebang = text.splitlines()[0][2:].strip()[:200]
    own = os.path.realpath(path)
    wraps = [m for m in dict.fromkeys(_WRAPPED.findall(text)) if os.path.realpath(m) != own][:5]
    return {"format": "script", "shebang": shebang, "wraps": wraps}


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
                               "libs": ggml_libs(path), "file": _file_kind(real)}
        marker = os.path.join(os.path.dirname(os.path.dirname(real)), "built.json")
        if os.path.isfile(marker):
            row["marker"] = marker
        binaries.append(row)
    for entry in dirs:
        entry["exists"] = os.path.isdir(entry["dir"])
    return {"sampled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "path_searched": True,
            "search_dirs": dirs, "binaries": binaries}
