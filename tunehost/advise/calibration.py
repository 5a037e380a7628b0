"""The TG band against published llama.cpp measurements (tests/advise/data/published_tg.csv): which fall inside,
and how wide the band is. Used by tests/advise/test_calibration.py and scripts/calibrate_tg.py."""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from tunehost.advise.ceiling import BAND_MODELS, BandModel, band_class, tg_band

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

    def path(self) -> str:
        return {"gpu": "gpu", "split": "moe", "cpu": "cpu"}.get(self.kind, "unified")


def load(path: str | Path) -> list[Measurement]:
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    out = []
    for r in csv.DictReader(lines):
        out.append(Measurement(r["id"], r["hardware"], r["kind"], float(r["gbps"]), r["model"], r["quant"],
                               r["moe"] == "1", int(r["layers"]), float(r["bytes_gb"]), float(r["cpu_bytes_gb"]),
                               float(r["cpu_gbps"]), float(r["tps"]), r["source"]))
    return out


@dataclass(frozen=True)
class Verdict:
    m: Measurement
    low: float
    high: float

    @property
    def inside(self) -> bool:
        return self.low <= self.m.tps <= self.high


def judge(rows: list[Measurement], table: dict[str, BandModel] | None = None) -> list[Verdict]:
    out = []
    for m in rows:
        parts = [(int(m.bytes_gb * GB), m.gbps)]
        if m.cpu_bytes_gb:
            parts.append((int(m.cpu_bytes_gb * GB), m.cpu_gbps))
        band = tg_band(parts, m.layers, band_class(m.path(), m.moe), table=table)
        assert band is not None, m.id
        out.append(Verdict(m, band.low, band.high))
    return out


GRID = [BandModel(lo, hi, fast, slow) for lo in (0.5, 0.55, 0.6, 0.65, 0.7) for hi in (0.9, 0.92, 0.95)
        for fast in (0.0, 5.0, 10.0, 20.0, 30.0) for slow in (40.0, 60.0, 80.0, 100.0, 120.0, 160.0, 200.0, 250.0, 300.0)]


def fit(rows: list[Measurement], key: str) -> BandModel:
    """The GRID point that puts the most of `rows` (all of class `key`) inside, then the narrowest median band:
    how BAND_MODELS was chosen (rounded by hand)."""
    if not rows:
        return BAND_MODELS[key]
    best: tuple[tuple[int, float], BandModel] | None = None
    for candidate in GRID:
        verdicts = judge(rows, {key: candidate})
        score = (-sum(v.inside for v in verdicts), statistics.median(v.high / v.low for v in verdicts))
        if best is None or score < best[0]:
            best = (score, candidate)
    return best[1]  # type: ignore[index]


def leave_one_source_out(rows: list[Measurement]) -> list[Verdict]:
    """Each measurement judged by a band fitted without any row of its source: an out-of-sample figure."""
    out = []
    for m in rows:
        key = band_class(m.path(), m.moe)
        train = [r for r in rows if r.source != m.source and band_class(r.path(), r.moe) == key]
        out.extend(judge([m], {key: fit(train, key)}))
    return out


def summary(verdicts: list[Verdict]) -> dict[str, float]:
    """share inside the band, and the band's width (high / low): median and maximum."""
    widths = [v.high / v.low for v in verdicts]
    return {"n": len(verdicts), "inside_share": sum(v.inside for v in verdicts) / len(verdicts),
            "median_width": statistics.median(widths), "max_width": max(widths)}
