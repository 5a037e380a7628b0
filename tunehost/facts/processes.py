"""Process facts: what runs beside llama.cpp — CPU hogs, inference servers and their sockets, the graphical session.

Sources: the `processes`, `activity` and `listeners` samples (formats in docs/snapshot.d/samples.md) and
`systemctl get-default`. A missing sample leaves its part unknown (None plus the reason).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

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
                       "llamafile": "llamafile", "vllm": "vLLM", "llama-bench": "llama-bench"}
# compute jobs that are not inference servers but hold GPU memory like one (ROCm / oneAPI python work)
COMPUTE_PROCESS_PREFIXES = ("python", "pt_main_thread", "ray::")


def client_kind(name: str | None) -> str:
    """A DRM client's kind as NVIDIA's process list names it: "C" (compute) or "G" (graphics: desktop, browser)."""
    if name and (name in INFERENCE_PROCESSES or name.startswith(COMPUTE_PROCESS_PREFIXES)):
        return "C"
    return "G"


# where each inference server listens when no flag says otherwise
DEFAULT_LISTEN = {
    "llama-server": ("127.0.0.1", 8080),
    "llamafile": ("127.0.0.1", 8080),
    "ollama": ("127.0.0.1", 11434),
    "lmstudio": ("127.0.0.1", 1234),
    "llama-cpp-python": ("localhost", 8000),
    "vllm": ("0.0.0.0", 8000),  # vLLM binds every interface unless --host is given
    "koboldcpp": ("0.0.0.0", 5001),  # koboldcpp's --host defaults to "" (every interface)
}
# servers with an API-key option; ollama has none, LM Studio's token is not visible on its command line
KEYED_SERVERS = ("llama-server", "llamafile", "vllm", "llama-cpp-python", "koboldcpp")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    name: str
    ppid: int | None = None
    username: str | None = None
    rss_bytes: int | None = None
    is_self: bool = False
    server: str | None = None  # inference server kind (llama-server, ollama, vllm, ...)
    flags: Mapping[str, Any] = field(default_factory=dict)  # {"host", "port", "api_key"} for servers
    api_key_env: bool | None = None  # LLAMA_API_KEY set (None: environment not readable)
    host_env: str | None = None  # LLAMA_ARG_HOST / OLLAMA_HOST
    port_env: str | None = None  # LLAMA_ARG_PORT

    @property
    def has_api_key(self) -> bool | None:
        """True: a key is set (flag or LLAMA_API_KEY); False: none; None: the environment could not be read."""
        if self.flags.get("api_key") or self.api_key_env:
            return True
        if self.server in ("llama-server", "llamafile") and self.api_key_env is None:
            return None
        return False

    def configured_listen(self) -> tuple[str, int | None, str]:
        """(host, port, where it comes from) per the flags, the environment, or the server's default."""
        default_host, default_port = DEFAULT_LISTEN.get(self.server or "", ("127.0.0.1", None))
        host, port, source = default_host, default_port, "default"
        if self.server == "ollama" and self.host_env:
            host, port, source = _split_ollama_host(self.host_env, default_port) + ("OLLAMA_HOST",)
        if self.host_env and self.server != "ollama":
            host, source = self.host_env, "LLAMA_ARG_HOST"
        env_port = whole_text(str(self.port_env), 0, 65535) if self.port_env else None
        if env_port is not None:
            port = env_port
        if self.flags.get("host"):
            host, source = str(self.flags["host"]), "--host"
        flag_port = whole_text(str(self.flags["port"]), 0, 65535) if self.flags.get("port") else None
        if flag_port is not None:
            port = flag_port
        return host, port, source


def _split_ollama_host(value: str, default_port: int | None) -> tuple[str, int | None]:
    # OLLAMA_HOST: "0.0.0.0", "0.0.0.0:11434", "http://0.0.0.0:11434", "[::]:11434"
    text = value.split("://", 1)[-1].rstrip("/")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    number = whole_text(port, 0, 65535)
    return host or "127.0.0.1", number if number is not None else default_port


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

    @property
    def servers(self) -> tuple[ProcessInfo, ...]:
        return tuple(p for p in self.processes or () if p.server and not p.is_self)

    @property
    def display_processes(self) -> tuple[ProcessInfo, ...]:
        return tuple(p for p in self.processes or () if p.name in DISPLAY_PROCESSES)

    def process(self, pid: int | None) -> ProcessInfo | None:
        return next((p for p in self.processes or () if p.pid == pid), None) if pid is not None else None

    @classmethod
    def gather(cls, host: "Host") -> "ProcessFacts":
        evidence: dict[str, str] = {}
        rows = host.sample("processes")
        processes = None
        processes_reason = None
        if isinstance(rows, list):
            processes = tuple(p for p in (_process(r) for r in rows) if p is not None)
        else:
            processes_reason = _reason(host, "processes", rows)

        activity = host.sample("activity")
        busy = interval = cpu_count = total = None
        activity_reason = None
        if isinstance(activity, dict) and isinstance(activity.get("processes"), list):
            busy = tuple(b for b in (_busy(r) for r in activity["processes"]) if b is not None)
            interval = _number(activity.get("interval_s"))
            count = _number(activity.get("cpu_count"))
            cpu_count = int(count) if count and count >= 1 else None
            total = _number(activity.get("cpu_percent_total"))
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
                   uid if isinstance(uid, int) else None, evidence)


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
    flags = row.get("flags") if isinstance(row.get("flags"), dict) else {}
    host_env = row.get("host_env") or row.get("ollama_host_env")
    api_env = row.get("api_key_env")
    return ProcessInfo(
        pid=row["pid"], name=str(row.get("name") or ""), ppid=_int(row.get("ppid")),
        username=row.get("username") if isinstance(row.get("username"), str) else None,
        rss_bytes=_int(row.get("rss_bytes")), is_self=bool(row.get("self")),
        server=row.get("server") if isinstance(row.get("server"), str) else None,
        flags={k: flags.get(k) for k in ("host", "port", "api_key") if k in flags},
        api_key_env=api_env if isinstance(api_env, bool) else None,
        host_env=str(host_env) if host_env else None,
        port_env=str(row["port_env"]) if row.get("port_env") else None,
    )


def _busy(row: Any) -> BusyProcess | None:
    if not isinstance(row, dict) or _int(row.get("pid")) is None or _number(row.get("cpu_percent")) is None:
        return None
    return BusyProcess(row["pid"], str(row.get("name") or ""), float(row["cpu_percent"]), bool(row.get("self")))


def _listener(row: Any) -> Listener | None:
    if not isinstance(row, dict) or _int(row.get("port")) is None or not isinstance(row.get("address"), str):
        return None
    return Listener(row["address"], row["port"], _int(row.get("pid")))


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
