"""This host's own token-generation constants, fitted to what it measured (the loop from bench/tune back to advise).

advise's band (tunehost.advise.ceiling) models a token's time as

    time/token = sum(bytes_i / (eff x bandwidth_i)) + layers x per_layer

with ``eff`` and ``per_layer`` fitted to published llama.cpp runs of other machines (BAND_MODELS). Every `tunehost
bench` and `tunehost tune` run recorded in the results store (tunehost.store) is one more equation of that model for
THIS host: the bytes a token read from each memory at the bandwidth basis of the run (the DIMMs' peak when known,
else the RAM bandwidth measured with the run; VRAM at its spec), the layers, and the TG it reached. Per
:class:`FitKey`: the class (band_class: gpu, gpu-moe, split, unified, cpu, cpu-moe...), whether the model has
recurrent layers, and, where the CPU reads weights (a CPU, MoE-offload or split placement), the thread count the run
used (a run at 2 threads is not an equation of a plan at 16), this module fits the two constants:

- two or more models whose bytes-per-layer differ by at least :data:`DISTINCT_SHAPES` x determine both (least
  squares on time/token, eff at most 1, per_layer at least 0);
- runs of one model shape determine one equation: ``eff`` is fitted with ``per_layer`` held at each end of the
  published range, and the band spans both answers; per_layer is reported as *not determined*;
- a run faster than its bandwidth basis allows (the model sits in the CPU's cache: a few-MB test model) says
  nothing about RAM and is left out, with that reason.

The expectation for a model of a calibrated class is the fitted time/token, widened by how far this host's runs
scatter around the fit (at least :data:`MIN_SPREAD` either way). Pure: no I/O; the store reads the points.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tunehost.advise.ceiling import BAND_MODELS, TgBand, band_class
from tunehost.bounds import whole
from tunehost.printable import one_line

DISTINCT_SHAPES = 1.25  # bytes per layer of two models must differ by this factor to tell eff from per-layer cost
# the host band is at least +-15 % around the fit. Run-to-run noise of one llama-bench median is ~5 %, but the band
# is for the next model, and another model (or setting) on the same host scatters more: judged on the published runs
# (calibration.within_host: each row by the fit of its host's other rows; 371 of 486 counted when it was set), +-5 %
# held 296 (80 %; a GPU + RAM split 17 of 30), +-10 % 318, +-15 % 334 (90 %), every class at 85 % or more but unified
# (40 of 48, no better at +-20 %: an M1 Max's F16 and 70B rows beside its Q4_K_M 8B). With session 11's H200 rows
# (384 of 506): 303, 326, 343. docs/history.md, "How far the host band holds"
MIN_SPREAD = 0.15
MAX_RAM_GBPS = 20_000.0  # far above any host's RAM: a larger stored figure is damage
CACHE_RESIDENT = 1.0  # a run above this share of its bandwidth basis did not read its weights from RAM
# where a bench/tune ceiling's RAM bandwidth came from (the "ram_source" of tunehost.bench.runner.tg_ceiling)
MEASURED_SOURCE = "measured"  # probed with the run, on a host busy_reason called quiet
STORE_SOURCE = "store"  # the host was busy: a quiet measurement of an earlier run (quiet_bandwidth)
DIMM_SOURCE = "dimm"  # the host was busy, nothing quiet stored: the configured DIMMs' peak
BUSY_SOURCE = "busy"  # the host was busy and nothing else was known: probed anyway, unreliable
QUIET_RUNS = 5  # the newest quiet measurements whose median stands in for one taken now
CLASS_NAMES = {"gpu": "GPU dense", "gpu-hbm": "NVIDIA HBM GPU dense", "gpu-hbm-amd": "AMD HBM GPU dense",
               "gpu-moe": "GPU MoE", "split": "GPU + RAM split", "unified": "unified memory",
               "unified-rdna": "AMD RDNA iGPU", "unified-vega": "AMD Vega iGPU", "cpu": "CPU dense",
               "cpu-moe": "CPU MoE", "gpu-hybrid": "GPU hybrid (recurrent layers)", "cpu-arm": "CPU on an ARM SoC"}


def read_seconds(ram_bytes: int, ram_gbps: float | None, vram_bytes: int, vram_gbps: float | None) -> float | None:
    """Seconds to read a token's bytes from RAM and VRAM at these bandwidths (GB/s); None when a memory that is
    read has no bandwidth."""
    if (ram_bytes and not ram_gbps) or (vram_bytes and not vram_gbps):
        return None
    return (ram_bytes / (ram_gbps * 1e9) if ram_bytes else 0.0) + \
        (vram_bytes / (vram_gbps * 1e9) if vram_bytes else 0.0)  # type: ignore[operator]


@dataclass(frozen=True)
class RunRef:
    """Which recorded run a point comes from (:meth:`HostPoint.from_run`), as the store read it (hostile: cleaned
    there)."""

    run_id: int
    created: str
    command: str  # bench | tune
    model: str  # display name
    model_hash: str


CPU_READS = ("cpu", "moe", "split")  # placements whose RAM part the CPU's threads read (their count matters)
MAX_THREADS = 4096


@dataclass(frozen=True, order=True)
class FitKey:
    """Which of a host's runs are equations of one fit: the class, whether the model has recurrent layers (a hybrid
    MoE decodes at 0.76-0.80 of a transformer MoE's speed on the same CPU threads: H25's Xeon sweep), and the CPU
    threads where the CPU reads weights (None: a GPU-only or unified placement, or a run that did not record them)."""

    cls: str
    recurrent: bool = False
    threads: int | None = None

    @classmethod
    def of(cls, band: str, path: str, *, recurrent: bool = False, threads: int | None = None) -> "FitKey":
        return cls.make(band, recurrent, threads if path in CPU_READS else None)

    @classmethod
    def make(cls, band: str, recurrent: bool, threads: int | None) -> "FitKey":
        # gpu-hybrid is the recurrent class already: its key does not say it twice
        return cls(band, recurrent and band != "gpu-hybrid", threads)

    def name(self) -> str:
        """"CPU MoE, recurrent layers, 8 threads"."""
        parts = [CLASS_NAMES.get(self.cls, self.cls)]
        if self.recurrent:
            parts.append("recurrent layers")
        if self.threads:
            parts.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        return ", ".join(parts)

    def text(self) -> str:
        """The key in `advise --calibrate --json`: the class alone for a transformer at no recorded thread count
        ("cpu"), else with "+recurrent" and "@<threads>t" ("cpu-moe+recurrent@8t")."""
        return self.cls + ("+recurrent" if self.recurrent else "") + \
            (f"@{self.threads}t" if self.threads else "")


@dataclass(frozen=True)
class HostPoint:
    """One recorded run as an equation: what a token read, from where, and the TG it reached."""

    run_id: int
    created: str
    command: str  # bench | tune
    model: str  # display name
    model_hash: str
    path: str  # placement: gpu | moe | split | unified | cpu
    moe: bool
    layers: int
    ram_bytes: int  # per token, from host RAM (unified RAM included)
    vram_bytes: int  # per token, from VRAM
    ram_gbps: float | None  # the bandwidth basis of the run
    vram_gbps: float | None
    basis: str  # "dimm" (the configured DIMMs' peak) | "measured" (RAM bandwidth measured with the run)
    tg_ts: float
    hybrid: bool = False  # the model has recurrent layers (the ceiling's "recurrent"; runs stored before it: False)
    threads: int | None = None  # CPU threads of the run (the ceiling's "threads"; None: not given, or stored before)

    @property
    def cls(self) -> str:
        # a hybrid on the GPU decodes compute-bound: its runs fit gpu-hybrid, not the transformers' gpu class (on the
        # published runs a host's hybrids judged by its transformers were the GPU band's deepest misses). Elsewhere
        # they count in their placement's class, kept apart by FitKey; the store does not know the CPU's ISA or the
        # VRAM's kind either, which one host does not change
        return band_class(self.path, self.moe, hybrid=self.hybrid)

    @property
    def key(self) -> "FitKey":
        return FitKey.of(self.cls, self.path, recurrent=self.hybrid, threads=self.threads)

    def read_s(self, ram_gbps: float | None = None, vram_gbps: float | None = None) -> float | None:
        """Seconds to read one token's bytes at the basis bandwidths (or the ones given)."""
        return read_seconds(self.ram_bytes, ram_gbps or self.ram_gbps, self.vram_bytes, vram_gbps or self.vram_gbps)

    @classmethod
    def from_run(cls, run: RunRef, tg_ts: float, ceiling: Mapping[str, Any]) -> "HostPoint | None":
        """A point from a run's TG and its recorded ceiling document (tunehost.bench.runner.tg_ceiling); None when
        it lacks what the equation needs or holds values no real run has (the store is read as hostile input)."""
        path, layers, moe = ceiling.get("path"), ceiling.get("layers"), ceiling.get("moe")
        parts = ceiling.get("parts")
        if path not in ("gpu", "moe", "split", "unified", "cpu") or not _count(layers) or not isinstance(moe, bool) \
                or not isinstance(parts, list) or not _positive(tg_ts) or tg_ts > 1e6:
            return None
        dimm = ceiling.get("ram_dimm_gbps")
        ram_bytes = vram_bytes = 0
        ram_gbps = vram_gbps = None
        basis = "dimm" if _positive(dimm) else "measured"
        if basis == "measured" and ceiling.get("ram_source") == BUSY_SOURCE:
            return None  # its RAM bandwidth was read on a busy host: no equation for this host's constants
        for part in parts[:4]:
            if not isinstance(part, Mapping) or not _count(part.get("bytes_per_token")):
                continue
            n, gbps = int(part["bytes_per_token"]), part.get("gbps")
            if part.get("memory") == "VRAM":
                vram_bytes += n
                vram_gbps = float(gbps) if _positive(gbps) else None
            else:
                ram_bytes += n
                ram_gbps = float(dimm) if basis == "dimm" else (float(gbps) if _positive(gbps) else None)
        if not ram_bytes and not vram_bytes:
            return None
        point = cls(int(run.run_id), one_line(run.created, 32), one_line(run.command, 16), one_line(run.model, 120),
                    str(run.model_hash)[:40], str(path), moe, int(layers), ram_bytes, vram_bytes, ram_gbps, vram_gbps,
                    basis, float(tg_ts), ceiling.get("recurrent") is True,
                    whole(ceiling.get("threads"), 1, MAX_THREADS))
        return point if point.read_s() is not None else None


