"""What the advise planner needs to know about a host, in one small frozen value.

`HostView.from_facts(facts)` is the adapter between the host facts (CPU topology, GPUs, /proc/meminfo,
/proc/self/limits, NUMA nodes, the llama.cpp install) and the pure planner in `tunehost.advise.plan`. It never
raises for missing data: anything unknown is None and `notes` says why. Tests build `HostView(...)` by hand.

Reads go through the host layer only (`facts.host.files`); the facts modules do the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable

from tunehost.cpulist import format_cpu_list, parse_cpu_list
from tunehost.errors import TunehostError
from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.facts import HostFacts

MiB = 1024 * 1024
LIMITS = "/proc/self/limits"
STATUS = "/proc/self/status"  # CapEff: whether this process may raise its priority
CAP_SYS_NICE = 23  # linux/capability.h
NODES = "/sys/devices/system/node"


@dataclass(frozen=True)
class GpuView:
    """One GPU as the planner sees it. Bytes, not MiB; None when unknown."""

    index: int
    name: str
    vendor: str  # nvidia | amd | intel | other
    total_bytes: int | None = None
    free_bytes: int | None = None
    unified: bool = False  # an APU / iGPU: its memory is system RAM (carve-out + GTT)
    gtt_free_bytes: int | None = None  # amdgpu: system RAM the GPU may still map (unified GPUs)
    compute_capability: str | None = None
    power_limit_w: float | None = None  # NVML's enforced power limit
    power_default_limit_w: float | None = None  # ... and the board's default limit
    vram_clients: tuple[tuple[int | None, str | None, int | None], ...] = ()  # (pid, name, MiB) holding VRAM now
    memory_bus_width_bits: int | None = None  # NVML: with the max memory clock, the VRAM bandwidth (ceiling.vram_peak)
    memory_clock_max_mhz: int | None = None


@dataclass(frozen=True)
class HostView:
    """The facts `plan()` uses. CPU lists are logical CPU numbers; `cores` groups SMT siblings per physical core."""

    online_cpus: tuple[int, ...] | None = None
    cores: tuple[tuple[int, ...], ...] = ()  # every physical core (its online logical CPUs)
    pin_cpus: tuple[int, ...] | None = None  # one logical CPU per physical performance core, `threads` of them
    performance_cores: int | None = None  # physical P-cores (all cores on a non-hybrid CPU)
    threads: int | None = None  # the --threads value (tunehost.facts.topology.recommended_threads)
    smt: bool | None = None
    hybrid: bool | None = None
    gpus: tuple[GpuView, ...] = ()
    gpus_known: bool = True  # False: GPU facts could not be read at all
    gpu_backends: tuple[str, ...] | None = None  # llama.cpp backends of the llama-server build; None unknown
    ram_total: int | None = None
    ram_available: int | None = None
    memlock_limit: int | None = None  # soft "Max locked memory" in bytes; None unknown (see memlock_unlimited)
    memlock_unlimited: bool = False
    # the lowest nice value this process may set (-20 with CAP_SYS_NICE or an unlimited RLIMIT_NICE, else
    # 20 - RLIMIT_NICE, setpriority(2)); None unknown. llama.cpp's --prio 2 needs -10 (tune's priority knob)
    nice_floor: int | None = None
    numa_nodes: int | None = None
    thp: str | None = None  # transparent huge pages mode: always | madvise | never | None (unknown)
    llama_server: str | None = None  # path of the llama-server found on the host
    cpus_given: bool = False  # pin_cpus/threads come from --cpus
    efficiency_cpus: tuple[int, ...] = ()  # E-cores of a hybrid CPU (logical CPUs)
    cpu_ccds: int | None = None  # links to the IO die (ceiling.ccd_links: L3 groups, Zen 2's two CCXs per CCD as one)
    cpu_isa: str | None = None  # amx | avx512 | avx2 | neon (tunehost.advise.ceiling.cpu_isa of /proc/cpuinfo)
    cpu_vendor: str | None = None  # amd | intel | other
    cpu_warnings: tuple[str, ...] = ()  # what is wrong with --cpus (E-cores in it)
    notes: tuple[str, ...] = ()

    @property
    def discrete_gpus(self) -> tuple[GpuView, ...]:
        return tuple(g for g in self.gpus if not g.unified)

    @property
    def unified_gpus(self) -> tuple[GpuView, ...]:
        return tuple(g for g in self.gpus if g.unified)

    def memlock_allows(self, n_bytes: int) -> bool | None:
        """Whether `n_bytes` may be locked under the current limit; None when the limit is unknown."""
        if self.memlock_unlimited:
            return True
        if self.memlock_limit is None:
            return None
        return n_bytes <= self.memlock_limit

    def with_cpus(self, text: str) -> "HostView":
        """This view pinned to a user's CPU list (--cpus). Raises TunehostError for a list that is not valid here."""
        cpus = parse_cpu_list(text)
        if self.online_cpus is not None:
            online = set(self.online_cpus)
            missing = [c for c in cpus if c not in online]
            if missing:
                raise TunehostError(
                    f"--cpus {text}: CPU {format_cpu_list(missing)} does not exist on this host "
                    f"(online CPUs: {format_cpu_list(self.online_cpus)})")
        chosen = set(cpus)
        if self.cores:
            physical = [core for core in self.cores if chosen & set(core)]
        else:
            physical = [(c,) for c in cpus]
        warnings: tuple[str, ...] = ()
        slow = sorted(chosen & set(self.efficiency_cpus))
        if slow:
            fast = [c for c in cpus if c not in set(self.efficiency_cpus)]
            alt = (f"--cpus {format_cpu_list(fast)} (the performance cores of your list"
                   + (f"; the advised one-thread-per-core set is {format_cpu_list(self.pin_cpus)}" if self.pin_cpus
                      else "") + ")") if fast else (f"--cpus {format_cpu_list(self.pin_cpus)}" if self.pin_cpus
                                                    else "a list of performance cores")
            warnings = (f"--cpus {text} includes E-cores ({format_cpu_list(slow)}): llama.cpp's threads work in "
                        "lock-step, so every token waits for the slowest core; use " + alt,)
        return replace(self, pin_cpus=tuple(cpus), threads=len(physical), cpus_given=True, cpu_warnings=warnings)

    # ---- the adapter ----

    @classmethod
    def from_facts(cls, facts: "HostFacts", *, llama_server: str | None = None) -> "HostView":
        notes: list[str] = []
        cpu = _cpu_part(facts, notes)
        gpus, gpus_known = _gpu_part(facts, notes)
        total, available = _ram_part(facts, notes)
        host = facts.host
        limit, unlimited = (None, False)
        numa = nice_floor = None
        if host is not None:
            limits = host.files.read(LIMITS)
            limit, unlimited = parse_memlock(limits)
            nice_floor = parse_nice_floor(limits, host.files.read(STATUS))
            if limit is None and not unlimited:
                notes.append(f"memlock limit unknown ({LIMITS} unreadable)")
            numa = sum(1 for n in host.files.listdir(NODES) if re.fullmatch(r"node\d+", n)) or None
        server, backends = _llama_part(facts, llama_server, notes)
        return cls(gpus=gpus, gpus_known=gpus_known, gpu_backends=backends, ram_total=total, ram_available=available,
                   memlock_limit=limit, memlock_unlimited=unlimited, nice_floor=nice_floor, numa_nodes=numa, thp=_thp_part(facts),
                   llama_server=server, notes=tuple(notes), **cpu)


