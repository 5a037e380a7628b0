"""Process facts: what runs beside llama.cpp — CPU hogs, inference servers and their sockets, the graphical session.

Sources: the `processes`, `activity` and `listeners` samples (formats in docs/snapshot.md) and
`systemctl get-default`. A missing sample leaves its part unknown (None plus the reason). The `processes` sample
holds raw facts (executable, argv[0], options, a few variables, sockets); which server a process is, and where it
listens, is decided here (SERVER_KINDS, classify), so an old snapshot is re-judged by newer code.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from tunehost.host.redact import REDACTED
from tunehost.printable import one_line
from tunehost.bounds import number, whole, whole_text
from tunehost.cpulist import MAX_CPUS

if TYPE_CHECKING:
    from tunehost.host import Host

GET_DEFAULT_ARGV = ("systemctl", "get-default")

# display servers, compositors, desktop shells and display managers (process names as the kernel reports them):
# what a graphical session keeps in RAM and VRAM
DISPLAY_PROCESSES = (
    "Xorg", "X", "Xwayland", "gnome-shell", "kwin_wayland", "kwin_x11", "plasmashell", "sway", "Hyprland", "weston",
    "cosmic-comp", "gdm", "gdm3", "sddm", "lightdm", "mutter", "xfwm4", "labwc", "niri", "gamescope",
    "cinnamon", "muffin", "marco", "compiz", "gnome-remote-desktop-daemon", "xdg-desktop-portal-gnome",
    "gdm-x-session", "gdm-wayland-session",
)
# inference processes that hold GPU memory (process name -> what to call it)
INFERENCE_PROCESSES = {"llama-server": "llama-server", "llama-cli": "llama-cli", "ollama": "ollama",
                       "ollama_llama_server": "ollama", "lms": "LM Studio", "koboldcpp": "koboldcpp",
                       "llamafile": "llamafile", "vllm": "vLLM", "llama-bench": "llama-bench",
                       "rpc-server": "llama.cpp rpc-server"}
# compute jobs that are not inference servers but hold GPU memory like one (ROCm / oneAPI python work)
COMPUTE_PROCESS_PREFIXES = ("python", "pt_main_thread", "ray::")


def client_kind(name: str | None) -> str:
    """A DRM client's kind as NVIDIA's process list names it: "C" (compute) or "G" (graphics: desktop, browser)."""
    if name and (name in INFERENCE_PROCESSES or name.startswith(COMPUTE_PROCESS_PREFIXES)):
        return "C"
    return "G"


# how a server lets clients in: "key" (an API-key option tunehost can see on its command line or environment),
# "none" (no authentication at all), "unseen" (may require one, set where tunehost does not look: a config file, an app)
KEY, NO_AUTH, UNSEEN = "key", "none", "unseen"


@dataclass(frozen=True)
class ServerKind:
    """One kind of inference server (or proxy in front of one): its default address and where its settings come from."""

    kind: str
    listen: tuple[str, int]  # where it listens when no option or variable says otherwise
    auth: str  # KEY, NO_AUTH or UNSEEN
    host_options: tuple[str, ...] = ("--host",)
    port_options: tuple[str, ...] = ("--port",)
    listen_options: tuple[str, ...] = ()  # "host:port" in one value (llama-swap --listen)
    key_options: tuple[str, ...] = ()
    host_env: str | None = None  # variables the server itself reads (tunehost records their values, keys only as set)
    port_env: str | None = None
    listen_env: str | None = None  # "[scheme://]host[:port]" in one variable (OLLAMA_HOST)
    key_env: str | None = None
    proxy: bool = False  # forwards to servers it starts (llama-swap): its listener is what clients reach


_LLAMA_CPP_ENV = dict(host_env="LLAMA_ARG_HOST", port_env="LLAMA_ARG_PORT", key_env="LLAMA_API_KEY")
# the one list of servers tunehost judges; sources: llama.cpp tools/server README and common/arg.cpp
# (--api-key set_env LLAMA_API_KEY), tools/rpc/rpc-server.cpp (-H/--host 127.0.0.1, -p/--port 50052, no auth),
# ollama FAQ (OLLAMA_HOST), vLLM docs (--api-key, VLLM_API_KEY), koboldcpp --password (host "" = all interfaces),
# llama-swap main.go (--listen, default ":8080"; API keys live in its config file)
SERVER_KINDS: dict[str, ServerKind] = {k.kind: k for k in (
    ServerKind("llama-server", ("127.0.0.1", 8080), KEY, key_options=("--api-key", "--api-key-file"), **_LLAMA_CPP_ENV),
    ServerKind("llamafile", ("127.0.0.1", 8080), KEY, key_options=("--api-key", "--api-key-file"), **_LLAMA_CPP_ENV),
    ServerKind("rpc-server", ("127.0.0.1", 50052), NO_AUTH, host_options=("-H", "--host"), port_options=("-p", "--port")),
    ServerKind("ollama", ("127.0.0.1", 11434), NO_AUTH, host_options=(), port_options=(), listen_env="OLLAMA_HOST"),
    ServerKind("lmstudio", ("127.0.0.1", 1234), UNSEEN),
    ServerKind("llama-cpp-python", ("localhost", 8000), KEY, key_options=("--api_key", "--api-key")),
    ServerKind("vllm", ("0.0.0.0", 8000), KEY, key_options=("--api-key",), key_env="VLLM_API_KEY"),
    ServerKind("koboldcpp", ("0.0.0.0", 5001), KEY, key_options=("--password",)),
    ServerKind("llama-swap", ("0.0.0.0", 8080), UNSEEN, host_options=(), port_options=(),
               listen_options=("--listen", "-listen"), proxy=True),
)}


def _basename(path: str | None) -> str:
    return (path or "").rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    name: str
    ppid: int | None = None
    username: str | None = None
    rss_bytes: int | None = None
    is_self: bool = False
    # raw facts of candidate processes (the processes sample, after redaction); see docs/snapshot.md
    exe: str | None = None  # /proc/PID/exe (None: not readable, or an old snapshot)
    exe_deleted: bool = False  # the file was deleted or replaced since the process started
    exe_file: Mapping[str, Any] = field(default_factory=dict)  # uid, mode, mtime, same_file, libs
    argv0: str | None = None  # None: command line not readable (or an old snapshot)
    command: str | None = None  # the first plain word after the program ("serve", "run")
    script: str | None = None  # what an interpreter runs: "llama_cpp.server", "koboldcpp.py"
    options: Mapping[str, str] = field(default_factory=dict)  # option as written -> value (secrets: REDACTED)
    env: Mapping[str, str] | None = None  # the variables tunehost reads (secrets: REDACTED); None: unreadable
    sockets: tuple["Listener", ...] | None = None  # its own listening TCP sockets; None: not visible
    recorded_kind: str | None = None  # an old snapshot's classification (samplers before raw facts)
    other_netns: bool = False  # in another network namespace (a container): its sockets were not visible

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this process goes by: kernel name, executable, argv[0], the script an interpreter runs."""
        found = [self.name, _basename(self.exe), _basename(self.argv0), _basename(self.script)]
        return tuple(dict.fromkeys(n for n in found if n))

    @property
    def server(self) -> str | None:
        """The kind of server this process is (a key of SERVER_KINDS), or None."""
        return classify(self)

    @property
    def kind(self) -> ServerKind | None:
        return SERVER_KINDS.get(self.server or "")

    def option(self, names: tuple[str, ...]) -> str | None:
        for name in names:
            if name in self.options:
                return self.options[name]
        return None

    @property
    def has_api_key(self) -> bool | None:
        """True: a key is set (option or variable); False: none; None: its environment could not be read."""
        kind = self.kind
        if kind is None or kind.auth != KEY:
            return False
        if self.option(kind.key_options) is not None:
            return True
        if kind.key_env is None:
            return False
        if self.env is None:
            return None
        return kind.key_env in self.env

    def configured_listen(self) -> tuple[str | None, int | None, str]:
        """(host, port, where it comes from) per its options, its environment, or the server's default.

        host is None when a variable that may move it (OLLAMA_HOST, LLAMA_ARG_HOST) could not be read.
        """
        kind = self.kind
        if kind is None:
            return None, None, "not a known server"
        host: str | None = kind.listen[0]
        port: int | None = kind.listen[1]
        source = "default"
        env_names = [n for n in (kind.listen_env, kind.host_env) if n]
        if self.env is None and env_names:
            host, source = None, f"{' / '.join(env_names)} not readable (another user's process: run as root)"
        env = self.env or {}
        if kind.listen_env and env.get(kind.listen_env) is not None:
            host, port = split_address(env[kind.listen_env], kind.listen)
            source = kind.listen_env
        if kind.host_env and env.get(kind.host_env) is not None:
            host, source = env[kind.host_env], kind.host_env
        if kind.port_env and _port(env.get(kind.port_env)) is not None:
            port = _port(env.get(kind.port_env))
        listen = self.option(kind.listen_options)
        if listen is not None:
            host, port = split_address(listen, kind.listen)
            source = next(n for n in kind.listen_options if n in self.options)
        flag_host = self.option(kind.host_options)
        if flag_host is not None:
            host, source = flag_host, next(n for n in kind.host_options if n in self.options)
        if _port(self.option(kind.port_options)) is not None:
            port = _port(self.option(kind.port_options))
        if host == "" or host == "*":
            host = "0.0.0.0"  # an empty host (koboldcpp's default, llama-swap ":8080") binds every interface
        return host, port, source


