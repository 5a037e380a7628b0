"""The TG band against published llama.cpp measurements (tests/advise/data/published_tg.csv): which fall inside,
and how wide the band is. Used by tests/advise/test_calibration.py and scripts/calibrate_tg.py."""

from __future__ import annotations

import csv
import math
import re
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from tunehost.advise.ceiling import (BAND_MODELS, OLLAMA_SHARE, BandContext, BandModel, BandRecord, CpuView,
                                     band_class, hbm_kind, record_class, tg_band)
from tunehost.advise.host_calibration import HostPoint, fit_host, host_band
from tunehost.facts.power_cap import POWER_CAP_NOTICE

GB = 1e9


@dataclass(frozen=True)
class Measurement:
    id: str
    hardware: str
    kind: str  # gpu | apple | apu | cpu | split
    gbps: float
    model: str
    quant: str
    moe: bool
    layers: int
    bytes_gb: float
    cpu_bytes_gb: float
    cpu_gbps: float
    tps: float
    source: str
    runtime: str = "llama.cpp"
    power_ratio: float | None = None
    cores: int | None = None
    ccds: int | None = None
    isa: str | None = None
    igpu: str | None = None
    fits: bool = True
    kv_gb: float = 0.0  # KV-cache bytes one token reads at the context depth the source measured at (GB)
    excluded: str = ""  # why the row is judged apart although it fitted (read off its source), "" = counted
    hybrid: bool = False  # the model has recurrent layers (Qwen3.5/3.6, Qwen3-Next: ModelFacts.has_recurrent)
    ram_measured: bool = False  # the RAM bandwidth was measured on the host, not the DIMMs' peak (MEASURED_RAM_SHARE)

    @property
    def counted(self) -> bool:
        """In the fits and the figures: the model fitted its memory and the source gives no reason to set it apart."""
        return self.fits and not self.excluded

    @property
    def calibrates(self) -> bool:
        """Counted, a llama.cpp run at the default power limit, its RAM at a peak: the rows a class's constants are
        fitted on (an Ollama row calibrates OLLAMA_SHARE, a capped one power_cap's tables, one whose RAM bandwidth
        was measured MEASURED_RAM_SHARE)."""
        return self.counted and self.runtime != "ollama" and not self.capped and not self.ram_measured

    @property
    def capped(self) -> bool:
        """Run under a GPU power cap advise names (POWER_CAP_NOTICE): judged by its class's constants times the
        share power_cap's tables keep, so it informs those tables (cap_points), not the class's constants."""
        return self.power_ratio is not None and self.power_ratio < POWER_CAP_NOTICE

    def path(self) -> str:
        return {"gpu": "gpu", "split": "moe", "cpu": "cpu"}.get(self.kind, "unified")

    def context(self) -> BandContext:
        cpu = None
        if self.kind in ("cpu", "split") and (self.cores or self.isa):
            vendor = "amd" if any(w in self.hardware for w in ("AMD", "Ryzen", "EPYC", "Threadripper")) else \
                "intel" if any(w in self.hardware for w in ("Intel", "Xeon", "Core")) else "other"
            cpu = CpuView(self.cores, self.ccds, self.isa, vendor)
        return BandContext(cpu=cpu, quant=self.quant, runtime=self.runtime, igpu=self.igpu,
                           power_ratio=self.power_ratio, ram_measured=self.ram_measured)

    @property
    def hbm(self) -> str | None:
        """"nvidia" | "amd" where the GPU's VRAM is HBM, told from the hardware column's card name as advise tells
        it without NVML (hbm_kind)."""
        return hbm_kind(self.hardware, None) if self.kind == "gpu" else None

    def band_class(self) -> str:
        return band_class(self.path(), self.moe, self.igpu, hybrid=self.hybrid, isa=self.isa, hbm=self.hbm)

    def record_class(self) -> str:
        """The BAND_RECORD key of the band advise gives such a run (ceiling.record_class)."""
        return record_class(self.band_class(), self.runtime, self.power_ratio)

    def report_class(self) -> str:
        """The class issue 33 reports on: gpu, split, cpu, unified; Ollama and power-capped rows are their own, and
        so are CPU runs on ARM (cpu-arm: runs that behave unlike x86's, 63 of them one Raspberry Pi 4B's)."""
        if self.runtime == "ollama":
            return "ollama"
        if self.capped:
            return "power-capped"
        if self.kind == "cpu" and self.isa == "neon":
            return "cpu-arm"
        return {"gpu": "gpu", "split": "split", "cpu": "cpu"}.get(self.kind, "unified")


