"""The clock load probe: effective CPU clocks while busy loops run (the clock keys of samples/measure.json).

    probe_clocks(host, budget_s=1.5)
    -> {"cpu_mhz_single": {"0": 4890.0, "16": 3900.0},      # one CPU per core type, each alone busy
        "cpu_mhz_all": {"0": 4610.0, "2": 4605.0, ...},     # one CPU per physical core, all busy at once
        "cpu_mhz_source": "aperf-mperf",                     # how the clock was read (below)
        "cpu_probe_window_s": 0.2}                           # seconds each reading covered (this module's own key)
    -> {"clocks_skipped": "no cpufreq in this VM/container: ..."}   when it cannot measure

Busy loops run in child processes (threads would share the GIL), each pinned with os.sched_setaffinity to one CPU;
they are killed and reaped on every way out, KeyboardInterrupt included, and end by themselves a few seconds after
their window should tunehost itself be killed. The whole probe stays within `budget_s`.
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
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from tunehost.bounds import whole_text
from tunehost.cpulist import MAX_CPUS
from tunehost.facts.clocks import ClockFacts, parse_feedback, feedback_mhz, cppc_dir, read_cppc
from tunehost.facts.cpu import CPU_ROOT, CPUINFO, CpuFacts
from tunehost.facts.topology import EFFICIENCY, PERFORMANCE, CpuTopology, physical_cores

if TYPE_CHECKING:
    from tunehost.host import Host

CHILD_GRACE_S = 3.0   # a busy child ends itself this long after its window even if nobody stops it
# The launcher: forks one busy child per CPU (each pins itself), says "ready cpu:pid ...", then waits for its stdin to
# close (or its parent to vanish, or the lifetime to pass), kills and reaps the children, and exits.
LAUNCHER = r"""
import os, select, signal, sys, time
end = time.monotonic() + float(sys.argv[1])
owner = os.getppid()
launcher = os.getpid()
children = {}
for cpu in map(int, sys.argv[2:]):
    pid = os.fork()
    if pid == 0:
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            os._exit(3)
        n = 0
        while True:
            n += 1
            if (n & 0x3FFFF) == 0 and (os.getppid() != launcher or time.monotonic() > end):
                os._exit(0)
    children[cpu] = pid
sys.stdout.write("ready " + " ".join("%d:%d" % kv for kv in children.items()) + "\n")
sys.stdout.flush()
while time.monotonic() < end and os.getppid() == owner:
    if select.select([sys.stdin], [], [], 0.05)[0]:
        break