def _port(value: Any) -> int | None:
    return whole_text(str(value), 1, 65535) if value is not None else None  # "²" and 5,000 digits are not ports


def classify(proc: ProcessInfo) -> str | None:
    """Which server kind a process is, from its raw facts; None for clients (`ollama run`) and everything else."""
    if proc.argv0 is None and proc.exe is None and proc.recorded_kind:
        return proc.recorded_kind if proc.recorded_kind in SERVER_KINDS else None
    names = [n.lower() for n in proc.names]
    script = _basename(proc.script).lower()
    command = proc.command
    argv_known = proc.argv0 is not None

    def named(*wanted: str) -> bool:
        return any(n in wanted for n in names)

    if named("llama-server", "llama-server.exe"):
        return "llama-server"
    if named("server") and "llama" in f"{proc.exe or ''} {proc.argv0 or ''}".lower():
        return "llama-server"  # llama.cpp's server before mid-2024 was build/bin/server
    if named("rpc-server", "rpc-server.exe"):
        return "rpc-server"
    if any(n.startswith("llama-swap") for n in names):
        return "llama-swap"
    if any(n == "llamafile" or n.endswith(".llamafile") for n in names):
        return "llamafile"
    if named("ollama"):
        # `ollama serve` listens; `ollama run/pull/list` are clients of it; an unreadable command line counts
        # as the server when the process has sockets or nothing else is known
        if command == "serve" or (not argv_known and proc.sockets != ()):
            return "ollama"
        return None
    if any(n.startswith("koboldcpp") for n in names) or script.startswith("koboldcpp"):
        return "koboldcpp"
    if script == "llama_cpp.server" or script.startswith("llama_cpp.server."):
        return "llama-cpp-python"
    if (script == "vllm" or named("vllm")) and command == "serve" or script.startswith("vllm.entrypoints"):
        return "vllm"
    if named("lms", "lm-studio", "lm studio") or any(n.startswith("lm studio") for n in names):
        return "lmstudio"
    return None


