"""`tunehost tune`: race configurations around advise's plan with the real llama-bench; the winner, proven.

docs/tune.md explains the race, the search space and how a killed tune resumes.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tunehost.cli import LINE_EVERY_ROUNDS, check_range, cli_errors, make_console
from tunehost.errors import EXIT_BUSY, TunehostError

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.tune.race import TuneOutcome

FORMATS = ("human", "shell", "systemd", "json")


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
    objective: str = typer.Option("tg", "--objective", metavar="tg|pp|balanced",
                                  help="What to make faster: token generation, prompt processing, or both."),
    n_prompt: int = typer.Option(512, "-p", "--n-prompt", metavar="N", help="Prompt tokens of the PP test."),
    n_gen: int = typer.Option(128, "-n", "--n-gen", metavar="N", help="Generated tokens of the TG test."),
    reps: int = typer.Option(3, "--reps", "-r", metavar="N", help="Repetitions per llama-bench run."),
    fmt: str = typer.Option("human", "--format", "-f", metavar="FORMAT",
                            help="human (default), shell, systemd or json: how the winner is printed."),
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

    if fmt not in FORMATS:
        raise TunehostError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
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
                             resuming=resuming if fmt == "human" else None)
        result = op.tune(host, HostFacts(host), lambda: open_for_recording(warn), options, hooks)
    if result.journal_note is not None:
        warn(result.journal_note)
    outcome = result.outcome
    render(outcome, result.settings, fmt, make_console(), unit_check=result.unit_check)
    if not outcome.has_result:  # a result from quiet rounds (a winner, or the plan kept) exits 0, said so
        raise typer.Exit(EXIT_BUSY)


def tune_summary(outcome: "TuneOutcome", tune_key: str | None) -> dict[str, Any]:
    """The outcome as JSON (tunehost.ops.tune.tune_summary: what the store keeps)."""
    from tunehost.ops.tune import tune_summary as summary

    return summary(outcome, tune_key)


def headline(outcome: "TuneOutcome", objective: str) -> str:
    """"+12.0 % TG, 95 % interval +9.1..+15.2 %, 14 rounds" or "advise's plan is already the fastest ..."."""
    what = {"tg": "TG", "pp": "PP", "balanced": "PP·TG (geometric mean)"}[objective]
    c = outcome.confirmation
    if not outcome.has_result:
        return (f"no winner: {outcome.stopped}; advise's plan stands. A load that holds a CPU changes which thread "
                "count wins: run again on a quiet host (`tunehost gate --wait-quiet`), or --allow-busy to "
                "measure under this load")
    if outcome.improved and c is not None:
        text = (f"{outcome.winner.label}: {c.change_percent:+.1f} % {what} over advise's plan, 95 % interval "
                f"{(c.low - 1) * 100:+.1f}..{(c.high - 1) * 100:+.1f} %, {c.rounds} rounds")
        if outcome.disturbed_rounds:
            counted = sum(1 for m in outcome.marks if m.counted)
            text += (f" — UNDER BACKGROUND LOAD ({outcome.disturbed_rounds} of {counted} rounds disturbed: "
                     f"{outcome.busy_reason}): this winner holds only under that load")
        return text + _gaps(outcome)
    complete = not outcome.not_searched and not outcome.load_dropped
    text = "advise's plan is already the fastest within the noise" if complete else "advise's plan stands"
    if c is not None:
        high = f"{(c.high - 1) * 100:+.1f}" if math.isfinite(c.high) else "+inf"
        low = f"{(c.low - 1) * 100:+.1f}" if c.low > 0 else "-100"
        text += (f" (the search's best, {outcome.best.label}, re-measured against it: {c.change_percent:+.1f} % "
                 f"{what}, 95 % interval {low}..{high} %, {c.rounds} rounds)")
    if outcome.disturbed_rounds:
        text += (f" — under background load ({outcome.disturbed_rounds} rounds disturbed: {outcome.busy_reason}); "
                 "this holds only under that load")
    return text + _gaps(outcome)


def _gaps(outcome: "TuneOutcome") -> str:
    """What the result does not cover: challengers not raced under the load, knobs not searched, why it stopped."""
    text = ""
    if outcome.load_dropped:
        text += (f"; not raced under that load: {', '.join(outcome.load_dropped)} ({outcome.busy_reason}), "
                 "so this holds only under that load")
    if outcome.not_searched:
        text += "; not searched: " + ", ".join(f"{knob} ({why})" for knob, why in outcome.not_searched)
    if outcome.stopped is not None:
        text += f" (from quiet rounds; the tune then stopped: {outcome.stopped})"
    return text


def render(outcome: "TuneOutcome", settings: Any, fmt: str, console: "Console", *, unit_check: Any = None) -> None:
    """The winner as `fmt`: json, shell and systemd through the formats room (tunehost.formats, as advise; a unit
    only with the check tune made before its race, `unit_check`: tunehost.advise.unit_access.check_unit), human
    as tune's own report with the winner's command line in the shell format."""
    from rich.markup import escape

    from tunehost.formats import Subject
    from tunehost.formats import render as render_format
    from tunehost.formats.shell import render_shell

    launch = outcome.winner.launch
    if fmt == "json":
        doc = {"schema": "tunehost-tune/1", "headline": headline(outcome, settings.objective),
               **tune_summary(outcome, None)}
        doc.pop("tune_key")
        typer.echo(render_format("json", Subject(launch, doc)), nl=False)
        return
    if fmt in ("shell", "systemd"):
        typer.echo(render_format(fmt, Subject(launch, unit_check=unit_check)), nl=False)
        if fmt == "systemd" and not unit_check.report.checked:
            from tunehost.printable import one_line

            typer.echo(f"tunehost: warning: {one_line(unit_check.report.reason)}", err=True)
        return
    if outcome.reused_steps:
        console.print(f"resumed: reused {outcome.reused_steps} of {outcome.steps} llama-bench runs from the store "
                      f"({outcome.reused_s:.0f} s of {outcome.spent_s:.0f} s of measurement)", highlight=False)
    for stage in outcome.stages:
        console.print(escape(stage.describe()), highlight=False)
        for label, why in stage.dropped:
            console.print(f"[dim]  dropped {escape(label)}: {escape(why)}[/]", highlight=False)
    for knob, why in outcome.skipped:
        console.print(f"[dim]{escape(knob)}: skipped, {escape(why)}[/]", highlight=False)
    if outcome.discarded_rounds and not outcome.stopped:
        console.print(f"[dim]{outcome.discarded_rounds} rounds disturbed by other processes were discarded and run "
                      f"again ({escape(outcome.busy_reason or '')})[/]", highlight=False)
    console.print()
    style = ("bold red" if not outcome.has_result else "bold yellow" if outcome.disturbed
             else "bold green" if outcome.improved else "yellow")
    console.print(f"[{style}]{escape(headline(outcome, settings.objective))}[/]", highlight=False)
    if outcome.waited_s >= 1:
        spent = (f"{outcome.spent_s:.0f} s of the {outcome.budget_s:.0f} s budget: "
                 f"{outcome.spent_s - outcome.waited_s:.0f} s of measurement, {outcome.waited_s:.0f} s waiting for quiet")
    else:
        spent = f"{outcome.spent_s:.0f} s of measurement of the {outcome.budget_s:.0f} s budget"
    console.print(f"[dim]{spent}, {outcome.steps} llama-bench runs[/]", highlight=False)
    if not outcome.has_result:
        return
    console.print()
    console.print(escape(render_shell(launch)), highlight=False, soft_wrap=True)
    console.print("[dim]as a systemd unit: tunehost tune ... --format systemd; as JSON: --format json[/]")


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
