"""`tunehost history`: every recorded measurement, newest first; `--drift` re-measures the last known best.

docs/history.md describes the store, the chart and how drift decides "slower".
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tunehost.cli import cli_errors, make_console
from tunehost.durations import parse_duration
from tunehost.errors import EXIT_BUSY, TunehostError

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.ops.drift import DriftResult
    from tunehost.store import StoredRun

COMMANDS = ("bench", "tune", "drift", "server-bench")
EXIT_SLOWER = 2  # --drift: this box got slower beyond the noise
SPARK = "▁▂▃▄▅▆▇█"


def register(app: typer.Typer) -> None:
    app.command("history", short_help='List every measured run, or re-measure for drift (--drift).')(history)


@cli_errors
def history(
    model: Optional[Path] = typer.Option(None, "--model", "-m", metavar="PATH.gguf",
                                         help="Only runs of this model (by its content hash, so a moved copy counts)."),
    command: Optional[str] = typer.Option(None, "--command", metavar="bench|tune|drift|server-bench", help="Only this command."),
    limit: int = typer.Option(30, "--limit", metavar="N", help="At most N runs (newest first)."),
    json_out: bool = typer.Option(False, "--json", help="The runs as JSON."),
    drift: bool = typer.Option(False, "--drift", help="Re-measure the last known best configuration of --model "
                                                      "and say whether this box got slower since."),
    budget: str = typer.Option("2m", "--budget", metavar="DURATION",
                               help="--drift: measurement budget (90, 90s, 2m, 1h)."),
    llama_bench: Optional[Path] = typer.Option(None, "--llama-bench", metavar="PATH",
                                               help="--drift: the llama-bench binary (or its directory)."),
) -> None:
    """The measurements this box has recorded (bench, tune, drift), newest first, with a chart of TG over time."""
    from tunehost.ops.history import list_runs
    from tunehost.store import model_hash, open_store

    if command is not None and command not in COMMANDS:
        raise TunehostError(f"--command must be one of {', '.join(COMMANDS)}, not {command!r}")
    if not 1 <= limit <= 100_000:
        raise TunehostError(f"--limit must be between 1 and 100000, not {limit}")
    budget_s = parse_duration(budget, option="--budget", allow_minimum=False)
    digest = model_hash(model) if model is not None else None
    if drift:
        if model is None:
            raise TunehostError("--drift needs --model PATH.gguf (whose last best configuration to re-measure)")
        raise typer.Exit(run_drift(model, digest or "", budget=budget_s, llama_bench=llama_bench, json_out=json_out))
    with open_store() as store:
        if json_out:  # each run with its rounds as the host watch saw them (counted or discarded, disturbed or
            # not), and why a stored row was left out (a store is read as hostile): streamed, one run at a time
            write_json_listing(store, model_hash=digest, command=command, limit=limit)
            return
        listing = list_runs(store, model_hash=digest, command=command, limit=limit)
    runs = listing.runs
    console = make_console()
    left_out(listing.skipped, make_console(stderr=True))
    if not runs:
        console.print(f"no runs recorded in {listing.store}" + (" for this model" if model else "")
                      + " yet: `tunehost bench` and `tunehost tune` record every run", highlight=False)
        return
    render_runs(runs, console)
    console.print()
    render_chart(runs, console)


def left_out(skipped: list[str], err: "Console") -> None:
    """The stored rows left out, said once on stderr: how many, and the first reason."""
    from tunehost.printable import one_line

    if skipped:
        more = f" (and {len(skipped) - 1} more; `tunehost history --json` lists them)" if len(skipped) > 1 else ""
        err.print(f"warning: {len(skipped)} stored row{'s' if len(skipped) != 1 else ''} left out of the results "
                  f"store's read: {one_line(skipped[0], 200)}{more}", markup=False, highlight=False)


def write_json_listing(store: "Any", *, model_hash: str | None, command: str | None, limit: int) -> None:
    """`history --json`, written as it is read: the document json.dumps(indent=2) would write of the whole
    listing, one run at a time (a store of large runs is never in memory at once). Strict JSON."""
    import textwrap

    from tunehost.bounds import json_text
    from tunehost.ops.history import each_run

    out = sys.stdout
    head = json_text({"schema": "tunehost-history/1", "store": str(store.path)}, indent=2)
    out.write(head[:-2] + ',\n  "runs": [')
    skipped: list[str] = []
    first = True
    for item in each_run(store, model_hash=model_hash, command=command, limit=limit):
        if item.run is None:
            skipped.append(item.skipped or "")
            continue
        valid, rounds_skipped = item.rounds
        run = dict(item.run.to_json(), rounds=[x.to_json() for x in valid], rounds_skipped=rounds_skipped)
        out.write(("\n" if first else ",\n") + textwrap.indent(json_text(run, indent=2), "    "))
        first = False
    if len(skipped) > MAX_SKIPPED_LISTED:
        skipped[MAX_SKIPPED_LISTED - 1:] = [f"and {len(skipped) - MAX_SKIPPED_LISTED + 1} more stored rows left out"]
    out.write(("]" if first else "\n  ]") + ',\n  "runs_skipped": '
              + textwrap.indent(json_text(skipped, indent=2), "  ").lstrip() + "\n}\n")
    out.flush()


MAX_SKIPPED_LISTED = 1000  # reasons `history --json` lists for stored rows left out


def render_runs(runs: list["StoredRun"], console: "Console") -> None:
    """One block per run, readable at 80 columns: a head line (id, time, command, model, build), one line per
    configuration (its TG and PP medians, then its flags, which wrap), and the verdict or the tune's result."""
    from rich.markup import escape

    from tunehost.printable import one_line

    def text(value: object) -> str:  # the store is read as hostile: one line each, no markup
        return escape(one_line(value))

    for run in runs:  # one print per run, not one per line (a run may list thousands of configurations)
        console.print("\n".join(_run_lines(run, text)), highlight=False, soft_wrap=True)