def split_address(value: str, default: tuple[str, int] | None = None) -> tuple[str, int | None]:
    """"0.0.0.0", "0.0.0.0:11434", "http://0.0.0.0:11434", "[::]:11434", ":8080" -> (host, port)."""
    default_host, default_port = default or ("127.0.0.1", None)
    text = value.strip().split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not text:
        return default_host, default_port
    return host, _port(port) if port else default_port


@dataclass(frozen=True)
class BusyProcess:
    pid: int
    name: str
    cpu_percent: float  # psutil's: 100 = one full core
    is_self: bool = False


@dataclass(frozen=True)
class Listener:
    address: str
    port: int
    pid: int | None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.address)


def is_loopback(address: str | None) -> bool:
    if not address:
        return False
    if address.strip("[]").lower() in ("localhost", "ip6-localhost"):
        return True
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


@dataclass(frozen=True)
class ActivityWindow:
    """One window of the activity sample: how long, and each process's CPU in it."""

    interval_s: float | None
    busy: tuple[BusyProcess, ...]
    machine_others: float | None = None  # % of one core the whole machine used beyond tunehost (/proc/stat)

    def percent(self, pid: int) -> float:
        return next((b.cpu_percent for b in self.busy if b.pid == pid), 0.0)

    def total(self, exclude: frozenset[int] | set[int] = frozenset()) -> float:
        """Other processes together (not tunehost, not ``exclude``): the processes seen, or the machine-wide figure
        where it is larger (it also counts jobs that started and ended inside the window, a build's compilers)."""
        seen = sum(b.cpu_percent for b in self.busy if not b.is_self and b.pid not in exclude)
        if self.machine_others is None:
            return seen
        excluded = sum(b.cpu_percent for b in self.busy if not b.is_self and b.pid in exclude)
        return max(seen, self.machine_others - excluded)


