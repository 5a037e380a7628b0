"""Watching the host while llama-bench runs, and describing the host a result was measured on.

A benchmark is only as good as the quiet it ran in. :class:`HostWatcher` reads the machine before the counted
rounds, after each llama-bench invocation and at the end, and :func:`judge` (pure) turns two readings into a
:class:`WatchReport` that names every disturbance:

- other work on the CPUs: CPU time the whole machine spent (``/proc/stat`` user+nice+system) minus what tunehost
  and its llama-bench children spent (``os.times()``). This catches short-lived processes that a process list taken
  at two moments misses; the busiest other processes are named from a per-process CPU-time diff (psutil);
- CPU time stolen by the hypervisor (``/proc/stat`` steal) on a virtual machine;
- paging: ``/proc/vmstat`` pswpin/pswpout deltas;
- thermal throttling: ``/sys/devices/system/cpu/cpu*/thermal_throttle/*_throttle_count`` deltas (Intel), and the
  hottest CPU temperature seen (hwmon coretemp/k10temp/zenpower), which is reported but only counts as a
  disturbance at the sensor's own "high"/"crit" mark;
- the GPUs (:mod:`tunehost.bench.gpu_watch`, ~1 Hz in a thread): throttling under load disturbs the run, a PCIe
  link below its maximum under load and power capping are reported as findings.

:func:`describe_host` records what the host was (CPU brand, the doctor's verdict and findings) next to a result.
Everything here reads through the host layer (``host.files``; process CPU times from
``tunehost.host.samples.process_cpu_seconds``) except our own times (``os.times``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunehost.host import Host

# A run is disturbed when, averaged over its wall time, other processes used more than this many cores ...
OTHER_CPU_LIMIT_CORES = 0.10
# ... or the hypervisor stole more than this share of the machine's CPU time ...
STEAL_LIMIT_SHARE = 0.05
# ... or more than this many pages (4 KiB) were swapped in or out ...
SWAP_LIMIT_PAGES = 256
# ... or any CPU's thermal-throttle counter went up, or a CPU sensor reached its own "high"/"crit" mark.

BUSIEST_SHOWN = 3


@dataclass(frozen=True)
class CpuTimes:
    """Machine-wide CPU seconds from /proc/stat's first line."""

    busy_s: float  # user + nice + system (guest time is already inside user)
    steal_s: float
    total_s: float  # every column but guest/guest_nice (counted twice otherwise)


@dataclass(frozen=True)
class Temperature:
    value_c: float
    limit_c: float | None  # the sensor's own high mark, else crit
    source: str


@dataclass(frozen=True)
class HostReading:
    """One look at the machine."""

    at_s: float  # time.monotonic()
    cpu: CpuTimes | None
    own_cpu_s: float  # tunehost plus its reaped children (llama-bench)
    swap_in: int | None
    swap_out: int | None
    throttle_count: int | None  # sum over CPUs of core + package throttle counts; None: no counters
    temperature: Temperature | None  # the hottest CPU sensor
    processes: Mapping[int, tuple[str, float]] = field(default_factory=dict, hash=False)  # pid -> (name, CPU s)


