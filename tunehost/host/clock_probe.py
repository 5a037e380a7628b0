"""The clock load probe: effective CPU clocks while busy loops run (the clock keys of samples/measure.json).

    probe_clocks(host, budget_s=1.5)
    -> {"cpu_mhz_single": {"0": 4890.0, "16": 3900.0},      # one CPU per core type, each alone busy
        "cpu_mhz_all": {"0": 4610.0, "2": 4605.0, ...},     # one CPU per physical core, all busy at once
        "cpu_mhz_source": "aperf-mperf",                     # how the clock was read (below)
        "cpu_probe_window_s": 0.2}                           # seconds each reading covered (this module's own key)
    -> {"clocks_skipped": "no cpufreq in this VM/container: ..."}   when it cannot measure

Busy loops run in child processes (threads would share the GIL), each pinned with os.sched_setaffinity to one CPU;
they are killed and reaped on every way out, KeyboardInterrupt included. The whole probe stays within `budget_s`.
Effective clocks are read, in order of preference, from:
- "aperf-mperf": cpufreq/cpuinfo_avg_freq (newer kernels: the hardware-reported average over a few ms, kHz);
- "cppc-feedback": acpi_cppc/feedback_ctrs deltas over the window (AMD, CPPC servers; no root needed);
- "scaling_cur_freq": cpufreq/scaling_cur_freq read repeatedly while busy (x86 kernels derive it from APERF/MPERF);
- "cpuinfo": the "cpu MHz" lines of /proc/cpuinfo read while busy.
Only raw figures are recorded; facts/checks compare them with cpuinfo_max_freq and base_frequency / nominal_freq.
Reads go through the host layer (host.files); a snapshot host is never probed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Callable, Iterable

from tunehost.facts.clocks import ClockFacts, parse_feedback, feedback_mhz, cppc_dir, read_cppc
from tunehost.facts.cpu import CPU_ROOT, CPUINFO, CpuFacts
from tunehost.facts.topology import EFFICIENCY, PERFORMANCE, CpuTopology, physical_cores

if TYPE_CHECKING:
    from tunehost.host import Host

BUSY_LOOP = "while True: pass"
RAMP_S = 0.12          # the governor/HWP raises the clock within tens of ms; the child interpreter starts in ~20 ms
MIN_WINDOW_S = 0.05
MAX_WINDOW_S = 0.5
READS_PER_WINDOW = 5   # scaling_cur_freq / cpu MHz: the median of a few reads while busy
MAX_ALL_CORE = 512     # children at once: one per physical core, capped on the largest hosts
KILL_WAIT_S = 2.0
SOURCES = ("aperf-mperf", "cppc-feedback", "scaling_cur_freq", "cpuinfo")


def probe_clocks(host: "Host", *, budget_s: float = 1.5) -> dict:
    """The clock keys of the measure sample (see the module docstring); never raises for what the host lacks."""
    started = time.monotonic()
    if not host.live:
        return {"clocks_skipped": "a snapshot is never probed"}
    cpu = CpuFacts.gather(host)
    clocks = ClockFacts.gather(host)
    if not cpu.has_cpufreq and not clocks.cppc:
        return {"clocks_skipped": cpu.reason or "no cpufreq: the effective clock cannot be read"}
    topo = CpuTopology.gather(host)
    try:
        allowed = os.sched_getaffinity(0)
    except OSError:
        allowed = set(topo.online)
    single, every = choose_cpus(topo, clocks, allowed)
    if not every:
        return {"clocks_skipped": "no online CPU this process may run on (CPU affinity / cpuset)"}
    source = pick_source(host, every[0], clocks)
    if source is None:
        return {"clocks_skipped": "no effective clock readable (no cpuinfo_avg_freq, acpi_cppc/feedback_ctrs, "
                                  f"scaling_cur_freq or \"cpu MHz\" in {CPUINFO})"}
    phases = [[c] for c in single] + [every]
    spent = time.monotonic() - started
    per_phase = (budget_s - spent) / len(phases) if phases else 0.0
    window = min(MAX_WINDOW_S, per_phase - RAMP_S - 0.03)  # 30 ms per phase for spawning and reaping
    if window < MIN_WINDOW_S:
        return {"clocks_skipped": f"a {budget_s:.1f} s budget leaves no time for a load window"}
    read = _reader(host, source, clocks)
    out_single: dict[str, float] = {}
    out_all: dict[str, float] = {}
    for phase in phases:
        if time.monotonic() - started + RAMP_S + window > budget_s:
            break
        got = run_phase(phase, read, window)
        target = out_all if phase is every else out_single
        target.update({str(c): round(mhz, 1) for c, mhz in got.items()})
    result: dict = {}
    if out_single:
        result["cpu_mhz_single"] = out_single
    if out_all:
        result["cpu_mhz_all"] = out_all
    if not result:
        return {"clocks_skipped": f"the effective clock ({source}) did not change while busy"}
    result["cpu_mhz_source"] = source
    result["cpu_probe_window_s"] = round(window, 3)
    return result


def choose_cpus(topo: CpuTopology, clocks: ClockFacts, allowed: set[int]) -> tuple[list[int], list[int]]:
    """(single-core CPUs: one per core type, the preferred core where CPPC ranks them; all-core CPUs: the first
    thread of every physical core), restricted to the CPUs this process may run on."""
    kinds = topo.by_cpu()
    isolated = set(topo.isolated)
    firsts = [core[0] for core in physical_cores(topo) if core[0] in allowed and core[0] not in isolated]
    single: list[int] = []
    for kind in ((PERFORMANCE, EFFICIENCY) if topo.hybrid else (None,)):
        group = [c for c in firsts if kinds[c].kind == kind]
        if not group:
            continue
        ranked = [c for c in group if clocks.cppc.get(c) and clocks.cppc[c].highest_perf]
        if ranked and len({clocks.cppc[c].highest_perf for c in ranked}) > 1:
            # AMD preferred cores: the highest highest_perf boosts furthest; ties go to the lowest CPU id
            single.append(max(ranked, key=lambda c: (clocks.cppc[c].highest_perf, -c)))
        else:
            single.append(group[0])
    return single, firsts[:MAX_ALL_CORE]


def pick_source(host: "Host", cpu: int, clocks: ClockFacts) -> str | None:
    files = host.files
    freq = f"{CPU_ROOT}/cpu{cpu}/cpufreq"
    if _positive(files.read_value(f"{freq}/cpuinfo_avg_freq")):
        return "aperf-mperf"
    cppc = clocks.cppc.get(cpu)
    if cppc and cppc.nominal_mhz and parse_feedback(files.read(f"{cppc_dir(cpu)}/feedback_ctrs")):
        return "cppc-feedback"
    if _positive(files.read_value(f"{freq}/scaling_cur_freq")):
        return "scaling_cur_freq"
    if _cpuinfo_mhz(files.read(CPUINFO)):
        return "cpuinfo"
    return None


# A reader runs one load window: given the busy CPUs and the window, it returns {cpu: MHz} for those it could read.
Reader = Callable[[list[int], float], dict[int, float]]


def _reader(host: "Host", source: str, clocks: ClockFacts) -> Reader:
    files = host.files

    def sampled(read_one: Callable[[list[int]], dict[int, float]]) -> Reader:
        def read(cpus: list[int], window: float) -> dict[int, float]:
            seen: dict[int, list[float]] = {}
            for _ in range(READS_PER_WINDOW):
                time.sleep(window / READS_PER_WINDOW)
                for cpu, mhz in read_one(cpus).items():
                    seen.setdefault(cpu, []).append(mhz)
            return {cpu: statistics.median(values) for cpu, values in seen.items()}
        return read

    def khz_file(name: str) -> Callable[[list[int]], dict[int, float]]:
        def read_one(cpus: list[int]) -> dict[int, float]:
            out = {}
            for cpu in cpus:
                khz = _positive(files.read_value(f"{CPU_ROOT}/cpu{cpu}/cpufreq/{name}"))
                if khz:
                    out[cpu] = khz / 1000
            return out
        return read_one

    def cpuinfo_one(cpus: list[int]) -> dict[int, float]:
        table = _cpuinfo_mhz(files.read(CPUINFO))
        return {cpu: table[cpu] for cpu in cpus if cpu in table}

    def feedback(cpus: list[int], window: float) -> dict[int, float]:
        statics = {cpu: clocks.cppc.get(cpu) or read_cppc(host, cpu) for cpu in cpus}
        before = {cpu: parse_feedback(files.read(f"{cppc_dir(cpu)}/feedback_ctrs")) for cpu in cpus}
        time.sleep(window)
        out = {}
        for cpu in cpus:
            after = parse_feedback(files.read(f"{cppc_dir(cpu)}/feedback_ctrs"))
            first, cppc = before[cpu], statics[cpu]
            if first and after and cppc:
                mhz = feedback_mhz(first, after, cppc)
                if mhz:
                    out[cpu] = mhz
        return out

    if source == "cppc-feedback":
        return feedback
    if source == "aperf-mperf":
        return sampled(khz_file("cpuinfo_avg_freq"))
    if source == "scaling_cur_freq":
        return sampled(khz_file("scaling_cur_freq"))
    return sampled(cpuinfo_one)


def run_phase(cpus: list[int], read: Reader, window: float) -> dict[int, float]:
    """Busy loops pinned to `cpus` for the ramp and the window; the clocks read meanwhile. Children never outlive it."""
    children: list[subprocess.Popen] = []
    try:
        children = spawn_busy(cpus)
        pinned = [c for c, child in zip(cpus, children) if child is not None]
        if not pinned:
            return {}
        time.sleep(RAMP_S)
        return read(pinned, window)
    finally:
        stop_busy(children)


def spawn_busy(cpus: Iterable[int]) -> list:
    """One busy-loop child per CPU, pinned from here (no pre-exec hook: unsafe with threads). A CPU that refuses the
    pinning gets no child (None in its place)."""
    children: list = []
    try:
        for cpu in cpus:
            child = subprocess.Popen([sys.executable, "-S", "-I", "-c", BUSY_LOOP], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
            children.append(child)
            try:
                os.sched_setaffinity(child.pid, {cpu})
            except OSError:
                stop_busy([child])
                children[-1] = None
    except BaseException:
        stop_busy(children)
        raise
    return children


def stop_busy(children: Iterable) -> None:
    """Kill and reap every child; a KeyboardInterrupt while reaping still reaps the rest, then goes on up."""
    live = [c for c in children if c is not None]
    interrupted: BaseException | None = None
    for child in live:
        try:
            child.kill()
        except OSError:
            pass
    for child in live:
        while True:
            try:
                child.wait(timeout=KILL_WAIT_S)
                break
            except subprocess.TimeoutExpired:
                child.kill()
            except KeyboardInterrupt as exc:
                interrupted = exc
    if interrupted is not None:
        raise interrupted


def _positive(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    value = int(text.strip())
    return value if 0 < value < 20_000_000 else None


def _cpuinfo_mhz(text: str | None) -> dict[int, float]:
    """{processor: cpu MHz} from /proc/cpuinfo."""
    out: dict[int, float] = {}
    current = None
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor" and value.isdigit():
            current = int(value)
        elif key == "cpu MHz" and current is not None:
            try:
                mhz = float(value)
            except ValueError:
                continue
            if 0 < mhz < 20_000:
                out[current] = mhz
    return out
