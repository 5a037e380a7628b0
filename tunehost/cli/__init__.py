"""The command-line edge: the Typer app. Only this package prints, and it alone turns errors into exit statuses.

Each command lives in its own module with a `register(app)` function; heavy imports happen inside the command body
so that `tunehost --help` stays fast.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from typing import Any, Callable, TypeVar

import typer
from typer.core import TyperGroup

try:  # typer >= 0.20 vendors click as typer._click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import NoArgsIsHelpError, UsageError

from tunehost import __version__
from tunehost.errors import TunehostError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USAGE = 1  # docs/snapshot.md: bad arguments are "the tool could not run" (1), not click's default 2
# llama.cpp reads -c/-np (common/arg.cpp) and llama-bench's -p/-n/-d/-r with std::stoi into an int: 32 bits
LLAMA_INT_MAX = 2**31 - 1
LINE_EVERY_ROUNDS = 5  # piped progress (bench, tune, history --drift): one plain line per this many rounds


def _as_one_line(exc: UsageError) -> UsageError:
    """Bad arguments: exit status 1 and one line on stderr, like every other tunehost error, instead of click's
    usage block ("Usage: ... Try ... Error: ...")."""
    command = exc.ctx.command if exc.ctx is not None else None
    exc.exit_code = getattr(command, "usage_exit_code", EXIT_USAGE)  # the gate keeps 1 for its wrapped command
    where = exc.ctx.command_path if exc.ctx is not None else "tunehost"

    def show(file: Any = None) -> None:
        from tunehost.printable import one_line

        typer.echo(f"tunehost: error: {one_line(exc.format_message())} (see `{where} --help`)", err=True)

    exc.show = show  # type: ignore[method-assign]
    return exc


class _Group(TyperGroup):
    """Keeps commands in the order they are registered and makes usage errors one line with exit status 1."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(self.commands)

    def make_context(self, *args: Any, **kwargs: Any) -> typer.Context:
        try:
            return super().make_context(*args, **kwargs)
        except NoArgsIsHelpError as exc:  # bare `tunehost`: the help on stdout, exit 0 (not an error)
            typer.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
            raise typer.Exit(0) from None
        except UsageError as exc:
            raise _as_one_line(exc)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            raise _as_one_line(exc)


app = typer.Typer(
    cls=_Group,
    name="tunehost",
    help="Find what in this Linux host holds llama.cpp back, fix it safely, and prove the result.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)


def fail(message: str) -> typer.Exit:
    """Print one error line to stderr and return the Exit(1) to raise."""
    from tunehost.printable import one_line

    # messages quote paths and file contents: one printable line, never a raw escape sequence
    typer.echo(f"tunehost: error: {one_line(message)}", err=True)
    return typer.Exit(1)


def check_range(option: str, value: int | float, low: int | float, high: int | float = LLAMA_INT_MAX,
                what: str = "") -> None:
    """One clear TunehostError for an option outside [low, high] (NaN and infinity included)."""
    import math

    if not math.isfinite(value) or not low <= value <= high:
        raise TunehostError(f"{option} must be between {low} and {high}{what}, not {value}")


def error_text(exc: TunehostError | OSError) -> str:
    """The one-line message for a TunehostError, or for an OSError: "PATH: file name too long"."""
    if not isinstance(exc, OSError):
        return str(exc)
    from tunehost.printable import one_line

    where = f"{one_line(exc.filename, 100)}: " if exc.filename is not None else ""
    return f"{where}{(exc.strerror or exc.__class__.__name__).lower()}"


def cli_errors(fn: F) -> F:
    """Turn TunehostError (and a broken pipe, Ctrl-C, or an OSError) into one line and a non-zero exit — never a
    traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TunehostError as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt:
            typer.echo("tunehost: interrupted", err=True)
            raise typer.Exit(130) from None
        except BrokenPipeError:  # the reader went away before the command knew its own status
            stdout_gone()
            raise typer.Exit(1) from None
        except OSError as exc:  # a path the system refuses (too long, a loop, no permission) the command did not name
            raise fail(error_text(exc)) from None

    return wrapper  # type: ignore[return-value]


def stdout_gone() -> None:
    """The reader of stdout went away (`tunehost doctor | head -1`): send the rest of the output to /dev/null, as
    Python's note on SIGPIPE recommends, so no later write or the final flush fails."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor behind sys.stdout (tests capture it)
        pass


@contextlib.contextmanager
def report_output():
    """Printing a report whose exit status is already decided (doctor's verdict, verify's drift): a reader that
    stops early does not turn that status into 1."""
    try:
        yield
    except BrokenPipeError:
        stdout_gone()


def make_console(*, stderr: bool = False) -> Any:
    """The rich Console every command prints through. Piped to a file or a pager it does not hard-wrap at
    80 columns, so long evidence and command lines stay whole. Every string it prints passes through
    `tunehost.printable.printable_lines`: an ANSI escape read from a GGUF or a snapshot never reaches the terminal."""
    from rich.console import Console

    from tunehost.printable import printable_lines

    class PrintableConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:  # every str printed, table cells included
            return super().render_str(printable_lines(text), **kwargs)

        def on_broken_pipe(self) -> None:  # rich exits 1 itself; let the command keep its own exit status
            self.quiet = True
            raise BrokenPipeError(32, "the reader of the output went away")

    stream = sys.stderr if stderr else sys.stdout
    return PrintableConsole(highlight=False, soft_wrap=not stream.isatty(), stderr=stderr)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tunehost {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Find what in this Linux host holds llama.cpp back, fix it safely, and prove the result."""


COMMAND_MODULES = ("doctor", "advise", "bench", "tune", "history", "apply", "gate", "fleet", "report", "export")

for _name in COMMAND_MODULES:
    importlib.import_module(f"tunehost.cli.{_name}").register(app)


def main() -> None:
    try:
        app()
    except BrokenPipeError:  # `tunehost ... | head` outside any command (the help): the reader has what it wanted
        stdout_gone()
        sys.exit(0)