@dataclass(frozen=True)
class WatchReport:
    """What happened on the host during the counted rounds; ``reasons`` empty means undisturbed."""

    wall_s: float
    cpu_count: int
    other_cpu_cores: float | None  # average cores used by everything but tunehost and llama-bench
    steal_share: float | None
    swap_in_pages: int | None
    swap_out_pages: int | None
    throttle_delta: int | None
    temp_before_c: float | None
    temp_max_c: float | None
    temp_after_c: float | None
    busiest_others: tuple[tuple[str, int, float], ...] = ()  # (name, pid, CPU seconds during the run)
    reasons: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()  # what could not be watched on this host
    gpu: Mapping[str, Any] | None = field(default=None, hash=False)  # GpuWatch.to_json(): the GPUs under load

    @property
    def disturbed(self) -> bool:
        return bool(self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_s": round(self.wall_s, 3), "cpu_count": self.cpu_count,
            "other_cpu_cores": _round(self.other_cpu_cores, 3), "steal_share": _round(self.steal_share, 4),
            "swap_in_pages": self.swap_in_pages, "swap_out_pages": self.swap_out_pages,
            "throttle_delta": self.throttle_delta, "temp_before_c": self.temp_before_c,
            "temp_max_c": self.temp_max_c, "temp_after_c": self.temp_after_c,
            "busiest_others": [{"name": n, "pid": p, "cpu_s": round(s, 2)} for n, p, s in self.busiest_others],
            "disturbed": self.disturbed, "reasons": list(self.reasons), "unknown": list(self.unknown),
            "gpu": dict(self.gpu) if self.gpu else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WatchReport":
        return cls(
            wall_s=float(data.get("wall_s") or 0.0), cpu_count=int(data.get("cpu_count") or 1),
            other_cpu_cores=data.get("other_cpu_cores"), steal_share=data.get("steal_share"),
            swap_in_pages=data.get("swap_in_pages"), swap_out_pages=data.get("swap_out_pages"),
            throttle_delta=data.get("throttle_delta"), temp_before_c=data.get("temp_before_c"),
            temp_max_c=data.get("temp_max_c"), temp_after_c=data.get("temp_after_c"),
            busiest_others=tuple((str(b.get("name")), int(b.get("pid") or 0), float(b.get("cpu_s") or 0.0))
                                 for b in data.get("busiest_others") or ()),
            reasons=tuple(str(r) for r in data.get("reasons") or ()),
            unknown=tuple(str(u) for u in data.get("unknown") or ()),
            gpu=dict(data["gpu"]) if isinstance(data.get("gpu"), Mapping) else None,
        )


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


# ---------------------------------------------------------------- pure parts


def parse_proc_stat(text: str | None, ticks_per_s: float) -> CpuTimes | None:
    """CpuTimes from /proc/stat (its aggregate "cpu" line); None when absent or malformed."""
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                values = [int(v) for v in parts[1:]]
            except ValueError:
                return None
            if len(values) < 4:
                return None
            values += [0] * (8 - len(values))
            user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
            total = user + nice + system + idle + iowait + irq + softirq + steal
            return CpuTimes((user + nice + system) / ticks_per_s, steal / ticks_per_s, total / ticks_per_s)
    return None


def judge(before: HostReading, after: HostReading, *, cpu_count: int,
          temperatures: Sequence[Temperature] = ()) -> WatchReport:
    """Compare two readings taken around a run (``temperatures``: the readings taken in between)."""
    wall = max(after.at_s - before.at_s, 1e-9)
    reasons: list[str] = []
    unknown: list[str] = []

    other_cores = steal_share = None
    if before.cpu and after.cpu:
        busy = after.cpu.busy_s - before.cpu.busy_s
        own = after.own_cpu_s - before.own_cpu_s
        other_cores = max(0.0, busy - own) / wall
        total = after.cpu.total_s - before.cpu.total_s
        steal_share = (after.cpu.steal_s - before.cpu.steal_s) / total if total > 0 else 0.0
    else:
        unknown.append("CPU use of other processes (/proc/stat unreadable)")

    busiest = _busiest(before.processes, after.processes)
    if other_cores is not None and other_cores > OTHER_CPU_LIMIT_CORES:
        named = ", ".join(f"{name} (pid {pid}, {cpu:.1f} s)" for name, pid, cpu in busiest)
        unnamed = other_cores * wall - sum(cpu for _, _, cpu in busiest)
        if unnamed > max(1.0, 0.5 * other_cores * wall):  # most of it came from processes gone by the end
            named = (named + ", " if named else "") + f"short-lived processes ({unnamed:.1f} s)"
        reasons.append(f"other processes used {other_cores:.2f} of {cpu_count} CPUs during the run"
                       + (f": {named}" if named else ""))
    if steal_share is not None and steal_share > STEAL_LIMIT_SHARE:
        reasons.append(f"the hypervisor stole {steal_share:.0%} of the CPU time (other guests on this host)")

    swap_in = swap_out = None
    if None not in (before.swap_in, after.swap_in, before.swap_out, after.swap_out):
        swap_in = after.swap_in - before.swap_in  # type: ignore[operator]
        swap_out = after.swap_out - before.swap_out  # type: ignore[operator]
        if swap_in + swap_out > SWAP_LIMIT_PAGES:
            reasons.append(f"the host was swapping: {swap_in} pages in, {swap_out} out")
    else:
        unknown.append("swap activity (/proc/vmstat unreadable)")

    throttle = None
    if before.throttle_count is not None and after.throttle_count is not None:
        throttle = after.throttle_count - before.throttle_count
        if throttle > 0:
            reasons.append(f"the CPU throttled for heat {throttle} times (thermal_throttle counters)")
    else:
        unknown.append("thermal throttling (no thermal_throttle counters)")

    temps = [t for t in (before.temperature, *temperatures, after.temperature) if t is not None]
    hottest = max(temps, key=lambda t: t.value_c) if temps else None
    if hottest is None:
        unknown.append("CPU temperature (no hwmon CPU sensor)")
    elif hottest.limit_c is not None and hottest.value_c >= hottest.limit_c:
        reasons.append(f"the CPU reached {hottest.value_c:.0f} °C, its {hottest.limit_c:.0f} °C limit ({hottest.source})")

    return WatchReport(
        wall_s=wall, cpu_count=cpu_count, other_cpu_cores=other_cores, steal_share=steal_share,
        swap_in_pages=swap_in, swap_out_pages=swap_out, throttle_delta=throttle,
        temp_before_c=before.temperature.value_c if before.temperature else None,
        temp_max_c=hottest.value_c if hottest else None,
        temp_after_c=after.temperature.value_c if after.temperature else None,
        busiest_others=busiest, reasons=tuple(reasons), unknown=tuple(unknown),
    )


def _busiest(before: Mapping[int, tuple[str, float]], after: Mapping[int, tuple[str, float]]
             ) -> tuple[tuple[str, int, float], ...]:
    deltas = []
    for pid, (name, cpu) in after.items():
        start = before.get(pid)
        used = cpu - start[1] if start and start[0] == name else cpu  # a process born during the run: all of it
        if used >= 0.05:
            deltas.append((name, pid, used))
    deltas.sort(key=lambda d: -d[2])
    return tuple(deltas[:BUSIEST_SHOWN])


# ---------------------------------------------------------------- reading the live host


def read_reading(host: "Host", *, exclude_pids: Callable[[], set[int]] | None = None,
                 processes: bool = True) -> HostReading:
    """One reading of the host (I/O). ``exclude_pids``: processes that are ours (llama-bench while it runs)."""
    ticks = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    cpu = parse_proc_stat(host.files.read("/proc/stat"), ticks)
    own = os.times()
    vm = _vmstat(host.files.read("/proc/vmstat"))
    return HostReading(
        at_s=time.monotonic(), cpu=cpu,
        own_cpu_s=own.user + own.system + own.children_user + own.children_system,
        swap_in=vm.get("pswpin"), swap_out=vm.get("pswpout"),
        throttle_count=read_throttle_count(host), temperature=read_cpu_temperature(host),
        processes=_process_cpu(exclude_pids() if exclude_pids else set()) if processes else {},
    )


def _vmstat(text: str | None) -> dict[str, int]:
    from tunehost.host.samples import parse_vmstat

    return parse_vmstat(text)


def read_throttle_count(host: "Host") -> int | None:
    """Sum of every CPU's core and package throttle counters; None when the kernel exposes none."""
    from tunehost.facts.thermal import throttle_counts

    values = [v for c in throttle_counts(host) for v in (c.core, c.package) if v is not None]
    return sum(values) if values else None


def read_cpu_temperature(host: "Host") -> Temperature | None:
    """The hottest CPU sensor (hwmon coretemp / k10temp / zenpower / cpu_thermal); None when there is none."""
    from tunehost.facts.thermal import CPU_DRIVERS, hwmon_readings

    cpu = [r for r in hwmon_readings(host) if r.chip in CPU_DRIVERS and r.value_c is not None]
    if not cpu:
        return None
    hottest = max(cpu, key=lambda r: r.value_c)
    return Temperature(hottest.value_c, hottest.high_c or hottest.crit_c, hottest.source)


def _process_cpu(exclude: set[int]) -> dict[int, tuple[str, float]]:
    """pid -> (name, CPU seconds) of every process but tunehost, its children and ``exclude`` (host layer)."""
    from tunehost.host.samples import process_cpu_seconds

    return process_cpu_seconds(exclude)


class HostWatcher:
    """Reads the live host around a run: ``start()``, ``tick()`` after each invocation, ``stop() -> WatchReport``."""

    def __init__(self, host: "Host", *, cpu_count: int | None = None,
                 read: Callable[["Host"], HostReading] | None = None, gpu: Any = True):
        """``gpu``: True samples the GPUs (NVML or amdgpu sysfs, ~1 Hz in a thread), False does not, or a
        tunehost.bench.gpu_watch.GpuSampler to use."""
        self.host = host
        self.cpu_count = cpu_count or os.cpu_count() or 1
        self._read = read or read_reading
        self._before: HostReading | None = None
        self._temps: list[Temperature] = []
        self._gpu_option = gpu
        self._gpu: Any = None

    def start(self) -> None:
        self._before = self._read(self.host)
        self._temps = []
        if self._gpu_option is True:
            from tunehost.bench.gpu_watch import GpuSampler

            self._gpu = GpuSampler(self.host)
        elif self._gpu_option:
            self._gpu = self._gpu_option
        if self._gpu is not None:
            self._gpu.start()

    def tick(self) -> None:
        """A cheap look between invocations (temperature only: the diffs need just the two ends)."""
        temp = read_cpu_temperature(self.host)
        if temp is not None:
            self._temps.append(temp)

    def stop(self) -> WatchReport:
        if self._before is None:
            raise RuntimeError("HostWatcher.stop() before start()")
        after = self._read(self.host)
        report = judge(self._before, after, cpu_count=self.cpu_count, temperatures=self._temps)
        if self._gpu is None:
            return report
        gpu = self._gpu.stop()
        return replace(report, reasons=report.reasons + gpu.reasons, unknown=report.unknown + gpu.unknown,
                       gpu=gpu.to_json())


# ---------------------------------------------------------------- what the host was


def describe_host(host: "Host", *, cpu_info: Callable[[], Mapping[str, Any]] | None = None,
                  doctor: bool = True) -> dict[str, Any]:
    """The host summary stored next to every result: CPU brand and flags, CPU count, the doctor's verdict and
    findings (check, severity, summary). py-cpuinfo and the doctor run in parallel (about 1 s together)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        cpu_future = pool.submit(cpu_info or _cpuinfo)
        report = _doctor_summary(host) if doctor else None
        try:
            info = dict(cpu_future.result())
        except Exception as exc:  # py-cpuinfo failing must not stop a benchmark
            info = {"error": f"{exc.__class__.__name__}: {exc}"}
    flags = sorted(info.get("flags") or ())
    summary: dict[str, Any] = {
        "cpu_brand": info.get("brand_raw"),
        "cpu_arch": info.get("arch_string_raw"),
        "cpu_count": os.cpu_count(),
        "cpu_flags": [f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sve", "neon", "asimd", "vnni"))
                      or f in ("sse4_2", "bmi2")],
        "kernel": os.uname().release if hasattr(os, "uname") else None,
    }
    if "error" in info:
        summary["cpu_info_error"] = info["error"]
    if report is not None:
        summary["doctor"] = report
    return summary


def _cpuinfo() -> Mapping[str, Any]:
    import cpuinfo

    return cpuinfo.get_cpu_info()


def _doctor_summary(host: "Host") -> dict[str, Any]:
    from tunehost.doctor import run_doctor
    from tunehost.facts import HostFacts
    from tunehost.registry import load_checks

    try:
        loaded = load_checks()
        report = run_doctor(HostFacts(host), loaded.checks)
    except Exception as exc:  # the summary is context; a broken doctor must not stop the benchmark
        return {"verdict": None, "error": f"{exc.__class__.__name__}: {exc}", "findings": []}
    return {
        "verdict": report.verdict,
        "findings": [{"check": f.check, "severity": f.severity.value, "summary": f.summary} for f in report.findings],
    }
