"""`tunehost advise`: the llama-server command line and CPU pinning for this host and one GGUF model."""

from __future__ import annotations

import json
import shlex
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from tunehost.cli import cli_errors, make_console
from tunehost.printable import one_line, require_printable

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.advise.plan import Plan
    from tunehost.advise.unit_access import UnitCheck
    from tunehost.launch import LaunchConfig

FORMATS = ("human", "shell", "systemd", "json", "ollama")
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
    spec: Optional[str] = typer.Option(None, "--spec", metavar="mtp|draft", help="Speculative decoding: the model's MTP heads, or --draft."),
    spec_draft_n_max: Optional[int] = typer.Option(None, "--spec-draft-n-max", metavar="N", help="Tokens to draft per step (llama-server --spec-draft-n-max)."),
    draft_max: Optional[int] = typer.Option(None, "--draft-max", hidden=True),
    draft_min: Optional[int] = typer.Option(None, "--draft-min", hidden=True),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", metavar="DIR", help="Router mode: every model llama-server would find in DIR."),
    models_max: Optional[int] = typer.Option(None, "--models-max", metavar="N", help="Router mode: models resident at once (llama-server's default 4; 0 = all)."),
    reserve_vram: int = typer.Option(0, "--reserve-vram", metavar="MiB", help="VRAM to keep for other servers on the GPU that are not running now."),
    preset_file: Optional[str] = typer.Option(None, "--preset-file", metavar="PATH", help="Router mode: where the preset file (--models-preset) will be (default models.ini here, or in --write DIR); the unit names it by its absolute path."),
    fmt: str = typer.Option("human", "--format", "-f", metavar="FORMAT", help="human (default), shell, systemd, json or ollama."),
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
    from tunehost.advise.flags import REMOVED_SPEC_OPTIONS, fit_supported, read_caps
    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import AdviseOptions
    from tunehost.errors import TunehostError
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.model import read_model

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
    if spec not in (None, "mtp", "draft"):
        raise TunehostError(f"--spec must be mtp or draft, not {spec!r}")
    if spec_draft_n_max is not None and not 0 <= spec_draft_n_max <= 1024:
        raise TunehostError(f"--spec-draft-n-max must be 0..1024, not {spec_draft_n_max}")
    if reserve_vram < 0 or reserve_vram > 16 * 1024 * 1024:
        raise TunehostError(f"--reserve-vram must be 0..16777216 MiB, not {reserve_vram}")
    from tunehost.advise.unit_access import unit_kind

    unit_kind(fmt, user_unit, service_user)  # --user / --service-user: the same checks as tune's
    if write_dir is not None and fmt not in ("systemd", "ollama"):
        raise TunehostError("--write writes the files of --format systemd or --format ollama: add one of them")
    if force and write_dir is None:
        raise TunehostError("--force replaces files that --write DIR would write: use it with --write")
    if calibrate:
        if snapshot is not None:
            raise TunehostError("--calibrate reads this host's results store: it cannot be used with --snapshot")
        if fmt not in ("human", "json"):
            raise TunehostError("--calibrate prints as human (default) or json")
        _show_calibration(fmt)
        return
    models = list(model or ())
    router = len(models) > 1 or models_dir is not None
    if not models and models_dir is None:
        from tunehost.cli import UsageError

        try:  # typer >= 0.20 vendors click as typer._click (as tunehost.cli imports UsageError)
            from typer._click.globals import get_current_context
        except ImportError:  # pragma: no cover
            from click import get_current_context
        raise UsageError("Missing option '--model' (one PATH.gguf; several, or --models-dir DIR, for router mode)",
                         ctx=get_current_context(silent=True))
    if router and (mmproj or draft or spec):
        raise TunehostError("--mmproj, --draft and --spec plan one model: leave them out in router mode "
                            "(a models-dir sub-directory's mmproj file is planned with its model)")
    if models_max is not None and not router:
        raise TunehostError("--models-max is for router mode: give several --model, or --models-dir")
    # these reach the command line and the unit verbatim: a newline there would start a new unit line
    for what, value in (*(("--model", m) for m in models), ("--models-dir", models_dir), ("--mmproj", mmproj),
                        ("--draft", draft), ("--llama-server", llama_server), ("--host", host_addr),
                        ("--api-key-file", api_key_file), ("--preset-file", preset_file), ("--write", write_dir)):
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
    mmproj_bytes = _mmproj_size(mmproj) if mmproj is not None else 0
    host = open_host(snapshot)
    facts = HostFacts(host)
    view = HostView.from_facts(facts, llama_server=llama_server)
    if cpus is not None:
        view = view.with_cpus(cpus)
    server = view.llama_server or "llama-server"
    caps = read_caps(host, view.llama_server)
    common = dict(ctx=ctx, parallel=parallel, host_addr=host_addr, server=server, fit_option=fit_supported(caps),
                  api_key_file=str(api_key_file.expanduser().resolve()) if api_key_file else None,
                  ram_peak=_dimm_peak(facts), spec_draft_n_max=spec_draft_n_max)
    if (not host.live or not no_probe):
        gbps, why, busy = ram_bandwidth(host)
        common.update(ram_bandwidth_gbps=gbps, ram_bandwidth_note=why, host_busy=busy)
    recorded = None  # this host's runs in the results store, read once (docs/history.md)
    if host.live:  # its own bench/tune runs set the speed band where they cover the class
        from tunehost.store import host_calibration, runs_on_host

        recorded = runs_on_host(facts)
        common.update(host_calibration=host_calibration(runs=recorded))
    if router:
        from tunehost.advise.router import LocalModel, model_name, scan_models_dir

        local = scan_models_dir(models_dir) if models_dir is not None else []
        local += [LocalModel(model_name(m), str(m)) for m in models]
        out = Output(fmt, user_unit, service_user, write_dir, force)
        _advise_router(host, local, view, caps, common, out, snapshot, models_max, reserve_vram,
                       _preset_path(preset_file, write_dir),
                       models_dir=str(models_dir.expanduser().resolve()) if models_dir else None)
        return
    facts_model = read_model(models[0])
    draft_model = read_model(draft) if draft else None
    if reserve_vram:
        from tunehost.advise.router import reserve_vram as keep

        view = keep(view, reserve_vram * 1024 * 1024)
    rope, vocab_problems = _gguf_checks(facts_model, draft_model)
    options = AdviseOptions(model_path=str(models[0].expanduser().resolve()), rope_scaling=rope,
                            draft_vocab_problems=vocab_problems,
                            mmproj=str(mmproj.expanduser().resolve()) if mmproj else None, mmproj_bytes=mmproj_bytes,
                            draft=str(draft.expanduser().resolve()) if draft else None, draft_model=draft_model,
                            spec=spec, **common)
    result = _plan_with_probe(host, view, caps, facts_model, options, no_probe)
    if reserve_vram:
        result = _note(result, f"{reserve_vram} MiB of VRAM kept for other servers on the GPU (--reserve-vram)")
    for refused in host.refusals:  # what the plan could not use from the snapshot
        typer.echo(f"tunehost: warning: snapshot: {one_line(refused)}", err=True)
    measured = None
    if recorded is not None:  # what this box measured for this model (tunehost bench/tune record it)
        from tunehost.store import measured_on_host

        measured = measured_on_host(options.model_path, runs=recorded)
    ceiling_ts = result.ceiling.tokens_per_s if result.ceiling is not None else None
    if fmt == "json":
        data = result.to_json()
        data["launch"] = result.launch().to_json()  # the typed launch configuration bench and tune read back
        data["snapshot"] = str(snapshot) if snapshot else None
        data["measured"] = measured.to_json(ceiling_ts) if measured else None
        typer.echo(json.dumps(data, indent=2))
    elif fmt == "shell":
        typer.echo(render_shell(result.launch()))
    elif fmt in ("systemd", "ollama"):
        _emit_files(host, result.launch(), Output(fmt, user_unit, service_user, write_dir, force))
    else:
        render_human(result, make_console(), snapshot=str(snapshot) if snapshot else None,
                     measured=measured.text(ceiling_ts) if measured else None)
    if not result.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _show_calibration(fmt: str) -> None:
    """`advise --calibrate`: this host's fitted constants per class, the published ones beside, what is missing."""
    from rich.table import Table

    from tunehost.advise.ceiling import BAND_MODELS
    from tunehost.advise.host_calibration import CLASS_NAMES, HostCalibration, undetermined
    from tunehost.facts import HostFacts
    from tunehost.host import open_host
    from tunehost.store import host_calibration, store_path

    calibration = host_calibration(facts=HostFacts(open_host()), strict=True) or HostCalibration({})
    if fmt == "json":
        typer.echo(json.dumps({"schema": "tunehost-calibration/1", "store": str(store_path()),
                               **calibration.to_json()}, indent=2))
        return
    from tunehost.cli.layout import print_folded

    console = make_console()  # every line folded to the terminal's width, the table shrunk to it
    print_folded(console, f"speed constants of this host, fitted to its runs in {store_path()}", "", "  ")
    print_folded(console, "time per token = bytes / (efficiency x bandwidth) + layers x per-layer cost; efficiency "
                 "is the share of the bandwidth basis reached", style="dim")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("class", "runs", "efficiency", "per layer", "published"):
        table.add_column(column)
    fitted = []
    for cls, published in BAND_MODELS.items():
        fit = calibration.get(cls)
        published_text = (f"{published.eff_low:.2f}-{published.eff_high:.2f}, "
                          f"{published.layer_us_low:g}-{published.layer_us_high:g} us")
        if fit is None:
            table.add_row(CLASS_NAMES[cls], "0", "-", "-", published_text)
            continue
        fitted.append(fit)
        eff = (f"{fit.eff:.2f}" if fit.layer_us_determined and fit.eff else
               f"{fit.eff_range[0]:.2f}-{fit.eff_range[1]:.2f}" if fit.eff_range else "not fitted")
        layer = f"{fit.layer_us:.0f} us" if fit.layer_us_determined and fit.layer_us is not None else "not determined"
        table.add_row(CLASS_NAMES[cls], str(fit.runs), eff, layer, published_text)
    console.print(table)
    for fit in fitted:
        ram = fit.median_gbps("RAM")
        basis = ("the configured DIMMs' peak" if fit.basis == "dimm" else
                 f"the RAM bandwidth measured with the runs (median {ram:.1f} GB/s)" if ram else "VRAM at its spec")
        print_folded(console, f"{CLASS_NAMES[fit.cls]}: {fit.runs} run{'s' if fit.runs != 1 else ''} of {fit.models} "
                              f"model{'s' if fit.models != 1 else ''}, last {fit.last[:10]}; efficiency is the share "
                              f"of {basis}", "", "  ")
    for line in undetermined(calibration):
        print_folded(console, line, "- ", "  ")
    for point, why in calibration.left_out + tuple(x for f in calibration.fits.values() for x in f.left_out):
        print_folded(console, f"left out: run {point.run_id} ({point.model}): {why}", "", "  ", style="dim")
    if not calibration.fits:
        print_folded(console, "no usable run recorded on this host yet: `tunehost bench --model M` or `tunehost tune "
                              "--model M` record one (token generation, with the bandwidth probe)")