MAX_WINDOWS = 16  # a sample with more is not one tunehost wrote; its windows are ignored


# what counts as busy, shared by cpu-hogs (judging) and the measurement probes (which refuse to run on a busy host)
HOG_PERCENT = 20.0  # of one core: a background process above this takes a core's time slices
HOG_SHARE = 0.2     # of the whole machine: about a full core on a 4-thread box, two on an 8-thread one


@dataclass(frozen=True)
class ProcessFacts:
    processes: tuple[ProcessInfo, ...] | None = None  # None: no process list
    processes_reason: str | None = None
    busy: tuple[BusyProcess, ...] | None = None  # processes that used CPU in the activity window
    activity_reason: str | None = None
    interval_s: float | None = None
    cpu_count: int | None = None
    cpu_percent_total: float | None = None
    listeners: tuple[Listener, ...] | None = None
    listeners_reason: str | None = None
    default_target: str | None = None
    default_target_reason: str | None = None
    uid: int | None = None  # of the run that sampled (0 = root sees every socket's pid)
    evidence: Mapping[str, str] = field(default_factory=dict)
    # the activity sample's back-to-back windows (each: the processes that used CPU in it); None for samples taken
    # before tunehost recorded windows, or with fewer than two usable ones: then only `busy` (the whole span) is known
    windows: tuple[ActivityWindow, ...] | None = None

    def steady_percent(self, pid: int) -> float | None:
        """The CPU (% of one core) a process used in EVERY window: the least of its windows (0 where it used none).
        None without windows. A load that shows in one window only is not steady (a verdict must not flip on it)."""
        if not self.windows:
            return None
        return min(w.percent(pid) for w in self.windows)

    def steady_total(self, exclude: frozenset[int] | set[int] = frozenset()) -> float | None:
        """What all other processes (not tunehost, not ``exclude``) used together in every window: the least
        window's total, in % of one core. None without windows."""
        if not self.windows:
            return None
        return min(w.total(exclude) for w in self.windows)

    @property
    def servers(self) -> tuple[ProcessInfo, ...]:
        """Inference servers (they hold models in memory); proxies such as llama-swap are not among them."""
        return tuple(p for p in self.listening_servers if not SERVER_KINDS[p.server or ""].proxy)

    @property
    def listening_servers(self) -> tuple[ProcessInfo, ...]:
        """Every server clients can reach: inference servers, rpc-servers and proxies in front of them."""
        return tuple(p for p in self.processes or () if p.server in SERVER_KINDS and not p.is_self)

    @property
    def display_processes(self) -> tuple[ProcessInfo, ...]:
        return tuple(p for p in self.processes or () if p.name in DISPLAY_PROCESSES)

    def process(self, pid: int | None) -> ProcessInfo | None:
        return next((p for p in self.processes or () if p.pid == pid), None) if pid is not None else None

    @classmethod
    def gather(cls, host: "Host") -> "ProcessFacts":
        evidence: dict[str, str] = {}
        processes, processes_reason = process_list(host)

        activity = host.sample("activity")
        busy = interval = cpu_count = total = windows = None
        activity_reason = None
        if isinstance(activity, dict) and isinstance(activity.get("processes"), list):
            busy = tuple(b for b in (_busy(r) for r in activity["processes"]) if b is not None)
            interval = _number(activity.get("interval_s"))
            count = _number(activity.get("cpu_count"))
            cpu_count = int(count) if count and count >= 1 else None
            total = _number(activity.get("cpu_percent_total"))
            windows = _windows(activity.get("windows"), _number(activity.get("ticks_per_s")))
        else:
            activity_reason = _reason(host, "activity", activity)

        raw_listeners = host.sample("listeners")
        listeners = None
        listeners_reason = None
        if isinstance(raw_listeners, list):
            listeners = tuple(x for x in (_listener(r) for r in raw_listeners) if x is not None)
        else:
            listeners_reason = _reason(host, "listeners", raw_listeners)

        default_target = None
        default_target_reason = None
        result = host.run(list(GET_DEFAULT_ARGV))
        if result is None:
            default_target_reason = "systemctl is not available"
        else:
            words = result.stdout.split()
            if result.ok and len(words) == 1 and words[0].endswith(".target"):
                default_target = words[0]
                evidence[" ".join(GET_DEFAULT_ARGV)] = default_target
            else:
                first = (result.stderr or result.stdout).strip().splitlines()
                default_target_reason = f"`systemctl get-default` gave no target ({first[0] if first else f'exit status {result.rc}'})"

        uid = host.manifest.get("uid") if not host.live else os.geteuid()
        return cls(processes, processes_reason, busy, activity_reason, interval, cpu_count, total, listeners,
                   listeners_reason, default_target, default_target_reason,
                   uid if isinstance(uid, int) else None, evidence, windows)