def load(path: str | Path) -> list[Measurement]:
    out = []
    opt = lambda r, k, f: f(r[k]) if r.get(k) else None  # noqa: E731
    for r in csv_rows(path):
        out.append(Measurement(r["id"], r["hardware"], r["kind"], float(r["gbps"]), r["model"], r["quant"],
                               r["moe"] == "1", int(r["layers"]), float(r["bytes_gb"]), float(r["cpu_bytes_gb"]),
                               float(r["cpu_gbps"]), float(r["tps"]), r["source"], r.get("runtime") or "llama.cpp",
                               opt(r, "power_ratio", float), opt(r, "cores", int), opt(r, "ccds", int),
                               r.get("isa") or None, r.get("igpu") or None, r.get("fits") != "0",
                               float(r.get("kv_gb") or 0), (r.get("excluded") or "").strip(),
                               r.get("hybrid") == "1", r.get("ram_measured") == "1"))
    return out


@dataclass(frozen=True)
class Verdict:
    m: Measurement
    low: float
    high: float

    @property
    def inside(self) -> bool:
        return self.low <= self.m.tps <= self.high

    def inside_by(self, margin: float) -> bool:
        """Inside with `margin` (>= 1) to spare at both edges."""
        return self.low * margin <= self.m.tps <= self.high / margin


CapTable = tuple[tuple[float, float, float], ...]


def judge(rows: list[Measurement], table: dict[str, BandModel] | None = None,
          ollama_share: tuple[float, float] | None = None,
          cap_share: tuple[CapTable, CapTable] | None = None) -> list[Verdict]:
    """Each row's band: BAND_MODELS (or `table`), OLLAMA_SHARE (or `ollama_share`), the power_cap tables (or
    `cap_share`: memory-bound, compute-bound)."""
    out = []
    for m in rows:
        # the KV cache lives beside the first part's weights (VRAM, unified or host RAM): a token generated deep in a
        # context reads it too, so a figure measured after a long prompt is judged with those bytes
        parts = [(int((m.bytes_gb + m.kv_gb) * GB), m.gbps)]
        if m.cpu_bytes_gb:
            parts.append((int(m.cpu_bytes_gb * GB), m.cpu_gbps))
        context = m.context()
        if ollama_share is not None:
            context = replace(context, ollama_share=ollama_share)
        if cap_share is not None:
            context = replace(context, cap_share=cap_share[0], cap_share_compute=cap_share[1])
        band = tg_band(parts, m.layers, m.band_class(), table=table, context=context)
        assert band is not None, m.id
        out.append(Verdict(m, band.low, band.high))
    return out


COVERAGE = 0.95  # the share inside a fit must reach before it narrows the band
# eff_high / eff_low at least this: hosts of one class differ by that much (DIMM ranks, clocks, builds); a fit on a
# handful of rows would otherwise promise a 1.07x band it cannot keep out of sample
MIN_SPREAD = 1.3
# a training row counts as inside only with this factor to spare at both edges: the band a fit picks then holds the
# next host of the class, not only the rows it was fitted on
FIT_MARGIN = 1.05
GRID = [BandModel(lo, hi, fast, slow) for lo in (0.35, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75) for hi in (0.75, 0.8, 0.85, 0.9, 0.95)
        for fast in (5.0, 10.0, 20.0, 30.0, 60.0) for slow in (60.0, 100.0, 160.0, 250.0, 400.0)
        if hi >= lo * MIN_SPREAD and slow > fast]


