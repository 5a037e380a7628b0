"""`tunehost export`: doctor's findings, the host's measured speeds and the results store as metrics for
Prometheus (a node_exporter textfile-collector file, written atomically), from the live host or a snapshot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from tunehost.cli import cli_errors
from tunehost.cli.doctor import QUICK_HELP, SNAPSHOT_HELP, load_checks_warning
from tunehost.errors import TunehostError
from tunehost.printable import one_line, require_printable

TEXTFILE_NAME = "tunehost.prom"
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,100}\.prom")
RUNS_READ = 200  # the store's newest runs read for the latest speed of each model (doctor's sample reads as many)


def register(app: typer.Typer) -> None:
    app.command("export", short_help="Write the verdict and speeds as Prometheus metrics.")(export)


@cli_errors
def export(
    textfile: Optional[Path] = typer.Option(None, "--textfile", metavar="DIR",
                                            help="Write DIR/tunehost.prom for node_exporter's textfile collector "
                                                 "(atomically: a temporary file in DIR, then renamed)."),
    name: str = typer.Option(TEXTFILE_NAME, "--name", metavar="FILE",
                             help="The file name in DIR (it must end in .prom)."),
    snapshot: Optional[Path] = typer.Option(None, "--snapshot", "-s", metavar="DIR", help=SNAPSHOT_HELP),
    quick: bool = typer.Option(False, "--quick", help=QUICK_HELP),
) -> None:
    """Doctor's verdict and each check's severity, RAM configured vs rated speed, measured bandwidth, CPU clocks
    under load, GPU PCIe links, the latest llama-bench TG/PP per model and configuration with its interval and
    the last drift verdict, in the Prometheus text format (docs/fleet.md). Without --textfile: printed.

    Exit status: 0 written (whatever the verdict: it is in the metrics), 1 tunehost could not run."""
    from tunehost.doctor import select_checks
    from tunehost.facts import HostFacts
    from tunehost.formats.prometheus import render_metrics
    from tunehost.host import open_host
    from tunehost.ops.export import ExportRequest
    from tunehost.ops.export import export as run_export

    target = _target(textfile, name) if textfile is not None else None
    loaded = load_checks_warning()
    host = open_host(snapshot)
    runs, store_note = _store_runs() if host.live else (None, None)
    request = ExportRequest(tuple(select_checks(loaded.checks, [], [])), tuple(loaded.warnings), quick=quick,
                            runs=runs, store_note=store_note)
    metrics = run_export(HostFacts(host), request)
    for note in (*metrics.doctor_notes, *metrics.notes):
        typer.echo(f"tunehost: note: {one_line(note, 300)}", err=True)
    text = render_metrics(metrics)
    if target is None:
        typer.echo(text, nl=False)
        return
    write_atomically(target, text)
    typer.echo(f"wrote {one_line(target)} ({len(metrics.families)} metrics, host {metrics.verdict})", err=True)


def _target(directory: Path, name: str) -> Path:
    require_printable(str(directory), "--textfile")
    if not _FILE_NAME.fullmatch(name):
        raise TunehostError(f"--name {one_line(name, 60)!r}: a plain file name ending in .prom (node_exporter's "
                            "textfile collector reads only *.prom)")
    from tunehost.cli.output_file import directory_link_allowed, replaceable

    directory_link_allowed(directory, "--textfile")
    if not directory.is_dir():
        raise TunehostError(f"--textfile {one_line(directory)}: not a directory (node_exporter's "
                            "--collector.textfile.directory)")
    return replaceable(directory / name, "--textfile")


def _store_runs() -> tuple[list | None, str | None]:
    """The results store's newest runs, or why not; a store that does not exist is not created."""
    from tunehost.store import open_store, store_path

    path = store_path()
    if not path.is_file():
        return [], None
    try:
        with open_store(path, create=False) as store:
            return list(store.runs(limit=RUNS_READ)), None
    except (TunehostError, OSError) as exc:
        return None, f"the results store could not be read ({one_line(str(exc), 200)}): speeds from doctor's sample"


def write_atomically(target: Path, text: str) -> None:
    """`text` as `target`: written to a temporary file in the same directory (not *.prom, so the collector never
    reads it half-written), flushed to disk, made world-readable, then renamed over `target` in one step; a
    target that is not a regular file (a link, a FIFO) is refused (tunehost.cli.output_file)."""
    from tunehost.cli.output_file import replace_file

    replace_file(target, text, option="--textfile")
