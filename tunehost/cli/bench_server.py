"""`tunehost bench --server URL` / `--serve -- llama-server ARGS [--vs -- ARGS_B]`: the server bench's command line.

Parsing and rendering only: the operation (starting the servers, the rounds, the watch, the store) is
tunehost.ops.server_bench; the measurement tunehost.bench.server.rounds, the process handling
tunehost.bench.server.launch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tunehost.cli import check_range
from tunehost.errors import TunehostError
from tunehost.printable import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.bench.server.rounds import ServerBenchResult
    from tunehost.ops.server_bench import ServerBenchRequest


@dataclass(frozen=True)
class ServerOptions:
    server: str | None
    serve: bool
    extra: tuple[str, ...]
    model: str | None
    n_gen: int | None
    depths: str | None
    to_context: bool
    clients: str | None
    api_key_file: Path | None
    timeout_s: float
    start_timeout_s: float
    budget_s: float
    save: Path | None
    json_out: bool
    api: str = "native"
    draft_ab: bool = False  # --serve: A = the command without its speculative-decoding options, B = as given


def parse_counts(text: str | None, option: str, low: int, high: int) -> tuple[int, ...] | None:
    """"512,4096" -> (512, 4096); one clear error for anything else."""
    if text is None:
        return None
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or len(part) > 10:
            raise TunehostError(f"{option}: {one_line(part, 40)!r} is not a whole number (give N,N,...)")
        check_range(option, int(part), low, high)
        values.append(int(part))
    if not values:
        raise TunehostError(f"{option}: give at least one number")
    return tuple(dict.fromkeys(values))


def bench_server(opts: ServerOptions) -> None:
    """Check the options, open the host once, run the server bench's operation (tunehost.ops.server_bench) and
    render its result: a table per server (or JSON), the disturbed rounds and the store's warnings on stderr."""
    from tunehost.bounds import json_text
    from tunehost.cli import make_console
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops import server_bench as server_op
    from tunehost.ops.server_bench import ServerBenchHooks

    request = server_request(opts)
    err = make_console(stderr=True)

    def starting(name: str, argv: tuple[str, ...]) -> None:
        if not opts.json_out:
            err.print(f"starting llama-server {name}: {one_line(' '.join(argv), 300)}", markup=False,
                      highlight=False)

    def report(result: "ServerBenchResult") -> None:  # measured and saved: shown before the store is touched
        if result.disturbed and not opts.json_out and result.watch is not None:
            for reason in result.watch.reasons:
                err.print(f"disturbed: {one_line(reason, 300)}", markup=False, highlight=False)
        if opts.json_out:
            typer.echo(json_text(result.to_json(), indent=2))
            return
        console = make_console()
        render_server_result(result, console)
        if opts.save is not None:
            from rich.markup import escape

            console.print(f"\nsaved to {escape(str(opts.save))}", highlight=False)

    hooks = ServerBenchHooks(
        on_starting=starting, on_note=lambda line: err.print(f"note: {line}", markup=False, highlight=False),
        progress=lambda: _Progress(err, enabled=sys.stderr.isatty() and not opts.json_out), report=report)
    outcome = server_op.bench_server(request, HostFacts(open_host()), hooks)  # the host opened once
    for line in outcome.warnings:  # the store's, after the result (exit 0: the measurement is kept)
        err.print(f"warning: {line}", markup=False, highlight=False)