def _thp_part(facts: "HostFacts") -> str | None:
    from tunehost.facts.memory import ThpFacts

    try:
        return facts.get(ThpFacts).enabled
    except Exception:  # THP is a detail of the mmap advice: unknown, never a reason not to plan
        return None


PRIO_NICE = -10  # llama.cpp's --prio 2 (GGML_SCHED_PRIO_HIGH): setpriority -10 (common.cpp set_process_priority)


def why_no_prio(host: "HostView", pin: tuple[int, ...] | None) -> str | None:
    """Why `tunehost tune` does not race --prio 2 for a plan pinned to ``pin`` on ``host``; None when it does.
    Real-time compute threads (SCHED_FIFO) on every CPU could starve the system, and llama-bench refuses to run
    ("failed to set process priority") where the process cannot reach nice -10."""
    if not pin:
        return "nothing is pinned, so real-time threads could take every CPU"
    if not set(host.online_cpus or ()) - set(pin):
        return "the pinning uses every CPU, so real-time threads could starve the system"
    if host.nice_floor is not None and host.nice_floor > PRIO_NICE:
        return (f"this account may not lower its nice value to {PRIO_NICE} (it needs CAP_SYS_NICE or a "
                f"'Max nice priority' limit of {20 - PRIO_NICE})")
    return None