@dataclass(frozen=True)
class ClassFit:
    """The constants of one class on this host (of one kind of model and CPU thread count: ``key``), and how well the
    data pin them down."""

    key: FitKey
    eff: float | None  # share of the bandwidth basis reached
    layer_us: float | None  # fixed cost per layer and token, microseconds
    eff_range: tuple[float, float] | None  # eff when layer_us is not determined: at each end of the published range
    layer_us_determined: bool
    points: tuple[HostPoint, ...]  # the ones fitted
    left_out: tuple[tuple[HostPoint, str], ...] = ()
    spread: tuple[float, float] = (1.0, 1.0)  # min / max of measured / fitted TG over the points
    basis: str = "measured"
    notes: tuple[str, ...] = field(default=())

    @property
    def cls(self) -> str:
        return self.key.cls

    @property
    def runs(self) -> int:
        return len(self.points)

    @property
    def models(self) -> int:
        return len({p.model_hash for p in self.points})

    @property
    def last(self) -> str:
        return max((p.created for p in self.points), default="")

    def median_gbps(self, memory: str) -> float | None:
        values = [p.ram_gbps if memory == "RAM" else p.vram_gbps for p in self.points]
        values = [v for v in values if v]
        return float(statistics.median(values)) if values else None

    def source(self) -> str:
        """"from 3 runs of 2 models on this host, last 2026-11-20"."""
        return (f"from {self.runs} run{'s' if self.runs != 1 else ''} of {self.models} "
                f"model{'s' if self.models != 1 else ''} on this host, last {self.last[:10]}")

    def to_json(self) -> dict[str, Any]:
        published = BAND_MODELS.get(self.cls)
        return {"class": self.cls, "name": self.key.name(), "recurrent": self.key.recurrent,
                "threads": self.key.threads, "runs": self.runs,
                "models": self.models, "last": self.last or None, "basis": self.basis,
                "efficiency": _round(self.eff), "efficiency_range": [_round(v) for v in self.eff_range]
                if self.eff_range else None, "per_layer_us": _round(self.layer_us),
                "per_layer_determined": self.layer_us_determined,
                "spread": [round(self.spread[0], 4), round(self.spread[1], 4)],
                "published": {"efficiency": [published.eff_low, published.eff_high],
                              "per_layer_us": [published.layer_us_low, published.layer_us_high]}
                if published else None,
                "points": [{"run": p.run_id, "created": p.created, "command": p.command, "model": p.model,
                            "tg_ts": round(p.tg_ts, 3), "layers": p.layers, "ram_bytes": p.ram_bytes,
                            "vram_bytes": p.vram_bytes, "ram_gbps": p.ram_gbps, "vram_gbps": p.vram_gbps}
                           for p in self.points],
                "left_out": [{"run": p.run_id, "model": p.model, "why": why} for p, why in self.left_out],
                "notes": list(self.notes)}

    def seconds(self, read_s: float, layers: int) -> tuple[float, float] | None:
        """(fast, slow) seconds per token for a token reading ``read_s`` at the basis through ``layers`` layers."""
        if self.layer_us_determined and self.eff and self.layer_us is not None:
            t = read_s / self.eff + layers * self.layer_us * 1e-6
            return t / self.spread[1], t / self.spread[0]
        if self.eff_range is None:
            return None
        published = BAND_MODELS[self.cls]
        ends = [read_s / eff + layers * us * 1e-6
                for eff, us in zip(self.eff_range, (published.layer_us_low, published.layer_us_high))]
        return min(ends) / self.spread[1], max(ends) / self.spread[0]