def process_list(host: "Host") -> tuple[tuple[ProcessInfo, ...] | None, str | None]:
    """Every process of the `processes` sample, or (None, why there is none)."""
    rows = host.sample("processes")
    if isinstance(rows, list):
        return tuple(p for p in (_process(r) for r in rows) if p is not None), None
    return None, _reason(host, "processes", rows)


def _reason(host: "Host", name: str, value: Any) -> str:
    if name in host.sample_errors:
        return host.sample_errors[name]
    return f"the {name} sample is malformed" if value is not None else f"no {name} sample"


def _number(value: Any) -> float | None:
    return number(value, 0.0, 100.0 * MAX_CPUS)  # finite, not negative, at most every CPU busy: else unknown


def _int(value: Any) -> int | None:
    return whole(value)


def _process(row: Any) -> ProcessInfo | None:
    if not isinstance(row, dict) or _int(row.get("pid")) is None:
        return None
    common = dict(pid=row["pid"], name=_text(row.get("name")) or "", ppid=_int(row.get("ppid")),
                  username=_text(row.get("username")), rss_bytes=_int(row.get("rss_bytes")),
                  is_self=row.get("self") is True)
    if "argv0" in row or "exe" in row:
        return ProcessInfo(**common, **_raw_facts(row))
    if isinstance(row.get("server"), str):
        return ProcessInfo(**common, **_old_server_facts(row))
    return ProcessInfo(**common)


def _text(value: Any, limit: int = 4096) -> str | None:
    # a process picks its own argv and name: control characters (newlines, ANSI escapes) never reach a report
    return one_line(value[:limit]) if isinstance(value, str) else None


def _raw_facts(row: Mapping[str, Any]) -> dict[str, Any]:
    options = row.get("options") if isinstance(row.get("options"), dict) else {}
    env = row.get("env")
    sockets = row.get("listeners")
    exe_file = row.get("exe_file") if isinstance(row.get("exe_file"), dict) else {}
    return dict(
        exe=_text(row.get("exe")), exe_deleted=row.get("exe_deleted") is True, exe_file=exe_file,
        argv0=_text(row.get("argv0")), command=_text(row.get("command"), 64), script=_text(row.get("script"), 256),
        other_netns=row.get("other_netns") is True,
        options={str(_text(k, 64)): str(_text(str(v), 2000)) for k, v in options.items()
                 if isinstance(k, str) and isinstance(v, (str, int)) and not isinstance(v, bool)},
        env={str(_text(k, 64)): str(_text(v, 300)) for k, v in env.items() if isinstance(v, str)}
        if isinstance(env, dict) else None,
        sockets=tuple(x for x in (_listener(r, pid=row["pid"]) for r in sockets) if x is not None)
        if isinstance(sockets, list) else None,
    )


