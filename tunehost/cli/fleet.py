"""`tunehost fleet DIR`: the doctor reports of several hosts as one table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List

import typer

from tunehost.bounds import json_text
from tunehost.cli import cli_errors, make_console
from tunehost.cli.doctor import SEVERITY_STYLE

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from tunehost.ops.fleet import Fleet, HostReport

STATUS_STYLE = {"ready": ("ready", "bold green"), "not-ready": ("NOT READY", "bold red"),
                "unreadable": ("UNREADABLE", "bold magenta")}
NOT_RUN = "-"  # the host's report has no finding of this check (older tunehost, --skip, a plugin not installed)
HOST_COLUMN_MAX = 24


def register(app: typer.Typer) -> None:
    app.command("fleet", short_help='One table of the doctor reports of several hosts.')(fleet)


@cli_errors
def fleet(
    directory: Path = typer.Argument(..., metavar="DIR",
                                     help="Directory of fetched reports: DIR/<host>/doctor.json (or DIR/<host>.json)."),
    json_out: bool = typer.Option(False, "--json", help="Print the fleet report as JSON."),
    host: List[str] = typer.Option([], "--host", metavar="NAME",
                                   help="A host that must have a report (repeatable): without one it is unreadable."),
    strict: bool = typer.Option(False, "--strict", help="Warnings (and broken checks) also make a host not ready."),
) -> None:
    """One table of the doctor reports fetched from several hosts (the Ansible role in ansible/ fetches them).

    Rows are checks, columns are hosts; each cell is the worst severity that check reported on that host. Under
    the table: every failing (and broken) finding by host, and why an unreadable report could not be read.

    Exit status: 0 every host ready, 2 a host is not ready, 1 no host is not ready but a report is missing or
    unreadable, or DIR holds no reports at all.
    """
    from tunehost.ops.fleet import load_fleet

    report = load_fleet(directory, expected=host, strict=strict)
    for h in report.hosts:
        if not h.readable:
            typer.echo(f"tunehost: warning: {h.host}: {h.source}: {h.problem}", err=True)
    if json_out:
        typer.echo(json_text(report.to_json(), indent=2))
    else:
        render_fleet(report, make_console())
    raise typer.Exit(report.exit_code)


def _cell(h: "HostReport", check: str) -> "Text":
    from rich.text import Text

    if not h.readable:
        return Text("?", style="dim")
    cell = h.cell(check)
    if cell is None:
        return Text(NOT_RUN, style="dim")
    label, style = SEVERITY_STYLE[cell.severity.value]
    return Text(label if cell.severity.value in ("fail", "error", "warn") else label.lower(), style=style)


def _host_chunks(fleet: "Fleet", width: int, first_column: int) -> list[list["HostReport"]]:
    """Hosts split into tables that fit the terminal: each host column is its name (clipped) plus padding."""
    chunks: list[list] = [[]]
    used = first_column + 4
    for h in fleet.hosts:
        need = max(len(h.host[:HOST_COLUMN_MAX]), len("UNREADABLE")) + 3
        if chunks[-1] and used + need > width:
            chunks.append([])
            used = first_column + 4
        chunks[-1].append(h)
        used += need
    return chunks


def render_fleet(fleet: "Fleet", console: "Console") -> None:
    """The table (checks x hosts, worst severity per cell), then the failing findings and unreadable reports.

    Text from the reports goes into rich Text objects, never into markup, so brackets and backslashes show as they are.
    """
    from rich.table import Table
    from rich.text import Text

    checks = fleet.checks
    hosts = f"{len(fleet.hosts)} host" + ("s" if len(fleet.hosts) != 1 else "")
    console.print(Text.assemble(("tunehost fleet", "bold"), f" — {fleet.directory} ({hosts})"))
    first_column = max([len(c) for c in checks] + [len("check")])
    for chunk in _host_chunks(fleet, console.width, first_column):
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        table.add_column("check", no_wrap=True)
        for h in chunk:
            table.add_column(Text(h.host[:HOST_COLUMN_MAX]), no_wrap=True)
        for check in checks:
            table.add_row(Text(check), *(_cell(h, check) for h in chunk))
        table.add_section()
        verdicts = [Text(*STATUS_STYLE[h.status(strict=fleet.strict)]) for h in chunk]
        table.add_row(Text("verdict", style="bold"), *verdicts)
        console.print()
        console.print(table)
    listed = {"fail", "error"} | ({"warn"} if fleet.strict else set())
    for h in fleet.hosts:
        if not h.readable:
            console.print()
            console.print(Text.assemble((h.host, "bold"), "  ", ("unreadable", "bold magenta"),
                                        f": {h.source}: {h.problem}"))
            continue
        lines = [(cell.check, f) for cell in h.cells for f in cell.findings if f.severity.value in listed]
        if not lines:
            continue
        console.print()
        console.print(Text(h.host, style="bold"))
        for check, f in lines:
            label, style = SEVERITY_STYLE[f.severity.value]
            console.print(Text.assemble("  ", (f"{label:<5}", style), " ", (check, "bold"), "  ", f.summary))
    counts = {s: sum(1 for h in fleet.hosts if h.status(strict=fleet.strict) == s) for s in STATUS_STYLE}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    console.print()
    console.print(Text.assemble((fleet.verdict, "bold green" if fleet.verdict == "ready" else "bold red"),
                                f"  ({summary})"))