def _gguf_checks(model, draft) -> tuple[str | None, tuple[str, ...]]:
    """The main model's RoPE scaling (for the context clamp) and what makes the draft's vocabulary incompatible."""
    from tunehost.advise.vocab import compare, read_meta

    first = (model.parts or (model.path,))[0] if (model.parts or model.path) else None
    meta = read_meta(first) if first else None
    rope = None
    if meta is not None and meta.rope_scaling:
        rope = meta.rope_scaling + (f" x{meta.rope_factor:g}" if meta.rope_factor else "") + \
            (f" from {meta.rope_original_ctx}" if meta.rope_original_ctx else "")
    problems: tuple[str, ...] = ()
    if draft is not None and meta is not None:
        dfirst = (draft.parts or (draft.path,))[0] if (draft.parts or draft.path) else None
        dmeta = read_meta(dfirst) if dfirst else None
        if dmeta is not None:
            problems = tuple(compare(meta, dmeta))
    return rope, problems


def _mmproj_size(path: Path) -> int:
    """The size of an --mmproj GGUF: a regular file only (a FIFO, device or directory is one error line)."""
    from tunehost.inputs import input_file_size

    return input_file_size(path, "a GGUF file")


def _plan_with_probe(host, view, caps, facts_model, options, no_probe: bool) -> "Plan":
    """plan(), then llama-fit-params' placement where it can answer, then the build's spellings."""
    from tunehost.advise.flags import fit_params_path, help_crash, run_fit_params
    from tunehost.advise.plan import FitPlacement, apply_caps, plan

    first = plan(facts_model, view, options)  # validates, and says whether a GPU placement is needed
    if first.path in ("gpu", "moe", "split") and not no_probe:
        fit_bin = fit_params_path(host, view.llama_server)
        if fit_bin:
            probe, why = run_fit_params(host, fit_bin, _fit_args(options.model_path, first))
            if probe is not None:
                options = _with(options, fit=FitPlacement(probe.gpu_layers, probe.cpu_expert_layers, probe.overrides,
                                                          probe.command, probe.tensor_split))
            else:
                options = _with(options, fit_note=f"placement is tunehost's estimate: {why}")
    result = apply_caps(plan(facts_model, view, options), caps)
    if host.live and not no_probe:  # llama.cpp's own memory estimate beside tunehost's
        result = _with_estimate(host, fit_params_path(host, view.llama_server), options.model_path, result)
    if caps is None and view.llama_server:
        crash = help_crash(host, view.llama_server)
        result = _note(result, f"could not read `{view.llama_server} --help`"
                               f"{f' ({crash})' if crash else ''}: flags assume a current llama.cpp build")
    return result


