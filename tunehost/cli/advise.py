"""`tunehost advise`: the llama-server command line and CPU pinning for this host and one GGUF model."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tunehost.cli import cli_errors, make_console
from tunehost.printable import one_line, require_printable

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.advise.plan import Plan
    from tunehost.launch import LaunchConfig

FORMATS = ("human", "shell", "systemd", "json")
EXIT_DOES_NOT_FIT = 2


def register(app: typer.Typer) -> None:
    app.command("advise", short_help='The llama-server command line for a model on this host.')(advise)


@cli_errors
def advise(
    model: Path = typer.Option(..., "--model", "-m", metavar="PATH.gguf", help="The GGUF model (any part of a split model)."),
    ctx: Optional[int] = typer.Option(None, "--ctx", metavar="N", help="Context tokens per slot (default: the model's, at most 32768)."),
    parallel: int = typer.Option(1, "--parallel", metavar="N", help="Concurrent requests (slots)."),
    mmproj: Optional[Path] = typer.Option(None, "--mmproj", metavar="PATH", help="Vision projector GGUF."),
    draft: Optional[Path] = typer.Option(None, "--draft", metavar="PATH", help="Draft model for speculative decoding."),
    spec: Optional[str] = typer.Option(None, "--spec", metavar="mtp|draft", help="Speculative decoding: the model's MTP heads, or --draft."),
    fmt: str = typer.Option("human", "--format", "-f", metavar="FORMAT", help="human (default), shell, systemd or json."),
    snapshot: Optional[Path] = typer.Option(None, "--snapshot", "-s", metavar="DIR", help="Advise for a snapshot instead of this host (no probe runs)."),
    llama_server: Optional[str] = typer.Option(None, "--llama-server", metavar="PATH", help="The llama-server binary to advise for."),
    cpus: Optional[str] = typer.Option(None, "--cpus", metavar="LIST", help="Pin to these CPUs (e.g. 0-7) instead of the performance cores."),
    host_addr: Optional[str] = typer.Option(None, "--host", metavar="ADDR", help="Address llama-server listens on (default 127.0.0.1)."),
    api_key_file: Optional[Path] = typer.Option(None, "--api-key-file", metavar="FILE", help="llama-server --api-key-file: clients must send one of its keys (one per line)."),
    user_unit: bool = typer.Option(False, "--user/--system", help="--format systemd: a unit for your user manager (~/.config/systemd/user) or the system one (default)."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Run no measurement (bandwidth probe, llama-fit-params)."),
) -> None:
    """The llama-server command for MODEL on this host: placement, threads, pinning, KV cache — each flag explained.

    Exit status: 0 a plan that fits, 2 the model does not fit (the plan says what would), 1 tunehost could not run.
    """
    from tunehost.advise.flags import fit_params_path, fit_supported, help_crash, read_caps, run_fit_params
    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import AdviseOptions, FitPlacement, apply_caps, plan
    from tunehost.errors import TunehostError
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.model import read_model

    if fmt not in FORMATS:
        raise TunehostError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if ctx is not None and ctx <= 0:
        raise TunehostError(f"--ctx must be a positive number of tokens, not {ctx}")
    if parallel <= 0:
        raise TunehostError(f"--parallel must be at least 1, not {parallel}")
    if spec not in (None, "mtp", "draft"):
        raise TunehostError(f"--spec must be mtp or draft, not {spec!r}")
    if user_unit and fmt != "systemd":
        raise TunehostError("--user chooses the kind of systemd unit: use it with --format systemd")
    # these reach the command line and the unit verbatim: a newline there would start a new unit line
    for what, value in (("--model", model), ("--mmproj", mmproj), ("--draft", draft), ("--llama-server", llama_server),
                        ("--host", host_addr), ("--api-key-file", api_key_file)):
        if value is not None:
            require_printable(str(value), what)
    from tunehost.advise.plan import DEFAULT_CTX
    from tunehost.cli import LLAMA_INT_MAX

    per_slot = ctx if ctx is not None else DEFAULT_CTX  # at most DEFAULT_CTX when --ctx is not given
    if per_slot * parallel > LLAMA_INT_MAX:  # llama-server gets -c ctx*parallel, a 32-bit int
        what = "--ctx" if parallel == 1 else "--ctx x --parallel" if ctx is not None else \
            f"--parallel x the default context ({DEFAULT_CTX})"
        raise TunehostError(f"{what} must be at most {LLAMA_INT_MAX} tokens (llama-server's -c is a 32-bit number), "
                            f"not {per_slot * parallel}")
    facts_model = read_model(model)
    draft_model = read_model(draft) if draft else None
    mmproj_bytes = 0
    if mmproj is not None:
        if mmproj.is_dir():
            raise TunehostError(f"{mmproj}: is a directory, not a GGUF file")
        if not mmproj.is_file():
            raise TunehostError(f"{mmproj}: no such file")
        mmproj_bytes = mmproj.stat().st_size
    host = open_host(snapshot)
    facts = HostFacts(host)
    view = HostView.from_facts(facts, llama_server=llama_server)
    if cpus is not None:
        view = view.with_cpus(cpus)
    server = view.llama_server or "llama-server"
    caps = read_caps(host, view.llama_server)

    options = AdviseOptions(model_path=str(model.expanduser().resolve()), ctx=ctx, parallel=parallel,
                            mmproj=str(mmproj.expanduser().resolve()) if mmproj else None, mmproj_bytes=mmproj_bytes,
                            draft=str(draft.expanduser().resolve()) if draft else None, draft_model=draft_model,
                            spec=spec, host_addr=host_addr, server=server, fit_option=fit_supported(caps),
                            api_key_file=str(api_key_file.expanduser().resolve()) if api_key_file else None,
                            ram_peak=_dimm_peak(facts))
    first = plan(facts_model, view, options)  # validates, and says whether a GPU placement is needed
    live_probe = host.live and not no_probe
    if first.path in ("gpu", "moe", "split") and not no_probe:
        fit_bin = fit_params_path(host, view.llama_server)
        if fit_bin:
            probe, why = run_fit_params(host, fit_bin, _fit_args(options.model_path, first))
            if probe is not None:
                options = _with(options, fit=FitPlacement(probe.gpu_layers, probe.cpu_expert_layers, probe.overrides,
                                                          probe.command, probe.tensor_split))
            else:
                options = _with(options, fit_note=f"placement is tunehost's estimate: {why}")
    if live_probe or not host.live:
        from tunehost.host.measure import read_bandwidth

        # live: the pinned per-core probe now; a snapshot: what its doctor run measured (samples/measure.json)
        options = _with(options, ram_bandwidth_gbps=read_bandwidth(host))
    result = apply_caps(plan(facts_model, view, options), caps)
    if caps is None and view.llama_server:
        crash = help_crash(host, view.llama_server)
        result = _note(result, f"could not read `{view.llama_server} --help`"
                               f"{f' ({crash})' if crash else ''}: flags assume a current llama.cpp build")

    for refused in host.refusals:  # what the plan could not use from the snapshot
        typer.echo(f"tunehost: warning: snapshot: {one_line(refused)}", err=True)
    if fmt == "json":
        data = result.to_json()
        data["snapshot"] = str(snapshot) if snapshot else None
        typer.echo(json.dumps(data, indent=2))
    elif fmt == "shell":
        typer.echo(render_shell(result.launch()))
    elif fmt == "systemd":
        typer.echo(render_systemd(result.launch(), user=user_unit), nl=False)
    else:
        render_human(result, make_console(), snapshot=str(snapshot) if snapshot else None)
    if not result.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _with(options, **changes):
    from dataclasses import replace

    return replace(options, **changes)


def _note(p: "Plan", text: str) -> "Plan":
    from dataclasses import replace

    return replace(p, notes=p.notes + (text,))


def _fit_args(model_path: str, p: "Plan") -> list[str]:
    """llama-fit-params arguments that pin what the plan decided (it only fits what is left unset)."""
    margin = 2048 if p.value("-mm") else 512
    return ["-m", model_path, "-c", str(p.ctx * p.parallel), "-np", str(p.parallel), "-fa", "on",
            "-ctk", p.kv_type, "-ctv", p.kv_type, "-b", p.value("-b") or "2048", "-ub", p.value("-ub") or "512",
            "-fitt", str(margin)]


# ---- renderers ----


def render_shell(p: "LaunchConfig") -> str:
    """A ready command line: taskset -c CPUS env VARS llama-server FLAGS (one flag per line).

    Every word is shell-quoted; a word holding a control character is refused (TunehostError): in a command to
    paste it is invisible, or rewrites the terminal, and the same plan also becomes a unit where it cannot be quoted."""
    from tunehost.cpulist import format_cpu_list

    lines = []
    prefix = []
    if p.pin_cpus:
        prefix += ["taskset", "-c", format_cpu_list(p.pin_cpus)]
    if p.env:
        prefix += ["env"] + [f"{e.name}={e.value}" for e in p.env]
    head = " ".join(_shell_word(a) for a in prefix + [p.server])
    lines.append(head)
    for f in p.flags:
        lines.append("  " + " ".join(_shell_word(a) for a in f.argv()))
    return " \\\n".join(lines)


def _shell_word(arg: str) -> str:
    return shlex.quote(require_printable(arg, "a llama-server argument"))


def _systemd_quote(arg: str) -> str:
    """One ExecStart/Environment word: C-style escapes doubled, specifiers (%) and $ escaped, quoted if needed.
    A word with a control character is refused: a newline would end the ExecStart= line (systemd.syntax(7))."""
    require_printable(arg, "a llama-server argument")
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    if escaped and not any(c in escaped for c in " \t'\"\\;") and escaped == arg:
        return escaped
    return f'"{escaped}"'


def _unit_text(value: str) -> str:
    """Free text (a model's name) for a unit setting such as Description=: one printable line, specifiers (%)
    escaped, no trailing backslash (it would continue the line into the next one)."""
    return one_line(value, 200).replace("%", "%%").rstrip("\\ ")


SYSTEM_UNIT_DIR = "/etc/systemd/system"
USER_UNIT_DIR = "~/.config/systemd/user"
UNIT_FILE = "llama-server.service"


def render_systemd(p: "LaunchConfig", *, user: bool = False) -> str:
    """A systemd service unit (ExecStart, CPUAffinity, LimitMEMLOCK, Nice, Environment) for the system manager, or
    with `user` for a user manager: no Nice below 0, no --prio, no LimitMEMLOCK above the user's hard limit, no
    system targets (a user manager cannot raise priority or limits, nor order itself after system units)."""
    from tunehost.cpulist import format_cpu_list

    argv = p.argv()
    server = argv[0] if argv[0].startswith("/") else "/usr/local/bin/llama-server"
    argv[0] = server
    notes: list[str] = []
    lock = bool(p.flag("--mlock") or p.mlock_wanted or p.value("--load-mode") in ("mlock", "mmap+mlock"))
    if user:
        if "--prio" in argv:
            i = argv.index("--prio")
            del argv[i:i + 2]
            notes.append("# no --prio and no Nice=: a user manager cannot raise priority (that needs CAP_SYS_NICE); "
                         "use --system for both")
        elif p.nice is not None and p.nice < 0:
            notes.append("# no Nice=: a user manager cannot raise priority; use --system for it")
        if p.mlock_wanted:
            notes.append("# no --mlock: the memlock limit is below what it locks, and a user manager cannot raise "
                         "its own hard limit (LimitMEMLOCK= is capped at it); raise memlock for your user in "
                         "/etc/security/limits.conf and log in again, or use --system")
        elif lock:
            notes.append("# --mlock within your user's memlock limit (a user unit cannot raise it: no LimitMEMLOCK=)")
    elif p.mlock_wanted and "--mlock" not in argv:
        argv.append("--mlock")  # LimitMEMLOCK=infinity below lifts the limit that kept it out of the shell form
    exec_start = " ".join(_systemd_quote(a) for a in argv)
    name = _unit_text(p.model_name or Path(p.model).name)
    if user:
        lines = [f"# written by tunehost advise --format systemd --user: save it as {UNIT_FILE}, check the paths,",
                 "# then, as yourself (not root):",
                 f"#   mkdir -p {USER_UNIT_DIR} && install -m 644 {UNIT_FILE} {USER_UNIT_DIR}/",
                 f"#   systemctl --user daemon-reload && systemctl --user enable --now {UNIT_FILE}",
                 "#   loginctl enable-linger \"$USER\"   # optional: start at boot, keep running after you log out",
                 "[Unit]", f"Description=llama-server: {name}", "", "[Service]", "Type=simple"]
    else:
        lines = [f"# written by tunehost advise --format systemd: save it as {UNIT_FILE}, check the paths,",
                 "# then, as root:",
                 f"#   install -m 644 {UNIT_FILE} {SYSTEM_UNIT_DIR}/ && systemctl daemon-reload",
                 f"#   systemctl enable --now {UNIT_FILE}",
                 "[Unit]", f"Description=llama-server: {name}",
                 "After=network-online.target", "Wants=network-online.target", "", "[Service]", "Type=simple"]
    lines += notes
    lines.append(f"ExecStart={exec_start}")
    if p.pin_cpus:
        lines.append(f"CPUAffinity={format_cpu_list(p.pin_cpus)}")  # a user manager may narrow affinity too
    for e in p.env:
        lines.append(f"Environment={_systemd_quote(f'{e.name}={e.value}')}")
    if lock and not user:
        lines.append("LimitMEMLOCK=infinity")
    if p.nice is not None and (not user or p.nice >= 0):
        lines.append(f"Nice={p.nice}")
    lines += ["Restart=on-failure", "RestartSec=5", "", "[Install]",
              "WantedBy=default.target" if user else "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def _gib(n: int | None) -> str:
    from tunehost.advise.plan import gib

    return "-" if n is None else gib(n)


def render_human(p: "Plan", console: "Console", *, snapshot: str | None = None) -> None:
    """The budget table, the command, each flag's reason, then warnings and notes."""
    from rich.markup import escape
    from rich.table import Table

    where = f"snapshot {snapshot}" if snapshot else "this host (live)"
    console.print(f"[bold]tunehost advise[/] — {escape(one_line(p.model_name or Path(p.model).name))} on "
                  f"{escape(one_line(where))}")
    console.print(f"placement: [bold]{p.path}[/] ({'llama-fit-params' if p.source == 'probe' else 'tunehost estimate'})"
                  f", context {p.ctx} x {p.parallel} slot{'s' if p.parallel > 1 else ''}, KV {p.kv_type}")
    b = p.budget
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    gpu_head = "GPU" if b.gpu_label else ""
    table.add_column("memory")
    if b.gpu_label:
        table.add_column(gpu_head, justify="right")
    table.add_column("RAM", justify="right")
    table.add_column("")
    for r in b.rows:
        cells = [r.label] + ([_gib(r.gpu)] if b.gpu_label else []) + [_gib(r.ram), escape(r.detail)]
        table.add_row(*cells)
    table.add_row(*(["[bold]total[/]"] + ([f"[bold]{_gib(b.gpu_total)}[/]"] if b.gpu_label else [])
                    + [f"[bold]{_gib(b.ram_total)}[/]", ""]))
    free_row = ["free"] + ([_gib(b.gpu_free)] if b.gpu_label else []) + [_gib(b.ram_available),
                                                                          escape(b.gpu_label or "")]
    table.add_row(*free_row)
    console.print(table)
    verdict = "[green]fits[/]" if p.fits else "[bold red]does not fit[/]"
    console.print(verdict)
    if p.ceiling is not None:
        from tunehost.advise.ceiling import describe

        c = p.ceiling
        console.print(escape(describe(c)))
        if c.tokens_per_s is not None:
            console.print(f"[dim]{escape(c.note)}[/]")
    console.print()
    console.print("[bold]command[/]")
    console.print(escape(render_shell(p.launch())))
    console.print()
    if p.pin_cpus:
        from tunehost.cpulist import format_cpu_list

        console.print(f"  [cyan]taskset -c {format_cpu_list(p.pin_cpus)}[/]  {escape(p.pin_reason)}")
    for e in p.env:
        console.print(f"  [cyan]{escape(e.name)}={escape(e.value or '')}[/]  {escape(e.reason)}")
    for f in p.flags:
        shown = " ".join(f.argv()) if f.name not in ("-m", "-mm", "-md") else f.name
        console.print(f"  [cyan]{escape(shown)}[/]  {escape(f.reason)}")
    for text, flags in p.alternatives:
        console.print()
        console.print(f"[bold]alternative[/]: {escape(text)} {escape(' '.join(a for f in flags for a in f.argv()))}")
    for w in p.warnings:
        console.print(f"[yellow]WARN[/] {escape(w)}")
    for s in p.suggestions:
        console.print(f"[cyan]try[/]  {escape(s)}")
    for n in p.notes:
        console.print(f"[dim]note {escape(n)}[/]")


def _dimm_peak(facts):
    """What the configured DIMMs allow (for the TG ceiling's RAM part); None when the modules are unknown."""
    from tunehost.facts.ram import RamFacts
    from tunehost.facts.memory_layout import dimm_peak

    try:
        return dimm_peak(facts.get(RamFacts))
    except Exception:  # the ceiling is context: unknown DIMMs must not stop advise
        return None
