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


def render_comparison(comparison: "Comparison", console: "Console", *, chart: bool = True) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("test")
    table.add_column(f"{comparison.baseline} t/s", justify="right")
    table.add_column(f"{comparison.candidate} t/s", justify="right")
    table.add_column("change", justify="right")
    table.add_column(f"{comparison.confidence:.0%} interval", justify="right")
    table.add_column("verdict")
    for row in comparison.rows:
        interval = "—" if row.low is None else f"{(row.low - 1) * 100:+.1f} … {(row.high - 1) * 100:+.1f} %"
        verdict = row.verdict
        if row.verdict == "disturbed" and row.statistical_verdict:
            verdict = f"disturbed (numbers alone: {row.statistical_verdict})"
        table.add_row(f"{row.kind.upper()} {row.test}", _ts(row.baseline_ts), _ts(row.candidate_ts),
                      f"{row.change_percent:+.1f} %", interval,
                      f"[{VERDICT_STYLE.get(row.verdict, '')}]{escape(verdict)}[/]")
    console.print(table)
    if chart:
        console.print()
        width = min(24, max(len(comparison.baseline), len(comparison.candidate)))
        base_label, cand_label = comparison.baseline[:width], comparison.candidate[:width]
        for row in comparison.rows:
            top = max(row.baseline_ts, row.candidate_ts) or 1.0
            style = VERDICT_STYLE.get(row.verdict, "")
            console.print(f"{row.kind.upper():<3} {escape(base_label):<{width}} {_bar(row.baseline_ts / top)} "
                          f"{_ts(row.baseline_ts)}")
            console.print(f"{'':<3} {escape(cand_label):<{width}} {_bar(row.candidate_ts / top, style=style)} "
                          f"{_ts(row.candidate_ts)}")
    from tunehost.cli.layout import print_folded

    console.print()
    print_folded(console, f"verdict: faster/slower only when the whole {comparison.confidence:.0%} interval of "
                          f"candidate/baseline lies beyond ±{comparison.threshold:.0%}", "", "  ", style="dim")
    for row in comparison.rows:
        if row.rounds:
            print_folded(console, f"{row.test}: {row.rounds} round{'s' if row.rounds != 1 else ''} behind the "
                                  f"interval; {min(row.n_baseline, row.n_candidate)} repetitions a side, worth "
                                  f"{row.effective_samples or 0:.1f} independent samples", "", "  ", style="dim")
        if row.note:
            print_folded(console, f"{row.test}: {row.note}", "", "  ", style="dim")
    for note in comparison.notes:
        print_folded(console, note, "note: ", "  ", first_style="yellow")


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