for pid in children.values():
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
for pid in children.values():
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
"""
RAMP_S = 0.12          # the governor/HWP raises the clock within tens of ms; the child interpreter starts in ~20 ms
MIN_WINDOW_S = 0.05
SPAWN_S = 0.1          # starting the launcher interpreter, its forks, and the reaping, per phase
MAX_WINDOW_S = 0.5
READS_PER_WINDOW = 5   # scaling_cur_freq / cpu MHz: the median of a few reads while busy
MAX_ALL_CORE = 512     # children at once: one per physical core, capped on the largest hosts
KILL_WAIT_S = 1.0
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
    # all-core first: it matters most, and a tight budget then drops a single-core reading rather than it
    phases = [every] + [[c] for c in single]
    read = _reader(host, source, clocks)
    out_single: dict[str, float] = {}
    out_all: dict[str, float] = {}
    windows: list[float] = []
    for k, phase in enumerate(phases):
        left = budget_s - (time.monotonic() - started)
        window = min(MAX_WINDOW_S, left / (len(phases) - k) - RAMP_S - SPAWN_S)
        if window < MIN_WINDOW_S:
            break
        try:
            got = run_phase(phase, read, window)
        except OSError as exc:  # no interpreter to start, no fork allowed (RLIMIT_NPROC, seccomp): say so
            return {"clocks_skipped": f"the busy-loop children could not start ({exc.__class__.__name__})"}
        windows.append(window)
        target = out_all if phase is every else out_single
        target.update({str(c): round(mhz, 1) for c, mhz in got.items()})
    if not windows:
        return {"clocks_skipped": f"a {budget_s:.1f} s budget leaves no time for a load window"}
    result: dict = {}
    if out_single:
        result["cpu_mhz_single"] = out_single
    if out_all:
        result["cpu_mhz_all"] = out_all
    if not result:
        return {"clocks_skipped": f"the effective clock ({source}) did not change while busy"}
    result["cpu_mhz_source"] = source
    result["cpu_probe_window_s"] = round(min(windows), 3)
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
    group: BusyGroup | None = None
    try:
        group = spawn_busy(cpus, lifetime_s=RAMP_S + window + CHILD_GRACE_S)
        if not group.pids:
            return {}
        time.sleep(RAMP_S)
        return read(sorted(group.pids), window)
    finally:
        if group is not None:
            stop_busy(group)


@dataclass
class BusyGroup:
    """One launcher process (its own session and process group) and its busy children: CPU -> pid."""

    launcher: subprocess.Popen
    pids: dict[int, int] = field(default_factory=dict)


def spawn_busy(cpus: Iterable[int], lifetime_s: float) -> BusyGroup:
    """Busy children pinned one per CPU. One launcher forks them all (a fork per CPU costs well under a millisecond;
    starting an interpreter per CPU would eat the budget on a 192-core host), then this process pins each again with
    os.sched_setaffinity; a CPU that refuses the pinning is dropped. Every child exits by itself after `lifetime_s`
    or when its parent goes away, so even a SIGKILL of tunehost leaves no busy loop behind."""
    wanted = list(dict.fromkeys(int(c) for c in cpus))
    launcher = subprocess.Popen([sys.executable, "-S", "-I", "-c", LAUNCHER, f"{lifetime_s:.3f}", *map(str, wanted)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                close_fds=True, start_new_session=True)
    group = BusyGroup(launcher)
    try:
        ready = launcher.stdout.readline().decode("ascii", "replace").split() if launcher.stdout else []
        for pair in ready[1:] if ready[:1] == ["ready"] else []:
            cpu, _, pid = pair.partition(":")
            if cpu.isdigit() and pid.isdigit() and int(cpu) in wanted:
                try:
                    os.sched_setaffinity(int(pid), {int(cpu)})
                except OSError:
                    continue
                group.pids[int(cpu)] = int(pid)
    except BaseException:
        stop_busy(group)
        raise
    return group


def stop_busy(group: BusyGroup) -> None:
    """End the launcher and every busy child: the launcher kills and reaps its children when its stdin closes; the
    whole process group is then killed in case it did not. A KeyboardInterrupt meanwhile still finishes the job,
    then goes on up."""
    launcher = group.launcher
    interrupted: BaseException | None = None
    try:
        if launcher.stdin:
            launcher.stdin.close()
    except OSError:
        pass
    try:
        launcher.wait(timeout=KILL_WAIT_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):
            interrupted = exc
    _kill_group(launcher.pid)  # whatever is left of the group (all of it, if the launcher did not answer)
    while launcher.returncode is None:
        try:
            launcher.wait()  # SIGKILLed: returns at once; a blocking wait needs no timer
        except KeyboardInterrupt as exc:
            interrupted = exc
    try:
        _await_dead(group)
    except KeyboardInterrupt as exc:
        interrupted = exc
    if launcher.stdout:
        launcher.stdout.close()
    if interrupted is not None:
        raise interrupted


def _await_dead(group: BusyGroup, timeout_s: float = KILL_WAIT_S) -> None:
    """Return once no busy child runs any more. A SIGKILLed child on a busy CPU needs a moment to be scheduled and
    die; the children are the launcher's, not ours, so /proc (state, process group) is the only way to see it."""
    import select

    deadline = time.monotonic() + timeout_s
    while any(_alive_in_group(pid, group.launcher.pid) for pid in group.pids.values()):
        if time.monotonic() > deadline:
            return
        select.select([], [], [], 0.005)  # not time.sleep: nothing here may be cut short


def _alive_in_group(pid: int, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return False
    return len(fields) > 2 and fields[0] not in ("Z", "X") and fields[2] == str(pgid)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _positive(text: str | None) -> int | None:
    return whole_text(text, 1, 19_999_999)  # kHz; "²" or 5,000 digits are no reading


def _cpuinfo_mhz(text: str | None) -> dict[int, float]:
    """{processor: cpu MHz} from /proc/cpuinfo."""
    out: dict[int, float] = {}
    current = None
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            current = whole_text(value, 0, MAX_CPUS - 1)
        elif key == "cpu MHz" and current is not None:
            try:
                mhz = float(value)
            except ValueError:
                continue
            if 0 < mhz < 20_000:
                out[current] = mhz
    return out
