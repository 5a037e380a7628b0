"""`--format human` (the default): the plan as a report for a terminal, printed through the rich console the CLI
hands in (folded to its width): the memory budget, the command, each flag's reason, warnings and notes. tune's
report (the race and its winner) is tunehost.formats.tune_report's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tunehost.formats.shell import render_shell
from tunehost.printable import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.advise.plan import Plan
    from tunehost.advise.router import RouterPlan
    from tunehost.formats import Subject
    from tunehost.launch import LaunchConfig


def render(subject: "Subject") -> str:
    """Print advise's report (tunehost.ops.advise.Advice), or tune's (tunehost.ops.tune.TuneResult:
    tunehost.formats.tune_report), to ``subject.console``; nothing is returned to echo."""
    from tunehost.errors import TunehostError
    from tunehost.ops.tune import TuneResult

    if isinstance(subject.report, TuneResult):
        from tunehost.formats import tune_report

        return tune_report.render_human(subject)
    advice, console = subject.report, subject.console
    if console is None:
        raise TunehostError("internal: --format human prints through a console")
    if advice.router is not None:
        render_router_human(advice.router, subject.launch, advice.preset_file, console, snapshot=advice.snapshot)
    else:
        render_human(advice.plan, console, snapshot=advice.snapshot, measured=advice.measured_text)
    return ""


def render_router_human(rp: "RouterPlan", launch: "LaunchConfig", preset_file: str, console: "Console", *,
                        snapshot: str | None = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from tunehost.formats.router_ini import render_preset

    where = f"snapshot {snapshot}" if snapshot else "this host (live)"
    console.print(f"[bold]tunehost advise[/] — router mode, {len(rp.names)} models, at most {rp.resident} resident "
                  f"(--models-max {rp.models_max}) on {escape(one_line(where))}")
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("model", "placement", "GPU", "RAM", "context", "TG"):
        table.add_column(col, justify="right" if col in ("GPU", "RAM") else "left")
    for name, p in zip(rp.names, rp.plans):
        band = p.ceiling.band if p.ceiling is not None else None
        table.add_row(escape(one_line(name)), p.path + (f" -ngl {p.value('-ngl')}" if p.path == "split" else "")
                      + (f" --n-cpu-moe {p.value('--n-cpu-moe')}" if p.value("--n-cpu-moe") else ""),
                      _gib(p.budget.gpu_total), _gib(p.budget.ram_total), f"{p.ctx} x {p.parallel}",
                      f"{band.low:.0f}-{band.high:.0f} t/s" if band else "-")
    table.add_row(f"[bold]worst {rp.resident} resident[/]", "", f"[bold]{_gib(rp.gpu_worst)}[/]",
                  f"[bold]{_gib(rp.ram_worst)}[/]", "", "")
    table.add_row("free", "", _gib(rp.gpu_free), _gib(rp.ram_available), "", "")
    console.print(table)
    console.print("[green]fits[/]" if rp.fits else "[bold red]does not fit[/]")
    _render_remedies(rp, console)
    console.print()
    console.print(f"[bold]preset file[/] ({escape(preset_file)})")
    console.print(escape(render_preset(launch)))
    console.print("[bold]command[/]")
    console.print(escape(render_shell(launch)))
    from tunehost.formats.fold import print_folded

    for w in (*rp.warnings, *(f"{n}: {w}" for n, p in zip(rp.names, rp.plans) for w in p.warnings)):
        print_folded(console, w, "WARN ", " " * 5, first_style="yellow")
    for n in dict.fromkeys((*rp.notes, *(n for p in rp.plans for n in p.notes))):
        print_folded(console, n, "note ", " " * 5, style="dim", first_style="dim")


def _render_remedies(rp: "RouterPlan", console: "Console") -> None:
    """What keeps the shrunk models whole, each with the TG it gives against the TG as planned, and its cost."""
    from tunehost.formats.fold import print_folded

    if not rp.remedies:
        return
    now = "; ".join(f"{one_line(m)} {lo:.0f}-{hi:.0f} t/s" for m, lo, hi in rp.now)
    console.print()
    console.print("[bold]instead of shrinking[/]")
    if now:
        print_folded(console, f"as planned now: {now}", "  ", "  ")
    for r in rp.remedies:
        speeds = "; ".join(f"{one_line(m)} {lo:.0f}-{hi:.0f} t/s" for m, lo, hi in r.speeds)
        print_folded(console, f"{r.text}" + (f": {speeds}" if speeds else ""), "  - ", " " * 4)
        print_folded(console, f"cost: {r.cost}", " " * 4, " " * 4, style="dim", first_style="dim")


def _gib(n: int | None) -> str:
    from tunehost.advise.plan import gib

    return "-" if n is None else gib(n)


def render_human(p: "Plan", console: "Console", *, snapshot: str | None = None, measured: str | None = None) -> None:
    """The budget table, the command, each flag's reason, then warnings and notes (folded to the console's width)."""
    from rich.markup import escape
    from rich.table import Table

    from tunehost.formats.fold import print_folded

    where = f"snapshot {snapshot}" if snapshot else "this host (live)"
    print_folded(console, one_line(f"{p.model_name or Path(p.model).name} on {where}"), "tunehost advise — ", "  ",
                 first_style="bold")
    console.print(f"placement: [bold]{p.path}[/] ({'llama-fit-params' if p.source == 'probe' else 'tunehost estimate'})"
                  f", context {p.ctx} x {p.parallel} slot{'s' if p.parallel > 1 else ''}, KV {p.kv_type}")
    b = p.budget
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    gpu_head = "GPU" if b.gpu_label else ""
    table.add_column("memory")
    if b.gpu_label:
        table.add_column(gpu_head, justify="right")
    table.add_column("RAM", justify="right")
    table.add_column("")
    for r in b.rows:
        cells = [r.label] + ([_gib(r.gpu)] if b.gpu_label else []) + [_gib(r.ram), escape(r.detail)]
        table.add_row(*cells)
    table.add_row(*(["[bold]total[/]"] + ([f"[bold]{_gib(b.gpu_total)}[/]"] if b.gpu_label else [])
                    + [f"[bold]{_gib(b.ram_total)}[/]", ""]))
    free_row = ["free"] + ([_gib(b.gpu_free)] if b.gpu_label else []) + [_gib(b.ram_available),
                                                                          escape(b.gpu_label or "")]
    table.add_row(*free_row)
    console.print(table)
    verdict = "[green]fits[/]" if p.fits else "[bold red]does not fit[/]"
    console.print(verdict)
    if p.ceiling is not None:
        from tunehost.advise.ceiling import describe

        c = p.ceiling
        print_folded(console, describe(c), "", "  ")
        full = p.ceiling_full
        if full is not None and full.band is not None and c.band is not None:
            print_folded(console, f"when a slot's context fills ({full.depth} tokens deep, {full.kv_bytes / 1e9:.2f} "
                                  f"GB of KV cache a token): expect {full.band.range_text()} (from "
                                  f"{c.band.range_text()} at its start)", "", "  ")
        if c.tokens_per_s is not None:
            print_folded(console, c.note, "", "  ", style="dim")
    if measured:
        print_folded(console, measured, "", "  ")
    console.print()
    console.print("[bold]command[/]")
    console.print(escape(render_shell(p.launch())))
    console.print()
    if p.pin_cpus:
        from tunehost.cpulist import format_cpu_list

        print_folded(console, p.pin_reason, f"  taskset -c {format_cpu_list(p.pin_cpus)}  ", " " * 4,
                     first_style="cyan")
    for e in p.env:
        print_folded(console, e.reason, one_line(f"  {e.name}={e.value or ''}  "), " " * 4, first_style="cyan")
    for f in p.flags:  # each flag with its reason, folded under it to the terminal's width
        shown = " ".join(f.argv()) if f.name not in ("-m", "-mm", "-md") else f.name
        print_folded(console, f.reason, one_line(f"  {shown}  "), " " * 4, first_style="cyan")
    for text, flags in p.alternatives:
        console.print()
        print_folded(console, f"{text} {' '.join(a for f in flags for a in f.argv())}", "alternative: ", "  ",
                     first_style="bold")
    for w in p.warnings:
        print_folded(console, w, "WARN ", " " * 5, first_style="yellow")
    for s in p.suggestions:
        print_folded(console, s, "try  ", " " * 5, first_style="cyan")
    for n in p.notes:
        print_folded(console, n, "note ", " " * 5, style="dim", first_style="dim")
