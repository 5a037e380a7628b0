"""`tunehost bench --server URL` / `--serve -- llama-server ARGS [--vs -- ARGS_B]` as an operation: start the served
servers (tunehost.bench.server.launch), measure the rounds (tunehost.bench.server.rounds) with the host watch,
save the JSON (--save), record the run in the results store, stop the servers; never prints.

The CLI (tunehost/cli/bench_server.py) parses the options, opens the host once, builds its HostFacts, calls
:func:`bench_server` and renders ``outcome.result``. What happens while it runs (a server starting, the watch's
one-time note, the rounds' progress) goes to the caller's :class:`ServerBenchHooks`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager

if TYPE_CHECKING:
    from tunehost.bench.server.rounds import ServerBenchResult, ServerSettings, ServerTarget
    from tunehost.facts import HostFacts
    from tunehost.host import Host

from tunehost.bench.server.launch import DEFAULT_START_TIMEOUT_S

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")


@dataclass(frozen=True)
class Served:
    """A llama-server the bench starts (--serve: "A"; --vs: "B") with its arguments, checked by the caller."""

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class ServerBenchRequest:
    """What to measure: a running server (``target``) or the servers to start (``serve``), the settings, the
    API key (and its file, passed on to a served llama-server), the label and where to save the JSON."""

    settings: "ServerSettings"
    target: "ServerTarget | None" = None
    serve: tuple[Served, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    api_key_file: str | None = None
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    label: str | None = None
    save: Path | None = None


@dataclass(frozen=True)
class ServerBenchHooks:
    """What the caller sees while the bench runs: a served server about to start (its name and argv), the host
    watch's one-time note, and the progress display around the rounds (a context manager giving the progress
    callback; entered once the servers are up, left before they are stopped)."""

    on_starting: Callable[[str, tuple[str, ...]], None] | None = None
    on_note: Callable[[str], None] | None = None
    progress: Callable[[], ContextManager[Callable[[Any], None] | None]] | None = None
    # the measured (and saved) result, before the store is touched: the caller shows it there (docs/history.md)
    report: Callable[["ServerBenchResult"], None] | None = None


@dataclass(frozen=True)
class ServerBenchOutcome:
    """The measured server bench, its row in the results store (None: not recorded) and why not (warning lines)."""

    result: "ServerBenchResult"
    run_id: int | None = None
    warnings: tuple[str, ...] = ()


def bench_server(request: ServerBenchRequest, facts: "HostFacts",
                 hooks: ServerBenchHooks = ServerBenchHooks()) -> ServerBenchOutcome:
    """Measure ``request`` (the servers it starts are stopped whatever happens), save it, hand it to
    ``hooks.report``, record it (a store that cannot record is found before measuring). ``facts``:
    the host the CLI opened once; the watch and the store's host identity read through it."""
    from tunehost.bench.results import write_json
    from tunehost.bench.server.rounds import measure_server
    from tunehost.store.records import check_recording

    writable, warnings = check_recording()  # a damaged or newer store is refused before anything is measured
    with contextlib.ExitStack() as stack:
        targets = [request.target] if request.target is not None else _start(request, stack, hooks)
        with (hooks.progress() if hooks.progress is not None else contextlib.nullcontext(None)) as update:
            result = measure_server(targets, request.settings, api_key=request.api_key, on_progress=update,
                                    label=request.label,
                                    watcher=server_watcher(targets, facts.host, warn=hooks.on_note))
    if request.serve:  # the servers are stopped: the RAM probe behind a split's ceiling reads a quiet host
        result = replace(result, ceilings=served_ceilings(result, facts))
    if request.save is not None:
        write_json(result.to_json(), request.save)
    if hooks.report is not None:
        hooks.report(result)
    if not writable:
        return ServerBenchOutcome(result, None, warnings)
    run_id, warnings = record(result, facts)  # the results store (docs/history.md): every measured run, after
    return ServerBenchOutcome(result, run_id, warnings)  # it was saved and shown; a failure here is a warning


def served_ceilings(result: "ServerBenchResult", facts: "HostFacts") -> dict[str, dict[str, Any]]:
    """Each started server's TG ceiling and band at every prompt depth the bench ran (bench.runner.tg_ceiling), from
    the llama-server arguments it was started with: its -m model, -ngl / --n-cpu-moe placement, -ctk / -ctv cache
    and -nkvo. A server started without a model file (a router's --models-dir) or whose model cannot be read gets
    none: {name: {"error": why}}."""
    from tunehost.advise.ceiling import flag_value
    from tunehost.bench.runner import tg_ceiling

    depths = [d for d in result.settings.get("depths_run") or () if isinstance(d, int) and d > 0]
    out: dict[str, dict[str, Any]] = {}
    for info, config in zip(result.servers, result.configs):
        flags = tuple(info.command[1:]) if info.command else ()
        model = flag_value(flags, ("-m", "--model"))
        if not model or not depths:
            continue
        data = tg_ceiling(model, flags, facts, depths=depths) or {}
        out[config.name] = {"error": data["error"]} if "error" in data else dict(data.get("at_depth") or {})
    return out


def _start(request: ServerBenchRequest, stack: contextlib.ExitStack, hooks: ServerBenchHooks) -> list["ServerTarget"]:
    """Start each served llama-server (stopped when ``stack`` closes); their targets."""
    from tunehost.bench.server import launch as serving
    from tunehost.bench.server.rounds import ServerTarget

    serving.install_handlers()
    targets = []
    for served in request.serve:
        if hooks.on_starting is not None:
            hooks.on_starting(served.name, served.argv)
        server = stack.enter_context(serving.ServedServer(
            list(served.argv), name=served.name, api_key_file=request.api_key_file,
            start_timeout_s=request.start_timeout_s, api_key=request.api_key))
        targets.append(ServerTarget(served.name, server.target, server.command, server.died))
    return targets


def record(result: "ServerBenchResult", facts: "HostFacts") -> tuple[int | None, tuple[str, ...]]:
    """Into the results store, with the servers' /props as provenance: (its id, or None when the store cannot be
    written, and the warning lines saying so; the result itself is never lost)."""
    from tunehost.store.records import record_run, server_run

    return record_run(lambda: server_run(result, facts))


def server_watcher(targets: Any, host: "Host", *, warn: Any = None, listening: Any = None,
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
