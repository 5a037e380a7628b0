"""The pre-benchmark gate's logic (`tunehost gate`, tunehost/cli/gate.py, is the edge): is the host quiet, what to
record next to results, its own exit statuses, and running the wrapped command with signals forwarded.

Quiet = no other process using more than `hog_percent` of one CPU, and the hottest temperature sensor moved by no
more than `settle_c` degrees between two readings. Readings come through the host layer (the `activity` sample,
hwmon and thermal_zone files), so the logic is tested with readings built by hand and an injected clock.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from tunehost.errors import EXIT_BUSY

if TYPE_CHECKING:
    from tunehost.host import Host

# The gate's own exit statuses: sysexits.h values, which common benchmark commands (llama-bench, make, python, grep,
# diff: 1 and 2) do not use, so a status from this list means the gate stopped and the command did not run.
EXIT_USAGE = 64  # EX_USAGE: bad arguments
EXIT_NOT_READY = 69  # EX_UNAVAILABLE: doctor says the host is not ready
EXIT_SOFTWARE = 70  # EX_SOFTWARE: the gate could not judge or record (unreadable snapshot, --out not writable)
EXIT_NOT_QUIET = EXIT_BUSY  # the one EX_TEMPFAIL (tunehost.errors): the host did not become quiet; try again later
# ...and, as env(1), nice(1) and timeout(1) do: the command could not be run
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
GATE_EXIT_STATUSES = {
    EXIT_USAGE: "bad arguments (the command did not run)",
    EXIT_NOT_READY: "the host is not ready: doctor found a fail (--strict: a warning too); the command did not run",
    EXIT_SOFTWARE: "the gate could not judge the host or write --out DIR; the command did not run",
    EXIT_NOT_QUIET: "the host did not become quiet within --wait-quiet; the command did not run",
    EXIT_CANNOT_EXECUTE: "the command was found but could not be executed",
    EXIT_NOT_FOUND: "the command was not found",
}
# forwarded to the command when they are sent to the gate (kill, systemd, a CI runner cancelling the job)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SI_KERNEL = 0x80  # si_code of a signal the kernel sent, e.g. Ctrl-C from the terminal to the whole process group

HOG_PERCENT = 50.0  # of one CPU
SETTLE_C = 2.0
TEMP_GLOBS = ("/sys/class/hwmon/hwmon*/temp*_input", "/sys/class/thermal/thermal_zone*/temp")


@dataclass(frozen=True)
class QuietReading:
    hogs: tuple[tuple[str, float], ...]  # (process name, % of one CPU) above the threshold
    max_temp_c: float | None
    cpu_percent_total: float | None = None


def max_temperature(host: "Host") -> float | None:
    """The hottest sensor in °C (sysfs reports millidegrees); None when the host exposes none."""
    temps = []
    for pattern in TEMP_GLOBS:
        for path in host.files.glob(pattern):
            value = host.files.read_int(path)
            if value is not None and 0 < value < 150_000:  # drop absent (-) and bogus readings
                temps.append(value / 1000)
    return max(temps) if temps else None


def read_quiet(host: "Host", hog_percent: float = HOG_PERCENT) -> QuietReading:
    """One process-list sample: what a snapshot holds (``--snapshot``). The live host is judged by
    :func:`wait_quiet_live` instead (the rounds' judgement)."""
    activity: Any = host.sample("activity") or {}
    hogs = tuple((str(p.get("name")), float(p.get("cpu_percent", 0))) for p in activity.get("processes", [])
                 if not p.get("self") and float(p.get("cpu_percent", 0)) > hog_percent)
    return QuietReading(hogs, max_temperature(host), activity.get("cpu_percent_total"))


def why_not_quiet(previous: QuietReading | None, current: QuietReading, settle_c: float = SETTLE_C) -> str | None:
    """None when the host is quiet, else the reason in one line (pure)."""
    if current.hogs:
        return "busy: " + ", ".join(f"{name} {pct:.0f}%" for name, pct in current.hogs)
    if current.max_temp_c is not None:
        if previous is None or previous.max_temp_c is None:
            return "temperature not settled yet (one reading)"
        delta = abs(current.max_temp_c - previous.max_temp_c)
        if delta > settle_c:
            return f"temperature still moving ({previous.max_temp_c:.1f} -> {current.max_temp_c:.1f} °C)"
    return None


@dataclass
class QuietResult:
    quiet: bool
    waited_s: float
    reason: str | None
    readings: list[QuietReading] = field(default_factory=list)


def wait_quiet(read: Callable[[], QuietReading], timeout_s: float, *, interval_s: float = 2.0,
               settle_c: float = SETTLE_C, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> QuietResult:
    """Poll until quiet or `timeout_s` has passed (bounded). `read` takes a fresh reading each call."""
    start = clock()
    readings: list[QuietReading] = []
    previous = None
    while True:
        current = read()
        readings.append(current)
        reason = why_not_quiet(previous, current, settle_c)
        waited = clock() - start
        if reason is None:
            return QuietResult(True, waited, None, readings)
        if waited + interval_s > timeout_s:
            return QuietResult(False, waited, reason, readings)
        sleep(interval_s)
        previous = current


def wait_quiet_live(open_live: Callable[[], "Host"], timeout_s: float, *, settle_c: float = SETTLE_C,
                    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                    watcher: Any = None) -> QuietResult:
    """--wait-quiet on the live host, judged as tune and bench judge their rounds (ONE notion of quiet:
    :func:`tunehost.bench.watch.wait_for_quiet`, machine-wide CPU time of other processes over two windows in a
    row, for a configuration that uses every CPU, plus steal, swapping and throttling): a build's short-lived
    compilers, which a single process list misses, keep the host busy. Then the temperature must have settled
    (two readings within ``settle_c``), in what is left of ``timeout_s``. ``watcher``: a
    tunehost.bench.watch.HostWatcher to wait with (tests)."""
    from tunehost.bench.watch import HostWatcher

    start = clock()
    before = _temperature_only(open_live())
    watch = watcher or HostWatcher(open_live(), gpu=False, clock=clock, sleep=sleep)
    waited = watch.wait_quiet(timeout_s, None)
    after = _temperature_only(open_live())
    if not waited.quiet:
        return QuietResult(False, clock() - start, f"busy: {waited.reason}", [before, after])
    if why_not_quiet(before, after, settle_c) is None:
        return QuietResult(True, clock() - start, None, [before, after])
    settled = wait_quiet(lambda: _temperature_only(open_live()), max(0.0, timeout_s - (clock() - start)),
                         settle_c=settle_c, clock=clock, sleep=sleep)
    return QuietResult(settled.quiet, clock() - start, settled.reason, [before, after, *settled.readings])


def _temperature_only(host: "Host") -> QuietReading:
    """A reading of the temperature alone (the sensor files): the CPU use was judged elsewhere (the watch's
    windows), so no process-list sample is taken for it."""
    return QuietReading((), max_temperature(host))


def host_summary(host: "Host") -> dict[str, Any]:
    """A short record of the host state a result was measured under (kept next to the results)."""
    from tunehost.facts.cpu import online_cpus
    from tunehost.facts.memory import THP_DEFRAG, THP_ENABLED, selected_mode
    from tunehost.apply.journal import Journal
    from tunehost.apply.settings import SWAPPINESS, cpufreq_path

    files = host.files
    model = None
    for line in (files.read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    cpus = online_cpus(host) or []
    per_cpu: dict[str, dict[str, int]] = {}
    for name in ("scaling_driver", "scaling_governor", "energy_performance_preference"):
        values: dict[str, int] = {}
        for cpu in cpus:
            v = files.read_value(cpufreq_path(cpu, name))
            if v is not None:
                values[v] = values.get(v, 0) + 1
        per_cpu[name] = values
    try:
        applied = [{"profile": r.profile, "run": r.id, "status": r.status} for r in Journal().active_runs()]
    except Exception as exc:  # a summary never fails the gate
        applied = [{"error": str(exc)}]
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "hostname": files.read_value("/proc/sys/kernel/hostname"),
        "kernel": files.read_value("/proc/sys/kernel/osrelease"),
        "cpu_model": model,
        "online_cpus": len(cpus) or None,
        "cpufreq": per_cpu,
        "thp": {"enabled": selected_mode(files.read_value(THP_ENABLED)),
                "defrag": selected_mode(files.read_value(THP_DEFRAG))},
        "swappiness": files.read_int(SWAPPINESS),
        "max_temp_c": max_temperature(host),
        "tunehost_applied": applied,
    }


def should_forward(signo: int, si_code: int) -> bool:
    """Pass a signal on unless the kernel sent it to the whole process group (the terminal's Ctrl-C, a hangup):
    the command, in the same group, already has that one."""
    return signo in FORWARDED_SIGNALS and si_code != SI_KERNEL


def run_command(argv: list[str]) -> int:
    """Run argv (no shell; PATH lookup like execvp) and return its exit status unchanged, or 128+N when signal N
    killed it, as shells report it. SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to the gate are passed on to the command;
    ones the terminal sent to the whole foreground process group already reached it and are not sent twice
    (llama-server takes a second Ctrl-C as "quit now"). Raises OSError when argv[0] cannot be started."""
    watched = {*FORWARDED_SIGNALS, signal.SIGCHLD}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)  # blocked: taken by sigwaitinfo, never lost
    try:
        # the child gets the mask the gate had, and SIGPIPE/SIGXFSZ at their defaults (Python ignores them)
        pid = os.posix_spawnp(argv[0], argv, dict(os.environ), setsigmask=previous,
                              setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            info = signal.sigwaitinfo(watched)
            if should_forward(info.si_signo, info.si_code):
                os.kill(pid, info.si_signo)
        while signal.sigtimedwait(watched, 0) is not None:  # drop what arrived as the child ended
            pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code
