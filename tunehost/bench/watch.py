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

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunehost.facts import HostFacts
    from tunehost.host import Host

# A run (or one round of it) is disturbed when, averaged over its wall time, other processes used more than this
# many cores beyond the spare CPUs its configuration leaves (other_cpu_limit: a configuration that uses every CPU
# tolerates 0.10 cores of other work; one that leaves CPUs idle tolerates half of each idle CPU more, since other work
# on an idle CPU still takes memory bandwidth and cache) ...
OTHER_CPU_LIMIT_CORES = 0.10
SPARE_CPU_SHARE = 0.5
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
    own_cpu_s: float | None  # tunehost plus its reaped children (llama-bench); None: a measured server not visible
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
    cpus_used: int | None = None  # CPUs the measured configuration uses (None: unknown, judged as all of them)
    temp_limit_c: float | None = None  # the hottest sensor's own high/crit mark
    temp_source: str | None = None
    energy: Mapping[str, Any] | None = field(default=None, hash=False)  # tunehost.bench.energy.Energy.to_json()

    @property
    def disturbed(self) -> bool:
        return bool(self.reasons)

    @property
    def other_cpu_s(self) -> float | None:
        """CPU seconds other processes took during the watched time."""
        return None if self.other_cpu_cores is None else self.other_cpu_cores * self.wall_s

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_s": round(self.wall_s, 3), "cpu_count": self.cpu_count,
            "other_cpu_cores": _round(self.other_cpu_cores, 3), "steal_share": _round(self.steal_share, 4),
            "swap_in_pages": self.swap_in_pages, "swap_out_pages": self.swap_out_pages,
            "throttle_delta": self.throttle_delta, "temp_before_c": self.temp_before_c,
            "temp_max_c": self.temp_max_c, "temp_after_c": self.temp_after_c,
            "busiest_others": [{"name": n, "pid": p, "cpu_s": round(s, 2)} for n, p, s in self.busiest_others],
            "disturbed": self.disturbed, "reasons": list(self.reasons), "unknown": list(self.unknown),
            "gpu": dict(self.gpu) if self.gpu else None, "cpus_used": self.cpus_used,
            "temp_limit_c": self.temp_limit_c, "temp_source": self.temp_source,
            **({"energy": dict(self.energy)} if self.energy else {}),
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
            cpus_used=_int_or_none(data.get("cpus_used")), temp_limit_c=_float_or_none(data.get("temp_limit_c")),
            temp_source=str(data["temp_source"]) if data.get("temp_source") is not None else None,
            energy=dict(data["energy"]) if isinstance(data.get("energy"), Mapping) else None,
        )


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _float_or_none(value: Any) -> float | None:
    try:
        number = None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None
    return number if number is not None and math.isfinite(number) else None


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


def other_cpu_limit(cpu_count: int, cpus_used: int | None) -> float:
    """How many cores of other work a round tolerates: :data:`OTHER_CPU_LIMIT_CORES` when the configuration uses
    every CPU (or it is unknown), plus :data:`SPARE_CPU_SHARE` of each CPU it leaves idle."""
    spare = 0 if cpus_used is None else max(0, cpu_count - cpus_used)
    return OTHER_CPU_LIMIT_CORES + SPARE_CPU_SHARE * spare


