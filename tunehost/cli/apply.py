"""`tunehost apply / verify / rollback / status / profiles / recommend` (see docs/apply.md and docs/profiles.md)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tunehost.bounds import json_text
from tunehost.cli import cli_errors, fail, make_console, report_output
from tunehost.errors import TunehostError

if TYPE_CHECKING:
    from tunehost.apply.engine import ApplyOutcome, ChangePlan

EXIT_DRIFT = 2


def register(app: typer.Typer) -> None:
    app.command("apply", short_help='Apply a tuning profile (journalled; rollback undoes it).')(apply)
    app.command("verify", short_help='Compare the live state with the last applied profile.')(verify)
    app.command("rollback", short_help='Undo the last apply.')(rollback)
    app.command("status", short_help='Show what tunehost has applied and not rolled back.')(status)
    app.command("profiles", short_help='List the tuning profiles and what each sets.')(profiles)
    app.command("recommend", short_help='Say which profile fits this host, and why.')(recommend)


@cli_errors
def apply(
    profile: str = typer.Option(..., "--profile", "-p", metavar="NAME", help="The profile to apply (`tunehost profiles`)."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Print the plan and change nothing."),
    persist: bool = typer.Option(False, "--persist", help="Also write boot-time configuration (sysctl.d, tmpfiles.d)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    bench: Optional[str] = typer.Option(None, "--bench", metavar="MODEL",
                                        help="Measure MODEL with llama-bench before and after applying."),
    power_daemon: Optional[str] = typer.Option(None, "--power-daemon", metavar="ppd|tuned-ppd",
                                               help="Override the profile's power_daemon key."),
) -> None:
    """Apply a tuning profile: plan, confirm, change (journalled), revert everything if any step fails.

    Needs root for the live host. Exit status: 0 applied (or nothing to do), 1 not applied (error, refused, reverted).
    """
    from tunehost.apply.engine import apply_plan, build_plan, doctor_findings
    from tunehost.apply.journal import Journal
    from tunehost.apply.profiles import load_profile, override
    from tunehost.apply.root import open_tuning_host, require_root

    loaded = load_profile(profile)
    if power_daemon is not None:
        loaded = override(loaded, power_daemon=power_daemon)
    journal = Journal()
    if not dry_run:
        require_root("tunehost apply")
        journal.ensure_writable()
        damaged = journal_damage(journal)
        if damaged:
            raise TunehostError(f"{damaged}: nothing was changed (`tunehost rollback` undoes every intact step; "
                                f"then move {journal.path} aside)")
        active = journal.active_runs()
        if active and active[-1].interrupted:
            raise TunehostError(f"an earlier apply of {active[-1].profile} (run {active[-1].id}) was interrupted: "
                                "run `tunehost rollback` first (nothing was changed)")
        if bench:
            from tunehost.apply.bench_hook import check_ready

            check_ready(bench)  # not a GGUF, no llama-bench: fail before any change
    host, root = open_tuning_host()
    findings, note = doctor_findings(host)
    plan = build_plan(host, loaded, persist=persist, findings=findings, doctor_note=note)
    render_plan(plan, root)
    if dry_run:
        typer.echo("dry run: nothing was changed")
        return
    if plan.empty:
        typer.echo(f"nothing to change: this host already matches profile {loaded.name}")
        return
    if not yes:
        try:
            typer.confirm(f"Apply {len(plan.to_change) + len(plan.files_to_write)} change(s)?", abort=True)
        except typer.Abort:
            raise fail("not confirmed: nothing was changed (use --yes to skip the question)") from None
    before = _measure(bench, "before") if bench else None
    outcome = apply_plan(host, plan, journal, root=root)
    _render_outcome(outcome)
    if not outcome.ok or outcome.unrecorded:
        raise typer.Exit(1)
    if bench:
        from tunehost.cli.bench_render import render_comparison
        from tunehost.apply.bench_hook import comparison

        after = _measure(bench, "after")
        compared = comparison(before, after)

        console = make_console()
        console.print(f"[bold]before/after applying {loaded.name}[/] (measured one after the other, not interleaved: "
                      "drift between the two runs is not cancelled out)")
        render_comparison(compared, console)


def _measure(model: str, label: str):
    from tunehost.apply.bench_hook import measure
    from tunehost.facts import HostFacts
    from tunehost.host import open_host

    typer.echo(f"measuring {model} ({label})...")
    result = measure(model, label, HostFacts(open_host()))  # the live host as it is now (before/after the change)
    typer.echo(f"bench {label}: {result}")
    return result


@cli_errors
def verify() -> None:
    """Compare the live state with the last applied profile. Exit 0 nothing drifted, 2 drift, 1 nothing applied."""
    from tunehost.apply.engine import verify as run_verify
    from tunehost.apply.journal import Journal
    from tunehost.apply.root import open_tuning_host

    host, root = open_tuning_host()
    journal = Journal()
    damaged = journal_damage(journal)
    if damaged and not journal.active_runs():
        raise TunehostError(f"{damaged}: its intact lines hold no applied profile to verify")
    report = run_verify(host, journal, root=root)
    run = report.run
    if report.undone_on_host:
        raise fail(f"profile {run.profile} (run {run.id}) is not in effect: every setting it changed is back at its "
                   "value before the apply (a rollback the journal could not record); `tunehost rollback` records it")
    with report_output():  # `tunehost verify | head -1` still exits 2 on drift
        typer.echo(f"profile {run.profile} (run {run.id}, {_when(run.begin.get('time'))}): "
                   f"{len(report.held)} setting(s) hold, {len(report.drift)} drifted")
        if run.interrupted:
            typer.echo("INTERRUPTED: that apply never finished; `tunehost rollback` completes its rollback")
        for d in report.drift:
            typer.echo(f"DRIFT {d.name}: {d.target} -> now {d.current if d.current is not None else '(unreadable)'}"
                       f"  ({d.where})")
        if not report.ok and not damaged:
            typer.echo("re-apply with `tunehost apply --profile " + run.profile + "`, or `tunehost rollback`")
    if damaged:
        raise fail(f"{damaged}: verified only what its intact lines record")
    if not report.ok:
        raise typer.Exit(EXIT_DRIFT)


@cli_errors
def rollback(
    yes: bool = typer.Option(True, "--yes/--ask", help="Roll back without asking (default), or ask first."),
) -> None:
    """Undo the last apply (or finish undoing an interrupted one): restore each recorded value, newest first,
    only where it is still what tunehost set. Exit 0 done, 1 something could not be restored."""
    from tunehost.apply.engine import rollback as run_rollback
    from tunehost.apply.journal import Journal
    from tunehost.apply.root import open_tuning_host, require_root

    require_root("tunehost rollback")
    journal = Journal()
    damaged = journal_damage(journal)
    if not journal.active_runs():
        if damaged:
            raise TunehostError(f"{damaged}: its intact lines hold nothing to roll back; check the host by hand "
                                f"(`tunehost doctor`), then move {journal.path} aside")
        typer.echo("nothing to roll back: no apply of tunehost is in place")
        return
    journal.ensure_writable()
    if not yes:
        try:
            typer.confirm("Roll back the last apply?", abort=True)
        except typer.Abort:
            raise fail("not confirmed: nothing was changed") from None
    host, root = open_tuning_host()
    outcome = run_rollback(host, journal, root=root)
    run = outcome.run
    assert run is not None
    state = "interrupted apply" if run.interrupted else "apply"
    typer.echo(f"rolling back {state} of profile {run.profile} (run {run.id})")
    for u in outcome.undo:
        if u["outcome"] == "restored":
            typer.echo(f"restored  {u['name']}: {u.get('was', '')} -> {u['value']}".replace(":  ->", ": ->"))
        elif u["outcome"] == "unchanged":
            typer.echo(f"unchanged {u['name']}: already {u.get('value', 'as before')}")
        elif u["outcome"] == "left":
            was = f"; was {u['previous']} before the apply" if u.get("previous") is not None else ""
            _echo_folded(f"{u['name']}: changed by someone else since (now {u['value']}; tunehost set "
                         f"{u.get('target', 'it')}{was}): left as it is", " " * 10, "LEFT      ")
        else:
            typer.echo(f"FAILED    {u['name']}: {u.get('error')}")
    if outcome.unrecorded:
        done = [f"{u['name']} ({u['outcome']})" for u in outcome.undo if u["outcome"] in ("restored", "unchanged")]
        raise fail(f"the host is rolled back ({', '.join(done) or 'nothing to restore'}) but the journal could not "
                   f"record it: {'; '.join(outcome.unrecorded[:3])}"
                   f"{f' (+{len(outcome.unrecorded) - 3} more)' if len(outcome.unrecorded) > 3 else ''}; "
                   f"free space in {journal.dir} and run `tunehost rollback` again to record it "
                   "(`tunehost status` and `verify` read the host meanwhile)")
    if not outcome.complete:
        typer.echo("rollback incomplete: fix the failures above and run `tunehost rollback` again", err=True)
        raise typer.Exit(1)
    if damaged:
        raise fail(f"{damaged}: every intact step was rolled back; what the damaged line(s) held is unknown: "
                   f"check the host (`tunehost doctor`), then move {journal.path} aside")
    if not outcome.still_active:
        typer.echo("rollback complete")
        return
    earlier = outcome.still_active[-1]  # applies stack: the one before is what the host holds now
    more = len(outcome.still_active) - 1
    others = f" with {more} earlier apply(s)" if more else ""
    _echo_folded(f"rollback complete: profile {earlier.profile} (run {earlier.id}, "
                 f"{_when(earlier.begin.get('time'))}), applied before it{others}, is still in effect; "
                 "`tunehost rollback` again undoes it too (`tunehost status` lists it)", "  ")


def _width() -> int:
    """The terminal's width as rich sees it (80 when unknown), 40 at least."""
    return max(make_console().width, 40)


