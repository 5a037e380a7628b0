"""A RAM bandwidth tunehost measured is not a DIMM peak (issue 33, session 4).

The class shares of a band (cpu: 0.60-0.85) were fitted on rows whose RAM bandwidth is the DIMMs' or the LPDDR's
peak. On a host without DIMM data (a VM, no root, soldered memory) advise has only its own probe's figure, which is
already a share of the peak: the class shares discounted it twice, and three of four CPU runs on the development box
ran above their band (hypothesis H5, round3_hypotheses.md). A measured figure now has its own shares."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tunehost.advise.calibration import judge, load
from tunehost.advise.ceiling import (BAND_MODELS, MEASURED_RAM_SHARE, BandContext, Bandwidths, Ceiling, tg_band,
                                     tg_band_for)

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "advise" / "data" / "published_tg.csv"
RUNS = ROOT / "data" / "devbox-tg"


def test_a_measured_ram_part_is_read_at_its_own_shares_and_says_so() -> None:
    parts, layers = [(4_220_000_000, 34.6)], 32
    peak = tg_band(parts, layers, "cpu")
    measured = tg_band(parts, layers, "cpu", context=BandContext(ram_measured=True))
    assert peak is not None and measured is not None
    per_layer = layers * BAND_MODELS["cpu"].layer_us_high * 1e-6
    assert measured.low == pytest.approx(1 / (4.22 / (34.6 * MEASURED_RAM_SHARE[0]) + per_layer))
    assert measured.high > peak.high * 1.2 and measured.low > peak.low  # no second discount
    assert any("as measured here" in n for n in measured.notes) and not any("measured" in n for n in peak.notes)
    # a GPU-only band has no RAM part: the flag changes nothing
    gpu = tg_band([(4_220_000_000, 936.0)], layers, "gpu", context=BandContext(ram_measured=True))
    assert gpu == tg_band([(4_220_000_000, 936.0)], layers, "gpu")


def _ceiling(bw: Bandwidths, path: str = "cpu") -> Ceiling:
    return Ceiling(10.0, (("RAM", 4_220_000_000, bw.ram_gbps),), "", None, bw, path)


def test_tg_band_for_takes_the_measured_shares_only_where_no_dimm_peak_is_known() -> None:
    from .conftest import shape_fixture

    llama = shape_fixture("llama-3.1-8b")
    measured = tg_band_for(llama, _ceiling(Bandwidths(ram_gbps=34.6)))
    dimms = tg_band_for(llama, _ceiling(Bandwidths(ram_gbps=34.6, dimm_gbps=76.8)))
    substituted = tg_band_for(llama, _ceiling(Bandwidths(ram_gbps=76.8, ram_basis="= the DIMMs' peak")))
    assert measured is not None and dimms is not None and substituted is not None
    assert any("as measured here" in n for n in measured.notes)
    # the DIMMs' peak is the calibration's basis whenever it is known, measured or not
    assert not any("as measured here" in n for n in dimms.notes + substituted.notes)


def test_the_rows_whose_ram_was_measured_are_marked_and_fall_inside() -> None:
    rows = load(CSV)
    marked = {m.id for m in rows if m.ram_measured}
    assert marked == {"c06", "dh03", "dh04", "dl01", "dl02", "dl03", "dl04"}
    # s01-s11's "102 GB/s measured" is the quad-channel DDR4-3200 peak (102.4): kept a peak
    assert all(m.cpu_gbps == 102 and not m.ram_measured for m in rows if m.id in {"s01", "s03", "s11"})
    assert not any(m.calibrates for m in rows if m.ram_measured)  # they calibrate MEASURED_RAM_SHARE, not a class
    verdicts = judge([m for m in rows if m.ram_measured])
    assert all(v.inside for v in verdicts)
    # the share of the measured figure llama.cpp read on the CPU-only rows spans the constant
    shares = [m.tps * m.bytes_gb / m.gbps for m in rows if m.ram_measured and m.kind == "cpu"]
    assert MEASURED_RAM_SHARE[0] <= min(shares) and max(shares) <= MEASURED_RAM_SHARE[1]


def test_by_the_class_shares_three_of_the_dev_box_runs_were_above_their_band() -> None:
    """H5 as it was judged, before MEASURED_RAM_SHARE: the counterfactual stays checked."""
    dev = [replace(m, ram_measured=False) for m in load(CSV) if m.id.startswith("dl")]
    above = sorted(v.m.id for v in judge(dev) if v.m.tps > v.high)
    assert above == ["dl01", "dl02", "dl03"]


@pytest.mark.parametrize("name, row_id", [("l8q4", "dl01"), ("l8q8", "dl02"), ("lfm", "dl03"), ("q30", "dl04")])
def test_the_rows_are_the_dev_box_runs(name: str, row_id: str) -> None:
    [run] = json.loads((RUNS / f"{name}.json").read_text())
    [row] = [m for m in load(CSV) if m.id == row_id]
    assert run["n_threads"] == row.cores == 2 and run["n_prompt"] == 0 and run["n_gen"] == 32
    assert row.tps == round(run["avg_ts"], 2) and run["build_commit"] == "0c1e570"
    assert abs(run["model_size"] / 1e9 - (row.bytes_gb if not row.moe else 17.0)) < 0.01