def _advise_router(host, local, view, caps, common, out: "Output", snapshot, models_max, reserve_mib, preset_file,
                   *, models_dir) -> None:
    """Router mode: one plan per model, any --models-max of them resident together (tunehost.advise.router)."""
    from tunehost.advise.plan import AdviseOptions, apply_caps, plan
    from tunehost.advise.router import DEFAULT_MODELS_MAX, plan_router
    from tunehost.model import read_model

    facts_models = [read_model(m.path) for m in local]
    opts = [AdviseOptions(model_path=str(Path(m.path).expanduser().resolve()), mmproj=m.mmproj,
                          mmproj_bytes=_mmproj_size(Path(m.mmproj)) if m.mmproj else 0, **common)
            for m in local]
    rp = plan_router([m.name for m in local],
                     lambda i, h: apply_caps(plan(facts_models[i], h, opts[i]), caps), view,
                     DEFAULT_MODELS_MAX if models_max is None else models_max, reserve_mib * 1024 * 1024,
                     models_dir=models_dir)
    launch = rp.launch(common["server"], preset_file)
    fmt = out.fmt
    if fmt == "json":
        data = rp.to_json()
        data["launch"] = launch.to_json()
        data["snapshot"] = str(snapshot) if snapshot else None
        typer.echo(json.dumps(data, indent=2))
    elif fmt == "shell":
        typer.echo(render_router_files(launch, preset_file))
    elif fmt in ("systemd", "ollama"):
        _emit_files(host, launch, out, preset_file=preset_file)
    else:
        render_router_human(rp, launch, preset_file, make_console(), snapshot=str(snapshot) if snapshot else None)
    if not rp.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _commented(text: str, head: str) -> str:
    return "\n".join([f"# ---- {head} ----"] + [f"# {line}" if line else "#" for line in text.splitlines()]) + "\n"