def _echo_folded(text: str, rest: str, first: str = "") -> None:
    """One message folded to the terminal's width (80 when unknown) after `first`, continuation lines indented by
    `rest`; both are one printable line (profile names, reasons and units come from files tunehost read)."""
    from tunehost.formats.fold import fold
    from tunehost.printable import one_line

    for line in fold(one_line(text), max(make_console().width, 40), one_line(first), rest):
        typer.echo(line)


@cli_errors
def status(json_out: bool = typer.Option(False, "--json", help="Print the applied runs as JSON.")) -> None:
    """Show what tunehost has applied (and not rolled back), newest last."""
    from tunehost.apply.engine import applied_settings
    from tunehost.apply.journal import Journal

    journal = Journal()
    damaged = journal_damage(journal)
    active, undone = _on_host(journal.active_runs())
    if json_out:
        typer.echo(json_text([{"run": r.id, "profile": r.profile, "root": r.root, "status": r.status,
                                "time": r.begin.get("time"), "settings": r.begin.get("settings", {}),
                                "applied": {s.key: s.state for s in applied_settings(r)},
                                "skipped": {s.key: list(s.reasons) for s in applied_settings(r) if s.reasons},
                                "steps": len(r.intents)} for r in active], indent=2))
        if damaged:
            raise fail(damaged)
        return
    for r in undone:
        typer.echo(f"{r.profile}: rolled back on the host (every setting it changed is back at its earlier value) "
                   f"but the journal does not record it, run {r.id}: `tunehost rollback` records it")
    if not active:
        typer.echo(f"no profile applied by tunehost (journal: {journal.path})")
        if damaged:
            raise fail(f"{damaged}: no applied profile in its intact lines")
        return
    for r in active:
        where = "" if r.root == "/" else f" on root {r.root}"
        _echo_folded(f"{r.profile}: {r.status}{where}, {len(r.intents)} change(s), run {r.id}, "
                     f"{_when(r.begin.get('time'))}", "  ")
        _print_settings(r)
    top = active[-1]
    _echo_folded(f"in effect: {top.profile}; `tunehost verify` checks it, `tunehost rollback` undoes it", "  ")
    if damaged:
        raise fail(f"{damaged}: the runs above are built from its intact lines")


