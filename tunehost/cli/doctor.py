"""`tunehost doctor` and `tunehost snapshot`."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from tunehost.bounds import json_text
from tunehost.cli import cli_errors, make_console, report_output
from tunehost.printable import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.doctor import Report
    from tunehost.facts import HostFacts
    from tunehost.doctor.registry import LoadedChecks

SEVERITY_STYLE = {
    "fail": ("FAIL", "bold red"),
    "error": ("ERROR", "bold magenta"),
    "warn": ("WARN", "yellow"),
    "info": ("INFO", "cyan"),
    "skip": ("SKIP", "dim"),
    "ok": ("OK", "green"),
}
REPORT_ORDER = ("fail", "error", "warn", "info", "skip", "ok")

SNAPSHOT_HELP = "Read this snapshot directory instead of the live host (nothing live is read, nothing runs)."
QUICK_HELP = "Do not measure (memory bandwidth, CPU clocks under load): judge the settings only, in about a second."


@contextlib.contextmanager
def measuring_status(show: bool):
    """A spinner on stderr that says what is being measured (only on a terminal, only while measuring): yields the
    function that updates it, or None."""
    import sys

    if not (show and sys.stderr.isatty()):
        yield None
        return
    console = make_console(stderr=True)
    with console.status("running the checks") as status:
        yield lambda message: status.update(message)


def load_checks_warning() -> "LoadedChecks":
    """Every installed check; each plugin that could not be loaded is one warning line on stderr."""
    from tunehost.doctor.registry import load_checks

    loaded = load_checks()
    for warning in loaded.warnings:
        typer.echo(f"tunehost: warning: {one_line(warning)}", err=True)
    if not loaded.usable():  # every check broken (or none installed): judging nothing would print "ready"
        from tunehost.doctor.registry import install_hint
        from tunehost.errors import TunehostError

        first = next((c.reason for c in loaded.unloadable()), "no check is installed")
        raise TunehostError(f"no check could be loaded ({first}). {install_hint(first)}")
    return loaded


def judge(facts: "HostFacts", checks: list, warnings: tuple[str, ...] | list[str] = (), *, strict: bool = False,
          quick: bool = False, show_status: bool = True) -> "Report":
    """One doctor run (doctor's, snapshot's and the gate's: tunehost.ops.doctor.diagnose), its warning lines on
    stderr: a plugin that printed while it ran, and the checks a snapshot could not answer."""
    from tunehost.ops.doctor import DoctorRequest, diagnose, measures

    request = DoctorRequest(tuple(checks), tuple(warnings), strict=strict, quick=quick)
    with measuring_status(show_status and measures(facts.host, quick)) as on_status:
        diagnosis = diagnose(facts, request, on_status=on_status)
    for note in diagnosis.notes:  # a plugin that printed while it ran: on stderr, never in the report
        typer.echo(f"tunehost: warning: {one_line(note)}", err=True)
    for refused in diagnosis.refusals:  # the checks that needed these skipped: say why
        typer.echo(f"tunehost: warning: snapshot: {one_line(refused)}", err=True)
    return diagnosis.report


def record_snapshot(facts: "HostFacts", directory: Path) -> None:
    """Write the snapshot (tunehost.ops.doctor.write_snapshot); each declared read that failed is one warning."""
    from tunehost.ops.doctor import write_snapshot

    for problem in write_snapshot(facts, directory):  # the snapshot is still useful for doctor without them
        typer.echo(f"tunehost: warning: {one_line(problem)}", err=True)


def register(app: typer.Typer) -> None:
    app.command("doctor", short_help='Judge this host for llama.cpp: each finding with its fix.')(doctor)
    app.command("snapshot", short_help='Capture this host into a directory that doctor can replay.')(snapshot)


@cli_errors
def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON (the format of docs/snapshot.md)."),
    snapshot: Optional[Path] = typer.Option(None, "--snapshot", "-s", metavar="DIR", help=SNAPSHOT_HELP),
    check: List[str] = typer.Option([], "--check", "-c", metavar="ID", help="Run only this check (repeatable)."),
    skip: List[str] = typer.Option([], "--skip", metavar="ID", help="Do not run this check (repeatable)."),
    list_checks: bool = typer.Option(False, "--list-checks", help="List the checks and what each judges, then exit."),
    strict: bool = typer.Option(False, "--strict", help="Warnings (and broken checks) also make the host not ready."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the verdict and the failures (for scripts)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show the evidence of ok and skipped findings."),
    quick: bool = typer.Option(False, "--quick", help=QUICK_HELP),
) -> None:
    """Judge this host for llama.cpp: each finding with its evidence and the exact fix.

    On the live host doctor also measures (about 3 s): memory read bandwidth and CPU clocks under load, compared
    with what this hardware should do. It never measures a busy host or a snapshot; --quick skips measuring.
    Background CPU use counts only when it shows in both of two back-to-back samples (one and a half seconds;
    half a second with --quick). Scripts that must wait for a quiet host before benchmarking: tunehost gate --wait-quiet 10m -- CMD.

    Exit status: 0 ready, 2 not ready (a fail; with --strict a warning too), 1 tunehost could not run.
    """
    from tunehost.doctor import select_checks
    from tunehost.facts import HostFacts
    from tunehost.host import open_host

    loaded = load_checks_warning()
    if list_checks:
        _print_checks(loaded.checks, json_out)
        return
    checks = select_checks(loaded.checks, check, skip)
    report = judge(HostFacts(open_host(snapshot)), checks, loaded.warnings, strict=strict, quick=quick,
                   show_status=not quiet)
    with report_output():  # `tunehost doctor | head -1` still exits with the verdict
        if json_out:
            typer.echo(json_text(report.to_json(), indent=2))
        elif quiet:
            _print_quiet(report)
        else:
            render_report(report, make_console(), verbose=verbose)
    raise typer.Exit(report.exit_code)


@cli_errors
def snapshot(
    directory: Path = typer.Argument(..., metavar="DIR", help="A new (or empty) directory to write the snapshot to."),
    quick: bool = typer.Option(False, "--quick", help="Do not measure (no samples/measure.json)."),
) -> None:
    """Capture this host into DIR: every file, command output and sample the checks use (no secrets, no serial
    numbers or UUIDs: those are redacted or replaced by a pseudonym).

    The measurements (memory bandwidth, CPU clocks under load) are recorded too, so a replay judges them the same.
    Attach DIR to a bug report; `tunehost doctor --snapshot DIR` replays it anywhere.
    """
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.host.snapshot import check_target

    check_target(directory)  # at once, not after the sampling
    checks = load_checks_warning().checks  # a broken install refuses here, not with a snapshot of nothing
    facts = HostFacts(open_host(record=True))
    judge(facts, checks, quick=quick)  # records everything every check reads
    record_snapshot(facts, directory)
    files = sum(1 for p in Path(directory).rglob("*") if p.is_file())
    typer.echo(f"snapshot written to {directory} ({files} files); replay with: tunehost doctor --snapshot {directory}")


def _print_checks(checks: list, json_out: bool) -> None:
    if json_out:
        typer.echo(json_text([{"id": c.id, "title": c.title, "judges": c.judges} for c in checks], indent=2))
        return
    from tunehost.formats.fold import fold

    width = max((len(c.id) for c in checks), default=0)
    columns = max(make_console().width, 40)
    for c in checks:  # plugins name themselves: one printable line each, folded under the description
        for line in fold(one_line(c.judges or c.title), columns, one_line(f"{c.id:<{width}}  "), " " * (width + 2)):
            typer.echo(line)


def quiet_lines(doc: dict, *, strict: bool) -> list[str]:
    """What --quiet prints, from a `doctor --json` document: the blocking findings, then the verdict."""
    blocking = {"fail", "warn", "error"} if strict else {"fail"}
    lines = [f"{f['severity'].upper()} {f['check']}: {f['summary']}" for f in doc["findings"]
             if f["severity"] in blocking]
    return lines + [doc["verdict"]]


def _print_quiet(report: "Report") -> None:
    for line in quiet_lines(report.to_json(), strict=report.strict):
        typer.echo(one_line(line))  # summaries quote snapshot text: no escape sequence reaches the terminal


EVIDENCE_LINES = 4  # an evidence value folds to at most this many lines (--verbose and --json show it whole)


def render_report(report: "Report", console: "Console", *, verbose: bool = False) -> None:
    """The human report: findings grouped by severity, each with its evidence and fix, folded to the console's
    width (whole words, indented under their finding; a long evidence value is never cut inside a number)."""
    from rich.markup import escape

    from tunehost.formats.fold import fold, fold_command

    width = max(console.width, 40)

    def show(lines: list[str], style: str = "") -> None:
        for line in lines:
            console.print(f"[{style}]{escape(line)}[/]" if style else escape(line))

    source = f"snapshot {report.snapshot}" if report.snapshot else "this host (live)"
    title = fold(source, width, "tunehost doctor — ", "  ")
    console.print(f"[bold]tunehost doctor[/] — {escape(title[0][len('tunehost doctor — '):])}")
    show(title[1:])
    for sev in REPORT_ORDER:
        group = [f for f in report.findings if f.severity.value == sev]
        if not group:
            continue
        label, style = SEVERITY_STYLE[sev]
        console.print()
        for f in group:
            lead = f"{label:<5} {f.check}  "
            head = fold(f.summary, width, lead, " " * 6)
            console.print(f"[{style}]{label:<5}[/] [bold]{escape(f.check)}[/]  {escape(head[0][len(lead):])}")
            show(head[1:])
            detailed = verbose or sev in ("fail", "error", "warn", "info")
            if not detailed:
                continue
            if f.detail:
                show(fold(f.detail, width, " " * 6), "dim")
            for src, value in f.evidence.items():
                lines = fold(f"{src}: {value}", width, " " * 6, " " * 8, None if verbose else EVIDENCE_LINES)
                label_end = 6 + len(src) + 1
                if lines[0][:label_end] == f"{' ' * 6}{src}:":
                    console.print(f"[dim]{escape(lines[0][:label_end])}[/]{escape(lines[0][label_end:])}")
                    show(lines[1:])
                else:  # a source name longer than a line
                    show(lines)
            if f.fix and sev != "ok":
                fix = fold(f"fix: {f.fix.text}", width, " " * 6)
                console.print(f"      [bold]fix:[/]{escape(fix[0][10:])}")
                show(fix[1:])
                for cmd in f.fix.commands:  # folded with line continuations: still runs when pasted
                    show(fold_command(cmd, width, "        $ ", " " * 12), "green")
    counts = ", ".join(f"{report.count(s)} {s}" for s in _severities() if report.count(s))
    console.print()
    verdict_style = "bold green" if report.ready else "bold red"
    console.print(f"[{verdict_style}]{report.verdict}[/]  ({counts})")


def _severities():
    from tunehost.check import Severity

    return [Severity(s) for s in REPORT_ORDER]