def _run_lines(run: "StoredRun", text: "Any") -> list[str]:
    """One run's block of :func:`render_runs`, as console markup lines (``text``: a stored value, one escaped line)."""
    when = str(run.created).replace("T", " ").rstrip("Z")[:16]
    model = run.model_name or Path(run.model_path).name
    lines = [f"[bold]#{run.id}[/]  {text(when)}  [bold]{text(run.command)}[/]  {text(model)}  "
             f"[dim]{text(run.build or 'build ?')}[/]"]
    by_config: dict[str, list] = {}  # one pass (a run may hold thousands of configurations)
    for r in run.results:
        by_config.setdefault(r.config, []).append(r)
    width = max((len(c) for c in by_config), default=0)
    for config, rows in by_config.items():
        flags = " ".join(rows[0].flags) if rows else ""
        tg = next((r.median_ts for r in rows if r.kind == "tg"), None)
        pp = next((r.median_ts for r in rows if r.kind == "pp"), None)
        other = next((r for r in rows if r.kind not in ("tg", "pp")), None)  # tune --objective balanced
        speed = "  ".join(part for part in (f"TG {_ts(tg)}" if tg is not None else "",
                                            f"PP {_ts(pp)}" if pp is not None else "",
                                            f"{other.kind} {_ts(other.median_ts)}" if other else "") if part)
        unit = "tokens/J" if other is not None and other.kind == "tokens-per-joule" else "t/s"
        lines.append(f"    {text(config.ljust(width))}  {speed or '—'} {unit}  "
                     f"[dim]{text(flags or '(llama-bench defaults)')}[/]")
    result = _result(run)
    if result:
        lines.append(f"    → {text(result)}")
    return lines


def _result(run: "StoredRun") -> str:
    s = run.summary
    if run.command == "tune":
        c = s.get("confirmation") or {}
        ratio = c.get("ratio") if isinstance(c.get("ratio"), (int, float)) else None  # null: not measured
        if s.get("improved") and c and ratio is not None:
            text = f"{s.get('winner')}: {(ratio - 1) * 100:+.1f} % ({c.get('rounds')} rounds)"
        else:
            text = "advise's plan kept" + (f" (reused {s['reused_steps']} runs)" if s.get("reused_steps") else "")
        if s.get("stopped"):
            return f"{text}; stopped: {s['stopped']}"
        if s.get("disturbed"):
            return f"{text}; DISTURBED: measured under background load (--allow-busy), holds only under it"
        return text + (f" ({s['discarded_rounds']} disturbed rounds discarded)" if s.get("discarded_rounds") else "")
    if run.command == "drift":
        return str(s.get("verdict") or "")
    verdicts = s.get("verdicts") or {}
    rounds = s.get("rounds")
    text = ", ".join(f"{t} {v}" for t, v in verdicts.items()) or (f"{rounds} rounds" if rounds else "")
    return text + ("; host disturbed" if s.get("disturbed") and "disturbed" not in text else "")