def reasons_for(report: WatchReport) -> tuple[str, ...]:
    """Why a watched time (a whole run or one round) was disturbed, judged from its raw facts alone: the ONE
    judgement bench, tune, history --drift and the server bench share (empty: undisturbed). A stored report is
    re-judged by this, so an old round is judged by newer code."""
    reasons: list[str] = []
    wall = max(report.wall_s, 1e-9)
    other = report.other_cpu_cores
    if other is not None and other > other_cpu_limit(report.cpu_count, report.cpus_used):
        busiest = report.busiest_others
        named = ", ".join(f"{name} (pid {pid}, {cpu:.1f} s)" for name, pid, cpu in busiest)
        unnamed = other * wall - sum(cpu for _, _, cpu in busiest)
        if unnamed > max(1.0, 0.5 * other * wall):  # most of it came from processes gone by the end
            named = (named + ", " if named else "") + f"short-lived processes ({unnamed:.1f} s)"
        uses = (f" (the configuration uses {report.cpus_used})"
                if report.cpus_used is not None and report.cpus_used < report.cpu_count else "")
        reasons.append(f"other processes used {other:.2f} of {report.cpu_count} CPUs{uses} during the run"
                       + (f": {named}" if named else ""))
    if report.steal_share is not None and report.steal_share > STEAL_LIMIT_SHARE:
        reasons.append(f"the hypervisor stole {report.steal_share:.0%} of the CPU time (other guests on this host)")
    if report.swap_in_pages is not None and report.swap_out_pages is not None \
            and report.swap_in_pages + report.swap_out_pages > SWAP_LIMIT_PAGES:
        reasons.append(f"the host was swapping: {report.swap_in_pages} pages in, {report.swap_out_pages} out")
    if report.throttle_delta is not None and report.throttle_delta > 0:
        reasons.append(f"the CPU throttled for heat {report.throttle_delta} times (thermal_throttle counters)")
    if report.temp_max_c is not None and report.temp_limit_c is not None and report.temp_max_c >= report.temp_limit_c:
        reasons.append(f"the CPU reached {report.temp_max_c:.0f} °C, its {report.temp_limit_c:.0f} °C limit "
                       f"({report.temp_source or 'CPU sensor'})")
    gpu = report.gpu.get("reasons") if isinstance(report.gpu, Mapping) else None
    if isinstance(gpu, (list, tuple)):
        reasons.extend(str(r) for r in gpu)
    return tuple(reasons)


def rejudge(report: WatchReport, cpus_used: int | None = None) -> WatchReport:
    """``report`` judged again (for the CPUs a configuration uses, when given)."""
    if cpus_used is not None:
        report = replace(report, cpus_used=cpus_used)
    return replace(report, reasons=reasons_for(report))


def combine(reports: Sequence[WatchReport]) -> WatchReport | None:
    """Several watched stretches (the llama-bench calls of one round) as one report: wall time, other CPU time,
    swapping and throttle counts added up, the hottest temperature, the busiest others merged; judged again."""
    if not reports:
        return None
    if len(reports) == 1:
        return rejudge(reports[0])
    wall = sum(r.wall_s for r in reports)

    def total(values: list[Any]) -> Any:
        return None if any(v is None for v in values) else sum(values)

    other_s = total([r.other_cpu_s for r in reports])
    shares = [r.steal_share for r in reports]
    steal = None if any(v is None for v in shares) else sum(
        (v or 0.0) * r.wall_s for v, r in zip(shares, reports)) / max(wall, 1e-9)
    busiest: dict[tuple[str, int], float] = {}
    for r in reports:
        for name, pid, cpu in r.busiest_others:
            busiest[(name, pid)] = busiest.get((name, pid), 0.0) + cpu
    top = sorted(((n, p, c) for (n, p), c in busiest.items()), key=lambda b: -b[2])[:BUSIEST_SHOWN]
    temps = [r for r in reports if r.temp_max_c is not None]
    hottest = max(temps, key=lambda r: r.temp_max_c or 0.0) if temps else None
    gpu_reasons = [g for r in reports if isinstance(r.gpu, Mapping) for g in r.gpu.get("reasons") or ()]
    used = [r.cpus_used for r in reports]
    first, last = reports[0], reports[-1]
    energy = _energy_total(reports)
    return rejudge(WatchReport(
        wall_s=wall, cpu_count=max(r.cpu_count for r in reports),
        other_cpu_cores=None if other_s is None else other_s / max(wall, 1e-9), steal_share=steal,
        swap_in_pages=total([r.swap_in_pages for r in reports]), swap_out_pages=total([r.swap_out_pages for r in reports]),
        throttle_delta=total([r.throttle_delta for r in reports]), temp_before_c=first.temp_before_c,
        temp_max_c=hottest.temp_max_c if hottest else None, temp_after_c=last.temp_after_c,
        busiest_others=tuple(top), unknown=tuple(dict.fromkeys(u for r in reports for u in r.unknown)),
        gpu={"reasons": list(dict.fromkeys(gpu_reasons))} if gpu_reasons else None,
        cpus_used=None if any(u is None for u in used) else max(u for u in used if u is not None),
        temp_limit_c=hottest.temp_limit_c if hottest else None, temp_source=hottest.temp_source if hottest else None,
        energy=energy))


