"""The pre-benchmark gate as an operation (`tunehost gate`; tunehost/cli/gate.py parses, opens and renders): is
the host quiet, what to record next to results, its own exit statuses, and running the wrapped command with
signals forwarded. :func:`run_gate` waits, judges, records and runs; it returns a :class:`GateResult` and never
prints (its status lines go to the caller's ``on_status``).

Quiet = no other process using more than `hog_percent` of one CPU, and the hottest temperature sensor moved by no
more than `settle_c` degrees between two readings. Readings come through the host layer (the `activity` sample,
hwmon and thermal_zone files), so the logic is tested with readings built by hand and an injected clock.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tunehost.bounds import json_text
from tunehost.errors import EXIT_BUSY, TunehostError

if TYPE_CHECKING:
    from tunehost.facts import HostFacts
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


# ---------------------------------------------------------------- the gate as an operation (tunehost/cli/gate.py renders)

MEASURED_CHECKS = ("memory-bandwidth", "cpu-clocks", "power-limits")  # their figures are said on every run


@dataclass(frozen=True)
class GateRequest:
    """What the gate was asked: the command to run after it, how long to wait for quiet, where to record
    (``out``: DIR, the record goes to DIR/host/) and the snapshot judged (None: the live host). How strictly the
    host is judged is the caller's judge's (GateEdge.judge)."""

    command: list[str]
    wait_quiet_s: float = 0.0
    out: Path | None = None
    snapshot: Path | None = None


@dataclass(frozen=True)
class GateEdge:
    """What the gate asks of its caller: a host opener (``fresh_host(record)``: a fresh host each call, live or
    the snapshot; the wait takes fresh readings), doctor's judgement of the facts, the snapshot writer for --out,
    and where its status lines go (said as they happen: before the judgement and the command's own output)."""

    fresh_host: Callable[[bool], "Host"]
    judge: Callable[["HostFacts"], Any]  # -> tunehost.doctor Report
    record_snapshot: Callable[["HostFacts", Path], None]
    on_status: Callable[[str], None] = lambda line: None


@dataclass(frozen=True)
class GateResult:
    """How the gate ended. ``status``: its own (GATE_EXIT_STATUSES) or the command's. ``error``: the gate's own
    failure in one line (EXIT_SOFTWARE). ``doc``: doctor's report as JSON once judged. After the command:
    ``cannot_run`` (why it could not be started), ``explanation`` (a llama.cpp tool killed by a signal) and
    ``summary_warning`` (the exit status could not be added to the record)."""

    status: int
    error: str | None = None
    quiet: QuietResult | None = None
    doc: dict[str, Any] | None = None
    ran: bool = False
    cannot_run: str | None = None
    explanation: str | None = None
    summary_warning: str | None = None


def run_gate(request: GateRequest, edge: GateEdge) -> GateResult:
    """Wait for quiet (``request.wait_quiet_s``), judge the host once after the wait, record it (``out``), and run
    the command when the host is ready. Never prints: the status lines go to ``edge.on_status``."""
    say = edge.on_status
    snapshot_out = request.out / "host" / "snapshot" if request.out is not None else None
    if snapshot_out is not None and snapshot_out.is_dir() and any(snapshot_out.iterdir()):
        return GateResult(EXIT_SOFTWARE, f"{snapshot_out} already holds a snapshot; choose a new --out DIR")
    quiet = None
    try:
        if request.wait_quiet_s:
            say(f"waiting up to {request.wait_quiet_s:g} s for the host to be quiet...")
            quiet = _wait(request, edge)
            if not quiet.quiet:
                return GateResult(EXIT_NOT_QUIET, quiet=quiet)
            say(f"host quiet after {quiet.waited_s:.0f} s")
        # judged after the wait, once: this run's measurement decides and is what --out records
        facts = _facts(edge.fresh_host(request.out is not None and request.snapshot is None))
        report = edge.judge(facts)
    except TunehostError as exc:
        return GateResult(EXIT_SOFTWARE, str(exc), quiet)
    doc = report.to_json()
    for finding in doc["findings"]:
        if finding["check"] in MEASURED_CHECKS:
            say(f"{finding['check']}: {finding['summary']}")
    host_dir = request.out / "host" if request.out is not None else None
    summary: dict[str, Any] = {}
    if host_dir is not None:
        try:
            summary = _record(facts, doc, host_dir, request, quiet, edge)
        except (OSError, TunehostError) as exc:
            return GateResult(EXIT_SOFTWARE, f"cannot write {host_dir}: {getattr(exc, 'strerror', None) or exc}",
                              quiet, doc)
    if not report.ready:
        return GateResult(EXIT_NOT_READY, quiet=quiet, doc=doc)
    say("tunehost doctor: ready")
    if not request.command:
        return GateResult(0, quiet=quiet, doc=doc)
    result, duration_s = _run(request.command)
    if host_dir is not None:
        summary.update({"exit_status": result.status, "duration_s": duration_s})
        try:
            _write_json(host_dir / "summary.json", summary)
        except OSError as exc:  # the command has run: its status still comes back
            result = replace(result, summary_warning=f"could not record the exit status in {host_dir}: "
                                                     f"{exc.strerror or exc}")
    return replace(result, quiet=quiet, doc=doc)


def _wait(request: GateRequest, edge: GateEdge) -> QuietResult:
    if request.snapshot is None:  # the live host: judged as tune and bench judge their rounds
        return wait_quiet_live(lambda: edge.fresh_host(False), request.wait_quiet_s)
    # a snapshot holds one process list: a fresh host per reading (samples are cached per host)
    return wait_quiet(lambda: read_quiet(edge.fresh_host(False)), request.wait_quiet_s)


def _facts(host: "Host") -> "HostFacts":
    from tunehost.facts import HostFacts

    return HostFacts(host)


def _run(command: list[str]) -> tuple[GateResult, float]:
    """Run the command (stdout flushed first: nothing buffered lands after the command's own output); its result
    and how long it ran (s)."""
    import sys

    sys.stdout.flush()
    started = time.time()
    try:
        rc = run_command(command)
    except OSError as exc:
        rc = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_EXECUTE
        result = GateResult(rc, cannot_run=f"cannot run {command[0]!r}: {exc.strerror or exc}")
    else:
        explanation = None
        program = os.path.basename(command[0])
        if 128 < rc < 128 + 65 and program.startswith("llama"):  # a llama.cpp tool killed by signal rc - 128
            from tunehost.facts.llama_exit import explain_exit
            from tunehost.host.cpuinfo import live_cpu_flags

            explanation = explain_exit(program, 128 - rc, live_cpu_flags()) or ""
        result = GateResult(rc, ran=True, explanation=explanation)
    return result, round(time.time() - started, 1)


def _record(facts: "HostFacts", doc: dict[str, Any], host_dir: Path, request: GateRequest,
            quiet: QuietResult | None, edge: GateEdge) -> dict[str, Any]:
    """DIR/host/doctor.json, summary.json and (live host) snapshot/, the replayable facts with the measurements."""
    host_dir.mkdir(parents=True, exist_ok=True)
    _write_json(host_dir / "doctor.json", doc)
    summary = host_summary(facts.host)  # before the snapshot is written, so that what it read is in it too
    if quiet is not None:
        last = quiet.readings[-1]
        summary["quiet"] = {"waited_s": round(quiet.waited_s, 1), "max_temp_c": last.max_temp_c,
                            "cpu_percent_total": last.cpu_percent_total}
    summary["verdict"] = doc["verdict"]
    summary["command"] = request.command
    if request.snapshot is None:
        edge.record_snapshot(facts, host_dir / "snapshot")
        summary["snapshot"] = "snapshot"
    else:
        summary["snapshot"] = str(request.snapshot)  # judged from this snapshot: nothing live to record
    _write_json(host_dir / "summary.json", summary)
    edge.on_status(f"doctor report and host facts written to {host_dir}")
    return summary


def _write_json(path: Path, data: Any) -> None:
    import json

    path.write_text(json_text(data, indent=2) + "\n")
