"""`tunehost tune`: race configurations around advise's plan with the real llama-bench; the winner, proven.

docs/tune.md explains the race, the search space and how a killed tune resumes.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tunehost.cli import LINE_EVERY_ROUNDS, check_range, cli_errors, make_console
from tunehost.errors import EXIT_BUSY, TunehostError
from tunehost.formats import TUNE, choices_text, refuse_unwritable
from tunehost.printable import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.ops.tune import TuneResult


def register(app: typer.Typer) -> None:
    app.command("tune", short_help='Find the fastest llama.cpp configuration by measurement.')(tune_command)


def parse_budget(text: str) -> float:
    """"10m" / "90s" / "1h" / "600" (seconds) -> seconds (tunehost.durations); one clear error otherwise."""
    from tunehost.durations import WEEK_S, parse_duration

    return parse_duration(text, option="--budget", maximum=WEEK_S, allow_minimum=False)


@cli_errors
def tune_command(
    model: Path = typer.Option(..., "--model", "-m", metavar="PATH.gguf", help="The GGUF model to tune for."),
    budget: str = typer.Option("10m", "--budget", metavar="DURATION",
                               help="Measurement time for the whole tune (10m, 90s, 1h)."),
    ctx: Optional[int] = typer.Option(None, "--ctx", metavar="N",
                                      help="Context tokens llama-server gets (decides what fits in memory)."),
    objective: str = typer.Option("tg", "--objective", metavar="OBJECTIVE",
                                  help="tg|pp|balanced: what to make faster (token generation, prompt processing, "
                                       "both); tokens-per-joule: generated tokens per joule of the CPU package "
                                       "and GPUs (needs a readable energy counter)."),
    n_prompt: int = typer.Option(512, "-p", "--n-prompt", metavar="N", help="Prompt tokens of the PP test."),
    n_gen: int = typer.Option(128, "-n", "--n-gen", metavar="N", help="Generated tokens of the TG test."),
    reps: int = typer.Option(3, "--reps", "-r", metavar="N", help="Repetitions per llama-bench run."),
    fmt: str = typer.Option("human", "--format", "-f", metavar="FORMAT",
                            help=f"{choices_text(TUNE)}: how the winner is printed."),
    llama_bench: Optional[Path] = typer.Option(None, "--llama-bench", metavar="PATH",
                                               help="The llama-bench binary (or its directory)."),
    fresh: bool = typer.Option(False, "--fresh", help="Start over instead of resuming an interrupted tune."),
    user_unit: bool = typer.Option(False, "--user/--system",
                                   help="--format systemd: a unit for your user manager or the system one "
                                        "(default), as advise."),
    service_user: Optional[str] = typer.Option(None, "--service-user", metavar="NAME",
                                               help="--format systemd: run the system unit as this existing "
                                                    "account (User=NAME); checked as advise does."),
    allow_busy: bool = typer.Option(False, "--allow-busy",
                                    help="Measure under background load instead of waiting for quiet; the winner "
                                         "then holds only under that load (said so, and stored)."),
) -> None:
    """Find the fastest llama.cpp configuration for MODEL on this box: a race of paired llama-bench rounds
    around advise's plan; a winner only when it beats the plan beyond the noise. Rounds disturbed by other
    processes are discarded; on a busy host it waits for quiet, or stops: with a result from quiet rounds
    (exit 0, the headline names what was not searched) or without any (exit 75).

    --format systemd: the unit's account (a dynamic user, --service-user NAME, or you with --user) is checked
    against llama-server and the model before any measurement, as advise does; a unit that could not start is
    refused up front."""
    from tunehost.advise.unit_access import unit_kind
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops import tune as op
    from tunehost.store import open_for_recording
    from tunehost.tune import race

    if fmt not in TUNE:
        raise TunehostError(f"--format must be one of {', '.join(TUNE)}, not {fmt!r}")
    kind = unit_kind(fmt, user_unit, service_user)
    if objective not in race.OBJECTIVES:
        raise TunehostError(f"--objective must be one of {', '.join(race.OBJECTIVES)}, not {objective!r}")
    budget_s = parse_budget(budget)
    if ctx is not None:
        check_range("--ctx", ctx, 1)
    check_range("-p/--n-prompt", n_prompt, 1)
    check_range("-n/--n-gen", n_gen, 1)
    check_range("--reps", reps, 1, 1000)
    err = make_console(stderr=True)

    def warn(line: str) -> None:
        err.print(f"warning: {line}", markup=False, highlight=False)

    def resuming(steps: int) -> None:
        err.print(f"resuming an interrupted tune: {steps} llama-bench runs are in the store",
                  markup=False, highlight=False)

    options = op.TuneOptions(model=str(model.expanduser().resolve()), ctx=ctx, objective=objective,
                             n_prompt=n_prompt, n_gen=n_gen, reps=reps, budget_s=budget_s, llama_bench=llama_bench,
                             fresh=fresh, allow_busy=allow_busy, unit=kind if fmt == "systemd" else None)
    host = open_host()
    interactive = sys.stderr.isatty() and sys.stdout.isatty()
    with _TuneView(err, enabled=interactive) as view_progress:
        lines = _TuneLines(err) if not interactive else None
        hooks = op.TuneHooks(progress=lines.update if lines is not None else view_progress.update,
                             resuming=resuming if fmt == "human" else None,
                             writable=partial(refuse_unwritable, fmt))
        result = op.tune(host, HostFacts(host), lambda: open_for_recording(warn), options, hooks)
    if result.journal_note is not None:
        warn(result.journal_note)
    render_result(result, fmt)
    if result.record_note is not None:  # after the result: a store failing after the race never hides it
        warn(result.record_note)
    if not result.outcome.has_result:  # a result from quiet rounds (a winner, or the plan kept) exits 0, said so
        raise typer.Exit(EXIT_BUSY)


def render_result(result: "TuneResult", fmt: str) -> None:
    """The tune's result as `fmt` through the formats room (tunehost.formats; tune's human report and JSON document
    are tunehost.formats.tune_report's; a unit only with the check tune made before its race)."""
    from tunehost.formats import Subject, render

    text = render(fmt, Subject(result.outcome.winner.launch, result, result.unit_check, console=make_console()))
    if text:
        typer.echo(text, nl=False)
    if result.unit_check is not None and not result.unit_check.report.checked:
        typer.echo(f"tunehost: warning: {one_line(result.unit_check.report.reason)}", err=True)


