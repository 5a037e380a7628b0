"""Energy per generated token: the CPU package's RAPL counters and the GPUs' energy over exactly the measured runs.

What is read (every file through the host layer, live or a snapshot; NVML through the GPU sampler's session):

- **CPU package**: the powercap tree's top-level RAPL zones (``/sys/class/powercap/intel-rapl:N``, also the tree
  AMD CPUs expose on newer kernels), those whose ``name`` is ``package-N``; ``energy_uj`` counts microjoules and
  wraps at ``max_energy_range_uj`` (:func:`counter_delta` adds the range back once). Sub-zones (core, uncore,
  dram) are not added: the package already holds core and uncore, ``psys`` the whole platform. Since Linux 5.10
  ``energy_uj`` is readable by root only (CVE-2020-8694): then the CPU part is missing, with that reason.
- **GPU**: NVML's total energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded, Volta
  and newer) or an amdgpu hwmon ``energy1_input`` (µJ) read at both ends; else the GPU watch's power samples
  (~1 Hz) integrated over the window (an estimate, said so).

:class:`EnergyMeter` reads (``read() -> EnergyReading``); :func:`energy_between` (pure) turns two readings into an
:class:`Energy` that names the parts measured and why the others are missing. No figure is ever a guess: a part that
cannot be read is left out and named, and with no part at all there is no figure, with the reasons.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunehost.host import Host

POWERCAP = "/sys/class/powercap"
_ZONE = re.compile(r"(intel|amd)-rapl:\d+")  # top level only: intel-rapl:0, not intel-rapl:0:1
CPU, GPU = "cpu", "gpu"
ROOT_ONLY = ("readable by root only since Linux 5.10 (CVE-2020-8694): run as root, or let this user read it "
             "(a udev rule or chmod on energy_uj)")
# integrating ~1 Hz power samples: a window needs at least this many to be integrated at all
MIN_POWER_SAMPLES = 2


@dataclass(frozen=True)
class Counter:
    """One energy counter as read: what it counts (``cpu`` or ``gpu``), its name, joules, and the value at which
    it wraps back to 0 (joules; None: a 64-bit counter that does not wrap in practice)."""

    part: str
    name: str
    joules: float
    wraps_at_j: float | None = None


@dataclass(frozen=True)
class EnergyReading:
    """Every energy counter at one moment (``at_s``: time.monotonic), and what could not be read (one line each,
    per part)."""

    at_s: float
    counters: tuple[Counter, ...] = ()
    missing: Mapping[str, str] = field(default_factory=dict, hash=False)  # part -> why not read
    gpus: tuple[str, ...] = ()  # every GPU the meter knows of (with or without a counter)


@dataclass(frozen=True)
class Energy:
    """The energy of one window (a llama-bench run, a round, a whole measurement): per part in joules, what was
    measured (``parts``: one line each, with its source) and what was not (``missing``: the reasons)."""

    wall_s: float
    cpu_j: float | None = None
    gpu_j: float | None = None
    parts: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def joules(self) -> float | None:
        """The measured parts added up; None when nothing was measured."""
        parts = [j for j in (self.cpu_j, self.gpu_j) if j is not None]
        return sum(parts) if parts else None

    @property
    def measured(self) -> str:
        """"CPU package + GPU", "CPU package only", "GPU only" or "none"."""
        if self.cpu_j is not None and self.gpu_j is not None:
            return "CPU package + GPU"
        if self.cpu_j is not None:
            return "CPU package only"
        return "GPU only" if self.gpu_j is not None else "none"

    def to_json(self) -> dict[str, Any]:
        return {"wall_s": round(self.wall_s, 3), "joules": _round(self.joules), "cpu_j": _round(self.cpu_j),
                "gpu_j": _round(self.gpu_j), "measured": self.measured, "parts": list(self.parts),
                "missing": list(self.missing)}

    @classmethod
    def from_json(cls, data: Any) -> "Energy | None":
        """An Energy from a stored document (hostile: anything but finite non-negative numbers is not read)."""
        if not isinstance(data, Mapping):
            return None
        wall = _joules(data.get("wall_s"))
        return cls(wall or 0.0, _joules(data.get("cpu_j")), _joules(data.get("gpu_j")),
                   tuple(str(p)[:300] for p in data.get("parts") or () if isinstance(p, str))[:16],
                   tuple(str(m)[:300] for m in data.get("missing") or () if isinstance(m, str))[:16])


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _joules(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


# ---------------------------------------------------------------- pure parts


def counter_delta(before: float, after: float, wraps_at: float | None) -> float | None:
    """``after - before`` of a counter that wraps to 0 at ``wraps_at``: once round when ``after < before``; None
    when it went backwards and does not wrap (a reset: the driver reloaded) or either value is no number."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in (before, after)):
        return None
    delta = after - before
    if delta >= 0:
        return delta
    if wraps_at is None or not math.isfinite(wraps_at) or wraps_at <= before:
        return None
    return wraps_at - before + after


