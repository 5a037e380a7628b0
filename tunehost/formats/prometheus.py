"""`tunehost export`: the metric families of tunehost.ops.export in the Prometheus text exposition format (0.0.4),
as node_exporter's textfile collector reads a `*.prom` file: `# HELP` and `# TYPE` once per family, no timestamps
on samples (the collector refuses them; each measurement's time is a `*_timestamp_seconds` series). Label values
go through tunehost.formats.quoting.prom_label_value (escaped, one printable line, bounded); a series that
bounding made identical to an earlier one is left out (the format forbids duplicates)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from tunehost.formats.quoting import prom_help, prom_label_value

if TYPE_CHECKING:
    from tunehost.ops.export import Metrics

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def number(value: float) -> str:
    """A sample value as Go's ParseFloat reads it: whole numbers without a fraction, others as repr."""
    if not math.isfinite(value):
        raise ValueError(f"internal: a metric value must be finite, not {value!r}")
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def render_metrics(metrics: "Metrics") -> str:
    """The textfile: every family with its HELP and TYPE, then its samples."""
    lines: list[str] = []
    for family in metrics.families:
        if not METRIC_NAME.fullmatch(family.name):
            raise ValueError(f"internal: {family.name!r} is not a metric name")
        lines += [f"# HELP {family.name} {prom_help(family.help)}", f"# TYPE {family.name} {family.type}"]
        seen: set[str] = set()
        for sample in family.samples:
            labels = []
            for name, value in sample.labels:
                if not LABEL_NAME.fullmatch(name) or name.startswith("__"):
                    raise ValueError(f"internal: {name!r} is not a label name")
                labels.append(f'{name}="{prom_label_value(value)}"')
            series = f"{family.name}{{{','.join(labels)}}}" if labels else family.name
            if series in seen:
                continue
            seen.add(series)
            lines.append(f"{series} {number(sample.value)}")
    return "\n".join(lines) + "\n"