def _soft_limit(text: str | None, name: str) -> tuple[int | None, bool]:
    """/proc/<pid>/limits -> (the soft value of the limit `name`, unlimited?); (None, False) when absent."""
    for line in (text or "").splitlines():
        if line.startswith(name):
            parts = line[len(name):].split()
            if not parts:
                return None, False
            if parts[0] == "unlimited":
                return None, True
            try:
                return int(parts[0]), False
            except ValueError:
                return None, False
    return None, False


def parse_memlock(text: str | None) -> tuple[int | None, bool]:
    """/proc/<pid>/limits -> (soft "Max locked memory" in bytes, unlimited?); (None, False) when absent."""
    return _soft_limit(text, "Max locked memory")


def parse_nice_floor(limits: str | None, status: str | None) -> int | None:
    """The lowest nice value the process may set: -20 with CAP_SYS_NICE (/proc/<pid>/status CapEff) or an
    unlimited "Max nice priority", else 20 minus that soft limit (setpriority(2), clamped to -20..19); None when
    neither file says."""
    cap = None
    for line in (status or "").splitlines():
        if line.startswith("CapEff:"):
            try:
                cap = bool(int(line.split()[1], 16) >> CAP_SYS_NICE & 1)
            except (IndexError, ValueError):
                cap = None
    value, unlimited = _soft_limit(limits, "Max nice priority")
    if cap or unlimited:
        return -20
    if value is None:
        return None if cap is None else 0
    return min(19, max(-20, 20 - value)) if value > 0 else 0


def _cpu_part(facts: "HostFacts", notes: list[str]) -> dict[str, Any]:
    try:
        from tunehost.advise.ceiling import ccd_links
        from tunehost.facts.topology import (CpuTopology, efficiency_cpus, l3_groups, performance_cores,
                                             performance_cpus, physical_cores, recommended_threads)

        topo = facts.get(CpuTopology)
    except Exception as exc:  # a broken or missing topology module: CPU advice becomes unknown, not a crash
        notes.append(f"CPU topology unavailable ({exc.__class__.__name__})")
        return {}
    if not topo.cpus:
        notes.append(f"CPU topology unknown: {topo.reason or 'no online CPUs found'}")
        return {}
    threads = recommended_threads(topo)
    pin = performance_cpus(topo)[:threads] if threads else None
    kind = _cpu_kind(facts)
    family = kind.pop("cpu_family", None)
    return {
        "online_cpus": tuple(topo.online),
        "cores": tuple(physical_cores(topo)),
        "pin_cpus": tuple(pin) if pin else None,
        "performance_cores": len(performance_cores(topo)) or None,
        "threads": threads,
        "smt": topo.smt,
        "hybrid": topo.hybrid,
        "efficiency_cpus": tuple(efficiency_cpus(topo)) if topo.hybrid else (),
        "cpu_ccds": ccd_links(len(l3_groups(topo)) or None, kind.get("cpu_vendor"), family),
        **kind,
    }


def _cpu_kind(facts: "HostFacts") -> dict[str, Any]:
    """The vector ISA, vendor and x86 family of the CPU (for what its cores can compute and pull); unknown is None."""
    from tunehost.advise.ceiling import cpu_isa

    out: dict[str, Any] = {}
    try:
        from tunehost.facts.cpu import CpuFacts
        from tunehost.host.cpuinfo import CPUINFO, parse_cpu_family, parse_cpu_features

        text = facts.host.files.read(CPUINFO) if facts.host is not None else None  # once: flags and family
        out["cpu_isa"] = cpu_isa(parse_cpu_features(text)) if text is not None else None
        out["cpu_family"] = parse_cpu_family(text) if text is not None else None
        vendor = facts.get(CpuFacts).vendor or ""
        out["cpu_vendor"] = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(vendor, "other" if vendor else None)
    except Exception:  # the band falls back to the DIMMs alone: never a reason not to plan
        pass
    return out