def server_request(opts: ServerOptions) -> "ServerBenchRequest":
    """The options checked (one clear error for anything wrong, before anything starts) as the operation's
    request: the settings, the running server's address or the llama-server command lines to start."""
    from tunehost.bench.server import launch as serving
    from tunehost.bench.server.client import parse_target, read_api_key
    from tunehost.bench.server.rounds import DEFAULT_DEPTHS, DEFAULT_N_GEN, MAX_CLIENTS, ServerSettings, ServerTarget
    from tunehost.cli import LLAMA_INT_MAX
    from tunehost.ops.server_bench import Served, ServerBenchRequest

    if (opts.server is None) == (not opts.serve):
        raise TunehostError("give one of --server URL (a running llama-server) and --serve -- llama-server ARGS")
    if opts.draft_ab and not opts.serve:
        raise TunehostError("--draft-ab races a llama-server command with and without drafting: use it with --serve")
    if opts.server is not None and opts.extra:
        raise TunehostError(f"unexpected arguments: {one_line(' '.join(opts.extra), 200)} (llama-server arguments "
                            "are for --serve)")
    if opts.save is not None and opts.save.is_dir():
        raise TunehostError(f"--save {opts.save} is a directory; give a file name (OUT.json)")
    if opts.api not in ("native", "openai"):
        raise TunehostError(f"--api must be native or openai, not {one_line(opts.api, 40)!r}")
    n_gen = opts.n_gen if opts.n_gen is not None else DEFAULT_N_GEN
    check_range("-n/--n-gen", n_gen, 1, LLAMA_INT_MAX, what=" tokens (the server bench generates in every request)")
    depths = parse_counts(opts.depths, "--depths", 1, LLAMA_INT_MAX) or DEFAULT_DEPTHS
    counts = parse_counts(opts.clients, "--clients", 1, MAX_CLIENTS)
    api_key = read_api_key(str(opts.api_key_file)) if opts.api_key_file is not None else None
    settings = ServerSettings(depths=depths, n_gen=n_gen, clients=counts or (), to_context=opts.to_context,
                              budget_s=opts.budget_s, timeout_s=opts.timeout_s, model=opts.model,
                              api=opts.api)
    request = ServerBenchRequest(settings, api_key=api_key, label=opts.save.stem if opts.save else None,
                                 api_key_file=str(opts.api_key_file) if opts.api_key_file else None,
                                 start_timeout_s=opts.start_timeout_s, save=opts.save)
    if opts.server is not None:
        request = replace(request, target=ServerTarget("server", parse_target(opts.server)))
    else:
        argv_a, argv_b = serving.split_serve_args(opts.extra)
        if opts.draft_ab:
            argv_a, argv_b = _draft_ab(argv_a, argv_b)
        serving.check_server_args(argv_a, what="--serve")
        if argv_b is not None:
            serving.check_server_args(argv_b, what="--vs")
        request = replace(request, serve=tuple(Served(name, tuple(argv)) for name, argv in (("A", argv_a),
                                                                                              ("B", argv_b))
                                               if argv is not None))
    return request


def _draft_ab(argv: list[str], vs: list[str] | None) -> tuple[list[str], list[str]]:
    """--draft-ab: (the command without its speculative-decoding options, the command as given)."""
    from tunehost.launch import without_speculation

    if vs is not None:
        raise TunehostError("--draft-ab makes the second configuration itself (the same command without drafting): "
                            "leave out --vs")
    plain, removed = without_speculation(argv)
    if not removed:
        raise TunehostError("--draft-ab: the command has no speculative-decoding option to race (-md, --spec-type, "
                            "--spec-default, ...); add the one advise wrote")
    return plain, list(argv)


class _Progress:
    """One transient status line on stderr: which round, which server."""

    def __init__(self, console: "Console", enabled: bool):
        self._status = console.status("probing", spinner="dots") if enabled else None

    def __enter__(self) -> Callable[[Any], None]:
        if self._status is not None:
            self._status.start()
        return self.update

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def update(self, event: Any) -> None:
        if self._status is None:
            return
        what = "warm-up" if event.phase == "warm-up" else f"round {event.round}/{event.rounds_planned}"
        line = f" · {event.line}" if event.line else ""
        eta = f" · ETA {event.eta_s:.0f} s" if event.eta_s is not None else ""
        self._status.update(one_line(f"{what} · {event.config}{line}{eta}", 120))

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()


