"""`tunehost advise`: the llama-server command line and CPU pinning for this host and one GGUF model."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from tunehost.bounds import json_text
from tunehost.cli import check_range, cli_errors, make_console
from tunehost.formats import FILES, FORMATS, choices_text, refuse_unwritable
from tunehost.printable import one_line, require_printable

if TYPE_CHECKING:
    from tunehost.facts import HostFacts
    from tunehost.ops.advise import AdviseRequest, PresetFile

EXIT_DOES_NOT_FIT = 2


def register(app: typer.Typer) -> None:
    app.command("advise", short_help='The llama-server command line for a model on this host.')(advise)


@cli_errors
def advise(
    model: Optional[List[Path]] = typer.Option(None, "--model", "-m", metavar="PATH.gguf", help="The GGUF model (any part of a split model); several: router mode."),
    ctx: Optional[int] = typer.Option(None, "--ctx", metavar="N", help="Context tokens per slot (default: the model's, at most 32768)."),
    parallel: int = typer.Option(1, "--parallel", metavar="N", help="Concurrent requests (slots)."),
    mmproj: Optional[Path] = typer.Option(None, "--mmproj", metavar="PATH", help="Vision projector GGUF."),
    draft: Optional[Path] = typer.Option(None, "--draft", metavar="PATH", help="Draft model for speculative decoding."),
    spec: Optional[str] = typer.Option(None, "--spec", metavar="mtp|draft|ngram", help="Speculative decoding: MTP heads (the model's, or a companion GGUF as --draft), a --draft model, or n-grams of the context."),
    spec_draft_n_max: Optional[int] = typer.Option(None, "--spec-draft-n-max", metavar="N", help="Tokens to draft per step (llama-server --spec-draft-n-max)."),
    draft_max: Optional[int] = typer.Option(None, "--draft-max", hidden=True),
    draft_min: Optional[int] = typer.Option(None, "--draft-min", hidden=True),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", metavar="DIR", help="Router mode: every model llama-server would find in DIR."),
    models_max: Optional[int] = typer.Option(None, "--models-max", metavar="N", help="Router mode: models resident at once (llama-server's default 4; 0 = all)."),
    reserve_vram: int = typer.Option(0, "--reserve-vram", metavar="MiB", help="VRAM to keep for other servers on the GPU that are not running now."),
    preset_file: Optional[str] = typer.Option(None, "--preset-file", metavar="PATH", help="Router mode: where the preset file (--models-preset) will be (default models.ini here, or in --write DIR); the unit names it by its absolute path."),
    fmt: str = typer.Option("human", "--format", "-f", metavar="FORMAT", help=f"{choices_text()}."),
    snapshot: Optional[Path] = typer.Option(None, "--snapshot", "-s", metavar="DIR", help="Advise for a snapshot instead of this host (no probe runs)."),
    llama_server: Optional[str] = typer.Option(None, "--llama-server", metavar="PATH", help="The llama-server binary to advise for."),
    cpus: Optional[str] = typer.Option(None, "--cpus", metavar="LIST", help="Pin to these CPUs (e.g. 0-7) instead of the performance cores."),
    host_addr: Optional[str] = typer.Option(None, "--host", metavar="ADDR", help="Address llama-server listens on (default 127.0.0.1)."),
    api_key_file: Optional[Path] = typer.Option(None, "--api-key-file", metavar="FILE", help="llama-server --api-key-file: clients must send one of its keys (one per line)."),
    user_unit: bool = typer.Option(False, "--user/--system", help="--format systemd: a unit for your user manager (~/.config/systemd/user) or the system one (default)."),
    service_user: Optional[str] = typer.Option(None, "--service-user", metavar="NAME", help="--format systemd: run the system unit as this existing account (User=NAME) instead of a dynamic user; it must be able to read every file the unit names (checked)."),
    write_dir: Optional[Path] = typer.Option(None, "--write", metavar="DIR", help="--format systemd or ollama: write the files (unit, preset, one Modelfile per model, README.txt) into DIR instead of printing them."),
    force: bool = typer.Option(False, "--force", help="--write: replace files that already exist in DIR."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Run no measurement (bandwidth probe, llama-fit-params)."),
    calibrate: bool = typer.Option(False, "--calibrate", help="Show the speed constants fitted to this host's bench/tune runs (no --model needed)."),
) -> None:
    """The llama-server command for MODEL on this host: placement, threads, pinning, KV cache — each flag explained.

    Several --model (or --models-dir): one router-mode plan (llama-server --models-preset/--models-max) in which any
    --models-max of them fit together.

    --calibrate: the token-generation constants fitted to what `tunehost bench`/`tune` measured on this host, per
    class (dense/MoE x GPU/split/CPU), beside the published ones, and which the data do not determine yet.

    --format systemd: a unit only when the account it runs as can reach llama-server and every model (else one
    error line with what to do); --write DIR writes the files and a README.txt of where they go.

    Exit status: 0 a plan that fits, 2 the model does not fit (the plan says what would), 1 tunehost could not run.
    """
    from tunehost.advise.flags import REMOVED_SPEC_OPTIONS
    from tunehost.errors import TunehostError
    from tunehost.ops.advise import AdviseRequest

    for removed, value in (("--draft-max", draft_max), ("--draft-min", draft_min)):
        if value is not None:
            raise TunehostError(f"{removed} was removed from llama.cpp (common/arg.cpp): use "
                                f"{REMOVED_SPEC_OPTIONS[removed]} N")
    if fmt not in FORMATS:
        raise TunehostError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if ctx is not None and ctx <= 0:
        raise TunehostError(f"--ctx must be a positive number of tokens, not {ctx}")
    if parallel <= 0:
        raise TunehostError(f"--parallel must be at least 1, not {parallel}")
    from tunehost.advise.plan import SPEC_KINDS

    if spec not in (None, *SPEC_KINDS):
        raise TunehostError(f"--spec must be {', '.join(SPEC_KINDS[:-1])} or {SPEC_KINDS[-1]}, not {spec!r}")
    if spec_draft_n_max is not None and not 0 <= spec_draft_n_max <= 1024:
        raise TunehostError(f"--spec-draft-n-max must be 0..1024, not {spec_draft_n_max}")
    if reserve_vram < 0 or reserve_vram > 16 * 1024 * 1024:
        raise TunehostError(f"--reserve-vram must be 0..16777216 MiB, not {reserve_vram}")
    from tunehost.advise.unit_access import unit_kind

    kind = unit_kind(fmt, user_unit, service_user)  # --user / --service-user: the same checks as tune's
    if write_dir is not None and fmt not in FILES:
        raise TunehostError(f"--write writes the files of {' or '.join(f'--format {n}' for n in FILES)}: add one "
                            "of them")
    if force and write_dir is None:
        raise TunehostError("--force replaces files that --write DIR would write: use it with --write")
    if calibrate:
        if snapshot is not None:
            raise TunehostError("--calibrate reads this host's results store: it cannot be used with --snapshot")
        if fmt not in ("human", "json"):
            raise TunehostError("--calibrate prints as human (default) or json")
        from tunehost.facts import HostFacts
        from tunehost.host import open_host

        _show_calibration(fmt, HostFacts(open_host()))
        return
    models = list(model or ())
    router = len(models) > 1 or models_dir is not None
    if not models and models_dir is None:
        _missing_model()
    if router and (mmproj or draft or spec):
        raise TunehostError("--mmproj, --draft and --spec plan one model: leave them out in router mode "
                            "(a models-dir sub-directory's mmproj file is planned with its model)")
    if models_max is not None and not router:
        raise TunehostError("--models-max is for router mode: give several --model, or --models-dir")
    if models_max is not None:  # llama-server reads it as a C int (common/arg.cpp): a larger one never starts
        check_range("--models-max", models_max, 0, what=" (0 = all)")
    # these reach the command line and the unit verbatim: a newline there would start a new unit line
    for what, value in (*(("--model", m) for m in models), ("--models-dir", models_dir), ("--mmproj", mmproj),
                        ("--draft", draft), ("--llama-server", llama_server), ("--host", host_addr),
                        ("--api-key-file", api_key_file), ("--preset-file", preset_file), ("--write", write_dir)):
        if value is not None:
            require_printable(str(value), what)
    _check_total_context(ctx, parallel)
    mmproj_bytes = _mmproj_size(mmproj) if mmproj is not None else 0
    request = AdviseRequest(
        models=tuple(models), models_dir=models_dir, ctx=ctx, parallel=parallel, mmproj=mmproj,
        mmproj_bytes=mmproj_bytes, draft=draft, spec=spec, spec_draft_n_max=spec_draft_n_max, models_max=models_max,
        reserve_vram_mib=reserve_vram, preset=_preset(preset_file, write_dir) if router else None,
        llama_server=llama_server, cpus=cpus, host_addr=host_addr, api_key_file=api_key_file, no_probe=no_probe,
        unit=kind if fmt == "systemd" else None, snapshot=snapshot, writable=partial(refuse_unwritable, fmt),
        runtime="ollama" if fmt == "ollama" else "llama.cpp")
    _advise_and_render(request, fmt, write_dir, force)


def _advise_and_render(request: "AdviseRequest", fmt: str, write_dir: Path | None, force: bool) -> None:
    """Open the host once (live, or the snapshot), run the operation, render its result as `fmt` (or write its
    files into --write DIR); exit 2 when the plan does not fit."""
    from tunehost.facts import HostFacts
    from tunehost.formats import Subject, render
    from tunehost.host import open_host
    from tunehost.ops.advise import advise as run_advise

    host = open_host(request.snapshot)
    advice = run_advise(host, HostFacts(host), request)
    for refused in advice.refusals:  # what the plan could not use from the snapshot
        typer.echo(f"tunehost: warning: snapshot: {one_line(refused)}", err=True)
    subject = Subject(advice.launch, advice, advice.unit_check, advice.preset_file,
                      console=make_console() if fmt == "human" else None)
    if write_dir is not None:
        from tunehost.advise.artifacts import write_artifacts

        _written(write_artifacts(write_dir, FILES[fmt](subject, write_dir), force=force))
    else:
        text = render(fmt, subject)
        if text:
            typer.echo(text, nl=False)
    if advice.unit_check is not None and not advice.unit_check.report.checked:
        typer.echo(f"tunehost: warning: {one_line(advice.unit_check.report.reason)}", err=True)
    if not advice.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _show_calibration(fmt: str, facts: "HostFacts") -> None:
    """`advise --calibrate`: this host's fitted constants per class, the published ones beside, what is missing."""
    from rich.table import Table

    from tunehost.advise.ceiling import BAND_MODELS
    from tunehost.advise.host_calibration import CLASS_NAMES, HostCalibration, undetermined
    from tunehost.store import host_calibration, store_path

    skipped: list[str] = []
    calibration = host_calibration(facts=facts, strict=True, skipped=skipped) or HostCalibration({})
    if skipped:  # the store is read as hostile: rows that are not valid runs are left out, said once
        typer.echo(f"tunehost: warning: {len(skipped)} stored row{'s' if len(skipped) != 1 else ''} left out of "
                   f"the results store's read: {one_line(skipped[0], 200)}", err=True)
    if fmt == "json":
        typer.echo(json_text({"schema": "tunehost-calibration/1", "store": str(store_path()),
                               **calibration.to_json()}, indent=2))
        return
    from tunehost.formats.fold import print_folded

    console = make_console()  # every line folded to the terminal's width, the table shrunk to it
    print_folded(console, f"speed constants of this host, fitted to its runs in {store_path()}", "", "  ")
    print_folded(console, "time per token = bytes / (efficiency x bandwidth) + layers x per-layer cost; efficiency "
                 "is the share of the bandwidth basis reached", style="dim")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("class", "runs", "efficiency", "per layer", "published"):
        table.add_column(column)
    fitted = []
    for cls, published in BAND_MODELS.items():
        fits = [f for k, f in sorted(calibration.fits.items()) if k.cls == cls and f.points]
        published_text = (f"{published.eff_low:.2f}-{published.eff_high:.2f}, "
                          f"{published.layer_us_low:g}-{published.layer_us_high:g} us")
        if not fits:
            table.add_row(CLASS_NAMES[cls], "0", "-", "-", published_text)
        for fit in fits:  # one row per kind of model and CPU thread count (FitKey)
            fitted.append(fit)
            eff = (f"{fit.eff:.2f}" if fit.layer_us_determined and fit.eff else
                   f"{fit.eff_range[0]:.2f}-{fit.eff_range[1]:.2f}" if fit.eff_range else "not fitted")
            layer = f"{fit.layer_us:.0f} us" if fit.layer_us_determined and fit.layer_us is not None else \
                "not determined"
            table.add_row(fit.key.name(), str(fit.runs), eff, layer, published_text)
    console.print(table)
    for fit in fitted:
        ram = fit.median_gbps("RAM")
        basis = ("the configured DIMMs' peak" if fit.basis == "dimm" else
                 f"the RAM bandwidth measured with the runs (median {ram:.1f} GB/s)" if ram else "VRAM at its spec")
        print_folded(console, f"{fit.key.name()}: {fit.runs} run{'s' if fit.runs != 1 else ''} of {fit.models} "
                              f"model{'s' if fit.models != 1 else ''}, last {fit.last[:10]}; efficiency is the share "
                              f"of {basis}", "", "  ")
    for line in undetermined(calibration):
        print_folded(console, line, "- ", "  ")
    for point, why in calibration.left_out + tuple(x for f in calibration.fits.values() for x in f.left_out):
        print_folded(console, f"left out: run {point.run_id} ({point.model}): {why}", "", "  ", style="dim")
    if not calibration.fits:
        print_folded(console, "no usable run recorded on this host yet: `tunehost bench --model M` or `tunehost tune "
                              "--model M` record one (token generation, with the bandwidth probe)")


