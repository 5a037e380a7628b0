"""`tunehost report`: one self-contained HTML page of this host (or a snapshot) to look at and share.

docs/report.md describes the page, what it leaves out to be shareable, and its limits.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, List, Optional

import typer

from tunehost.cli import cli_errors
from tunehost.cli.doctor import QUICK_HELP, SNAPSHOT_HELP, load_checks_warning
from tunehost.errors import TunehostError
from tunehost.host.proc import start_detached
from tunehost.printable import first_unwritable, one_line

DEFAULT_OUTPUT = "tunehost-report.html"
# what a browser started for the user who ran `sudo tunehost report --open` needs of their session
SESSION_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")


def register(app: typer.Typer) -> None:
    app.command("report", short_help="One HTML page of this host to look at and share.")(report)


@cli_errors
def report(
    snapshot: Optional[Path] = typer.Option(None, "--snapshot", "-s", metavar="DIR", help=SNAPSHOT_HELP),
    store: Optional[Path] = typer.Option(None, "--store", metavar="FILE",
                                         help="Read the runs from this results store (default: yours; with "
                                              "--snapshot: the snapshot's results sample)."),
    model: Optional[List[Path]] = typer.Option(None, "--model", "-m", metavar="PATH.gguf",
                                               help="Plan this model (repeatable; default: the store's models "
                                                    "that are on this machine)."),
    output: Path = typer.Option(Path(DEFAULT_OUTPUT), "--output", "-o", metavar="FILE", show_default=False,
                                help=f"Write the page here (default {DEFAULT_OUTPUT}; - for stdout)."),
    open_page: bool = typer.Option(False, "--open", help="Open the page in your browser when written."),
    full: bool = typer.Option(False, "--full", help="Keep paths and user names (the page is no longer "
                                                    "shareable as is)."),
    quick: bool = typer.Option(False, "--quick", help=QUICK_HELP),
) -> None:
    """One self-contained HTML page: doctor's verdict and every finding with its evidence and fix, advise's
    memory plan per model, the latest bench and tune results with their intervals, TG over time with drift and
    host changes marked, and the hardware. It fetches nothing and opens offline in any browser.

    Shareable by default: no secrets, home directories or user names (--full keeps them).

    Exit status: 0 the page was written, 1 it could not be (`tunehost doctor` gives the verdict's status).
    """
    from tunehost.doctor import select_checks
    from tunehost.facts import HostFacts
    from tunehost.formats.report_html import render
    from tunehost.host import open_host
    from tunehost.ops.report import ReportRequest, build_report

    to_stdout = str(output) == "-"
    if open_page and to_stdout:
        raise TunehostError("--open opens the written file: give --output FILE, not -")
    if store is not None and not store.is_file():
        raise TunehostError(f"--store {one_line(store, 200)}: no such results store file")
    if not to_stdout:
        page_target(output)  # a FIFO, a device or a link there: one line now, not after the page was built
    loaded = load_checks_warning()
    host = open_host(snapshot)
    facts = HostFacts(host)
    request = ReportRequest(checks=tuple(select_checks(loaded.checks)), warnings=tuple(loaded.warnings),
                            quick=quick, full=full, models=tuple(model or ()), snapshot=snapshot)
    with _runs_store(store, live=host.live) as opened:
        page = render(build_report(facts, request, opened))
    if to_stdout:
        sys.stdout.write(page)
        return
    written = write_page(output, page)
    typer.echo(f"wrote {one_line(written, 300)} ({len(page.encode()) / 1024:.0f} KiB)", err=True)
    if open_page:
        said = open_in_browser(written)
        if said:
            typer.echo(f"tunehost: {one_line(said)}", err=True)


@contextlib.contextmanager
def _runs_store(path: Path | None, *, live: bool) -> Iterator[Any]:
    """The results store the runs come from: --store FILE, else (live) the user's when it exists, else None (a
    snapshot's results sample, or no runs). Never created."""
    from tunehost.store import open_store, store_path

    if path is None and not (live and store_path().is_file()):
        yield None
        return
    with open_store(path, create=False) as store:
        yield store


def write_page(output: Path, page: str, environ: Mapping[str, str] | None = None) -> Path:
    """Write the page atomically (a temporary file beside it, then a rename), readable by all (it is meant to be
    shared). Run as root through sudo, the file goes to the user who ran sudo: never a root-owned surprise in
    their directory."""
    from tunehost.cli.output_file import replace_file

    env = os.environ if environ is None else environ
    target = page_target(output, env)
    replace_file(target, page, option="--output", owner=sudo_owner(env))
    return target


def page_target(output: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The file --output names (DIR/tunehost-report.html for a directory), checked before anything is built:
    absent or a regular file, in a directory that exists (tunehost.cli.output_file)."""
    from tunehost.cli.output_file import directory_link_allowed, replaceable

    env = os.environ if environ is None else environ
    target = output.expanduser().absolute()
    hint = " (give -o - to write the page to stdout)"
    if target.is_dir():
        directory_link_allowed(target, "--output", env)
        target = target / DEFAULT_OUTPUT
    if not target.parent.is_dir():
        raise TunehostError(f"--output {one_line(output, 200)}: no such directory {one_line(target.parent, 200)}")
    return replaceable(target, "--output", hint)


def sudo_owner(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """(uid, gid) of the user who ran `sudo tunehost ...` when this runs as root through sudo, else None."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(environ.get("SUDO_UID", "")), int(environ.get("SUDO_GID", ""))
    except ValueError:
        return None
    return (uid, gid) if uid > 0 else None


def open_in_browser(path: Path, environ: Mapping[str, str] | None = None, *,
                    launch: Callable[[list[str], dict[str, str]], None] | None = None,
                    as_user: Callable[[str], bool] | None = None) -> str | None:
    """Open the page in the user's browser; what to tell them when it was not opened. As root a browser is never
    started as root: through sudo it is started as the user who ran sudo (`sudo -u USER -- env ... xdg-open`, their
    session's display variables passed on), plain root gets the line to run instead. Returns None when started."""
    import webbrowser

    env = dict(os.environ if environ is None else environ)
    launch = launch or start_detached
    if os.geteuid() != 0:
        if launch is not start_detached:
            launch(["xdg-open", str(path)], env)
            return None
        return None if webbrowser.open(path.as_uri()) else f"no browser found: open {path} yourself"
    user = env.get("SUDO_USER", "")
    if not user or user == "root" or first_unwritable(user) or user.startswith("-") or sudo_owner(env) is None:
        return f"not opening a browser as root: open {path} as your user (xdg-open {shlex.quote(str(path))})"
    if not (as_user or _have)("sudo") or not (as_user or _have)("xdg-open"):
        return f"sudo or xdg-open not found: open {path} as {user}"
    passed = [f"{k}={v}" for k in SESSION_VARIABLES if (v := env.get(k)) and not first_unwritable(v)]
    launch(["sudo", "-u", user, "--", "env", *passed, "xdg-open", str(path)], env)
    return None


def _have(program: str) -> bool:
    import shutil

    return shutil.which(program) is not None
