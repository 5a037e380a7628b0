"""`tunehost gate`: wait for a quiet host, judge it (doctor, in-process), record it, then run the benchmark command.

The gate speaks on stderr only: stdout belongs to the command. Its own refusals use the sysexits statuses of
tunehost.ops.gate (GATE_EXIT_STATUSES); any other status is the command's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer
from typer.core import TyperCommand

from tunehost.cli import cli_errors, error_text
from tunehost.cli.doctor import QUICK_HELP, SNAPSHOT_HELP
from tunehost.errors import TunehostError
from tunehost.printable import one_line
from tunehost.ops.gate import EXIT_NOT_QUIET, EXIT_NOT_READY, EXIT_SOFTWARE, EXIT_USAGE

MAX_WAIT_S = 24 * 3600


class GateCommand(TyperCommand):
    """Bad arguments exit EX_USAGE (64), not 1: a wrapped command's own status 1 must stay unambiguous."""

    usage_exit_code = EXIT_USAGE


def register(app: typer.Typer) -> None:
    app.command("gate", short_help="Refuse to benchmark a host that is not ready.", cls=GateCommand, context_settings={"allow_interspersed_args": False})(gate)


def say(message: str) -> None:
    typer.echo(f"gate: {one_line(message)}", err=True)  # summaries and paths come from the host


def _seconds(value: str) -> float:
    """--wait-quiet through the one duration parser (tunehost.durations); bad input is a usage error (64)."""
    from tunehost.durations import parse_duration

    try:
        return parse_duration(value, option="--wait-quiet", maximum=MAX_WAIT_S)
    except TunehostError as exc:
        raise typer.BadParameter(str(exc)) from None


@cli_errors
def gate(
    command: Optional[List[str]] = typer.Argument(None, metavar="-- COMMAND [ARGS]...",
                                                  help="The benchmark command, run without a shell."),
    wait_quiet: str = typer.Option("0", "--wait-quiet", metavar="DURATION", callback=_seconds,
                                   help="First wait up to DURATION (90, 90s, 5m, 1h) for a quiet host (as tune "
                                        "judges its rounds) and settled temperatures (0: do not wait)."),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR",
                                       help="Write the doctor report, a host summary and a snapshot of the host "
                                            "(with the measurements) to DIR/host/."),
    quick: bool = typer.Option(False, "--quick", help=QUICK_HELP),
    strict: bool = typer.Option(False, "--strict", help="Warnings (and broken checks) also make the host not ready."),
    skip: List[str] = typer.Option([], "--skip", metavar="ID", help="Do not run this doctor check (repeatable)."),
    snapshot: Optional[Path] = typer.Option(None, "--snapshot", "-s", metavar="DIR", help=SNAPSHOT_HELP),
) -> None:
    """Refuse to benchmark a host that is not ready; record where every number came from.

    In order: wait for a quiet host (--wait-quiet), judge it with doctor (measuring unless --quick), write DIR/host/
    (--out), then run COMMAND. COMMAND's stdout and stderr pass through untouched; the gate speaks on stderr.
    SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to the gate are passed on to COMMAND.

    \b
    Exit status: COMMAND's own (128+N when signal N killed it), or one of
    the gate's, none used by common tools:
      64  bad arguments
      69  the host is not ready (doctor found a fail; --strict: a warning too)
      70  the gate could not judge the host or write --out DIR
      75  the host did not become quiet within --wait-quiet
      126 COMMAND could not be executed, 127 COMMAND was not found
    With 64, 69, 70 and 75 COMMAND did not run.
    """
    try:
        status = run_gate(GateRun(list(command or []), wait_quiet, out, quick, strict, list(skip), snapshot))
    except (TunehostError, OSError) as exc:  # the gate's own failure: never 1, which COMMAND may return
        typer.echo(f"tunehost: error: {one_line(error_text(exc))}", err=True)
        status = EXIT_SOFTWARE
    raise typer.Exit(status)


@dataclass(frozen=True)
class GateRun:
    """The gate's arguments, as given."""

    command: list[str]
    wait_quiet: float
    out: Path | None
    quick: bool
    strict: bool
    skip: list[str]
    snapshot: Path | None


def run_gate(args: GateRun) -> int:
    """Select the checks, call the gate's operation (tunehost.ops.gate.run_gate) with a host opener, doctor's
    judgement and the snapshot writer, and say how it ended; the exit status."""
    from tunehost.cli.doctor import judge, load_checks_warning, quiet_lines, record_snapshot
    from tunehost.doctor import select_checks
    from tunehost.host import open_host
    from tunehost.ops.gate import GateEdge, GateRequest
    from tunehost.ops.gate import run_gate as gate_op

    loaded = load_checks_warning()
    try:
        checks = select_checks(loaded.checks, (), args.skip)
    except TunehostError as exc:
        typer.echo(f"tunehost: error: {one_line(exc)}", err=True)
        return EXIT_USAGE
    edge = GateEdge(fresh_host=lambda record: open_host(args.snapshot, record=record),
                    judge=lambda facts: judge(facts, checks, loaded.warnings, strict=args.strict, quick=args.quick,
                                              show_status=True),
                    record_snapshot=record_snapshot, on_status=say)
    result = gate_op(GateRequest(args.command, args.wait_quiet, args.out, args.snapshot), edge)
    if result.error is not None:
        typer.echo(f"tunehost: error: {one_line(result.error)}", err=True)
    elif result.status == EXIT_NOT_QUIET and result.quiet is not None:
        say(f"host did not settle within {args.wait_quiet:g} s: {result.quiet.reason}")
    elif result.status == EXIT_NOT_READY and result.doc is not None:
        say("host not ready for benchmarking (tunehost doctor):")
        for line in quiet_lines(result.doc, strict=args.strict):
            typer.echo(one_line(line), err=True)
        say("fix the findings above (`tunehost doctor` explains each; `tunehost apply` fixes what software can)")
    if result.cannot_run is not None:
        say(result.cannot_run)
    elif result.ran and result.status != 0:
        say(f"the command exited with status {result.status}")
    if result.explanation is not None:
        say(result.explanation)
    if result.summary_warning is not None:
        say(f"warning: {result.summary_warning}")
    return result.status