def _print_settings(run) -> None:
    """Each key of the run's profile with what the apply did: set (rollback restores it), already so (the apply
    changed nothing), or not set because this host does not support it (with the reason the journal holds)."""
    from tunehost.formats.fold import fold
    from tunehost.printable import one_line
    from tunehost.apply.engine import applied_settings
    from tunehost.apply.profiles import SETTING_KEYS

    order = list(SETTING_KEYS)
    rank = ("changed", "already", "skipped")
    states = sorted(applied_settings(run), key=lambda s: (rank.index(s.state) if s.state in rank else len(rank),
                                                          order.index(s.key) if s.key in order else len(order)))
    width = max(make_console().width, 40)
    for s in states:
        value = one_line(f"{s.key} = {s.target}")  # journal fields are hostile: one printable line
        why = one_line("; ".join(s.reasons)) if s.reasons else ""
        if s.state == "changed":
            text = value + (f" (skipped on {one_line(', '.join(u or 'all' for u in s.skipped_units))}: {why})"
                            if why else "")
        elif s.state == "already":
            text = f"{value} (was already so: rollback leaves it)"
        else:
            text = f"{one_line(s.key)}: NOT APPLIED, unsupported here" + (f": {why}" if why else "")
        for line in fold(text, width, "    ", "      "):
            typer.echo(line)