@dataclass(frozen=True)
class HostCalibration:
    fits: Mapping[FitKey, ClassFit]
    left_out: tuple[tuple[HostPoint, str], ...] = ()

    def get(self, cls: str, *, recurrent: bool = False, threads: int | None = None) -> ClassFit | None:
        """The fit for a plan of class ``cls`` (a model with ``recurrent`` layers; the CPU at ``threads``, given only
        where the CPU reads weights): the runs at that thread count, else runs that recorded none; never runs at
        another thread count (:meth:`other_threads` names those)."""
        return self.fit_for(FitKey.make(cls, recurrent, threads))

    def fit_for(self, key: FitKey) -> ClassFit | None:
        """The fit for a plan of ``key`` (as :meth:`get`)."""
        for k in dict.fromkeys((key, replace(key, threads=None))):
            fit = self.fits.get(k)
            if fit is not None and fit.points:
                return fit
        return None

    def other_threads(self, cls: str, *, recurrent: bool = False) -> list[int]:
        """The thread counts this host has runs of ``cls`` at (for "calibrated at 8 threads, the plan uses 16")."""
        want = FitKey.make(cls, recurrent, None)
        return sorted(k.threads for k, f in self.fits.items()
                      if (k.cls, k.recurrent) == (want.cls, want.recurrent) and k.threads and f.points)

    def to_json(self) -> dict[str, Any]:
        return {"classes": {k.text(): v.to_json() for k, v in sorted(self.fits.items())},
                "undetermined": undetermined(self),
                "left_out": [{"run": p.run_id, "model": p.model, "why": why} for p, why in self.left_out]}