class _TuneView:
    """Progress on stderr: stage, round, the leader and its lead, candidates left, budget used."""

    def __init__(self, console: "Console", enabled: bool):
        self.console, self.enabled = console, enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> "_TuneView":
        if self.enabled:
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                      TextColumn("{task.fields[budget]}"), console=self.console, transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task("starting", total=1.0, budget="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def update(self, event: Any) -> None:
        if self._progress is None:
            return
        from tunehost.cli.layout import progress_text

        lead = (f"leader {event.leader} ({event.leader_change * 100:+.1f} %)" if event.leader_change is not None
                else "leader: the incumbent")
        what = (f"{event.stage} ({event.stage_index + 1}/{event.stages}) · round {event.round} · {lead} · "
                f"{event.alive} left")
        if event.note:
            what = f"{event.stage} · {event.note}"
        # labels and notes carry other processes' names ("[/]" is a valid one): never read as rich markup
        self._progress.update(self._task, description=progress_text(what), completed=min(1.0, event.spent_s / event.budget_s),
                              budget=f"{event.spent_s:.0f}/{event.budget_s:.0f} s")


class _TuneLines:
    """Progress when stdout or stderr is not a terminal (`tune | tee`, a CI log): one plain line on stderr when a
    stage starts, every LINE_EVERY_ROUNDS rounds, and for each wait for quiet."""

    def __init__(self, console: "Console"):
        self.console = console
        self._stage: tuple[str, int] | None = None
        self._round = 0
        self._note: str | None = None

    def update(self, event: Any) -> None:
        stage = (event.stage, event.stage_index)
        head = f"tune: {event.stage} ({event.stage_index + 1}/{event.stages})"
        budget = f"{event.spent_s:.0f}/{event.budget_s:.0f} s"
        if event.note:
            if event.note != self._note:
                self._print(f"{head}: {event.note} · {budget}")
            self._note = event.note
            return
        self._note = None
        if stage != self._stage:
            self._stage, self._round = stage, 0
            self._print(f"{head}: racing {event.alive} configurations · {budget}")
        if event.round and event.round != self._round and event.round % LINE_EVERY_ROUNDS == 0:
            self._round = event.round
            lead = (f"leader {event.leader} {event.leader_change * 100:+.1f} %" if event.leader_change is not None
                    else "leader: the incumbent")
            dropped = f", {event.discarded} disturbed discarded" if event.discarded else ""
            self._print(f"{head}: round {event.round}, {lead}, {event.alive} left{dropped} · {budget}")

    def _print(self, line: str) -> None:
        from tunehost.cli.layout import print_progress_line

        print_progress_line(self.console, line, 300)
