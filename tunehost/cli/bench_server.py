"""`tunehost bench --server URL` / `--serve -- llama-server ARGS [--vs -- ARGS_B]`: the server bench's command line.

Parsing and rendering only; the measurement is tunehost.bench.server.rounds, the process handling tunehost.bench.serve.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tunehost.cli import check_range
from tunehost.errors import TunehostError
from tunehost.printable import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.bench.server.rounds import ServerBenchResult


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
    from tunehost.bench.server import launch as serving
    from tunehost.bench.results import write_json
    from tunehost.bench.server.rounds import (
        DEFAULT_DEPTHS, DEFAULT_N_GEN, MAX_CLIENTS, ServerSettings, ServerTarget, measure_server,
    )
    from tunehost.bench.server.client import parse_target, read_api_key
    from tunehost.cli import LLAMA_INT_MAX, make_console

    if (opts.server is None) == (not opts.serve):
        raise TunehostError("give one of --server URL (a running llama-server) and --serve -- llama-server ARGS")
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
    err = make_console(stderr=True)
    from tunehost.facts import HostFacts
    from tunehost.host import open_host

    facts = HostFacts(open_host())  # opened once: the watch and the store's host identity read it
    with contextlib.ExitStack() as stack:
        if opts.server is not None:
            target = parse_target(opts.server)
            targets = [ServerTarget("server", target)]
        else:
            serving.install_handlers()
            argv_a, argv_b = serving.split_serve_args(opts.extra)
            serving.check_server_args(argv_a, what="--serve")
            if argv_b is not None:
                serving.check_server_args(argv_b, what="--vs")
            targets = []
            for name, argv in (("A", argv_a), ("B", argv_b)):
                if argv is None:
                    continue
                if not opts.json_out:
                    err.print(f"starting llama-server {name}: {one_line(' '.join(argv), 300)}", markup=False,
                              highlight=False)
                served = stack.enter_context(serving.ServedServer(
                    argv, name=name, api_key_file=str(opts.api_key_file) if opts.api_key_file else None,
                    start_timeout_s=opts.start_timeout_s, api_key=api_key))
                targets.append(ServerTarget(name, served.target, served.command, served.died))
        progress = _Progress(err, enabled=sys.stderr.isatty() and not opts.json_out)
        try:
            result = measure_server(targets, settings, api_key=api_key, on_progress=progress.update,
                                    label=opts.save.stem if opts.save else None, watcher=_server_watcher(
                                        targets, facts.host, warn=lambda line: err.print(f"note: {line}", markup=False,
                                                                             highlight=False)))
        finally:
            progress.close()
    if opts.save is not None:
        write_json(result.to_json(), opts.save)
    if result.disturbed and not opts.json_out and result.watch is not None:
        for reason in result.watch.reasons:
            err.print(f"disturbed: {one_line(reason, 300)}", markup=False, highlight=False)
    _record(result, err, facts)  # the results store (docs/history.md): every measured run
    if opts.json_out:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    console = make_console()
    render_server_result(result, console)
    if opts.save is not None:
        from rich.markup import escape

        console.print(f"\nsaved to {escape(str(opts.save))}", highlight=False)


class _Progress:
    """One transient status line on stderr: which round, which server."""

    def __init__(self, console: "Console", enabled: bool):
        self._status = console.status("probing", spinner="dots") if enabled else None
        if self._status is not None:
            self._status.start()

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
        console.print()
    if result.comparison is not None:
        render_comparison(result.comparison, console, chart=False)
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


def _ms(value: float) -> str:
    """Compact (no space, so a narrow table never wraps it): "955ms", "10.8s"."""
    return f"{value / 1000:.1f}s" if value >= 1000 else f"{value:.0f}ms"


def _record(result, err, facts) -> None:
    """Into the results store, with the servers' /props as provenance; a store that cannot be written is one warning
    line and the result is still shown."""
    from tunehost.store import open_for_recording, server_run

    store = open_for_recording(lambda line: err.print(f"warning: {line}", markup=False, highlight=False))
    if store is None:
        return
    with store:
        store.record(server_run(result, facts))


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")


def _server_watcher(targets: Any, host: Any, *, warn: Any = None, listening: Any = None,
                    serving: Any = None) -> Any:
    """A HostWatcher for the server bench: the CPU time of the servers measured on this host (found by their
    listening port; each process's own increase, tunehost.bench.server.cpu) counts as the measurement's own;
    everything else is other work, judged per round as bench's. A local server whose process this user cannot see
    (another user's, e.g. advise's DynamicUser unit, when not run as root): `warn` says so once, and the CPU load
    of other processes is unknown rather than disturbed (swap, steal, heat still judged). None when no target is
    on this host (a remote server's host cannot be watched from here). `host`: the live host, opened by the
    caller. `listening`/`serving`: tests' fakes."""
    from tunehost.bench.server.cpu import ServingCpu
    from tunehost.bench.watch import HostWatcher, read_reading

    if listening is None:
        from tunehost.host.samples import listening_pids as listening
    ports = {t.target.port for t in targets if t.target.host in LOCAL_HOSTS}
    if not ports:
        return None
    found: set[int] = set()
    cpu = serving if serving is not None else ServingCpu()
    seen: dict[str, bool] = {"visible": False, "said": False}

    def servers() -> set[int]:
        if not seen["visible"]:
            try:
                pids = listening(ports)
            except Exception:  # not visible to this user: said below
                pids = set()
            if pids:
                seen["visible"] = True
                found.update(pids - {os.getpid()})  # an in-process server's time is counted already (os.times)
            elif not seen["said"] and warn is not None:
                seen["said"] = True
                shown = ", ".join(str(p) for p in sorted(ports))
                warn(f"no process listening on port {shown} is visible to this user (a server run by another "
                     "account; run as root or as that account to see it): the CPU load of other processes is not "
                     "judged")
        return set(found) | cpu.seen  # the router's children too: none of them is other work

    def own(_pids: set[int]) -> float | None:
        if not seen["visible"]:
            return None  # its CPU time would count as other work: unknown, not disturbed
        return cpu.update(set(found)) if found else 0.0

    return HostWatcher(host, read=lambda host: read_reading(host, exclude_pids=servers, own_cpu=own))