def fit_host(points: Iterable[HostPoint]) -> HostCalibration:
    """Fit every FitKey that has points (see the module docstring)."""
    by_key: dict[FitKey, list[HostPoint]] = {}
    left_out: list[tuple[HostPoint, str]] = []
    for p in points:
        read = p.read_s()
        if read is None or p.cls not in BAND_MODELS:
            left_out.append((p, "no bandwidth basis for its memory"))
        elif read * p.tg_ts > CACHE_RESIDENT:
            left_out.append((p, f"{p.tg_ts:.0f} t/s is faster than its bytes can be read at "
                                f"{_basis_text(p)}: the model sits in the CPU's cache"))
        else:
            by_key.setdefault(p.key, []).append(p)
    fits = {}
    for key, pts in by_key.items():
        basis = max(pts, key=lambda p: (p.created, p.run_id)).basis  # the newest run's: the host as it is now
        kept = [p for p in pts if p.basis == basis]
        mixed = tuple((p, f"bandwidth basis {p.basis}, the others' is {basis}") for p in pts if p.basis != basis)
        fits[key] = _fit_class(key, kept, mixed, basis)
    return HostCalibration(fits, tuple(left_out))


def _fit_class(key: FitKey, pts: Sequence[HostPoint], left_out: tuple[tuple[HostPoint, str], ...],
               basis: str) -> ClassFit:
    published = BAND_MODELS[key.cls]
    # one host, one RAM: a measured bandwidth that differs between runs is the probe's scatter (33-55 GB/s within
    # minutes on a VM), so every run is read at the median of its class (the DIMMs' peak is one number anyway)
    ram = statistics.median([p.ram_gbps for p in pts if p.ram_gbps] or [0.0]) or None
    vram = statistics.median([p.vram_gbps for p in pts if p.vram_gbps] or [0.0]) or None
    xs = [(p.read_s(ram, vram) or 0.0, float(p.layers), 1.0 / p.tg_ts) for p in pts]
    shapes = [x / layers for x, layers, _ in xs]
    notes: list[str] = []
    if max(shapes) / min(shapes) >= DISTINCT_SHAPES:
        solved = _least_squares(xs)
        if solved is not None:
            a, b = solved
            fit = ClassFit(key, 1.0 / a, b * 1e6, None, True, tuple(pts), left_out, basis=basis)
            return _with_spread(fit, xs)
        notes.append("the runs' models differ, but no efficiency at most 1 with a non-negative per-layer cost fits "
                     "them: per-layer cost held at the published range")
    else:
        notes.append("every run here is of one model shape: the per-layer cost is not determined (held at the "
                     f"published {published.layer_us_low:g}-{published.layer_us_high:g} us); bench a model of "
                     "another size on the same placement to determine it")
    effs = []
    for us in (published.layer_us_low, published.layer_us_high):
        values = [x / (y - layers * us * 1e-6) for x, layers, y in xs if y - layers * us * 1e-6 > 0]
        effs.append(min(1.0, float(statistics.median(values))) if values else None)
    if effs[0] is None:
        return ClassFit(key, None, None, None, False, tuple(pts), left_out, basis=basis,
                        notes=tuple(notes) + ("the measured time per token is below the per-layer cost alone: "
                                              "nothing can be fitted",))
    if effs[1] is None:  # the slow end's overhead alone exceeds the measured time: only the fast end fits
        effs[1] = effs[0]
        notes.append(f"a per-layer cost of {published.layer_us_high:g} us is more than this host's runs took")
    fit = ClassFit(key, float(statistics.median(effs)), None, (effs[0], effs[1]), False, tuple(pts), left_out,
                   basis=basis, notes=tuple(notes))
    return _with_spread(fit, xs)