# classes whose band uses another class's constants: a split's VRAM part is read at the gpu row's shares
# (ceiling.tg_band); MoE on the CPU reads RAM at the dense cpu row's shares, its routing and gathers being per-layer
# costs, so cpu-moe fits only its per-layer costs
DEPENDS = {"split": "gpu", "cpu-moe": "cpu"}
SHARED_EFF = {"cpu-moe": "cpu"}


def fit(rows: list[Measurement], key: str, base: dict[str, BandModel] | None = None) -> BandModel:
    """The GRID point with the narrowest median band among those that put at least COVERAGE of `rows` (all of
    class `key`; rows that did not fit their memory or are excluded left out) inside, else the most inside: how
    BAND_MODELS was chosen. Maximising the share inside alone buys it with width (every band 2x wide holds more).
    `base`: the constants of the class `key` depends on (DEPENDS; BAND_MODELS' when not given)."""
    rows = [r for r in rows if r.calibrates]
    if not rows:
        return BAND_MODELS[key]
    dep = DEPENDS.get(key)
    base = {dep: (base or {}).get(dep) or BAND_MODELS[dep]} if dep else {}
    grid = GRID
    if key in SHARED_EFF:
        shared = base[SHARED_EFF[key]]
        grid = [c for c in GRID if (c.eff_low, c.eff_high) == (shared.eff_low, shared.eff_high)]
    target = math.ceil(COVERAGE * len(rows))
    best: tuple[tuple[int, float], BandModel] | None = None
    for candidate in grid:
        verdicts = judge(rows, {**base, key: candidate})
        score = (-min(sum(v.inside_by(FIT_MARGIN) for v in verdicts), target),
                 statistics.median(v.high / v.low for v in verdicts))
        if best is None or score < best[0]:
            best = (score, candidate)
    return best[1]  # type: ignore[index]


# the class a narrower one is carved from: where `rows` hold no llama.cpp run of the narrower class (its only source
# left out), fit_class answers with the parent's fit on them, not with BAND_MODELS (fitted on the left-out rows)
PARENT = {"gpu-hbm": "gpu", "gpu-hbm-amd": "gpu-hbm", "gpu-hybrid": "gpu", "gpu-moe": "gpu", "cpu-arm": "cpu",
          "unified-rdna": "unified", "unified-vega": "unified"}


def fit_class(rows: list[Measurement], key: str) -> dict[str, BandModel]:
    """`key`'s constants fitted on `rows` (all classes), with those of the class it depends on (DEPENDS) fitted on
    the same rows first: {dependency: ..., key: ...}. A class none of `rows` informs takes its PARENT's fit."""
    if key in PARENT and not any(r.band_class() == key and r.calibrates for r in rows):
        return {key: fit_class(rows, PARENT[key])[PARENT[key]]}
    dep = DEPENDS.get(key)
    base = {dep: fit([r for r in rows if r.band_class() == dep], dep)} if dep else {}
    return {**base, key: fit([r for r in rows if r.band_class() == key], key, base)}


OLLAMA_GRID = [(lo, hi) for lo in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9) for hi in (0.9, 1.0, 1.1)]