def _energy_total(reports: Sequence[WatchReport]) -> dict[str, Any] | None:
    """The stretches' energy added up (tunehost.bench.energy.add_up); None when none of them carries any."""
    from tunehost.bench.energy import Energy, add_up

    read = [Energy.from_json(r.energy) for r in reports if r.energy]
    total = add_up([e for e in read if e is not None]) if len(read) == len(reports) else None
    return total.to_json() if total is not None else None


def cpus_used_by(args: Sequence[str], cpu_count: int) -> int | None:
    """How many CPUs a llama-bench call's configuration keeps busy: the largest -t value (several values: the
    largest), capped by a -C/--cpu-mask's CPUs and by ``cpu_count``; None when it sets no thread count (llama-bench
    then picks its own, judged as every CPU)."""
    threads: int | None = None
    mask_cpus: int | None = None
    for i, token in enumerate(args[:-1]):
        value = str(args[i + 1])
        if token in ("-t", "--threads"):
            try:
                threads = max(int(v) for v in value.split(","))
            except ValueError:
                return None
        elif token in ("-C", "--cpu-mask"):
            try:
                mask_cpus = max(bin(int(v, 16)).count("1") for v in value.split(","))
            except ValueError:
                mask_cpus = None
    if threads is None:
        return None
    used = min(threads, mask_cpus) if mask_cpus else threads
    return max(1, min(used, cpu_count))


def judge(before: HostReading, after: HostReading, *, cpu_count: int,
          temperatures: Sequence[Temperature] = (), cpus_used: int | None = None) -> WatchReport:
    """Compare two readings taken around a run or a round (``temperatures``: the readings taken in between); the
    raw facts, judged by :func:`reasons_for`."""
    wall = max(after.at_s - before.at_s, 1e-9)
    unknown: list[str] = []

    other_cores = steal_share = None
    if before.cpu and after.cpu:
        busy = after.cpu.busy_s - before.cpu.busy_s
        if before.own_cpu_s is None or after.own_cpu_s is None:
            unknown.append("CPU use of other processes (the measured server's processes are not visible here)")
        else:
            other_cores = max(0.0, busy - (after.own_cpu_s - before.own_cpu_s)) / wall
        total = after.cpu.total_s - before.cpu.total_s
        steal_share = (after.cpu.steal_s - before.cpu.steal_s) / total if total > 0 else 0.0
    else:
        unknown.append("CPU use of other processes (/proc/stat unreadable)")

    swap_in = swap_out = None
    if None not in (before.swap_in, after.swap_in, before.swap_out, after.swap_out):
        swap_in = after.swap_in - before.swap_in  # type: ignore[operator]
        swap_out = after.swap_out - before.swap_out  # type: ignore[operator]
    else:
        unknown.append("swap activity (/proc/vmstat unreadable)")

    throttle = None
    if before.throttle_count is not None and after.throttle_count is not None:
        throttle = after.throttle_count - before.throttle_count
    else:
        unknown.append("thermal throttling (no thermal_throttle counters)")

    temps = [t for t in (before.temperature, *temperatures, after.temperature) if t is not None]
    hottest = max(temps, key=lambda t: t.value_c) if temps else None
    if hottest is None:
        unknown.append("CPU temperature (no hwmon CPU sensor)")

    report = WatchReport(
        wall_s=wall, cpu_count=cpu_count, other_cpu_cores=other_cores, steal_share=steal_share,
        swap_in_pages=swap_in, swap_out_pages=swap_out, throttle_delta=throttle,
        temp_before_c=before.temperature.value_c if before.temperature else None,
        temp_max_c=hottest.value_c if hottest else None,
        temp_after_c=after.temperature.value_c if after.temperature else None,
        busiest_others=_busiest(before.processes, after.processes), unknown=tuple(unknown),
        cpus_used=cpus_used, temp_limit_c=hottest.limit_c if hottest else None,
        temp_source=hottest.source if hottest else None,
    )
    return replace(report, reasons=reasons_for(report))


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
                 processes: bool = True, own_cpu: Callable[[set[int]], float | None] | None = None) -> HostReading:
    """One reading of the host (I/O). ``exclude_pids``: processes whose work is the measurement's own (llama-bench
    while it runs, the llama-server a server bench measures): their CPU time counts as ours, not as other work.
    ``own_cpu``: those processes' CPU seconds (tunehost.bench.server.cpu; None: not visible, the reading's own
    CPU time is then unknown); default: their trees' current total."""
    ticks = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    cpu = parse_proc_stat(host.files.read("/proc/stat"), ticks)
    own = os.times()
    vm = _vmstat(host.files.read("/proc/vmstat"))
    excluded = exclude_pids() if exclude_pids else set()
    serving = own_cpu(excluded) if own_cpu is not None else _cpu_seconds_of(excluded) if excluded else 0.0
    return HostReading(
        at_s=time.monotonic(), cpu=cpu,
        own_cpu_s=None if serving is None else own.user + own.system + own.children_user + own.children_system
        + serving,
        swap_in=vm.get("pswpin"), swap_out=vm.get("pswpout"),
        throttle_count=read_throttle_count(host), temperature=read_cpu_temperature(host),
        processes=_process_cpu(excluded) if processes else {},
    )


