"""The pre-benchmark gate's logic (scripts/gate is the edge): is the host quiet, and what to record next to results.

Quiet = no other process using more than `hog_percent` of one CPU, and the hottest temperature sensor moved by no
more than `settle_c` degrees between two readings. Readings come through the host layer (the `activity` sample,
hwmon and thermal_zone files), so the logic is tested with readings built by hand and an injected clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from tunehost.host import Host

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


def host_summary(host: "Host") -> dict[str, Any]:
    """A short record of the host state a result was measured under (kept next to the results)."""
    from tunehost.cpulist import online_cpus
    from tunehost.facts.memory import THP_DEFRAG, THP_ENABLED, selected_mode
    from tunehost.tuning.journal import Journal
    from tunehost.tuning.settings import SWAPPINESS, cpufreq_path

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