def fit_ollama_share(rows: list[Measurement], table: dict[str, BandModel] | None = None) -> tuple[float, float]:
    """Ollama's share of llama.cpp's speed (OLLAMA_GRID point), given the class constants `table`: the narrowest
    share range that puts COVERAGE of the Ollama rows inside. The class constants come from llama.cpp runs only
    (fit), so the two are told apart even where every row of a class ran under Ollama (the Vega iGPU rows)."""
    rows = [r for r in rows if r.counted and r.runtime == "ollama"]
    if not rows:
        return OLLAMA_SHARE
    target = math.ceil(COVERAGE * len(rows))
    best: tuple[tuple[int, float], tuple[float, float]] | None = None
    for share in OLLAMA_GRID:
        verdicts = judge(rows, table, share)
        score = (-min(sum(v.inside_by(FIT_MARGIN) for v in verdicts), target),
                 statistics.median(v.high / v.low for v in verdicts))
        if best is None or score < best[0]:
            best = (score, share)
    return best[1]  # type: ignore[index]


@dataclass(frozen=True)
class CapPoint:
    """One point of a published power-limit sweep: the share of its default-limit speed a run kept at `ratio`."""

    ratio: float
    kept: float
    compute_bound: bool
    source: str


def _sweep(hardware: str) -> str:
    """The rig a sweep row ran on: its hardware column without the " at 250 W ..." tail."""
    return re.sub(r"\s+at\s+\d+(\.\d+)?\s*W\b.*$", "", hardware)


def cap_points(rows: list[Measurement]) -> list[CapPoint]:
    """The sweeps in `rows`: counted rows of one source, rig, model and quant, one of them at the default limit
    (power_ratio empty or 1), each other one a point (its tps / the default row's)."""
    sweeps: dict[tuple[str, str, str, str], list[Measurement]] = {}
    for m in rows:
        if m.counted:
            sweeps.setdefault((m.source, _sweep(m.hardware), m.model, m.quant), []).append(m)
    out = []
    for runs in sweeps.values():  # a default row may leave power_ratio empty
        default = [m for m in runs if m.power_ratio is None or m.power_ratio >= 0.999]
        if len(default) != 1:
            continue
        out.extend(CapPoint(m.power_ratio, m.tps / default[0].tps, m.hybrid, m.source)
                   for m in runs if m is not default[0] and m.power_ratio is not None)
    return out


CAP_WINDOW = 0.075  # a sweep point informs the knots of power_cap's tables within this ratio of it
CAP_MARGIN = 0.05   # the share a knot allows beyond the points it holds (one card or rig per point: not a point fit)


def fit_cap_share(points: list[CapPoint], compute_bound: bool) -> CapTable:
    """power_cap's table (knots of CAP_SHARE) from sweep points of one kind: at each knot the lowest and highest
    share kept by the points within CAP_WINDOW, CAP_MARGIN either side (the highest at most 1). A knot no point
    informs keeps the low of the nearest knot below that has points (nothing below: 0.02) and a high of 1; lows
    then never rise towards a lower ratio, highs never fall towards a higher one."""
    from tunehost.facts.power_cap import CAP_SHARE

    mine = [p for p in points if p.compute_bound == compute_bound]
    knots = [r for r, _, _ in CAP_SHARE]
    lows: list[float | None] = []
    highs: list[float | None] = []
    for k in knots:
        near = [p.kept for p in mine if abs(p.ratio - k) <= CAP_WINDOW]
        if k >= 1.0:
            lows.append(1.0), highs.append(1.0)
        elif near:
            lows.append(max(0.02, min(near) - CAP_MARGIN)), highs.append(min(1.0, max(near) + CAP_MARGIN))
        else:
            lows.append(None), highs.append(None)
    low_at: list[float] = []
    for low in lows:
        low_at.append(low if low is not None else (low_at[-1] if low_at else 0.02))
    for i in range(len(low_at) - 2, -1, -1):
        low_at[i] = min(low_at[i], low_at[i + 1])
    high_at: list[float] = [1.0] * len(highs)
    for i in range(len(highs) - 1, -1, -1):  # an uninformed knot: the high of the nearest knot above
        high_at[i] = highs[i] if highs[i] is not None else (high_at[i + 1] if i + 1 < len(highs) else 1.0)
    for i in range(1, len(high_at)):
        high_at[i] = max(high_at[i], high_at[i - 1])
    return tuple((k, round(lo, 3), round(hi, 3)) for k, lo, hi in zip(knots, low_at, high_at))