def _cpu_seconds_of(pids: set[int]) -> float:
    from tunehost.host.samples import cpu_seconds_of

    return cpu_seconds_of(pids)


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
    """Reads the live host around a run: ``start()``, ``tick()`` after each invocation, ``lap()`` after each round
    (that round's own report), ``stop() -> WatchReport`` (the whole run)."""

    def __init__(self, host: "Host", *, cpu_count: int | None = None,
                 read: Callable[["Host"], HostReading] | None = None, gpu: Any = True,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 energy: Any = True):
        """``gpu``: True samples the GPUs (NVML or amdgpu sysfs, ~1 Hz in a thread), False does not, or a
        tunehost.bench.gpu_watch.GpuSampler to use. ``clock``/``sleep``: what :meth:`wait_quiet` waits with.
        ``energy``: True reads the energy counters (tunehost.bench.energy.EnergyMeter: RAPL, the watched GPUs'
        counters) at every lap and at the end, False does not, or a meter to use (tests)."""
        self.host = host
        self._clock, self._sleep = clock, sleep
        self.cpu_count = cpu_count or os.cpu_count() or 1
        self._read = read or read_reading
        self._before: HostReading | None = None
        self._lap: HostReading | None = None
        self._temps: list[Temperature] = []
        self._lap_temps: list[Temperature] = []
        self._gpu_option = gpu
        self._gpu: Any = None
        self._energy_option = energy
        self._meter: Any = None
        self._energy_start: Any = None  # the EnergyReading at start() ...
        self._energy_lap: Any = None  # ... and at the latest lap

    def start(self) -> None:
        self._before = self._lap = self._read(self.host)
        self._temps, self._lap_temps = [], []
        if self._gpu is not None:
            return  # started before (a second start() only restarts the CPU side)
        if self._gpu_option is True:
            from tunehost.bench.gpu_watch import GpuSampler

            self._gpu = GpuSampler(self.host)
        elif self._gpu_option:
            self._gpu = self._gpu_option
        if self._gpu is not None:
            self._gpu.start()
        if self._energy_option is True and getattr(self.host, "files", None) is not None:
            from tunehost.bench.energy import EnergyMeter

            self._meter = EnergyMeter(self.host, gpu_counters=getattr(self._gpu, "energy_counters", None))
        elif self._energy_option and self._energy_option is not True:
            self._meter = self._energy_option
        self._energy_start = self._energy_lap = self.energy_mark()

    def energy_mark(self) -> Any:
        """The energy counters now (tunehost.bench.energy.EnergyReading); None when energy is not read."""
        return self._meter.read() if self._meter is not None else None

    def energy_since(self, mark: Any) -> Any:
        """The energy used since ``mark`` (:meth:`energy_mark`) as tunehost.bench.energy.Energy; None without a
        meter. A GPU without an energy counter is integrated from the GPU watch's power samples."""
        if self._meter is None or mark is None:
            return None
        return self._between(mark, self._meter.read())

    def _between(self, before: Any, after: Any) -> Any:
        from tunehost.bench.energy import energy_between

        power = getattr(self._gpu, "power_samples", None)
        return energy_between(before, after, power() if power is not None else None)

    def _energy_json(self, mark: Any) -> dict[str, Any] | None:
        energy = self.energy_since(mark)
        return energy.to_json() if energy is not None else None

    def tick(self) -> None:
        """A cheap look between invocations (temperature only: the diffs need just the two ends)."""
        temp = read_cpu_temperature(self.host)
        if temp is not None:
            self._temps.append(temp)
            self._lap_temps.append(temp)

    def lap(self, cpus_used: int | None = None) -> WatchReport:
        """What happened on the host since the previous lap (or ``start()``): one round's report, judged for a
        configuration that uses ``cpus_used`` CPUs."""
        if self._lap is None:
            raise RuntimeError("HostWatcher.lap() before start()")
        now = self._read(self.host)
        report = judge(self._lap, now, cpu_count=self.cpu_count, temperatures=self._lap_temps, cpus_used=cpus_used)
        window = getattr(self._gpu, "window", None)
        if window is not None:
            gpu = window(self._lap.at_s)
            report = rejudge(replace(report, gpu=gpu.to_json(), unknown=report.unknown + gpu.unknown))
        if self._meter is not None:  # this lap's energy; its end is the next lap's start
            mark = self.energy_mark()
            if self._energy_lap is not None:
                report = replace(report, energy=self._between(self._energy_lap, mark).to_json())
            self._energy_lap = mark
        self._lap, self._lap_temps = now, []
        return report

    def wait_quiet(self, timeout_s: float, cpus_used: int | None = None) -> "QuietWait":
        """:func:`wait_for_quiet` on this host (the default :class:`QuietRule` for ``cpus_used`` CPUs)."""
        return wait_for_quiet(lambda: self._read(self.host), QuietRule(self.cpu_count, cpus_used), timeout_s,
                              clock=self._clock, sleep=self._sleep)

    def stop(self) -> WatchReport:
        if self._before is None:
            raise RuntimeError("HostWatcher.stop() before start()")
        after = self._read(self.host)
        report = judge(self._before, after, cpu_count=self.cpu_count, temperatures=self._temps)
        if self._meter is not None:
            report = replace(report, energy=self._energy_json(self._energy_start))
            self._meter = None
        if self._gpu is None:
            return report
        gpu = self._gpu.stop()
        self._gpu = None
        return rejudge(replace(report, unknown=report.unknown + gpu.unknown, gpu=gpu.to_json()))