@dataclass(frozen=True)
class Output:
    """How advise hands out a unit or Ollama files: the format, the kind of unit, where to write them."""

    fmt: str
    user_unit: bool = False  # --user
    service_user: str | None = None  # --service-user
    write: Path | None = None  # --write DIR
    force: bool = False


def _preset_path(preset_file: str | None, write_dir: Path | None) -> str:
    """The router preset's absolute path (a unit has no working directory to resolve a relative one against):
    --preset-file, else models.ini in --write DIR, else in the current directory."""
    chosen = Path(preset_file) if preset_file is not None else (write_dir or Path(".")) / PRESET_FILE
    return os.path.abspath(chosen.expanduser())


def _emit_files(host, launch: "LaunchConfig", out: Output, *, preset_file: str | None = None) -> None:
    """--format systemd / ollama: print the files, or write them into --write DIR. A unit is handed out only when
    its user can reach every path it names (or the host cannot say: a snapshot), never one that fails at start."""
    from tunehost.advise.artifacts import Artifact, write_artifacts
    from tunehost.advise.unit_access import UnitKind, check_unit

    if out.fmt == "ollama":
        if out.write is None:
            typer.echo(render_ollama(launch), nl=False)
            return
        dropin, modelfiles, _notes = ollama_files(launch)
        artifacts = [Artifact(OLLAMA_DROPIN_FILE, dropin)]
        artifacts += [Artifact(f"Modelfile.{slug}", text) for slug, text in modelfiles]
        artifacts.append(Artifact("README.txt", _readme_ollama(out.write, [slug for slug, _ in modelfiles])))
        _written(write_artifacts(out.write, artifacts, force=out.force))
        return
    preset_text = render_router_preset(launch) if launch.is_router else None
    in_dir = out.write is not None and preset_file == os.path.abspath(out.write.expanduser() / PRESET_FILE)
    created = bool(preset_file) and not in_dir and not os.path.exists(preset_file)
    check = check_unit(host, launch, UnitKind(out.user_unit, out.service_user), preset_created=created,
                       preset_written=in_dir)
    report, checked = check.report, check.comment
    unit = render_checked_unit(launch, check)
    if out.write is None:
        typer.echo(unit, nl=False)
        if preset_text is not None:
            typer.echo(_commented(preset_text, f"save as {preset_file} (or: advise --write DIR writes both files)"))
        if not report.checked:
            typer.echo(f"tunehost: warning: {one_line(report.reason)}", err=True)
        return
    artifacts = [Artifact(UNIT_FILE, unit)]
    if preset_text is not None:
        artifacts.append(Artifact(PRESET_FILE, preset_text))
    artifacts.append(Artifact("README.txt", _readme_systemd(out, preset_file if preset_text is not None else None,
                                                            checked)))
    _written(write_artifacts(out.write, artifacts, force=out.force))
    if not report.checked:
        typer.echo(f"tunehost: warning: {one_line(report.reason)}", err=True)


def _written(paths: list[Path]) -> None:
    for path in paths:
        typer.echo(f"wrote {one_line(path)}")
    if paths:
        typer.echo(f"what goes where: {one_line(paths[-1])}")