def leave_one_source_out(rows: list[Measurement]) -> list[Verdict]:
    """Each measurement judged by a band fitted without any row of its source: an out-of-sample figure (the class it
    depends on, DEPENDS, refitted without the source too). An Ollama row's class constants are fitted on the other
    sources' llama.cpp rows and Ollama's share on their Ollama rows."""
    out = []
    # every row of one source shares its fits: each (source, class, runtime) is fitted once
    fitted: dict[tuple[str, str, bool], tuple[Any, Any, Any]] = {}
    for m in rows:
        key = m.band_class()
        memo = (m.source, key, m.runtime == "ollama")
        if memo not in fitted:
            others = [r for r in rows if r.source != m.source]
            points = cap_points(others)
            caps = (fit_cap_share(points, False), fit_cap_share(points, True))
            table = fit_class(others, key)
            share = None
            if m.runtime == "ollama":
                full = dict(BAND_MODELS)
                for k in {r.band_class() for r in others if r.runtime == "ollama"}:
                    full.update(fit_class(others, k))
                share = fit_ollama_share(others, full)
                table = {**full, **table}
            fitted[memo] = (table, share, caps)
        out.extend(judge([m], *fitted[memo]))
    return out


@dataclass(frozen=True)
class HostVerdict(Verdict):
    """A row judged by the band of its host's other rows (within_host); `seen`: a row of the same model and quant was
    among them (a rerun or another setting of a model the host ran), else the model is new to the host."""

    seen: bool = False


def host_point(m: Measurement, run_id: int) -> HostPoint:
    """A row as one run in the results store of its host (tunehost.advise.host_calibration.HostPoint): the bytes a
    token read from VRAM and RAM (the KV cache with the first part, as judge reads it) at the row's bandwidths, the
    DIMMs' peak its basis unless the row's RAM bandwidth was measured."""
    first = int((m.bytes_gb + m.kv_gb) * GB)  # the first part, as judge reads it: VRAM on a GPU, else RAM
    if m.kind == "gpu":
        vram, ram, ram_gbps = first, 0, None
    elif m.kind == "split":
        vram, ram, ram_gbps = first, int(m.cpu_bytes_gb * GB), m.cpu_gbps
    else:  # cpu, or unified memory: one RAM part
        vram, ram, ram_gbps = 0, first, m.gbps
    return HostPoint(run_id, "", "bench", m.model, f"{m.model} {m.quant}", m.path(), m.moe, m.layers, ram, vram,
                     ram_gbps, m.gbps if vram else None, "measured" if m.ram_measured else "dimm", m.tps, m.hybrid,
                     m.cores or None)


def within_host(rows: list[Measurement]) -> list[HostVerdict]:
    """Each counted row judged by the band advise gives once the results store holds the other counted rows of its
    host (one source, hardware, runtime and host class: HostPoint.cls) as its own runs: host_calibration's fit_host
    and host_band, what `tunehost bench` feeds back to advise, looked up as advise does (the row's FitKey: a model
    with recurrent layers apart, and the CPU's thread count where it reads weights). A row with no other row of its
    key on its host is not judged."""
    hosts: dict[tuple[str, str, str, str], list[tuple[Measurement, HostPoint]]] = {}
    for i, m in enumerate(r for r in rows if r.counted):
        p = host_point(m, i)
        hosts.setdefault((m.source, m.hardware, m.runtime, p.cls), []).append((m, p))
    out = []
    for runs in hosts.values():
        for m, p in runs:
            others = [q for _, q in runs if q is not p]
            # as advise looks it up (plan._host_band): the row's model kind, and its threads where the CPU reads
            # weights; None when no other row of its host is of that kind and thread count
            fit = fit_host(others).fit_for(p.key)
            if fit is None:
                continue
            read_s = p.read_s(fit.median_gbps("RAM"), fit.median_gbps("VRAM"))
            band = host_band(fit, read_s, p.layers, "") if read_s is not None else None
            if band is not None:
                out.append(HostVerdict(m, band.low, band.high, any(q.model_hash == p.model_hash for q in others)))
    return out