def _missing_model() -> None:
    from tunehost.cli import UsageError

    try:  # typer >= 0.20 vendors click as typer._click (as tunehost.cli imports UsageError)
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover
        from click import get_current_context
    raise UsageError("Missing option '--model' (one PATH.gguf; several, or --models-dir DIR, for router mode)",
                     ctx=get_current_context(silent=True))


def _check_total_context(ctx: int | None, parallel: int) -> None:
    """llama-server gets -c ctx x parallel, a 32-bit int: one error line beyond it."""
    from tunehost.advise.plan import DEFAULT_CTX
    from tunehost.cli import LLAMA_INT_MAX
    from tunehost.errors import TunehostError

    per_slot = ctx if ctx is not None else DEFAULT_CTX  # at most DEFAULT_CTX when --ctx is not given
    if per_slot * parallel > LLAMA_INT_MAX:
        what = "--ctx" if parallel == 1 else "--ctx x --parallel" if ctx is not None else \
            f"--parallel x the default context ({DEFAULT_CTX})"
        raise TunehostError(f"{what} must be at most {LLAMA_INT_MAX} tokens (llama-server's -c is a 32-bit number), "
                            f"not {per_slot * parallel}")


def _mmproj_size(path: Path) -> int:
    """The size of an --mmproj GGUF: a regular file only (a FIFO, device or directory is one error line)."""
    from tunehost.inputs import input_file_size

    return input_file_size(path, "a GGUF file")


def _preset(preset_file: str | None, write_dir: Path | None) -> "PresetFile":
    """The router preset's absolute path (a unit has no working directory to resolve a relative one against):
    --preset-file, else models.ini in --write DIR, else in the current directory; whether --write DIR writes it
    there, and whether it does not exist yet (the unit's access check counts it as created)."""
    from tunehost.advise.router import PRESET_FILE
    from tunehost.ops.advise import PresetFile

    chosen = Path(preset_file) if preset_file is not None else (write_dir or Path(".")) / PRESET_FILE
    path = os.path.abspath(chosen.expanduser())
    written = write_dir is not None and path == os.path.abspath(write_dir.expanduser() / PRESET_FILE)
    return PresetFile(path, created=not written and not os.path.exists(path), written=written)


def _written(paths: list[Path]) -> None:
    for path in paths:
        typer.echo(f"wrote {one_line(path)}")
    if paths:
        typer.echo(f"what goes where: {one_line(paths[-1])}")
