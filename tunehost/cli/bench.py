"""`tunehost bench`: real llama-bench, baseline against candidate (or before against after), with honest verdicts.

See docs/bench.md for how to read the table and the statistics behind it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tunehost.bounds import json_text
from tunehost.cli import LINE_EVERY_ROUNDS, LLAMA_INT_MAX, check_range, cli_errors, make_console
from tunehost.cli.bench_render import _ts, render_comparison
from tunehost.cli.layout import progress_text
from tunehost.formats.fold import print_folded
from tunehost.durations import DAY_S, parse_duration
from tunehost.errors import TunehostError
from tunehost.printable import one_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from tunehost.bench.results import SavedResult
    from tunehost.ops.bench import BenchRequest



def register(app: typer.Typer) -> None:
    # extra arguments: the llama-server command lines after `--serve --`
    app.command("bench", short_help="Measure llama-bench or llama-server: baseline vs candidate.",
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(bench)


@cli_errors
def bench(
    ctx: typer.Context,
    model: Optional[Path] = typer.Option(None, "--model", "-m", metavar="PATH.gguf",
                                         help="The GGUF model to run (--server/--serve: the model NAME a "
                                              "llama-server router serves)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="FLAGS",
                                           help='llama-bench flags of the baseline, one string ("-t 4 -fa off"); '
                                                "default: llama-bench's defaults."),
    candidate: Optional[str] = typer.Option(None, "--candidate", metavar="FLAGS",
                                            help="llama-bench flags to compare against the baseline."),
    advised: bool = typer.Option(False, "--advised",
                                 help="The candidate is what `tunehost advise` recommends for this model here."),
    n_prompt: Optional[int] = typer.Option(None, "-p", "--n-prompt", metavar="N",
                                           help="Prompt tokens of the PP test (default 512; 0 skips it)."),
    n_gen: Optional[int] = typer.Option(None, "-n", "--n-gen", metavar="N",
                                        help="Generated tokens of the TG test (default 128; 0 skips it)."),
    depth: Optional[int] = typer.Option(None, "--depth", "-d", metavar="D",
                                        help="Tokens already in the context before each test (default 0)."),
    reps: int = typer.Option(3, "--reps", "-r", metavar="N", help="Repetitions per llama-bench run (llama-bench -r)."),
    budget: str = typer.Option("2m", "--budget", metavar="DURATION",
                               help="Time after which no extra round starts (90, 90s, 2m, 1h; 0: only the first "
                                    "5 rounds, which always run)."),
    save: Optional[Path] = typer.Option(None, "--save", metavar="OUT.json", help="Save the result (JSON)."),
    compare: Optional[Path] = typer.Option(None, "--compare", metavar="SAVED.json",
                                           help="Compare this run (after) with a saved one (before)."),
    import_file: Optional[Path] = typer.Option(None, "--import", metavar="FILE",
                                               help="Show llama-bench results you already have (Markdown, CSV, JSON, "
                                                    "JSONL) instead of running anything."),
    llama_bench: Optional[str] = typer.Option(None, "--llama-bench", metavar="PATH",
                                               help="The llama-bench binary (or its directory)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON (the --save format)."),
    server: Optional[str] = typer.Option(None, "--server", metavar="URL",
                                         help="Benchmark a running llama-server (http://127.0.0.1:8080): TTFT, "
                                              "PP/TG rates, prompt cache, concurrent clients."),
    serve: bool = typer.Option(False, "--serve",
                               help="Start llama-server yourself: --serve -- llama-server ARGS [--vs -- ARGS_B]; "
                                    "stopped afterwards."),
    depths: Optional[str] = typer.Option(None, "--depths", metavar="N,N,...",
                                         help="Server bench prompt depths in the server's tokens (default "
                                              "512,4096,16384; those that fit the context)."),
    to_context: bool = typer.Option(False, "--to-context", help="Server bench: add the deepest prompt that fits."),
    clients: Optional[str] = typer.Option(None, "--clients", metavar="N,N,...",
                                          help="Server bench: concurrent client counts (default: 1, and the "
                                               "server's slot count when above 1)."),
    api_key_file: Optional[Path] = typer.Option(None, "--api-key-file", metavar="FILE",
                                                help="Server bench: the API key (first line; never printed or "
                                                     "saved)."),
    timeout: str = typer.Option("5m", "--timeout", metavar="DURATION",
                                help="Server bench: one deadline for each whole request, from connecting to "
                                     "its last byte (30s, 5m; at most 24h)."),
    api: str = typer.Option("native", "--api", metavar="native|openai",
                            help="Server bench: stream from /completion (native) or /v1/completions (openai)."),
    start_timeout: str = typer.Option("5m", "--start-timeout", metavar="DURATION",
                                      help="--serve: the longest wait, in all, for llama-server's /health (at "
                                           "most 24h)."),
    draft_ab: bool = typer.Option(False, "--draft-ab",
                                  help="--serve: race the command without its speculative-decoding options (A) "
                                       "against it as given (B): draft acceptance and the net TG change."),
) -> None:
    """Measure a model with the real llama-bench: baseline against candidate, interleaved, with a verdict only
    beyond the noise ("faster", "slower", "no clear difference"; "disturbed" when the host was busy).

    With --server URL or --serve, measure llama-server over HTTP instead (docs/bench.md, "Server bench")."""
    from tunehost.bench import results as saved_results
    from tunehost.bench import runner

    budget_s = parse_duration(budget, option="--budget")
    if llama_bench is not None and not llama_bench.strip():  # as a Path, "" was "." (the current directory)
        raise TunehostError("--llama-bench: an empty path names no llama-bench")
    if server is not None or serve:
        if baseline or candidate or advised or import_file or compare or llama_bench or depth is not None \
                or n_prompt is not None:
            raise TunehostError("--server/--serve measure llama-server: --baseline/--candidate/--advised/--import/"
                                "--compare/--llama-bench/-p/--depth are llama-bench's (use --depths, and --vs for "
                                "a second configuration)")
        from tunehost.cli.bench_server import ServerOptions, bench_server

        bench_server(ServerOptions(
            server=server, serve=serve, extra=tuple(ctx.args), model=str(model) if model is not None else None,
            n_gen=n_gen, depths=depths, to_context=to_context, clients=clients, api_key_file=api_key_file,
            timeout_s=parse_duration(timeout, option="--timeout", maximum=DAY_S, allow_minimum=False),
            start_timeout_s=parse_duration(start_timeout, option="--start-timeout", maximum=DAY_S,
                                           allow_minimum=False),
            budget_s=budget_s, save=save, json_out=json_out, api=api, draft_ab=draft_ab))
        return
    if draft_ab:
        raise TunehostError("--draft-ab races a llama-server command with and without drafting: use it with --serve")
    if ctx.args:
        raise TunehostError(f"unexpected arguments: {one_line(' '.join(ctx.args), 200)} (llama-server arguments go after "
                            "--serve --)")

    if candidate is not None and advised:
        raise TunehostError("--candidate and --advised are two candidates; give one")
    if import_file is not None and (model or baseline or candidate or advised):
        raise TunehostError("--import shows results you already have and runs nothing; drop --model/--baseline/"
                            "--candidate/--advised")
    if import_file is None and model is None:
        raise TunehostError("--model PATH.gguf is required (or --import FILE)")
    _check_numbers(n_prompt, n_gen, depth, reps)
    if save is not None and save.is_dir():  # said now, not after minutes of measuring
        raise TunehostError(f"--save {save} is a directory; give a file name (OUT.json)")
    before = saved_results.load(compare) if compare is not None else None
    err = make_console(stderr=True)

    if import_file is not None:
        result = saved_results.import_results(import_file)
    else:
        assert model is not None
        from tunehost.bench.runner import BenchSettings
        from tunehost.ops.bench import BenchRequest

        base_flags = runner.parse_flags(baseline, what="--baseline")
        cand_flags = runner.parse_flags(candidate, what="--candidate") if candidate is not None else None
        defaults = before.settings if before is not None else {}
        if before is not None and baseline is None and candidate is None and not advised:
            base_flags = before.config().flags  # measure again what was measured before
        settings = BenchSettings(
            model=str(model), n_prompt=_pick(n_prompt, defaults.get("n_prompt"), runner.DEFAULT_N_PROMPT),
            n_gen=_pick(n_gen, defaults.get("n_gen"), runner.DEFAULT_N_GEN),
            depth=_pick(depth, defaults.get("n_depth"), 0), reps=reps, budget_s=budget_s, llama_bench=llama_bench,
            label=save.stem if save else None)
        def report(result: "SavedResult") -> None:  # measured: saved and shown before the store is touched
            if save is not None:
                saved_results.save(result, save)
            _render(result, before, compare, save, json_out=json_out)

        _measure(BenchRequest(settings, base_flags, cand_flags, advised), err, json_out=json_out, report=report)
        return
    if save is not None:
        saved_results.save(result, save)
    _render(result, before, compare, save, json_out=json_out)


def _render(result: "SavedResult", before: "SavedResult | None", compare: Path | None, save: Path | None, *,
            json_out: bool) -> None:
    """The result (--json: the saved schema; with --compare, both and their comparison) on stdout."""
    from tunehost.bench import results as saved_results

    comparison = saved_results.compare_saved(before, result) if before is not None else None
    if json_out:
        if before is not None and comparison is not None:
            document: dict[str, Any] = {"schema": "tunehost-bench-compare/1", "comparison": comparison.to_json(),
                                        "before": before.to_json(), "after": result.to_json()}
        else:
            document = result.to_json()
        typer.echo(json_text(document, indent=2))
        return
    from rich.markup import escape

    console = make_console()
    render_result(result, console)
    if comparison is not None and before is not None:
        console.print()
        console.print(f"[bold]before/after[/] — {escape(str(compare))} ({escape(str(before.created))}) → this run")
        render_comparison(comparison, console)
    if save is not None:
        again = shlex.join(["tunehost", "bench", "--model", str(result.model.get("path") or "MODEL.gguf"),
                            "--compare", str(save)])  # a command to paste: quoted, never raw paths
        console.print(f"\nsaved to {escape(str(save))}; compare later with: {escape(again)}", highlight=False)


def _measure(request: "BenchRequest", err: "Console", *, json_out: bool,
             report: "Callable[[SavedResult], None]") -> "SavedResult":
    """Open the host once, then the bench operation: plan (--advised: say which flags), measure, ``report`` (save
    and show), record; a store failing after the measurement is a warning line after the result (exit 0)."""
    from tunehost.bench.runner import MeasureHooks
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.ops.bench import Recording, plan_bench, run_bench

    facts = HostFacts(open_host())  # planning, the host summary, the ceiling, the watch and the store read these
    planned = plan_bench(request, facts)
    if planned.advised_flags is not None and not json_out:
        shown = shlex.join(planned.advised_flags.flags) or "(llama-bench defaults)"
        err.print(f"advised llama-bench flags: {shown}", markup=False, highlight=False)
    with progress_view(err, enabled=sys.stderr.isatty() and sys.stdout.isatty()) as progress:
        outcome = run_bench(planned, facts, MeasureHooks(on_progress=progress.update, on_status=progress.status),
                            Recording(report=lambda result: _after_progress(progress, report, result)))
    _warn(err, outcome.warnings)
    return outcome.result


def _after_progress(progress: "_ProgressView", report: "Callable[[SavedResult], None]",
                    result: "SavedResult") -> None:
    """The result shown once the progress line is gone (the store is recorded after it, still in the view)."""
    progress.__exit__(None, None, None)
    report(result)


def _warn(err: "Console", lines: Any) -> None:
    for line in lines:
        err.print(f"warning: {line}", markup=False, highlight=False)


def _check_numbers(n_prompt: int | None, n_gen: int | None, depth: int | None, reps: int) -> None:
    """Bounds llama-bench can take (its -p/-n/-d/-r are 32-bit ints; the context it allocates is p + n + d)."""
    for option, value in (("-p/--n-prompt", n_prompt), ("-n/--n-gen", n_gen), ("--depth", depth)):
        if value is not None:
            check_range(option, value, 0, what=" tokens (0 skips the test)" if option != "--depth" else " tokens")
    if sum(v or 0 for v in (n_prompt, n_gen, depth)) > LLAMA_INT_MAX:
        raise TunehostError(f"-p + -n + --depth must be at most {LLAMA_INT_MAX} tokens (llama-bench's context is "
                            f"their sum)")
    check_range("--reps", reps, 1)


def _pick(given: int | None, saved: Any, default: int) -> int:
    if given is not None:
        return given
    return int(saved) if isinstance(saved, int) else default


# ---------------------------------------------------------------- progress


class _ProgressView:
    """A rich progress bar on stderr: what runs now and our own ETA. Disabled (stdout or stderr not a terminal:
    `bench | tee`, a CI log), plain lines instead when ``lines``: the first counted round, every
    LINE_EVERY_ROUNDS-th and the end (nothing before the warm-up succeeded: a flag llama-bench rejects stays one
    error line)."""

    def __init__(self, console: "Console", enabled: bool, lines: bool = False, what: str = "bench"):
        self.console = console
        self.enabled = enabled
        self.lines = lines and not enabled
        self.what = what
        self._progress: Any = None
        self._task: Any = None
        self._last: tuple[str, int] | None = None

    def __enter__(self) -> "_ProgressView":
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), console=self.console, transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("starting", total=None, eta="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:  # once (the result may be shown before the view's block ends)
            progress, self._progress = self._progress, None
            progress.__exit__(*exc)

    def status(self, message: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=progress_text(message))

    def _line(self, text: str) -> None:
        from tunehost.cli.layout import print_progress_line

        print_progress_line(self.console, f"{self.what}: {text}")

    def update(self, event: Any) -> None:
        if self._progress is None:
            if not self.lines or event.line:
                return
            key = (event.phase, event.round)
            if key == self._last:
                return
            eta = f", ETA {event.eta_s:.0f} s" if event.eta_s is not None else ""
            if event.phase == "round" and (event.round == 1 or event.round % LINE_EVERY_ROUNDS == 0):
                self._line(f"round {event.round} ({event.done}/{event.planned} llama-bench runs{eta})")
            elif event.phase == "done":
                self._line(f"done: {event.round} rounds in {event.elapsed_s:.0f} s")
            else:
                return
            self._last = key
            return
        if event.phase == "warm-up":
            what = f"warm-up · {event.config}"
        elif event.phase == "done":
            what = "done"
        else:
            what = f"round {event.round}/{event.rounds_planned} · {event.config}"
        if event.line:
            what += " · " + event.line.replace("llama-bench: ", "").strip()[:48]
        eta = f"ETA {event.eta_s:.0f} s" if event.eta_s is not None else "ETA …"
        self._progress.update(self._task, description=progress_text(what), total=event.planned, completed=event.done, eta=eta)


def progress_view(console: "Console", *, enabled: bool, lines: bool = True, what: str = "bench") -> _ProgressView:
    """The progress of a measurement: a bar when ``enabled`` (a terminal), else plain lines (``lines``)."""
    return _ProgressView(console, enabled, lines, what)


# ---------------------------------------------------------------- rendering


def render_result(result: "SavedResult", console: "Console") -> None:
    """Header, the before/after table (or one config's numbers), bars, the TG ceiling, and how it was measured."""
    model = result.model
    size = f", {model['size_bytes'] / 1e6:.1f} MB" if model.get("size_bytes") else ""
    build = result.llama_bench
    build_text = f"llama-bench b{build.get('build_number')} ({build.get('build_commit')})" if build.get("build_number") \
        else "llama-bench"
    source = "imported from " + (result.label or "a file") if result.source == "imported" else "measured"
    print_folded(console, f"{model.get('name') or model.get('model_type') or 'model'}{size} · {build_text} · "
                          f"{build.get('backend') or ''} · {source}", "tunehost bench — ", "  ", first_style="bold")
    if result.host.get("cpu_brand"):
        doctor = (result.host.get("doctor") or {}).get("verdict")
        print_folded(console, f"host: {result.host['cpu_brand']}" + (f" · doctor: {doctor}" if doctor else ""), "",
                     "  ", style="dim")
    for config in result.configs:
        flags = " ".join(config.flags) or ("(llama-bench defaults)" if result.source == "measured" else "")
        if flags:  # imported rows carry no flags: their settings name the configuration
            print_folded(console, flags, one_line(f"{config.name}: "), "  ", first_style="bold")
    console.print()
    if result.source == "imported":  # llama-bench's own mean ± stddev first: what the user's file says
        render_configs(result, console)
        if result.comparison is not None:
            console.print()
            render_comparison(result.comparison, console, chart=False)
    elif result.comparison is not None:
        render_comparison(result.comparison, console, chart=True)
    else:
        render_configs(result, console)
    render_energy(result, console)
    render_ceiling(result, console)
    render_how(result, console)


def render_energy(result: "SavedResult", console: "Console") -> None:
    """Joules per generated token of each configuration beside its t/s, which parts were measured (CPU package,
    GPU) and why the others were not; a result without an energy reading prints nothing."""
    for name, data in (result.energy or {}).items():
        if not isinstance(data, dict):
            continue
        jpt = data.get("joules_per_token")
        missing = "; ".join(one_line(str(m), 200) for m in data.get("missing") or ())
        if isinstance(jpt, (int, float)) and jpt > 0:
            watts = data.get("watts")
            text = (f"{jpt:.3g} J per generated token ({1 / jpt:.3g} tokens/J"
                    + (f", {watts:.1f} W average" if isinstance(watts, (int, float)) else "")
                    + f") · {one_line(str(data.get('measured')), 40)}"
                    + (f" (not measured: {missing})" if missing else ""))
        else:
            text = f"no energy figure: {one_line(str(data.get('why_none') or missing or 'not measured'), 300)}"
        print_folded(console, text, one_line(f"energy, {name}: ", 60), "  ", style="dim" if jpt is None else "")


def render_configs(result: "SavedResult", console: "Console") -> None:
    """One row per config and test. Imported llama-bench output: llama-bench's own mean ± standard deviation (what
    its table prints); measured: the median of the samples and their relative spread (MAD / median)."""
    from rich.markup import escape
    from rich.table import Table

    own = result.source == "imported" and any(t.avg_ts is not None for c in result.configs for t in c.tests)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("config", overflow="fold")
    table.add_column("test", overflow="fold")
    if own:
        table.add_column("t/s mean", justify="right", no_wrap=True)
        table.add_column("± stddev", justify="right", no_wrap=True)
    else:
        table.add_column("t/s (median)", justify="right", no_wrap=True)
        table.add_column("spread", justify="right", no_wrap=True)
    table.add_column("samples", justify="right", no_wrap=True)
    for config in result.configs:
        for test in config.tests:
            if own:
                centre = _ts(test.avg_ts) if test.avg_ts is not None else _ts(test.centre)
                spread = f"± {_ts(test.stddev_ts)}" if test.stddev_ts is not None and test.stddev_ts >= 0 else "—"
            else:
                centre = _ts(test.centre)
                spread = f"±{test.spread * 100:.1f} %" if test.spread is not None else "—"
            table.add_row(escape(config.name), escape(test.test), centre, spread,
                          str(len(test.samples_ts)) if test.samples_ts else "mean only")
    console.print(table)
    if own:
        console.print("[dim]mean ± stddev: llama-bench's own, over the repetitions of one run (they share its "
                      "placement and clocks: run-to-run noise is larger)[/]")


def render_ceiling(result: "SavedResult", console: "Console") -> None:
    """Where the measured TG sits under the ceiling of its placement (tunehost.advise.ceiling, shared with advise),
    and which RAM bandwidth that ceiling rests on: a busy host's is never used silently (issue 29)."""

    from tunehost.advise.ceiling import ceiling_from_json, describe
    from tunehost.advise.host_calibration import BUSY_SOURCE, DIMM_SOURCE, STORE_SOURCE

    data = result.ceiling or {}
    tg = next((t for t in result.config().tests if t.kind == "tg"), None)
    if tg is None:
        return
    source, busy = data.get("ram_source"), data.get("ram_busy")
    ceiling = ceiling_from_json(data)
    # no "below the band" from a bandwidth or a TG read while other processes ran
    judge = source != BUSY_SOURCE and not result.disturbed
    if ceiling is not None:
        console.print()
        print_folded(console, describe(ceiling, tg.centre, judge_band=judge), "", "  ")
        if ceiling.tokens_per_s and tg.centre > ceiling.tokens_per_s and ceiling.path == "cpu":
            print_folded(console, "above the RAM ceiling: the model's weights fit in the CPU caches", style="dim")
        backend = str(result.llama_bench.get("backend") or "")
        if ceiling.path in ("gpu", "split", "moe") and backend and not _gpu_backend(backend):
            print_folded(console, f"llama-bench ran on the {backend} backend: the layers never reached the GPU, so "
                                  "this GPU ceiling does not apply (build llama.cpp with CUDA/ROCm/Vulkan)",
                         "note: ", "  ", first_style="yellow")
    else:
        top = data.get("tg_ceiling_ts")  # results saved before the per-placement ceiling
        if not top:
            return
        share = tg.centre / top
        basis = (f"{data['bandwidth_gbps']:.1f} GB/s read bandwidth / {data['bytes_per_token'] / 1e6:.1f} MB of "
                 "weights per token")
        console.print()
        print_folded(console, f"TG = {share:.0%} of the ~{_ts(top)} t/s ceiling ({basis})", "", "  ")
    reason = one_line(str(busy), 300).removeprefix("not measured: ") if busy else ""
    why = f" ({reason})" if reason else ""
    if source == BUSY_SOURCE:
        print_folded(console, f"RAM bandwidth measured on a busy host{why}: the % of ceiling is unreliable and no "
                              "band verdict is given; measure when the host is quiet (scripts: tunehost gate "
                              "--wait-quiet 10m -- tunehost bench …)", "warning: ", "  ", first_style="bold yellow")
    elif source in (STORE_SOURCE, DIMM_SOURCE):
        used = "a quiet measurement from the results store" if source == STORE_SOURCE else "the DIMMs' peak"
        print_folded(console, f"ceiling basis: {used}; the host was busy, so its bandwidth was not measured now{why}",
                     "", "  ", style="dim")
    elif result.disturbed and ceiling is not None and ceiling.band is not None:
        print_folded(console, "no band verdict: the rounds were disturbed (their TG is not what a quiet host "
                              "reaches)", "", "  ", style="dim")


def render_how(result: "SavedResult", console: "Console") -> None:

    settings = result.settings
    if result.source == "measured":
        counts = {t.test: len(t.samples_ts) for t in result.config().tests}
        n = max(counts.values(), default=0)
        print_folded(console, f"{settings.get('rounds')} rounds (A B, B A, …) after 1 warm-up run per side, "
                              f"{n} samples per side per test, {settings.get('wall_s', 0):.1f} s; "
                              f"stopped: {settings.get('stop_reason')}", "", "  ", style="dim")
    watch = result.watch
    if watch is not None:
        if watch.disturbed:
            for reason in watch.reasons:
                print_folded(console, reason, "disturbed: ", "  ", first_style="bold magenta")
        else:
            parts = []
            if watch.other_cpu_cores is not None:
                parts.append(f"other processes {watch.other_cpu_cores:.2f} CPUs")
            if watch.swap_in_pages is not None:
                parts.append("no swapping" if not (watch.swap_in_pages + (watch.swap_out_pages or 0))
                             else f"{watch.swap_in_pages + (watch.swap_out_pages or 0)} pages swapped")
            if watch.temp_max_c is not None:
                parts.append(f"CPU up to {watch.temp_max_c:.0f} °C")
            if watch.throttle_delta is not None:
                parts.append("no throttling" if watch.throttle_delta == 0 else f"{watch.throttle_delta} throttle events")
            unseen = '; '.join(u.split(' (')[0] for u in watch.unknown)
            print_folded(console, f"host stayed quiet: {', '.join(parts)}"
                         + (f" (not visible here: {unseen})" if watch.unknown else ""), "", "  ", style="dim")
        render_gpu_watch(watch.gpu, console)
    for note in result.notes:
        print_folded(console, note, "note: ", "  ", first_style="yellow")


def _gpu_backend(backend: str) -> bool:
    """Whether a llama-bench backend string ("CUDA", "ROCm", "Vulkan,BLAS", "CPU") offloads to a GPU."""
    return any(part.strip().upper() not in ("CPU", "BLAS", "") for part in backend.split(","))


def render_gpu_watch(gpu: Any, console: "Console") -> None:
    """The GPUs under load: one dim line per GPU, then the findings (PCIe below max, power capping)."""

    if not isinstance(gpu, dict):
        return
    for name, s in (gpu.get("summary") or {}).items():
        if not isinstance(s, dict) or not s.get("busy_samples"):
            continue
        bits = [f"busy in {s['busy_samples']} of {s.get('samples')} samples"]
        for key, unit, label in (("sm_clock_mhz", "MHz", "clock"), ("power_w", "W", "power"),
                                 ("temperature_c", "°C", "temperature")):
            span = s.get(key)
            if isinstance(span, list) and len(span) == 2:
                bits.append(f"{label} {span[0]:.0f}-{span[1]:.0f} {unit}")
        gen, width = s.get("pcie_gen"), s.get("pcie_width")
        if isinstance(gen, list) and isinstance(width, list):
            bits.append(f"PCIe Gen{gen[1]:.0f} x{width[1]:.0f}")
        print_folded(console, f"{name}: {', '.join(bits)}", "", "  ", style="dim")
    for finding in gpu.get("findings") or ():
        print_folded(console, str(finding), "GPU: ", "  ", first_style="yellow")
