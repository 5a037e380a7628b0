"""`tunehost gate`: wait for a quiet host, judge it (doctor, in-process), record it, then run the benchmark command.

The gate speaks on stderr only: stdout belongs to the command. Its own refusals use the sysexits statuses of
tunehost.ops.gate (GATE_EXIT_STATUSES); any other status is the command's own.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional

import typer
from typer.core import TyperCommand

from tunehost.cli import cli_errors, error_text
from tunehost.cli.doctor import QUICK_HELP, SNAPSHOT_HELP
from tunehost.errors import TunehostError
from tunehost.printable import one_line
from tunehost.ops.gate import (EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_NOT_QUIET, EXIT_NOT_READY, EXIT_SOFTWARE,
                                  EXIT_USAGE)

MEASURED_CHECKS = ("memory-bandwidth", "cpu-clocks", "power-limits")  # their figures are printed on every run
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
    from tunehost.cli.doctor import judge, load_checks_warning, quiet_lines
    from tunehost.doctor import select_checks
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops.gate import read_quiet, wait_quiet, wait_quiet_live

    loaded = load_checks_warning()
    try:
        checks = select_checks(loaded.checks, (), args.skip)
    except TunehostError as exc:
        typer.echo(f"tunehost: error: {one_line(exc)}", err=True)
        return EXIT_USAGE
    snapshot_out = args.out / "host" / "snapshot" if args.out is not None else None
    if snapshot_out is not None and snapshot_out.is_dir() and any(snapshot_out.iterdir()):
        typer.echo(f"tunehost: error: {one_line(snapshot_out)} already holds a snapshot; choose a new --out DIR",
                   err=True)
        return EXIT_SOFTWARE
    try:
        quiet = None
        if args.wait_quiet:
            say(f"waiting up to {args.wait_quiet:g} s for the host to be quiet...")
            if args.snapshot is None:  # the live host: judged as tune and bench judge their rounds
                quiet = wait_quiet_live(open_host, args.wait_quiet)
            else:  # a snapshot holds one process list: a fresh host per reading (samples are cached per host)
                quiet = wait_quiet(lambda: read_quiet(open_host(args.snapshot)), args.wait_quiet)
            if not quiet.quiet:
                say(f"host did not settle within {args.wait_quiet:g} s: {quiet.reason}")
                return EXIT_NOT_QUIET
            say(f"host quiet after {quiet.waited_s:.0f} s")
        # judged after the wait, once: this run's measurement decides and is what --out records
        record = args.out is not None and args.snapshot is None
        facts = HostFacts(open_host(args.snapshot, record=record))
        report = judge(facts, checks, loaded.warnings, strict=args.strict, quick=args.quick,
                       show_status=True)
    except TunehostError as exc:
        typer.echo(f"tunehost: error: {one_line(exc)}", err=True)
        return EXIT_SOFTWARE
    doc = report.to_json()
    for finding in doc["findings"]:
        if finding["check"] in MEASURED_CHECKS:
            say(f"{finding['check']}: {finding['summary']}")

    host_dir = args.out / "host" if args.out is not None else None
    summary: dict[str, Any] = {}
    if host_dir is not None:
        try:
            summary = _record(facts, doc, host_dir, args, quiet)
        except (OSError, TunehostError) as exc:
            typer.echo(f"tunehost: error: cannot write {one_line(host_dir)}: "
                       f"{one_line(getattr(exc, 'strerror', None) or exc)}", err=True)
            return EXIT_SOFTWARE

    if not report.ready:
        say("host not ready for benchmarking (tunehost doctor):")
        for line in quiet_lines(doc, strict=args.strict):
            typer.echo(one_line(line), err=True)
        say("fix the findings above (`tunehost doctor` explains each; `tunehost apply` fixes what software can)")
        return EXIT_NOT_READY
    say("tunehost doctor: ready")
    if not args.command:
        return 0

    sys.stdout.flush()
    started = time.time()
    try:
        from tunehost.ops.gate import run_command

        rc = run_command(args.command)
    except OSError as exc:
        say(f"cannot run {args.command[0]!r}: {exc.strerror or exc}")
        rc = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_EXECUTE
    else:
        if rc != 0:
            say(f"the command exited with status {rc}")
        program = os.path.basename(args.command[0])
        if 128 < rc < 128 + 65 and program.startswith("llama"):  # a llama.cpp tool killed by signal rc - 128
            from tunehost.facts.llama_exit import explain_exit
            from tunehost.host.cpuinfo import live_cpu_flags

            say(explain_exit(program, 128 - rc, live_cpu_flags()) or "")
    if host_dir is not None:
        summary.update({"exit_status": rc, "duration_s": round(time.time() - started, 1)})
        try:
            _write_json(host_dir / "summary.json", summary)
        except OSError as exc:  # the command has run: its status still comes back
            say(f"warning: could not record the exit status in {host_dir}: {exc.strerror or exc}")
    return rc


def _record(facts: Any, doc: dict, host_dir: Path, args: GateRun, quiet: Any) -> dict[str, Any]:
    """DIR/host/doctor.json, summary.json and (live host) snapshot/, the replayable facts with the measurements."""
    from tunehost.cli.doctor import record_snapshot
    from tunehost.ops.gate import host_summary

    host_dir.mkdir(parents=True, exist_ok=True)
    _write_json(host_dir / "doctor.json", doc)
    summary = host_summary(facts.host)  # before the snapshot is written, so that what it read is in it too
    if quiet is not None:
        last = quiet.readings[-1]
        summary["quiet"] = {"waited_s": round(quiet.waited_s, 1), "max_temp_c": last.max_temp_c,
                            "cpu_percent_total": last.cpu_percent_total}
    summary["verdict"] = doc["verdict"]
    summary["command"] = args.command
    if args.snapshot is None:
        record_snapshot(facts, host_dir / "snapshot")
        summary["snapshot"] = "snapshot"
    else:
        summary["snapshot"] = str(args.snapshot)  # judged from this snapshot: nothing live to record
    _write_json(host_dir / "summary.json", summary)
    say(f"doctor report and host facts written to {host_dir}")
    return summary


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")