def csv_rows(path: str | Path) -> list[dict[str, str]]:
    """Every row of one of the calibration's data CSVs (lines starting "#" are its header notes)."""
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


def _counted_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of an evaluation set's CSV that its `excluded` column keeps."""
    return [r for r in csv_rows(path) if not r["excluded"].strip()]


# Llama 2 7B, the model of llama.cpp's scoreboards, at three quants: the bytes a token reads without token_embd (a
# lookup reads one row of it): llama-bench's 12.55, 6.67 and 3.56 GiB less a 32000 x 4096 table at 2, 34/32 and 18/32
# bytes a weight (as rows g14 and g15 of published_tg.csv). The Apple Silicon scoreboard (discussion #4167,
# tests/advise/data/scoreboard_apple_tg.csv) has all three
LLAMA2_7B_BYTES_GB = {"F16": 13.21, "Q8_0": 7.02, "Q4_0": 3.75}
# llama.cpp's community scoreboards (tests/advise/data/scoreboard_tg.csv): every row is llama-bench tg128 of this model
SCOREBOARD_MODEL = {"model": "Llama 2 7B", "quant": "Q4_0", "layers": 32, "bytes_gb": LLAMA2_7B_BYTES_GB["Q4_0"]}


def load_scoreboard(path: str | Path, *, as_judged: bool = True) -> list[Measurement]:
    """The scoreboard rows H17's rules count (an evaluation set: nothing is fitted on them), as discrete GPUs fully
    in VRAM. as_judged: at the bandwidth H17 judged them at (`gbps`); else as advise gives it now (the spec table,
    gpu_bandwidth, where it knows the card, else the row's spec-sheet figure)."""
    from tunehost.advise.ceiling import gpu_bandwidth

    out = []
    for r in _counted_rows(path):
        gbps = float(r["gbps"]) if as_judged else (gpu_bandwidth(r["device"]) or float(r["spec_gbps"]))
        out.append(Measurement(r["id"], r["gpu"], "gpu", gbps, SCOREBOARD_MODEL["model"], SCOREBOARD_MODEL["quant"],
                               False, SCOREBOARD_MODEL["layers"], SCOREBOARD_MODEL["bytes_gb"], 0.0, 0.0,
                               float(r["tps"]), r["source"]))
    return out




def load_apple_scoreboard(path: str | Path) -> list[Measurement]:
    """The counted rows of the Apple Silicon scoreboard (H20's rules: an evaluation set, nothing is fitted on it), as
    Apple chips on unified memory at their Apple bandwidth figure (`gbps`)."""
    out = []
    for r in _counted_rows(path):
        name = f"Apple {r['chip']} ({r['gpu_cores']} GPU cores)" if r["gpu_cores"] else f"Apple {r['chip']}"
        out.append(Measurement(r["id"], name, "apple", float(r["gbps"]), SCOREBOARD_MODEL["model"], r["quant"],
                               False, SCOREBOARD_MODEL["layers"], LLAMA2_7B_BYTES_GB[r["quant"]], 0.0, 0.0,
                               float(r["tps"]), r["source"]))
    return out


# LocalScore (tests/advise/data/localscore_tg.csv): llamafile submissions of three models at Q4_K - Medium, with the
# layers and the bytes a token reads as the set's rows of the same files give them (ha46's 0.80 GB, tied embeddings;
# the Llama 3.1 8B rows' 4.62 and the Qwen2.5-14B rows' 8.55, token_embd left out)
LOCALSCORE_MODELS = {"Llama 3.2 1B": (16, 0.80), "Llama 3.1 8B": (32, 4.62), "Qwen2.5 14B": (48, 8.55)}


