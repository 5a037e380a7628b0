"""tune's report in the formats room: the headline (what the race proved, and what it did not cover), the JSON
document `tune --format json` prints, and the human report (`--format human`, tune's default), printed through the
console the CLI hands in. The human and json formats hand a tune result (tunehost.ops.tune.TuneResult) here."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunehost.formats import Subject
    from tunehost.ops.tune import TuneResult
    from tunehost.tune.race import TuneOutcome

SCHEMA = "tunehost-tune/1"


def headline(outcome: "TuneOutcome", objective: str) -> str:
    """"+12.0 % TG, 95 % interval +9.1..+15.2 %, 14 rounds" or "advise's plan is already the fastest ..."."""
    what = {"tg": "TG", "pp": "PP", "balanced": "PP·TG (geometric mean)",
            "tokens-per-joule": "tokens per joule"}[objective]
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
    best = "the most efficient" if objective == "tokens-per-joule" else "the fastest"
    text = f"advise's plan is already {best} within the noise" if complete else "advise's plan stands"
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


def document(result: "TuneResult") -> dict[str, Any]:
    """`tune --format json`: the schema, the headline and the outcome as the store keeps it (without the
    journal's key)."""
    from tunehost.ops.tune import tune_summary

    doc = {"schema": SCHEMA, "headline": headline(result.outcome, result.settings.objective),
           **tune_summary(result.outcome, None)}
    doc.pop("tune_key")
    return doc


def render_human(subject: "Subject") -> str:
    """tune's report, printed to ``subject.console``: the stages, what was skipped or discarded, the headline,
    the time spent, then the winner's command line (the shell format); nothing is returned to echo."""
    from rich.markup import escape

    from tunehost.errors import TunehostError
    from tunehost.formats.shell import render_shell

    result, console = subject.report, subject.console
    if console is None:
        raise TunehostError("internal: --format human prints through a console")
    outcome = result.outcome
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
    console.print(f"[{style}]{escape(headline(outcome, result.settings.objective))}[/]", highlight=False)
    if outcome.waited_s >= 1:
        spent = (f"{outcome.spent_s:.0f} s of the {outcome.budget_s:.0f} s budget: "
                 f"{outcome.spent_s - outcome.waited_s:.0f} s of measurement, {outcome.waited_s:.0f} s waiting for quiet")
    else:
        spent = f"{outcome.spent_s:.0f} s of measurement of the {outcome.budget_s:.0f} s budget"
    console.print(f"[dim]{spent}, {outcome.steps} llama-bench runs[/]", highlight=False)
    if not outcome.has_result:
        return ""
    console.print()
    console.print(escape(render_shell(subject.launch)), highlight=False, soft_wrap=True)
    console.print("[dim]as a systemd unit: tunehost tune ... --format systemd; as JSON: --format json[/]")
    return ""