def _least_squares(xs: Sequence[tuple[float, float, float]]) -> tuple[float, float] | None:
    """y = a x + b l, a >= 1 (eff <= 1), b >= 0; None when the unconstrained answer breaks a bound."""
    sxx = sum(x * x for x, _, _ in xs)
    sll = sum(layers * layers for _, layers, _ in xs)
    sxl = sum(x * layers for x, layers, _ in xs)
    sxy = sum(x * y for x, _, y in xs)
    sly = sum(layers * y for _, layers, y in xs)
    det = sxx * sll - sxl * sxl
    if det <= 0 or not math.isfinite(det):
        return None
    a = (sxy * sll - sly * sxl) / det
    b = (sxx * sly - sxl * sxy) / det
    if a < 1.0 or b < 0 or not math.isfinite(a) or not math.isfinite(b):
        return None
    return a, b


def _with_spread(fit: ClassFit, xs: Sequence[tuple[float, float, float]]) -> ClassFit:
    ratios = []
    for x, layers, y in xs:
        band = fit.seconds(x, int(layers))
        if band is None:
            continue
        centre = math.sqrt(band[0] * band[1])
        ratios.append(centre / y)  # measured TG / fitted TG
    if not ratios:
        return fit
    low, high = min(min(ratios), 1.0 - MIN_SPREAD), max(max(ratios), 1.0 + MIN_SPREAD)
    return replace(fit, spread=(low, high))