def _readme_systemd(out: Output, preset_file: str | None, checked: str) -> str:
    """README.txt beside a written unit: what each file is, and the commands that install and start it."""
    assert out.write is not None
    here = os.path.abspath(out.write.expanduser())
    q = shlex.quote
    unit = q(os.path.join(here, UNIT_FILE))
    lines = ["Written by tunehost advise --format systemd --write: what each file is and where it goes.", "",
             f"{UNIT_FILE}  the systemd unit for "
             + ("your user manager (systemctl --user)" if out.user_unit else
                f"the system manager, run as {out.service_user} (User=)" if out.service_user else
                "the system manager, run as a dynamic unprivileged user (DynamicUser=yes)")]
    if preset_file is not None:
        local = os.path.join(here, PRESET_FILE)
        lines.append(f"{PRESET_FILE}  the router's preset (--models-preset): the unit reads it from {preset_file}")
        if preset_file != local:
            lines.append(f"    put it there first: install -D -m 644 {q(local)} {q(preset_file)}")
        else:
            lines.append("    keep it where it is (or move it and run advise again with --preset-file PATH)")
    lines += ["README.txt  this file", ""]
    if out.user_unit:
        lines += ["Install and start it as yourself (not root):",
                  f"  mkdir -p {USER_UNIT_DIR} && install -m 644 {unit} {USER_UNIT_DIR}/",
                  "  systemctl --user daemon-reload",
                  f"  systemctl --user enable --now {UNIT_FILE}",
                  f"  systemctl --user status {UNIT_FILE}    # its log: journalctl --user -u {UNIT_FILE}",
                  "  loginctl enable-linger \"$USER\"   # optional: start at boot, keep running after you log out"]
    else:
        lines += ["Install and start it as root:",
                  f"  install -m 644 {unit} {SYSTEM_UNIT_DIR}/",
                  "  systemctl daemon-reload",
                  f"  systemctl enable --now {UNIT_FILE}",
                  f"  systemctl status {UNIT_FILE}    # its log: journalctl -u {UNIT_FILE}"]
    lines += ["", "Paths: " + checked, ""]
    return "\n".join(lines)


def _readme_ollama(directory: Path, slugs: list[str]) -> str:
    """README.txt beside the written Ollama files: the drop-in, then one `ollama create` per Modelfile."""
    here = os.path.abspath(directory.expanduser())
    q = shlex.quote
    lines = ["Written by tunehost advise --format ollama --write: what each file is and where it goes.", "",
             f"{OLLAMA_DROPIN_FILE}  a drop-in for ollama.service (environment, CPU affinity); as root:",
             f"  install -D -m 644 {q(os.path.join(here, OLLAMA_DROPIN_FILE))} {OLLAMA_DROPIN}",
             "  systemctl daemon-reload && systemctl restart ollama", ""]
    for slug in slugs:
        lines += [f"Modelfile.{slug}  the model {slug}:",
                  f"  ollama create {slug} -f {q(os.path.join(here, f'Modelfile.{slug}'))}"]
    lines += ["", "README.txt  this file", ""]
    return "\n".join(lines)


def ram_bandwidth(host) -> tuple[float | None, str | None, bool]:
    """RAM GB/s for the TG ceiling, why there is none, and whether the host is busy now: never a measurement taken
    on a busy host.

    Live: the pinned per-core probe now, unless tunehost.facts.processes.busy_reason says the host is busy (then
    nothing: the plan falls back to the DIMMs' peak; the results store keeps llama-bench runs, not bandwidth).
    A snapshot: what its doctor run measured (samples/measure.json), or why it did not (a busy host, --quick)."""
    from tunehost.facts.measure import MeasureFacts

    if host.live:
        from tunehost.facts.processes import ProcessFacts, busy_reason
        from tunehost.probes.sampler import probe_memory

        reason = busy_reason(ProcessFacts.gather(host))
        if reason is None:
            return probe_memory(host)["memory_read_gbps"], None, False
        return None, reason, True
    m = MeasureFacts.gather(host)
    if m.memory_read_gbps is not None:
        return m.memory_read_gbps, None, False
    return None, m.why_missing("memory_read_gbps"), False


def _with(options, **changes):
    from dataclasses import replace

    return replace(options, **changes)


def _note(p: "Plan", text: str) -> "Plan":
    from dataclasses import replace

    return replace(p, notes=p.notes + (text,))


def _with_estimate(host, fit_bin: str | None, model_path: str, result: "Plan") -> "Plan":
    """llama.cpp's own memory estimate for the finished plan's flags beside tunehost's budget (live hosts only)."""
    from tunehost.advise.flags import compare_estimate, run_fit_print

    if not fit_bin:
        return result
    args = _fit_args(model_path, result)[:-2]  # the placement is the plan's: no fitting, so no -fitt
    for name in ("-ngl", "--n-cpu-moe", "-ot"):
        value = result.value(name)
        if value:
            args += [name, value]
    estimate, why = run_fit_print(host, fit_bin, args)
    if estimate is None:
        return _note(result, f"no llama.cpp memory estimate beside tunehost's: {why}")
    rows = {r.label: r for r in result.budget.rows}
    total = {label: r.gpu + r.ram for label, r in rows.items()}
    gpu_weights = rows["weights"].gpu if "weights" in rows and result.path != "unified" else 0
    for text in compare_estimate(estimate, total.get("KV cache", 0), gpu_weights, total.get("compute buffers", 0)):
        result = _note(result, text)
    return result


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
PRESET_FILE = "models.ini"


def render_checked_unit(launch: "LaunchConfig", check: "UnitCheck") -> str:
    """The unit for `launch` as check_unit (tunehost.advise.unit_access) found it may run: its kind, only the GPU
    groups this host has, and a header saying what was checked. advise and tune hand out units only through this."""
    return render_systemd(launch, user=check.kind.user_unit, service_user=check.kind.service_user,
                          groups=check.groups, comments=(*check.notes, check.comment))