def _on_host(runs: list) -> tuple[list, list]:
    """(runs the host still holds, runs the journal calls active that the host shows rolled back): status reads
    the host, not only the journal. Runs on another root, or a host that cannot be read, count as the journal says."""
    from tunehost.apply.engine import host_state
    from tunehost.apply.root import open_tuning_host

    if not runs:
        return [], []
    try:
        host, root = open_tuning_host()
    except TunehostError:
        return list(runs), []
    held, undone = [], []
    for run in runs:
        try:
            gone = run.root == root and not run.begin_damaged and host_state(host, run).undone_on_host
        except Exception:  # a knob that cannot be read: the journal's word stands
            gone = False
        (undone if gone else held).append(run)
    return held, undone


def journal_damage(journal) -> str | None:
    """One line for a damaged journal (None when intact); a last line cut short by a crash is only a warning."""
    from tunehost.apply.journal import damage_message

    state = journal.read()
    for d in state.damage:
        if d.cut_short:
            typer.echo(f"tunehost: warning: {d} ({journal.path}): ignored", err=True)
    return damage_message(journal, state.harmful) if state.harmful else None


@cli_errors
def profiles(json_out: bool = typer.Option(False, "--json", help="Print the merged profiles as JSON.")) -> None:
    """List the tuning profiles and what each sets (includes merged)."""
    from tunehost.apply.profiles import SETTING_KEYS, load_all

    loaded = load_all()
    if json_out:
        typer.echo(json_text([{"name": p.name, "description": p.description, "includes": list(p.includes),
                                "settings": dict(p.settings)} for p in loaded], indent=2))
        return
    for p in loaded:  # folded to the terminal's width, each meaning under its column
        inc = f" (includes {', '.join(p.includes)})" if p.includes else ""
        _echo_folded(f"{p.name}{inc}", "  ")
        if p.description:
            _echo_folded(p.description, "  ", "  ")
        for key, value in p.targets().items():
            _echo_folded(SETTING_KEYS[key].meaning, " " * 44, f"    {key:<14} {value:<24} ")
        typer.echo("")


@cli_errors
def recommend(
    snapshot: Optional[Path] = typer.Option(None, "--snapshot", "-s", metavar="DIR",
                                            help="Read this snapshot directory instead of the live host."),
) -> None:
    """Say which profile fits this host, and why (chassis type, battery and AC power)."""
    from tunehost.host import open_host
    from tunehost.apply.recommend import recommend as run_recommend

    rec = run_recommend(open_host(snapshot))
    typer.echo(f"recommended profile: {rec.profile}")
    for reason in rec.reasons:  # read from the host or a snapshot: one printable line each, folded
        _echo_folded(reason, "    ", "  - ")
    for src, value in rec.evidence.items():
        _echo_folded(f"{src}: {value}", "      ", "    ")
    _echo_folded(f"see the plan with `tunehost apply --profile {rec.profile} --dry-run`, then apply it as root: "
                 f"`sudo tunehost apply --profile {rec.profile}`", "  ")


# --- rendering ---------------------------------------------------------------------------------------------------------

def _units_text(units: list[str]) -> str:
    from tunehost.cpulist import format_cpu_list

    cpus = [int(u[3:]) for u in units if u.startswith("cpu") and u[3:].isdecimal() and len(u) < 9]
    if cpus and len(cpus) == len(units):
        return "cpu " + format_cpu_list(cpus)
    return ", ".join(u for u in units if u)


def _grouped(items, key_of):
    groups: dict[tuple, list] = {}
    for item in items:
        groups.setdefault(key_of(item), []).append(item)
    return groups


def _label(key: str, units: list[str]) -> str:
    units = [u for u in units if u]
    return f"{key} ({_units_text(units)})" if units else key


def _echo_command(command: str, first: str, rest: str) -> None:
    """A shell command to copy, folded with line continuations (it still runs as one when pasted)."""
    from tunehost.formats.fold import fold_command
    from tunehost.printable import one_line

    for line in fold_command(one_line(command), max(make_console().width, 40), first, rest):
        typer.echo(line)