def integrate_power(samples: Sequence[tuple[float, float]], start_s: float, end_s: float) -> float | None:
    """Joules from (time, watts) samples over [start_s, end_s]: the trapezoid between samples, the first and last
    value held to the window's edges. None with fewer than :data:`MIN_POWER_SAMPLES` samples inside."""
    inside = sorted((t, w) for t, w in samples if start_s <= t <= end_s and math.isfinite(w) and w >= 0)
    if len(inside) < MIN_POWER_SAMPLES or end_s <= start_s:
        return None
    joules = inside[0][1] * (inside[0][0] - start_s) + inside[-1][1] * (end_s - inside[-1][0])
    for (t0, w0), (t1, w1) in zip(inside, inside[1:]):
        joules += (w0 + w1) / 2.0 * (t1 - t0)
    return joules


def energy_between(before: EnergyReading, after: EnergyReading,
                   power: Mapping[str, Sequence[tuple[float, float]]] | None = None) -> Energy:
    """The energy from ``before`` to ``after`` (pure). ``power``: each GPU's (time, watts) samples, integrated
    for a GPU with no energy counter at both ends."""
    wall = max(0.0, after.at_s - before.at_s)
    start = {(c.part, c.name): c for c in before.counters}
    totals: dict[str, float] = {}
    parts: list[str] = []
    missing: list[str] = []
    counted: dict[str, list[str]] = {CPU: [], GPU: []}
    broken: dict[str, list[str]] = {CPU: [], GPU: []}
    for c in after.counters:
        first = start.get((c.part, c.name))
        if first is None:
            broken[c.part].append(f"{c.name}: not read at the start")
            continue
        delta = counter_delta(first.joules, c.joules, c.wraps_at_j if c.wraps_at_j is not None else first.wraps_at_j)
        if delta is None:
            broken[c.part].append(f"{c.name}: the counter went back ({first.joules:g} J -> {c.joules:g} J) "
                                  "without a wrap range: reset")
            continue
        totals[c.part] = totals.get(c.part, 0.0) + delta
        counted[c.part].append(c.name)
    # the CPU part is all packages or none: a sum over some of them would understate it without saying so
    if broken[CPU]:
        totals.pop(CPU, None)
        missing.append("CPU package: " + "; ".join(broken[CPU]))
    elif counted[CPU]:
        parts.append(f"CPU package (RAPL: {', '.join(counted[CPU])})")
    elif CPU in after.missing:
        missing.append(f"CPU package: {after.missing[CPU]}")
    gpu_j = totals.get(GPU)
    gpu_missing = list(broken[GPU])
    if counted[GPU]:
        parts.append(f"GPU energy counter ({', '.join(counted[GPU])})")
    no_counter = [g for g in after.gpus if g not in counted[GPU]]
    for gpu in no_counter:
        joules = integrate_power((power or {}).get(gpu, ()), before.at_s, after.at_s)
        if joules is None:
            gpu_missing.append(f"{gpu}: no energy counter and fewer than {MIN_POWER_SAMPLES} power samples "
                               f"in the {wall:.1f} s window")
            continue
        gpu_j = (gpu_j or 0.0) + joules
        parts.append(f"GPU power samples integrated ({gpu}, ~1 Hz: an estimate)")
    if gpu_missing:  # the GPU part is all GPUs or none, like the packages
        gpu_j = None
        parts = [p for p in parts if not p.startswith("GPU")]
        missing.append("GPU: " + "; ".join(gpu_missing))
    elif GPU in after.missing and gpu_j is None:
        missing.append(f"GPU: {after.missing[GPU]}")
    return Energy(wall, totals.get(CPU), gpu_j, tuple(parts), tuple(missing))


def add_up(energies: Sequence[Energy]) -> Energy | None:
    """Several windows as one: each part added up when every window measured it (else that part is missing)."""
    if not energies:
        return None

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    cpu = total([e.cpu_j for e in energies])
    gpu = total([e.gpu_j for e in energies])
    parts = tuple(dict.fromkeys(p for e in energies for p in e.parts
                                if (p.startswith("CPU") and cpu is not None) or (p.startswith("GPU") and gpu is not None)))
    missing = list(dict.fromkeys(m for e in energies for m in e.missing))
    for name, value, seen in (("CPU package", cpu, [e.cpu_j for e in energies]),
                              ("GPU", gpu, [e.gpu_j for e in energies])):
        if value is None and any(v is not None for v in seen):
            missing.append(f"{name}: not measured in every window ({sum(v is None for v in seen)} of "
                           f"{len(seen)} without it)")
    return Energy(sum(e.wall_s for e in energies), cpu, gpu, parts, tuple(missing))


