"""Rendering a comparison (llama-bench's and the server bench's): one table, bars, the verdict's explanation."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.bench.results import Comparison

VERDICT_STYLE = {
    "faster": "bold green", "slower": "bold red", "no clear difference": "yellow", "disturbed": "bold magenta",
    "n/a": "dim",
}
BAR_WIDTH = 36
CHART_LABEL = 18  # the test name beside the bars ("cached16384 client")


def render_comparison(comparison: "Comparison", console: "Console", *, chart: bool = True) -> None:
    """A = baseline, B = candidate; their t/s columns are what the change beside them is the ratio of (see
    :func:`level_note`), so a row never reads "1 322 → 1 146 +8.9 %". Numbers never wrap (80 columns)."""
    from rich.markup import escape
    from rich.table import Table

    from tunehost.formats.fold import print_folded

    if (comparison.baseline, comparison.candidate) == ("A", "B"):
        console.print("A, B: the two servers above", highlight=False)
    else:
        print_folded(console, f"A = {comparison.baseline} · B = {comparison.candidate}", "", "    ")
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("test", overflow="fold")
    table.add_column("A t/s", justify="right", no_wrap=True)
    table.add_column("B t/s", justify="right", no_wrap=True)
    table.add_column("B/A", justify="right", no_wrap=True)
    table.add_column(f"{comparison.confidence:.0%} interval".replace("%", " %"), justify="right", no_wrap=True)
    table.add_column("verdict", min_width=9)
    for row in comparison.rows:
        interval = "—" if row.low is None else f"{_percent(row.low)} … {_percent(row.high)} %"
        verdict = row.verdict
        if row.verdict == "disturbed" and row.statistical_verdict:
            verdict = f"disturbed (numbers alone: {row.statistical_verdict})"
        table.add_row(escape(f"{row.kind.upper()} {row.test}"), _ts(row.baseline_ts), _ts(row.candidate_ts),
                      f"{row.change_percent:+.1f} %", interval,
                      f"[{VERDICT_STYLE.get(row.verdict, '')}]{escape(verdict)}[/]")
    console.print(table)
    print_folded(console, level_note(comparison), "", "  ", style="dim")
    if chart:
        console.print()
        for row in comparison.rows:
            top = max(row.baseline_ts, row.candidate_ts) or 1.0
            style = VERDICT_STYLE.get(row.verdict, "")
            name = escape(row.test[:CHART_LABEL])
            console.print(f"{name:<{CHART_LABEL}} A {_bar(row.baseline_ts / top)} {_ts(row.baseline_ts)}",
                          highlight=False)
            console.print(f"{'':<{CHART_LABEL}} B {_bar(row.candidate_ts / top, style=style)} "
                          f"{_ts(row.candidate_ts)}", highlight=False)
    console.print()
    print_folded(console, f"verdict: faster/slower only when the whole {comparison.confidence:.0%} interval of "
                          f"B/A lies beyond ±{comparison.threshold:.0%}", "", "  ", style="dim")
    for row in comparison.rows:
        if row.rounds:
            print_folded(console, f"{row.test}: {row.rounds} round{'s' if row.rounds != 1 else ''} behind the "
                                  f"interval; {min(row.n_baseline, row.n_candidate)} repetitions a side, worth "
                                  f"{row.effective_samples or 0:.1f} independent samples", "", "  ", style="dim")
        if row.note:
            print_folded(console, f"{row.test}: {row.note}", "", "  ", style="dim")
    for note in comparison.notes:
        print_folded(console, note, "note: ", "  ", first_style="yellow")


def level_note(comparison: "Comparison") -> str:
    """What the two t/s columns are, in one line: the reader must see why B/A is their ratio."""
    from tunehost.bench.results import ROUNDS_LEVEL, SAMPLES_LEVEL

    levels = {row.level for row in comparison.rows}
    if levels == {ROUNDS_LEVEL}:
        how = ("rounds paired A B, B A, …" if any(r.method and r.method.startswith("paired") for r in comparison.rows)
               else "each side's own rounds, not paired")
        return (f"t/s: geometric mean over rounds of each round's median ({how}); B/A is their ratio, the change "
                "the interval and verdict judge")
    if levels == {SAMPLES_LEVEL}:
        return ("t/s: median of all samples (llama-bench's mean where it kept none); B/A is their ratio, with no "
                "interval behind it")
    if levels <= {ROUNDS_LEVEL, SAMPLES_LEVEL}:
        return ("t/s: geometric mean of each round's median where rounds are known, else the median of all "
                "samples (llama-bench's mean without samples); B/A is their ratio")
    return "t/s: median of all samples (saved by an older tunehost); B/A: the change over rounds, not their ratio"


def _percent(ratio: float | None) -> str:
    """A ratio's change in percent for the interval; unbounded ends (too few rounds) as ±inf."""
    if ratio is None or ratio != ratio:
        return "?"
    if ratio == float("inf"):
        return "+inf"
    return f"{(ratio - 1) * 100:+.1f}"


def _ts(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}".replace(",", " ")
    return f"{value:.2f}"


def _bar(fraction: float, *, style: str = "") -> str:
    blocks = " ▏▎▍▌▋▊▉█"
    eighths = max(0, min(BAR_WIDTH * 8, round(fraction * BAR_WIDTH * 8)))
    text = "█" * (eighths // 8) + (blocks[eighths % 8] if eighths % 8 else "")
    text = text.ljust(BAR_WIDTH)
    return f"[{style}]{text}[/]" if style else text
