"""`tunehost report`'s page: one self-contained HTML file from a tunehost.ops.report.HostReport.

The page fetches nothing: its styles and scripts are inline (uPlot, vendored in formats/report/ with its MIT
license, draws the charts; charts.js feeds it), and a Content-Security-Policy allows no source at all but those
scripts by their hashes, so even a value that escaped its escaping could neither run nor load anything.

Every value is rendered by Jinja2 with autoescape on; the charts' data is one ``application/json`` block written by
Jinja2's ``tojson`` (``<``, ``>``, ``&`` and ``'`` as ``\\u`` escapes, so ``</script>`` in a model name cannot end
it) and holds numbers and fixed words only. The memory bars are plain HTML boxes (no drawing library needed).
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from tunehost.timestamps import epoch_seconds

if TYPE_CHECKING:
    from tunehost.ops.report import HostReport, ModelPlan

ASSETS = "report"  # the package directory beside this module
UPLOT_VERSION = "1.6.32"
SEVERITIES = (("fail", "FAIL"), ("error", "ERROR"), ("warn", "WARN"), ("info", "INFO"), ("skip", "SKIP"),
              ("ok", "OK"))
SEGMENT_COLORS = ("#0969da", "#bf8700", "#8250df", "#6e7781", "#1a7f37", "#cf222e", "#57606a", "#e16f24")
GiB = 2**30
_SCRIPT_END = re.compile(r"</script|<!--", re.IGNORECASE)


@dataclass(frozen=True)
class Segment:
    label: str
    bytes: int
    percent: float
    color: int

    @property
    def text(self) -> str:
        return _size(self.bytes)


@dataclass(frozen=True)
class Bar:
    """One memory (VRAM or RAM): what the plan puts there, item by item, against what is free."""

    title: str
    segments: tuple[Segment, ...]
    used: int
    free: int | None
    free_percent: float | None

    @property
    def used_text(self) -> str:
        return _size(self.used)

    @property
    def free_text(self) -> str:
        return f"{_size(self.free)} free" if self.free is not None else "free memory unknown"


def render(report: "HostReport") -> str:
    """The page."""
    env, css, uplot, license_text = _assets()
    charts = _asset("charts.js")
    scripts = [uplot, charts]
    for script in scripts:  # vendored or ours: an end tag inside would end the element early
        if _SCRIPT_END.search(script):
            raise ValueError("an inline script holds </script or <!--")
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in scripts)
    template = env.get_template("page.html.j2")
    return template.render(r=report, counts=report.counts(), severities=SEVERITIES, seg_colors=SEGMENT_COLORS,
                           bars=[memory_bars(p) for p in report.plans], data=chart_data(report),
                           plans_none=("no model to plan: the store names none on this machine; give --model "
                                       "PATH.gguf" if not report.plans else ""),
                           uplot_css=css, scripts=scripts, script_hashes=hashes, uplot_version=UPLOT_VERSION,
                           uplot_license=license_text)


def memory_bars(plan: "ModelPlan") -> list[Bar]:
    """The plan's VRAM bar (when anything goes to a GPU or one is known) and its RAM bar."""
    if plan.skipped:
        return []
    bars = []
    if any(i.gpu for i in plan.items) or plan.gpu_label:
        bars.append(_bar(f"VRAM ({plan.gpu_label})" if plan.gpu_label else "VRAM",
                         [(i.label, i.gpu) for i in plan.items], plan.gpu_free))
    bars.append(_bar("RAM", [(i.label, i.ram) for i in plan.items], plan.ram_available))
    return bars


def _bar(title: str, items: list[tuple[str, int]], free: int | None) -> Bar:
    used = sum(max(0, b) for _, b in items)
    scale = max(used, free or 0, 1)
    segments = tuple(Segment(label, b, 100.0 * b / scale, i % len(SEGMENT_COLORS))
                     for i, (label, b) in enumerate(items) if b > 0)
    return Bar(title, segments, used, free, 100.0 * free / scale if free is not None else None)


def chart_data(report: "HostReport") -> dict[str, Any]:
    """What charts.js draws: per series the times (epoch seconds), TG values and numbered marks. Numbers and the
    marks' tones only: the texts are in the page's HTML."""
    series = []
    for s in report.series:
        xs, ys = [], []
        for p in s.points:
            at = epoch(p.at)
            if at is not None and math.isfinite(p.tg):
                xs.append(at)
                ys.append(round(p.tg, 3))
        marks = [{"x": at, "tone": m.tone, "n": n} for n, m in enumerate(s.marks, 1)
                 if (at := epoch(m.at)) is not None]
        series.append({"x": xs, "y": ys, "marks": marks})
    return {"series": series, "verdict": report.verdict, "findings": len(report.findings)}


def epoch(created: str) -> int | None:
    """A stored time ("2026-03-02T10:00:00Z", or a date) as whole epoch seconds, None when it is not one."""
    at = epoch_seconds(created)
    return int(at) if at is not None else None


def when(created: str) -> str:
    """A stored time as "2026-03-02 10:00 UTC" (what is not one, as it is)."""
    at = epoch(created)
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at)) if at is not None else str(created)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / GiB:.2f} GiB" if n >= GiB / 10 else f"{n / 2**20:.0f} MiB"


@lru_cache(maxsize=1)
def _assets() -> tuple[Any, str, str, str]:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("tunehost.formats", ASSETS),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False)
    env.filters["when"] = when
    env.filters["size"] = _size
    return env, _asset("uPlot.min.css"), _asset("uPlot.iife.min.js"), _asset("uPlot.LICENSE")


def _asset(name: str) -> str:
    return resources.files("tunehost.formats").joinpath(ASSETS, name).read_text(encoding="utf-8")