def render_systemd(p: "LaunchConfig", *, user: bool = False, service_user: str | None = None,
                   groups: tuple[str, ...] | None = None, comments: tuple[str, ...] = ()) -> str:
    """A systemd service unit (ExecStart, CPUAffinity, LimitMEMLOCK, Nice, Environment) for the system manager, or
    with `user` for a user manager: no Nice below 0, no --prio, no LimitMEMLOCK above the user's hard limit, no
    system targets (a user manager cannot raise priority or limits, nor order itself after system units).
    A system unit runs as a dynamic user, or as `service_user` (User=), in the GPU `groups`; `comments` go into its
    header (what was checked). A relative --models-preset is refused: a unit has no working directory for it."""
    from tunehost.advise.unit_access import API_KEY_CREDENTIAL, GPU_GROUPS, credential_path, unit_server
    from tunehost.cpulist import format_cpu_list
    from tunehost.errors import TunehostError

    groups = GPU_GROUPS if groups is None else groups
    argv = p.argv()
    argv[0] = unit_server(argv[0])
    preset = p.value("--models-preset")
    if preset is not None and not preset.startswith("/"):
        raise TunehostError(f"--models-preset {one_line(preset)!r} must be an absolute path in a unit (it has no "
                            "working directory)")
    notes: list[str] = []
    from tunehost.launch import LaunchConfig

    every = (p, *p.models, LaunchConfig("", p.preset))  # a router: its models' (and shared) flags lock too
    lock = any(c.flag("--mlock") or c.mlock_wanted or c.value("--load-mode") in ("mlock", "mmap+mlock")
               for c in every)
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
    words = [_systemd_quote(a) for a in argv]
    credential = None
    if not user and "--api-key-file" in argv[:-1] and credential_path(argv[argv.index("--api-key-file") + 1]):
        # the manager reads the key file as root and hands the service a private copy (systemd.exec(5),
        # LoadCredential=): the keys stay readable by root only, whoever the unit runs as
        i = argv.index("--api-key-file") + 1
        credential = f"LoadCredential={API_KEY_CREDENTIAL}:{argv[i]}"
        words[i] = "${CREDENTIALS_DIRECTORY}/" + API_KEY_CREDENTIAL
    exec_start = " ".join(words)
    name = _unit_text(p.model_name or Path(p.model).name)
    if user:
        lines = [f"# written by tunehost advise --format systemd --user: save it as {UNIT_FILE}, check the paths,",
                 "# then, as yourself (not root):",
                 f"#   mkdir -p {USER_UNIT_DIR} && install -m 644 {UNIT_FILE} {USER_UNIT_DIR}/",
                 f"#   systemctl --user daemon-reload && systemctl --user enable --now {UNIT_FILE}",
                 "#   loginctl enable-linger \"$USER\"   # optional: start at boot, keep running after you log out",
                 *(f"# {one_line(c)}" for c in comments),
                 "[Unit]", f"Description=llama-server: {name}", "", "[Service]", "Type=simple"]
    else:
        lines = [f"# written by tunehost advise --format systemd: save it as {UNIT_FILE}, check the paths,",
                 "# then, as root:",
                 f"#   install -m 644 {UNIT_FILE} {SYSTEM_UNIT_DIR}/ && systemctl daemon-reload",
                 f"#   systemctl enable --now {UNIT_FILE}",
                 *(f"# {one_line(c)}" for c in comments),
                 "[Unit]", f"Description=llama-server: {name}",
                 "After=network-online.target", "Wants=network-online.target", "", "[Service]", "Type=simple"]
    lines += notes
    if not user and service_user is None:  # never root: a throw-away user that may open the GPUs (/dev/dri, /dev/kfd)
        lines += ["# runs as an unprivileged dynamic user, not root: it reads only what any account may read (each",
                  "# directory on the way o+x, the files o+r), and has its own /tmp; or advise --service-user NAME",
                  "DynamicUser=yes"]
    elif not user:
        lines += [f"# runs as {service_user} (advise --service-user), not root", f"User={service_user}"]
    if not user and groups:
        lines.append(f"SupplementaryGroups={' '.join(groups)}")
    if credential is not None:
        lines.append(credential)
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


# ---- router mode ----


def render_router_preset(p: "LaunchConfig") -> str:
    """The --models-preset INI file of a router LaunchConfig."""
    from tunehost.advise.router import render_preset

    return render_preset(p)


def render_router_files(p: "LaunchConfig", preset_file: str) -> str:
    """The router's command line, then the preset file it reads (as a heredoc that writes it)."""
    preset = render_router_preset(p)
    return (f"cat > {_shell_word(preset_file)} <<'TUNEHOST_PRESET'\n{preset}TUNEHOST_PRESET\n\n" + render_shell(p))