def render_server_result(result: "ServerBenchResult", console: "Console") -> None:
    """Per server: provenance, the depth table (cold and cached), the concurrency table; then the A/B verdicts."""
    from rich.markup import escape
    from rich.table import Table

    from tunehost.cli.bench_render import _ts, render_comparison

    for info, config in zip(result.servers, result.configs):
        model = info.model_alias or info.model_path or "model"
        console.print(f"[bold]tunehost bench --server[/] — [bold]{escape(config.name)}[/] "
                      f"{escape(one_line(info.url, 200))} · {escape(model)} · build {escape(info.build or '?')} · "
                      f"{info.slots or '?'} slot(s) × {info.n_ctx or '?'} ctx")
        if info.command:
            console.print(f"[dim]{escape(one_line(' '.join(info.command), 1000))}[/]")
        console.print(f"[dim]prompt cache in host RAM: {escape(info.cache_ram)}[/]")
        if info.load_s is not None:
            console.print(f"router: the first request waited [bold]{info.load_s:.2f} s[/] for the model to load "
                          "(not in the figures below)")
        # one space between columns and no number ever wrapped: ten columns of up to "1 234 567" fit 80
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", collapse_padding=True)
        for column in ("request", "depth", "TTFT p50", "p90", "PP t/s", "client", "TG t/s", "client", "all t/s",
                       "cached"):
            table.add_column(column, justify="left" if column == "request" else "right",
                             no_wrap=column != "request")
        rows = result.summary.get(config.name, [])
        for row in rows:
            label = row["test"] if row["test"] in ("cold", "cached") else f"x{row['clients']}"
            table.add_row(label, str(row["depth"]), _ms(row["ttft_ms_p50"]), _ms(row["ttft_ms_p90"]),
                          _ts(row["pp_ts"]) if row["prompt_n"] else "—", _ts(row["pp_client_ts"]), _ts(row["tg_ts"]),
                          _ts(row["tg_client_ts"]) if row.get("tg_client_ts") else "—",
                          _ts(row["aggregate_ts"]) if "aggregate_ts" in row else "", f"{row['cache_n']:.0f}")
        console.print(table)
        drafts = [r for r in rows if "draft_acceptance" in r]
        for row in drafts:
            console.print(f"draft acceptance ({row['test']} d{row['depth']}): {row['draft_acceptance']:.1%}")
        _render_expected(result, config.name, rows, console)
        console.print()
    if result.comparison is not None:
        render_comparison(result.comparison, console, chart=False)
    for spec in result.speculation:
        console.print(f"[bold]speculative decoding ({escape(spec['server'])})[/]: {spec['accepted']} of "
                      f"{spec['drafted']} drafted tokens accepted ({spec['acceptance']:.1%})", highlight=False)
        for tg in spec["tg"]:
            console.print(f"  net {escape(tg['test'])}: {tg['ts']:.1f} t/s against {tg['vs_ts']:.1f} t/s on "
                          f"{escape(tg['vs'])}: {tg['net_percent']:+.1f} %, {escape(tg['verdict'])}",
                          highlight=False)
    settings = result.settings
    overhead = result.overhead
    console.print(f"[dim]{settings.get('rounds')} rounds (A B, B A, …) after 1 warm-up round per server, "
                  f"{settings.get('wall_s', 0):.1f} s; stopped: {escape(str(settings.get('stop_reason')))}; "
                  f"{settings.get('n_gen')} tokens generated per request; TTFT on the client's clock, PP/TG from "
                  "the server's timings (client: depth / TTFT, tokens after the first / their time)[/]")
    if overhead:
        console.print(f"[dim]client overhead: {overhead['total_percent']:.3f} % of request time "
                      f"(max {overhead['max_percent']:.3f} % over {overhead['requests']} requests)[/]")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _render_expected(result: "ServerBenchResult", name: str, rows: list, console: "Console") -> None:
    """The cold requests' TG at each depth beside tunehost's band at that depth (the weights and the KV cache a
    token reads there: tunehost.advise.ceiling, as bench and advise give it); no inside/below verdict from disturbed
    rounds."""
    from tunehost.advise.ceiling import ceiling_from_json
    from tunehost.formats.fold import print_folded

    ceilings = result.ceilings.get(name) or {}
    if "error" in ceilings:
        print_folded(console, f"no expected band: {one_line(str(ceilings['error']), 300)}", "", "  ", style="dim")
        return
    parts = []
    excuse = ""  # a band below which its kind's published runs often fell too (TgBand.below_text)
    for row in rows:
        c = ceiling_from_json(ceilings.get(str(row["depth"]))) if row["test"] == "cold" else None
        if c is None or c.band is None or not row.get("tg_ts"):
            continue
        band, tg = c.band, row["tg_ts"]
        where = "" if result.disturbed else (" inside" if band.low <= tg <= band.high else
                                             " below" if tg < band.low else " above")
        if where == " below":
            excuse = excuse or band.below_text()
        kv = f"{c.kv_bytes / 1e9:.2f} GB" if c.kv_bytes >= 10**7 else f"{c.kv_bytes / 1e6:.2f} MB"
        parts.append(f"d{row['depth']} {tg:.1f} t/s{where} {band.range_text()} ({kv} of KV a token)")
    if parts:
        print_folded(console, "TG against tunehost's band at each depth (weights and KV cache a token reads): "
                     + "; ".join(parts) + ("; no verdict: the rounds were disturbed" if result.disturbed else "")
                     + (f"; below: {excuse}" if excuse else ""), "", "  ")


def _ms(value: float) -> str:
    """Compact (no space, so a narrow table never wraps it): "955ms", "10.8s"."""
    return f"{value / 1000:.1f}s" if value >= 1000 else f"{value:.0f}ms"