def load_localscore(path: str | Path, *, as_judged: bool = True) -> list[Measurement]:
    """The counted LocalScore submissions (H21's rules: an evaluation set, nothing is fitted on it), as discrete GPUs
    fully in VRAM. as_judged: at the bandwidth H21 judged them at (`gbps`); else as advise gives it now (the spec
    table, gpu_bandwidth, where it names the card, else the row's figure)."""
    from tunehost.advise.ceiling import gpu_bandwidth

    out = []
    for r in _counted_rows(path):
        layers, n_bytes = LOCALSCORE_MODELS[r["model"]]
        gbps = float(r["gbps"]) if as_judged else (gpu_bandwidth(r["accelerator"]) or float(r["gbps"]))
        out.append(Measurement(r["id"], r["accelerator"], "gpu", gbps, r["model"], "Q4_K_M", False, layers, n_bytes,
                               0.0, 0.0, float(r["tps"]), r["source"], runtime="llamafile"))
    return out


def scoreboard_of(m: Measurement) -> str:
    """cuda | rocm | vulkan | apple: which discussion a scoreboard row comes from."""
    return {"15013": "cuda", "15021": "rocm", "10879": "vulkan", "4167": "apple"}[m.source.rsplit("/", 1)[-1]]


def summary(verdicts: list[Verdict]) -> dict[str, float]:
    """share inside the band, the band's width (high / low): median and maximum, and the worst optimistic miss
    (measured / the band's low edge, 1.0 when nothing fell below)."""
    widths = [v.high / v.low for v in verdicts]
    return {"n": len(verdicts), "inside": sum(v.inside for v in verdicts),
            "inside_share": sum(v.inside for v in verdicts) / len(verdicts),
            "median_width": statistics.median(widths), "max_width": max(widths),
            "worst_low": min([v.m.tps / v.low for v in verdicts if v.m.tps < v.low] or [1.0])}


def width_floor(verdicts: list[Verdict], share: float = 0.85) -> float:
    """The narrowest band (high / low) that holds `share` of `verdicts` when it is a constant multiple of each band's
    centre (the geometric mean of its edges) placed with hindsight: what no band of this model's shape can beat
    without a new fact that moves the centres. 1.0 for fewer than two rows."""
    logs = sorted(math.log(v.m.tps / math.sqrt(v.low * v.high)) for v in verdicts)
    need = math.ceil(share * len(logs))
    if need < 2:
        return 1.0
    return math.exp(min(logs[i + need - 1] - logs[i] for i in range(len(logs) - need + 1)))


def _counted_by(verdicts: list[Verdict], key: Callable[[Measurement], str]) -> list[tuple[str, list[Verdict]]]:
    """The counted `verdicts` (rows that did not fit their memory or that their source sets apart left out) grouped
    by `key` of their row, in key order."""
    classes: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.m.counted:
            classes.setdefault(key(v.m), []).append(v)
    return sorted(classes.items())


def by_class(verdicts: list[Verdict]) -> dict[str, dict[str, float]]:
    """summary() per report class (Measurement.report_class), rows that did not fit their memory or that their
    source sets apart (Measurement.excluded) left out."""
    return {k: {**summary(vs), "width_floor": width_floor(vs)}
            for k, vs in _counted_by(verdicts, Measurement.report_class)}


def by_record(verdicts: list[Verdict]) -> dict[str, BandRecord]:
    """The BandRecord of each record class (Measurement.record_class) among the counted `verdicts`: what
    ceiling.BAND_RECORD holds for leave_one_source_out's verdicts (width and depth to two decimals)."""
    out = {}
    for k, vs in _counted_by(verdicts, Measurement.record_class):
        s = summary(vs)
        out[k] = BandRecord(s["inside"], s["n"], round(s["median_width"], 2), round(s["worst_low"], 2))
    return out