def render_router_human(rp, launch: "LaunchConfig", preset_file: str, console: "Console", *,
                        snapshot: str | None = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    where = f"snapshot {snapshot}" if snapshot else "this host (live)"
    console.print(f"[bold]tunehost advise[/] — router mode, {len(rp.names)} models, at most {rp.resident} resident "
                  f"(--models-max {rp.models_max}) on {escape(one_line(where))}")
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("model", "placement", "GPU", "RAM", "context", "TG"):
        table.add_column(col, justify="right" if col in ("GPU", "RAM") else "left")
    for name, p in zip(rp.names, rp.plans):
        band = p.ceiling.band if p.ceiling is not None else None
        table.add_row(escape(one_line(name)), p.path + (f" -ngl {p.value('-ngl')}" if p.path == "split" else "")
                      + (f" --n-cpu-moe {p.value('--n-cpu-moe')}" if p.value("--n-cpu-moe") else ""),
                      _gib(p.budget.gpu_total), _gib(p.budget.ram_total), f"{p.ctx} x {p.parallel}",
                      f"{band.low:.0f}-{band.high:.0f} t/s" if band else "-")
    table.add_row(f"[bold]worst {rp.resident} resident[/]", "", f"[bold]{_gib(rp.gpu_worst)}[/]",
                  f"[bold]{_gib(rp.ram_worst)}[/]", "", "")
    table.add_row("free", "", _gib(rp.gpu_free), _gib(rp.ram_available), "", "")
    console.print(table)
    console.print("[green]fits[/]" if rp.fits else "[bold red]does not fit[/]")
    console.print()
    console.print(f"[bold]preset file[/] ({escape(preset_file)})")
    console.print(escape(render_router_preset(launch)))
    console.print("[bold]command[/]")
    console.print(escape(render_shell(launch)))
    from tunehost.cli.layout import print_folded

    for w in (*rp.warnings, *(f"{n}: {w}" for n, p in zip(rp.names, rp.plans) for w in p.warnings)):
        print_folded(console, w, "WARN ", " " * 5, first_style="yellow")
    for n in dict.fromkeys((*rp.notes, *(n for p in rp.plans for n in p.notes))):
        print_folded(console, n, "note ", " " * 5, style="dim", first_style="dim")


# ---- Ollama ----
# Names and defaults checked in ollama/ollama fb30760 (2026-08-21): envconfig/config.go (OLLAMA_FLASH_ATTENTION
# BoolWithDefault, OLLAMA_KV_CACHE_TYPE "" = f16, OLLAMA_NUM_PARALLEL 1, OLLAMA_MAX_LOADED_MODELS 0 = automatic),
# api/types.go Runner (num_ctx, num_gpu -1 = automatic, num_thread 0 = automatic, use_mmap), llm/llama_server.go
# (-c num_ctx x num_parallel, -np num_parallel, -ngl only when num_gpu > 0 or == 0, --load-mode none for use_mmap
# false, one KV type for K and V).
OLLAMA_DROPIN = "/etc/systemd/system/ollama.service.d/tunehost.conf"
OLLAMA_DROPIN_FILE = "tunehost.conf"


def render_ollama(p: "LaunchConfig") -> str:
    """An ollama.service drop-in (environment, CPU affinity) and a Modelfile per model carrying the same plan, as
    one text: each file under a `# ---- NAME (then: ...) ----` line; `--write DIR` writes them as files."""
    dropin, modelfiles, notes = ollama_files(p)
    lines = [f"# ---- {OLLAMA_DROPIN} (then: systemctl daemon-reload && systemctl restart ollama) ----",
             dropin.rstrip("\n")]
    for slug, text in modelfiles:
        lines += ["", f"# ---- Modelfile.{slug} (then: ollama create {slug} -f Modelfile.{slug}) ----",
                  text.rstrip("\n")]
    if notes:
        lines.append("")
        lines += [f"# note: {one_line(n)}" for n in notes]
    return "\n".join(lines) + "\n"


def ollama_files(p: "LaunchConfig") -> tuple[str, list[tuple[str, str]], list[str]]:
    """The ollama.service drop-in, one (name, Modelfile) per model (the name an Ollama model name, unique, safe as
    a file-name part: tunehost.advise.artifacts.model_slug) and what Ollama cannot carry."""
    from tunehost.advise.artifacts import unique_slugs
    from tunehost.cpulist import format_cpu_list

    configs = p.model_configs()
    first = configs[0]
    notes: list[str] = []
    env: list[tuple[str, str]] = []
    fa = first.value("-fa") if first.flag("-fa") else None
    if first.flag("-fa"):
        env.append(("OLLAMA_FLASH_ATTENTION", "0" if fa == "off" else "1"))
    ctk, ctv = first.value("-ctk"), first.value("-ctv")
    if ctk:
        env.append(("OLLAMA_KV_CACHE_TYPE", ctk))
        if ctv and ctv != ctk:
            notes.append(f"Ollama sets one KV type for K and V: {ctk} (the plan has V {ctv})")
    env.append(("OLLAMA_NUM_PARALLEL", first.value("-np") or "1"))
    models_max = p.value("--models-max") if p.models else "1"
    if models_max == "0":  # llama-server: 0 = unlimited; Ollama: 0 = its own automatic choice
        models_max = str(len(p.models))
    env.append(("OLLAMA_MAX_LOADED_MODELS", models_max or "1"))
    for e in p.env:
        env.append((e.name, e.value or ""))
    dropin = ["# written by tunehost advise --format ollama", "[Service]"]
    for name, value in env:
        dropin.append(f"Environment={_systemd_quote(f'{name}={value}')}")
    pins = p.pin_cpus or first.pin_cpus
    if pins:
        dropin.append(f"CPUAffinity={format_cpu_list(pins)}")
    slugs = unique_slugs([m.name if p.models and m.name else Path(m.model).name.replace(".gguf", "")
                          for m in configs])
    modelfiles: list[tuple[str, str]] = []
    for m, name in zip(configs, slugs):
        lines = [f"FROM {require_printable(m.model, 'a model path')}"]
        c, np_ = m.value("-c"), m.value("-np") or "1"
        if c:
            per_slot = int(c) // max(1, int(np_))
            lines.append(f"PARAMETER num_ctx {per_slot}")  # Ollama passes -c num_ctx x OLLAMA_NUM_PARALLEL
        if m.flag("--n-cpu-moe") or any(f.name == "-ot" for f in m.flags):
            notes.append(f"{name}: Ollama has no --n-cpu-moe / -ot; num_gpu is left unset so llama-server's own "
                         "fit (on by default) places the experts")
        elif m.value("-ngl") is not None:
            lines.append(f"PARAMETER num_gpu {m.value('-ngl')}")
        if m.value("-t"):
            lines.append(f"PARAMETER num_thread {m.value('-t')}")
        if m.flag("--no-mmap") or m.value("--load-mode") in ("none", "mlock"):
            lines.append("PARAMETER use_mmap false")
        if m.flag("--mlock") or m.value("--load-mode") in ("mlock", "mmap+mlock"):
            notes.append(f"{name}: Ollama has no mlock option; the weights may be paged out under memory pressure")
        if m.flag("-mm") or m.flag("-md"):
            notes.append(f"{name}: the vision projector / draft model are not carried into the Modelfile")
        modelfiles.append((name, "\n".join(lines) + "\n"))
    return "\n".join(dropin) + "\n", modelfiles, list(dict.fromkeys(notes))


def _gib(n: int | None) -> str:
    from tunehost.advise.plan import gib

    return "-" if n is None else gib(n)


def render_human(p: "Plan", console: "Console", *, snapshot: str | None = None, measured: str | None = None) -> None:
    """The budget table, the command, each flag's reason, then warnings and notes (folded to the console's width)."""
    from rich.markup import escape
    from rich.table import Table

    from tunehost.cli.layout import print_folded

    where = f"snapshot {snapshot}" if snapshot else "this host (live)"
    print_folded(console, one_line(f"{p.model_name or Path(p.model).name} on {where}"), "tunehost advise — ", "  ",
                 first_style="bold")
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
        print_folded(console, describe(c), "", "  ")
        if c.tokens_per_s is not None:
            print_folded(console, c.note, "", "  ", style="dim")
    if measured:
        print_folded(console, measured, "", "  ")
    console.print()
    console.print("[bold]command[/]")
    console.print(escape(render_shell(p.launch())))
    console.print()
    if p.pin_cpus:
        from tunehost.cpulist import format_cpu_list

        print_folded(console, p.pin_reason, f"  taskset -c {format_cpu_list(p.pin_cpus)}  ", " " * 4,
                     first_style="cyan")
    for e in p.env:
        print_folded(console, e.reason, one_line(f"  {e.name}={e.value or ''}  "), " " * 4, first_style="cyan")
    for f in p.flags:  # each flag with its reason, folded under it to the terminal's width
        shown = " ".join(f.argv()) if f.name not in ("-m", "-mm", "-md") else f.name
        print_folded(console, f.reason, one_line(f"  {shown}  "), " " * 4, first_style="cyan")
    for text, flags in p.alternatives:
        console.print()
        print_folded(console, f"{text} {' '.join(a for f in flags for a in f.argv())}", "alternative: ", "  ",
                     first_style="bold")
    for w in p.warnings:
        print_folded(console, w, "WARN ", " " * 5, first_style="yellow")
    for s in p.suggestions:
        print_folded(console, s, "try  ", " " * 5, first_style="cyan")
    for n in p.notes:
        print_folded(console, n, "note ", " " * 5, style="dim", first_style="dim")


def _dimm_peak(facts):
    """What the configured DIMMs allow (for the TG ceiling's RAM part); None when the modules are unknown."""
    from tunehost.facts.ram import RamFacts
    from tunehost.facts.memory_layout import dimm_peak

    try:
        return dimm_peak(facts.get(RamFacts))
    except Exception:  # the ceiling is context: unknown DIMMs must not stop advise
        return None