def host_band(fit: ClassFit, read_s: float, layers: int, bound: str, *, basis: str = "") -> TgBand | None:
    """The TG this host should reach for a token reading ``read_s`` (at the fit's basis, which ``basis`` names
    for the reader) through ``layers``."""
    seconds = fit.seconds(read_s, layers)
    if seconds is None or seconds[0] <= 0:
        return None
    note = (f"efficiency {fit.eff:.2f} and {fit.layer_us:.0f} us per layer fitted here" if fit.layer_us_determined
            else f"efficiency {fit.eff_range[0]:.2f}-{fit.eff_range[1]:.2f} fitted here, per-layer cost not yet "
                 "determined" if fit.eff_range else "")
    notes = tuple(n for n in (note, basis) if n)
    return TgBand(1.0 / seconds[1], 1.0 / seconds[0], fit.cls, bound, notes, source=fit.source())


def undetermined(calibration: HostCalibration) -> list[str]:
    """What the data do not determine yet, one line per constant (for `advise --calibrate`)."""
    out = []
    fitted = {k.cls for k, f in calibration.fits.items() if f.points}
    for cls in BAND_MODELS:
        if cls not in fitted:
            out.append(f"{CLASS_NAMES.get(cls, cls)}: no run on this host: efficiency and per-layer cost come from "
                       "published runs")
    for key, fit in sorted(calibration.fits.items()):
        name = key.name()
        if not fit.points:
            continue
        if fit.eff is None:
            out.append(f"{name}: nothing fitted ({'; '.join(fit.notes)})")
        elif not fit.layer_us_determined:
            out.append(f"{name}: per-layer cost not determined (runs of one model shape); efficiency "
                       f"{fit.eff_range[0]:.2f}-{fit.eff_range[1]:.2f} depending on it" if fit.eff_range else
                       f"{name}: per-layer cost not determined")
    return out


def _basis_text(p: HostPoint) -> str:
    gbps = p.ram_gbps if p.ram_bytes else p.vram_gbps
    return f"{gbps:.1f} GB/s ({'the DIMMs peak' if p.basis == 'dimm' else 'measured'})" if gbps else "its bandwidth"


def _round(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 50


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class StoredBandwidth:
    """A quiet RAM bandwidth this host measured with earlier runs (the results store): what a busy host's ceiling
    uses instead of a probe that would read the other load."""

    gbps: float
    runs: int
    last: str  # when the newest of them was measured

    def basis(self) -> str:
        return (f"measured on this host when it was quiet ({'median of ' + str(self.runs) + ' runs, ' if self.runs > 1 else ''}"
                f"newest {self.last[:10]}; the results store)")


def quiet_bandwidth(runs: Iterable[Any]) -> StoredBandwidth | None:
    """The median RAM bandwidth of the newest :data:`QUIET_RUNS` runs (StoredRun-like: ``summary``, ``created``;
    newest first, of this host) that measured it on a quiet host: ``ram_source`` "measured", or, recorded before
    tunehost said where it came from, a run not disturbed. None when there is none. Hostile store rows: anything
    that is not a plausible positive number is left out."""
    found: list[tuple[float, str]] = []
    for run in runs:
        summary = getattr(run, "summary", None)
        ceiling = summary.get("ceiling") if isinstance(summary, Mapping) else None
        if not isinstance(ceiling, Mapping):
            continue
        gbps, source = ceiling.get("ram_measured_gbps"), ceiling.get("ram_source")
        quiet = source == MEASURED_SOURCE or (source is None and summary.get("disturbed") is False)
        if not quiet or not _positive(gbps) or float(gbps) > MAX_RAM_GBPS:
            continue
        found.append((float(gbps), one_line(str(getattr(run, "created", "") or ""), 32)))
        if len(found) == QUIET_RUNS:
            break
    if not found:
        return None
    return StoredBandwidth(round(statistics.median(g for g, _ in found), 2), len(found), found[0][1])