def per_token(energy: Energy | None, tokens: int) -> float | None:
    """Joules per generated token; None without a measured part or without generated tokens."""
    if energy is None or energy.joules is None or tokens <= 0:
        return None
    return energy.joules / tokens


# ---------------------------------------------------------------- reading through the host


def read_rapl(host: "Host") -> tuple[list[Counter], str | None]:
    """The CPU packages' RAPL counters, or ([], why not): no powercap zone, a package whose ``energy_uj`` is there
    but cannot be read (root only), or garbage in it."""
    zones = [z for z in host.files.listdir(POWERCAP) if _ZONE.fullmatch(z)]
    if not zones:
        return [], (f"no RAPL zone in {POWERCAP} (no intel_rapl/powercap driver for this CPU, or a virtual "
                    "machine that does not pass it through)")
    counters: list[Counter] = []
    problems: list[str] = []
    for zone in zones:
        base = f"{POWERCAP}/{zone}"
        name = host.files.read_value(f"{base}/name") or ""
        if not name.startswith("package"):
            continue  # psys holds the package, dram sits beside it: only packages are added
        energy = host.files.read_value(f"{base}/energy_uj")
        if energy is None:
            problems.append(f"{base}/energy_uj " + (ROOT_ONLY if host.files.exists(f"{base}/energy_uj")
                                                     else "is absent"))
            continue
        value = _microjoules(energy)
        wraps = _microjoules(host.files.read_value(f"{base}/max_energy_range_uj") or "")
        if value is None:
            problems.append(f"{base}/energy_uj holds {energy[:40]!r}, not a count of microjoules")
            continue
        counters.append(Counter(CPU, f"{zone} {name}", value / 1e6, wraps / 1e6 if wraps else None))
    if problems:
        return [], "; ".join(problems)
    if not counters:
        return [], f"no package zone among {', '.join(zones)} in {POWERCAP}"
    return counters, None


def _microjoules(text: str) -> int | None:
    text = text.strip()
    return int(text) if re.fullmatch(r"\d{1,20}", text) else None


def read_amdgpu_energy(host: "Host", dev: str) -> float | None:
    """An amdgpu card's hwmon ``energy1_input`` in joules (µJ in the file); None when it has none."""
    for hwmon in host.files.listdir(f"{dev}/hwmon"):
        value = _microjoules(host.files.read_value(f"{dev}/hwmon/{hwmon}/energy1_input") or "")
        if value is not None:
            return value / 1e6
    return None


# GPU label -> joules (None: this GPU has no counter); the callable returns None when no GPU is watched
GpuCounters = Callable[[], "Mapping[str, float | None] | None"]


class EnergyMeter:
    """Reads every energy counter at once (``read()``): RAPL through ``host.files``, the GPUs through
    ``gpu_counters`` (the GPU watch's: NVML or amdgpu hwmon; None: no GPU known)."""

    def __init__(self, host: "Host", *, gpu_counters: GpuCounters | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.host = host
        self.gpu_counters = gpu_counters
        self.clock = clock

    def read(self) -> EnergyReading:
        counters, why = read_rapl(self.host)
        missing = {CPU: why} if why else {}
        gpus: tuple[str, ...] = ()
        try:
            got = self.gpu_counters() if self.gpu_counters is not None else None
        except Exception as exc:  # a broken GPU reading is a missing part, never a failed benchmark
            got, missing[GPU] = {}, f"the GPU energy reading failed ({exc.__class__.__name__})"
        if got is None:
            missing[GPU] = "no GPU watched (no NVML, amdgpu or Intel GPU)"
        else:
            gpus = tuple(str(g) for g in got)
            counters += [Counter(GPU, str(gpu), float(j)) for gpu, j in got.items() if _joules(j) is not None]
        return EnergyReading(self.clock(), tuple(counters), missing, gpus)


def unavailable(reading: EnergyReading) -> str | None:
    """Why nothing can be measured on this host (no counter at all), else None: what `--objective
    tokens-per-joule` checks before it races (a GPU with power samples only is not enough for a race)."""
    if reading.counters:
        return None
    return "; ".join(f"{'CPU package' if part == CPU else 'GPU'}: {why}" for part, why in reading.missing.items()) \
        or "no energy counter"