def _old_server_facts(row: Mapping[str, Any]) -> dict[str, Any]:
    """An old snapshot's row (server kind, {"host","port","api_key"} flags, *_env values) as raw facts."""
    kind = SERVER_KINDS.get(row["server"])
    flags = row.get("flags") if isinstance(row.get("flags"), dict) else {}
    options: dict[str, str] = {}
    if kind is not None:
        if flags.get("host") is not None:
            options[(kind.host_options or kind.listen_options or ("--host",))[-1]] = str(flags["host"])
        if flags.get("port") is not None:
            options[(kind.port_options or ("--port",))[-1]] = str(flags["port"])
        if flags.get("api_key") is True:
            options[(kind.key_options or ("--api-key",))[0]] = REDACTED
    env: dict[str, str] | None = {}
    api_env = row.get("api_key_env")
    host_env = row.get("host_env") or row.get("ollama_host_env")
    if kind is not None and kind.key_env and api_env is None and "api_key_env" in row:
        env = None  # the old sampler could not read this process's environment
    elif kind is not None and kind.kind == "ollama" and not host_env:
        env = None  # the old sampler recorded nothing when OLLAMA_HOST was unset or unreadable: unknown
    if env is not None and kind is not None:
        if api_env is True and kind.key_env:
            env[kind.key_env] = REDACTED
        if isinstance(host_env, str) and host_env and (kind.listen_env or kind.host_env):
            env[kind.listen_env or kind.host_env or ""] = host_env
        if isinstance(row.get("port_env"), str) and kind.port_env:
            env[kind.port_env] = row["port_env"]
    return dict(options=options, env=env, recorded_kind=row["server"])


def _busy(row: Any) -> BusyProcess | None:
    if not isinstance(row, dict) or _int(row.get("pid")) is None or _number(row.get("cpu_percent")) is None:
        return None
    return BusyProcess(row["pid"], str(row.get("name") or ""), float(row["cpu_percent"]), bool(row.get("self")))


def _windows(raw: Any, ticks_per_s: float | None) -> tuple[ActivityWindow, ...] | None:
    """The sample's windows; None unless there are two or more well-formed ones (hostile input: rows that are not
    processes are dropped, as in `processes`; impossible machine-wide figures are left out)."""
    if not isinstance(raw, list) or not 2 <= len(raw) <= MAX_WINDOWS:
        return None
    windows = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("processes"), list):
            return None
        busy = tuple(b for b in (_busy(r) for r in item["processes"]) if b is not None)
        interval = _number(item.get("interval_s"))
        windows.append(ActivityWindow(interval, busy, _machine_others(item, interval, ticks_per_s)))
    return tuple(windows)


def _machine_others(item: Mapping[str, Any], interval: float | None, ticks_per_s: float | None) -> float | None:
    """% of one core the machine spent in user+nice+system beyond tunehost's own CPU, over one window; None when the
    window lacks /proc/stat ticks (older samples) or holds impossible ones."""
    ticks, own = item.get("cpu_ticks"), number(item.get("self_cpu_s"), 0.0, 1e6)
    if not isinstance(ticks, dict) or not interval or not ticks_per_s or own is None:
        return None
    parts = [whole(ticks.get(k)) for k in ("user", "nice", "system")]
    if any(p is None for p in parts):
        return None
    busy_s = sum(p for p in parts if p is not None) / ticks_per_s
    return _number(max(0.0, busy_s - own) / interval * 100.0)


def _listener(row: Any, pid: int | None = None) -> Listener | None:
    if not isinstance(row, dict) or _int(row.get("port")) is None or not isinstance(row.get("address"), str):
        return None
    return Listener(row["address"][:64], row["port"], _int(row.get("pid")) if pid is None else pid)


def busy_reason(procs: ProcessFacts) -> str | None:
    """Why the host is too busy for a load probe (an inference server at work, a CPU hog), or None when it is quiet.

    A probe on a busy host measures the other load, not the hardware, and would disturb a server that is serving.
    """
    if procs.busy is None:
        return None
    cpus = procs.cpu_count or 1
    others = [b for b in procs.busy if not b.is_self]
    servers = {p.pid for p in procs.servers}
    for b in others:
        if b.pid in servers and b.cpu_percent > HOG_PERCENT:
            return (f"not measured: an inference server is at work ({b.name or 'pid'} pid {b.pid}, "
                    f"{b.cpu_percent:g} % of a core); measuring would disturb it and read its load, not the hardware")
    total = sum(b.cpu_percent for b in others)
    if total / 100.0 / cpus >= HOG_SHARE:
        top = max(others, key=lambda b: b.cpu_percent)
        return (f"not measured: the host is busy (other processes used {total:g} % of a core, "
                f"{total / cpus:.0f} % of {cpus} CPUs; most: {top.name or '?'} pid {top.pid}); "
                "run doctor again when it is idle")
    return None