def _gpu_part(facts: "HostFacts", notes: list[str]) -> tuple[tuple[GpuView, ...], bool]:
    try:
        from tunehost.facts.gpu import GpuFacts

        gathered = facts.get(GpuFacts)
    except Exception as exc:
        notes.append(f"GPU facts unavailable ({exc.__class__.__name__})")
        return (), False
    views = []
    for i, g in enumerate(getattr(gathered, "gpus", ()) or ()):
        views.append(_gpu_view(i, g))
    if getattr(gathered, "nvidia_error", None) and not views:
        notes.append(f"NVIDIA GPU state unknown: {gathered.nvidia_error}")
    return tuple(views), True


def _mib(value: Any) -> int | None:
    return int(value) * MiB if isinstance(value, (int, float)) else None


def _gpu_view(i: int, g: Any) -> GpuView:
    unified = bool(getattr(g, "unified_memory", False) or getattr(g, "integrated", False))
    total = _mib(getattr(g, "memory_total_mib", None))
    free = _mib(getattr(g, "memory_free_mib", None))
    if free is None and total is not None and getattr(g, "memory_used_mib", None) is not None:
        free = total - _mib(g.memory_used_mib)  # type: ignore[operator]
    gtt_total, gtt_used = _mib(getattr(g, "gtt_total_mib", None)), _mib(getattr(g, "gtt_used_mib", None))
    gtt_free = gtt_total - (gtt_used or 0) if gtt_total is not None else None
    index = getattr(g, "index", None)
    return GpuView(index=index if isinstance(index, int) else i, name=getattr(g, "name", None) or f"GPU {i}",
                   vendor=getattr(g, "vendor", None) or "other", total_bytes=total, free_bytes=free, unified=unified,
                   gtt_free_bytes=gtt_free, compute_capability=getattr(g, "compute_capability", None),
                   power_limit_w=_num(getattr(g, "power_limit_w", None)),
                   power_default_limit_w=_num(getattr(g, "power_default_limit_w", None)),
                   vram_clients=tuple((getattr(p, "pid", None), getattr(p, "name", None), getattr(p, "used_mib", None))
                                      for p in (getattr(g, "processes", None) or ())),
                   memory_bus_width_bits=_whole(getattr(g, "memory_bus_width_bits", None)),
                   memory_clock_max_mhz=_whole(getattr(g, "memory_clock_max_mhz", None)))


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _ram_part(facts: "HostFacts", notes: list[str]) -> tuple[int | None, int | None]:
    try:
        from tunehost.facts.memory import MemInfo

        mem = facts.get(MemInfo)
        total, available = mem.total_kb, mem.available_kb
    except Exception as exc:
        notes.append(f"RAM unknown ({exc.__class__.__name__})")
        return None, None
    if available is None:
        notes.append("available RAM unknown (/proc/meminfo has no MemAvailable)")
    return (total * 1024 if total is not None else None), (available * 1024 if available is not None else None)


def _llama_part(facts: "HostFacts", given: str | None, notes: list[str]) -> tuple[str | None, tuple[str, ...] | None]:
    """The llama-server to advise for (--llama-server, else the one found) and its GPU backends if known."""
    try:
        from tunehost.facts.llama import LlamaBuildFacts

        build = facts.get(LlamaBuildFacts)
        binaries: Iterable[Any] = build.binaries
        if build.bin_dir_problem and build.configured_bin_dir and not given:
            # said, never a silent fallback: bench and tune refuse this setting outright
            notes.append(f"TUNEHOST_LLAMA_BIN_DIR is set to {one_line(build.configured_bin_dir[0], 200)}, "
                         f"{build.bin_dir_problem}: not used here (bench and tune stop with an error on it)")
    except Exception as exc:
        notes.append(f"llama.cpp install unknown ({exc.__class__.__name__})")
        binaries = ()
    # a running server's file that llama-build would not run (another user's, replaced) is not run here either
    servers = [b for b in binaries if b.name == "llama-server" and not getattr(b, "version_not_run", None)]
    chosen = next((b for b in servers if given and b.path == given), None) or (None if given else
                                                                                 next(iter(servers), None))
    path = given or (chosen.path if chosen else None)
    if path is None and facts.host is not None:
        path = facts.host.which("llama-server")
    if path is None:
        notes.append("no llama-server found (PATH, $LLAMA_CPP_DIR, tunehost cache): flags assume a current build")
    backends = tuple(chosen.backends) if chosen is not None and chosen.backends else None
    return path, backends


__all__ = ["GpuView", "HostView", "PRIO_NICE", "parse_memlock", "parse_nice_floor", "why_no_prio"]