def render_chart(runs: list["StoredRun"], console: "Console") -> None:
    """TG over time per model and configuration (oldest left), one sparkline each, from two points up."""
    from rich.markup import escape

    from tunehost.printable import one_line

    series: dict[tuple[str, str], list[tuple[str, float]]] = {}
    labels: dict[tuple[str, str], str] = {}
    for run in reversed(runs):
        for r in run.results:
            if r.kind in ("tg", "balanced") and math.isfinite(r.median_ts):  # the store's reader admits only
                # finite medians; a run built elsewhere with one that is not never reaches the arithmetic below
                key = (run.model_hash, r.config_key)  # the model by content, whatever its file was called
                labels.setdefault(key, escape(one_line(f"{run.model_name or Path(run.model_path).name} · "
                                                      f"{' '.join(r.flags) or 'defaults'}")))
                series.setdefault(key, []).append((run.created, r.median_ts))
    shown = [(labels[key], points) for key, points in series.items() if len(points) >= 2]
    if not shown:
        console.print("[dim]TG over time: a chart needs two runs of the same model and configuration[/]")
        return
    console.print("[bold]TG over time[/] (oldest → newest, t/s)")
    lines = []
    for label, points in shown:
        values = [v for _, v in points]
        low, high = min(values), max(values)
        line = "".join(SPARK[_level(v, low, high)] for v in values)
        lines.append(f"  {line}  {_ts(low)}..{_ts(high)}  [dim]{points[0][0][:10]} → {points[-1][0][:10]}, "
                     f"{len(points)} runs · {label}[/]")
    for start in range(0, len(lines), 1000):  # a few prints, not one per line; each line wraps as before
        console.print("\n".join(lines[start:start + 1000]), highlight=False)


def _level(value: float, low: float, high: float) -> int:
    """The sparkline step of a finite ``value`` in [low, high] (halved first: ±1e308 spans overflow a float)."""
    span = high / 2 - low / 2
    share = (value / 2 - low / 2) / span if span > 0 else 0.0
    return min(len(SPARK) - 1, max(0, int(share * (len(SPARK) - 1) + 0.5)))


def _ts(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}".replace(",", " ") if value >= 100 else f"{value:.2f}"


# ---------------------------------------------------------------- drift


def run_drift(model: Path, digest: str, *, budget: float, llama_bench: Path | None, json_out: bool) -> int:
    """--drift at the edge: the host opened once, the store opened once, one operation (tunehost.ops.drift), then
    its result rendered; returns the exit status."""
    from tunehost.cli.bench import progress_view
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops.drift import DriftRequest, measure_drift
    from tunehost.bounds import json_text
    from tunehost.store import open_store

    request = DriftRequest(model, digest, budget, llama_bench)
    facts = HostFacts(open_host())
    err = make_console(stderr=True)
    with open_store() as store, \
            progress_view(err, enabled=sys.stderr.isatty() and sys.stdout.isatty(), what="drift") as progress:
        result = measure_drift(request, facts=facts, store=store, on_progress=progress.update,
                               on_status=progress.status)
    if json_out:
        typer.echo(json_text(result.to_json(), indent=2, default=lambda v: None))
    else:
        render_drift(result, make_console())
    if result.record_note is not None:  # after the result, which it never hides
        err.print(f"warning: {result.record_note}", markup=False, highlight=False)
    return EXIT_BUSY if result.not_judged else EXIT_SLOWER if result.slower else 0


def render_drift(result: "DriftResult", console: "Console") -> None:
    """Each test then -> now with its interval, the verdict and what changed on this host since the reference."""
    from rich.markup import escape

    since = result.since
    console.print(f"drift of {escape(' '.join(result.flags) or '(llama-bench defaults)')} since run {since.id} "
                  f"({since.created}, {since.command}):", highlight=False)
    for r in result.rows:
        high = f"{(r.high - 1) * 100:+.1f}" if math.isfinite(r.high) else "+inf"
        low = f"{(r.low - 1) * 100:+.1f}" if r.low > 0 else "-100"
        console.print(f"  {r.test}: {_ts(r.then)} → {_ts(r.now)} t/s, {r.change_percent:+.1f} %, "
                      f"95 % interval {low}..{high} % ({r.rounds_then} rounds then, {r.rounds_now} now): "
                      f"{r.verdict}", highlight=False)
    busy = result.disturbed
    if busy and not result.not_judged:
        console.print(f"[dim]{len(busy)} of {result.watched} rounds disturbed by other processes were left out "
                      f"({escape(busy[0])})[/]", highlight=False)
    if result.not_judged:
        console.print(f"[bold yellow]{escape(result.verdict)}[/]: run it again on a quiet host "
                      "(`tunehost gate --wait-quiet`)", highlight=False)
        return
    style = "bold red" if result.slower else "green"
    verdict = result.verdict
    said = f"this box got {verdict} since then" if verdict != "no clear change" else "no clear change since then"
    console.print(f"[{style}]{said}[/]" if result.rows else "nothing comparable was measured")
    if result.changed:
        console.print("what changed on this host since then:")
        for line in result.changed:
            console.print(f"  - {escape(line)}", highlight=False)
    else:
        console.print("[dim]no host fact tunehost records changed (CPU, memory modules, GPUs, kernel, BIOS, "
                      "llama.cpp build): look at load, pinning, power and thermal state (`tunehost doctor`)[/]")