class CallWatcher:
    """A :class:`HostWatcher` around each llama-bench call of a tune (the race's ``RaceWatch``): ``begin()`` before
    a call, ``end()`` after it (that call's report), ``wait_quiet()`` between calls, ``close()`` at the end."""

    def __init__(self, watcher: HostWatcher):
        self.watcher = watcher
        self._started = False

    def begin(self) -> None:
        if not self._started:
            self.watcher.start()
            self._started = True
        else:
            self.watcher.lap()  # what happened between calls is no call's

    def end(self) -> WatchReport:
        return self.watcher.lap()

    def wait_quiet(self, timeout_s: float, cpus_used: int | None) -> "QuietWait":
        return self.watcher.wait_quiet(timeout_s, cpus_used)

    def close(self) -> None:
        if self._started:
            self.watcher.stop()
            self._started = False


# ---------------------------------------------------------------- waiting for quiet

QUIET_WINDOW_S = 2.0  # one look at the host lasts this long ...
QUIET_WINDOWS = 2  # ... and this many in a row must be undisturbed: a load on 2 s / off 3 s never passes


@dataclass(frozen=True)
class QuietWait:
    """The outcome of waiting for quiet: quiet or not by the deadline, how long it took, why not."""

    quiet: bool
    waited_s: float
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"quiet": self.quiet, "waited_s": round(self.waited_s, 3), "reason": self.reason}

    @classmethod
    def from_json(cls, data: Any) -> "QuietWait":
        if not isinstance(data, Mapping):
            return cls(False, 0.0, "not recorded")
        waited = _float_or_none(data.get("waited_s")) or 0.0
        return cls(bool(data.get("quiet")), waited, str(data["reason"]) if data.get("reason") else None)