def render_plan(plan: "ChangePlan", root: str) -> None:
    """The plan, every line folded to the terminal's width under its column (80 when unknown)."""
    from tunehost.printable import one_line

    p = plan.profile
    where = "this host (live)" if root == "/" else f"root {root}"
    inc = f", includes {', '.join(p.includes)}" if p.includes else ""
    _echo_folded(f"plan for profile {p.name}{inc} on {where}", "  ")
    column = " " * 39  # under the value column of "  change   <label:28> "
    changes = _grouped(plan.to_change, lambda c: (c.knob.key, c.current, c.target))
    for (key, current, target), items in changes.items():
        where_ = items[0].knob.where if len(items) == 1 else items[0].knob.where.replace(
            f"/{items[0].knob.unit}/", "/cpu*/")
        label = _label(key, [c.knob.unit for c in items])
        first = f"  change   {label:<28} "
        if len(first) + len(f"{current} -> {target}   [{where_}]") <= _width():
            typer.echo(one_line(f"{first}{current} -> {target}   [{where_}]"))
        else:  # the file on a line of its own, indented as far as it fits
            _echo_folded(f"{current} -> {target}", column, first)
            _echo_folded(f"[{where_}]", "    ", " " * max(4, min(11, _width() - len(where_) - 2)))
    for (key, current, target), items in _grouped(plan.already, lambda c: (c.knob.key, c.current, c.target)).items():
        _echo_folded(str(target), column, f"  already  {_label(key, [c.knob.unit for c in items]):<28} ")
    for (key, reason), items in _grouped(plan.skipped, lambda s: (s.key, s.reason)).items():
        _echo_folded(f"unsupported here: {reason}", column, f"  skipped  {_label(key, [s.unit for s in items]):<28} ")
    for f in plan.files:
        state = "already written" if not f.needed else ("new file" if f.previous is None else "replaces the current file")
        _echo_folded(f"{f.path} ({state})", " " * 11, "  persist  ")
        if f.needed:
            for line in f.content.splitlines():
                if not line.startswith("#"):
                    typer.echo(f"             {line}")  # the file's content, as written
    for note in plan.notes:
        _echo_folded(note, " " * 8, "  note: ")
    manual = plan.manual
    if manual:
        typer.echo("MANUAL steps (doctor findings that tunehost apply does not fix):")
        for d in manual:
            _echo_folded(f"{d.check}: {d.summary}", " " * 7, f"  {d.severity.upper():<4} ")
            if d.fix:
                _echo_folded(d.fix, " " * 12, "       fix: ")
            for cmd in d.commands:
                _echo_command(cmd, "         $ ", " " * 13)
    fixed = [d for d in plan.doctor if d.fixed_by]
    if fixed:
        _echo_folded("doctor findings this plan addresses (re-run `tunehost doctor` afterwards to confirm):", "  ")
        for d in fixed:
            _echo_folded(f"{d.check}: {d.summary} <- {', '.join(d.fixed_by)}", " " * 7, f"  {d.severity.upper():<4} ")
    intended = [d for d in plan.doctor if d.intended]
    if intended:
        _echo_folded(f"doctor findings profile {p.name} accepts on purpose (see `tunehost profiles`):", "  ")
        for d in intended:
            _echo_folded(f"{d.check}: {d.summary} <- {', '.join(d.intended)} held on purpose", " " * 7,
                         f"  {d.severity.upper():<4} ")
        skips = " ".join(f"--skip {c}" for c in dict.fromkeys(d.check for d in intended))
        _echo_folded(f"doctor keeps reporting them while the profile is applied: gate benchmark runs with "
                     f"`tunehost gate {skips} -- ...` (or `tunehost doctor {skips}`)", "  ", "  ")
    n = len(plan.to_change) + len(plan.files_to_write)
    _echo_folded(f"{n} change(s), {len(plan.already)} already set, {len(plan.skipped)} skipped, "
                 f"{len(manual)} manual step(s)", "  ")


def _render_outcome(outcome: "ApplyOutcome") -> None:
    if outcome.ok:
        for name, before, after in outcome.changed:
            typer.echo(f"set {name}: {before} -> {after}")
        for path in outcome.files:
            typer.echo(f"wrote {path}")
        typer.echo(f"applied (run {outcome.run}); `tunehost verify` checks it, `tunehost rollback` undoes it")
        for missing in outcome.unrecorded:  # every change has its undo record; only the run's end is missing
            typer.echo(f"tunehost: error: the journal could not record the {missing}: the apply reads as "
                       "interrupted until `tunehost rollback` (or free space and re-apply)", err=True)
        return
    typer.echo(f"tunehost: error: apply failed: {outcome.failed}", err=True)
    bad = [u for u in outcome.undo if u["outcome"] == "failed"]
    for u in outcome.undo:
        if u["outcome"] == "restored":
            typer.echo(f"reverted {u['name']} -> {u['value']}", err=True)
    if bad:
        for u in bad:
            typer.echo(f"tunehost: error: could not revert {u['name']}: {u.get('error')}", err=True)
        typer.echo("tunehost: error: the host is partly changed; `tunehost rollback` retries the revert", err=True)
    else:
        typer.echo("every change was reverted: the host is as it was", err=True)
    for missing in outcome.unrecorded:
        typer.echo(f"tunehost: error: the journal could not record the {missing}", err=True)


def _when(ts) -> str:
    if not isinstance(ts, (int, float)):
        return "time unknown"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