@dataclass(frozen=True)
class QuietRule:
    """When the host counts as quiet (:func:`wait_for_quiet`): ``windows`` looks of ``window_s`` in a row that
    :func:`reasons_for` finds undisturbed for a configuration using ``cpus_used`` of ``cpu_count`` CPUs (None:
    judged as if it used every CPU)."""

    cpu_count: int
    cpus_used: int | None = None
    window_s: float = QUIET_WINDOW_S
    windows: int = QUIET_WINDOWS


def wait_for_quiet(read: Callable[[], HostReading], rule: QuietRule, timeout_s: float, *,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> QuietWait:
    """Look at the host in windows of ``rule.window_s`` until ``rule.windows`` in a row are undisturbed by
    :func:`reasons_for` (the same judgement as a measured round's), or until the next window would pass
    ``timeout_s``. Bounded: at most ``timeout_s`` plus one reading."""
    window_s, windows = rule.window_s, rule.windows
    start = clock()
    before = read()
    streak = 0
    reason: str | None = None
    while True:
        if clock() - start + window_s > timeout_s:
            return QuietWait(False, clock() - start, reason or f"not quiet for {windows * window_s:g} s in a row "
                                                                f"within {timeout_s:g} s")
        sleep(window_s)
        after = read()
        report = judge(before, after, cpu_count=rule.cpu_count, cpus_used=rule.cpus_used)
        before = after
        if report.disturbed:
            streak, reason = 0, report.reasons[0]
        else:
            streak += 1
            if streak >= windows:
                return QuietWait(True, clock() - start, None)


# ---------------------------------------------------------------- what the host was


def describe_host(facts: "HostFacts", *, cpu_info: Callable[[], Mapping[str, Any]] | None = None,
                  doctor: bool = True) -> dict[str, Any]:
    """The host summary stored next to every result: CPU brand and flags, CPU count, the doctor's verdict and
    findings (check, severity, summary), judged on ``facts`` (the caller's, gathered once). The CPU is read
    through the host layer (tunehost.host.cpuinfo: py-cpuinfo on the live host) in parallel with the doctor
    (about 1 s together)."""
    from concurrent.futures import ThreadPoolExecutor

    from tunehost.host import cpuinfo

    host = facts.host

    def read_cpu() -> Mapping[str, Any]:
        if host is None:
            raise LookupError("no host to read")
        return cpuinfo.cpu_info(host)

    with ThreadPoolExecutor(max_workers=2) as pool:
        cpu_future = pool.submit(cpu_info or read_cpu)
        report = _doctor_summary(facts) if doctor else None
        try:
            info = dict(cpu_future.result())
        except Exception as exc:  # py-cpuinfo failing must not stop a benchmark
            info = {"error": f"{exc.__class__.__name__}: {exc}"}
    flags = sorted(info.get("flags") or ())
    summary: dict[str, Any] = {
        "cpu_brand": info.get("brand_raw"),
        "cpu_arch": info.get("arch_string_raw"),
        "cpu_count": cpuinfo.cpu_count(host) if host is not None else None,
        "cpu_flags": [f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sve", "neon", "asimd", "vnni"))
                      or f in ("sse4_2", "bmi2")],
        "kernel": cpuinfo.kernel_release(host) if host is not None else None,
    }
    if "error" in info:
        summary["cpu_info_error"] = info["error"]
    if report is not None:
        summary["doctor"] = report
    return summary


def _doctor_summary(facts: "HostFacts") -> dict[str, Any]:
    """The doctor's verdict and findings on the caller's facts (never a second gathering of the host)."""
    from tunehost.doctor import run_doctor
    from tunehost.doctor.registry import load_checks

    try:
        loaded = load_checks()
        report = run_doctor(facts, loaded.checks)
    except Exception as exc:  # the summary is context; a broken doctor must not stop the benchmark
        return {"verdict": None, "error": f"{exc.__class__.__name__}: {exc}", "findings": []}
    return {
        "verdict": report.verdict,
        "findings": [{"check": f.check, "severity": f.severity.value, "summary": f.summary} for f in report.findings],
    }
