"""`advise` as an operation: the llama-server plan for one model (or a router of several) on one host.

The CLI opens the host once (live, or a snapshot) and builds its HostFacts once; `advise` reads everything else
through them: the llama-server build's options, the RAM bandwidth (measured now, or the snapshot's), this host's
runs in the results store (by the facts' identity), llama-fit-params, and the unit's access check. It returns an
`Advice` and never prints: the formats room (tunehost.formats) renders it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunehost.advise.flags import ServerCaps
    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import AdviseOptions, Plan
    from tunehost.advise.router import RouterPlan
    from tunehost.advise.unit_access import UnitCheck, UnitKind
    from tunehost.facts import HostFacts
    from tunehost.host import Host
    from tunehost.launch import LaunchConfig
    from tunehost.store.records import Measured


@dataclass(frozen=True)
class PresetFile:
    """Router mode: where the --models-preset file will be (an absolute path: a unit has no working directory),
    whether it is not there yet (created), and whether --write DIR writes it beside the unit (written)."""

    path: str
    created: bool = False
    written: bool = False


@dataclass(frozen=True)
class AdviseRequest:
    """What to plan, as the CLI parsed and validated it: paths as given, sizes already read."""

    models: tuple[Path, ...] = ()
    models_dir: Path | None = None  # router mode: every model llama-server would find there
    ctx: int | None = None  # per slot
    parallel: int = 1
    mmproj: Path | None = None
    mmproj_bytes: int = 0
    draft: Path | None = None
    spec: str | None = None  # "mtp" | "draft"
    spec_draft_n_max: int | None = None
    models_max: int | None = None
    reserve_vram_mib: int = 0
    preset: PresetFile | None = None  # router mode
    llama_server: str | None = None
    cpus: str | None = None
    host_addr: str | None = None
    api_key_file: Path | None = None
    no_probe: bool = False
    unit: "UnitKind | None" = None  # --format systemd: the unit to check before it is handed out
    snapshot: Path | None = None  # the snapshot the caller opened (None: this host, live), named in the report
    # the output format's refusals (tunehost.formats.refuse_unwritable), run on the launch before the unit's check
    writable: "Callable[[LaunchConfig], None] | None" = None
    runtime: str = "llama.cpp"  # --format ollama: "ollama", whose share of llama.cpp's speed the TG band applies

    @property
    def router(self) -> bool:
        return len(self.models) > 1 or self.models_dir is not None


@dataclass(frozen=True)
class Advice:
    """advise's result: one model's Plan or the router's plan, the launch configuration either ends in, what this
    host measured for the model, and what the snapshot could not give."""

    launch: "LaunchConfig"
    plan: "Plan | None" = None
    router: "RouterPlan | None" = None
    preset_file: str | None = None  # router mode
    measured: "Measured | None" = None  # this host's own TG for the model (tunehost bench/tune recorded it)
    unit_check: "UnitCheck | None" = None  # --format systemd: who the unit runs as and what it can reach
    refusals: tuple[str, ...] = ()  # what the plan could not use from the snapshot (one model)
    snapshot: str | None = None

    @property
    def fits(self) -> bool:
        chosen = self.router if self.router is not None else self.plan
        return bool(chosen is not None and chosen.fits)

    @property
    def measured_text(self) -> str | None:
        return self.measured.text(self._ceiling_ts) if self.measured else None

    @property
    def _ceiling_ts(self) -> float | None:
        c = self.plan.ceiling if self.plan is not None else None
        return c.tokens_per_s if c is not None else None

    def to_json(self) -> dict[str, Any]:
        """The plan's JSON (tunehost advise --format json), the typed launch configuration, where it was planned."""
        if self.router is not None:
            data = self.router.to_json()
            data["launch"] = self.launch.to_json()
            data["snapshot"] = self.snapshot
            return data
        assert self.plan is not None
        data = self.plan.to_json()
        data["launch"] = self.launch.to_json()  # the typed launch configuration bench and tune read back
        data["snapshot"] = self.snapshot
        data["measured"] = self.measured.to_json(self._ceiling_ts) if self.measured else None
        return data


@dataclass(frozen=True)
class _Inputs:
    """What every model's plan shares: the host view, the build's options, the options common to every model."""

    view: "HostView"
    caps: "ServerCaps | None"
    common: dict[str, Any]
    recorded: list[Any] | None  # this host's runs in the results store (live hosts only)
    co_resident: tuple[Any, ...] = ()  # tunehost.advise.router.CoResident: inference servers beside the plan


def advise(host: "Host", facts: "HostFacts", request: AdviseRequest) -> Advice:
    """The plan for `request` on `host` (whose facts the caller built once). Reads through `host` only."""
    request = _named_server(facts, request)
    inputs = _inputs(host, facts, request)
    if request.router:
        return _advise_router(host, inputs, request)
    return _advise_one(host, inputs, request)


def _named_server(facts: "HostFacts", request: AdviseRequest) -> AdviseRequest:
    """--llama-server PATH on the live host: that very file (a path with a slash made absolute, so neither a run
    nor the unit looks it up on PATH), and no other llama-server is run, not even `--version`."""
    named = request.llama_server
    if not named or "/" not in named or not facts.live or facts.host is None:
        return request
    import os
    from dataclasses import replace

    from tunehost.facts.llama import LlamaBuildFacts

    named = os.path.abspath(os.path.expanduser(named))
    facts.provide(LlamaBuildFacts.gather_named(facts.host, {"llama-server": named}))
    return replace(request, llama_server=named)


def _inputs(host: "Host", facts: "HostFacts", request: AdviseRequest) -> _Inputs:
    from tunehost.advise.flags import fit_supported, read_caps
    from tunehost.advise.host_view import HostView

    view = HostView.from_facts(facts, llama_server=request.llama_server)
    if request.cpus is not None:
        view = view.with_cpus(request.cpus)
    server = view.llama_server or "llama-server"
    caps = read_caps(host, view.llama_server)
    api_key_file = request.api_key_file
    common: dict[str, Any] = dict(
        ctx=request.ctx, parallel=request.parallel, host_addr=request.host_addr, server=server,
        fit_option=fit_supported(caps), api_key_file=str(api_key_file.expanduser().resolve()) if api_key_file else None,
        ram_peak=_dimm_peak(facts), spec_draft_n_max=request.spec_draft_n_max, runtime=request.runtime)
    if not host.live or not request.no_probe:
        gbps, why, busy = ram_bandwidth(host)
        common.update(ram_bandwidth_gbps=gbps, ram_bandwidth_note=why, host_busy=busy)
    recorded = None  # this host's runs in the results store, read once (docs/history.md)
    if host.live:  # its own bench/tune runs set the speed band where they cover the class
        from tunehost.store import host_calibration, runs_on_host

        recorded = runs_on_host(facts)
        common.update(host_calibration=host_calibration(runs=recorded))
    from tunehost.advise.router import co_resident
    from tunehost.facts.processes import ProcessFacts

    found = co_resident(view, facts.get(ProcessFacts))  # servers beside the plan on its GPU, from the samples
    return _Inputs(view, caps, common, recorded, found)


def _advise_one(host: "Host", inputs: _Inputs, request: AdviseRequest) -> Advice:
    from tunehost.advise.plan import AdviseOptions
    from tunehost.model import read_model

    model, draft, mmproj = request.models[0], request.draft, request.mmproj
    facts_model = read_model(model)
    draft_model = read_model(draft) if draft else None
    view = inputs.view
    if request.reserve_vram_mib:
        from tunehost.advise.router import reserve_vram as keep

        view = keep(view, request.reserve_vram_mib * 1024 * 1024)
    rope, vocab_problems = _gguf_checks(facts_model, draft_model)
    options = AdviseOptions(model_path=str(model.expanduser().resolve()), rope_scaling=rope,
                            draft_vocab_problems=vocab_problems,
                            mmproj=str(mmproj.expanduser().resolve()) if mmproj else None,
                            mmproj_bytes=request.mmproj_bytes,
                            draft=str(draft.expanduser().resolve()) if draft else None, draft_model=draft_model,
                            spec=request.spec, **inputs.common)
    result = _plan_with_probe(host, view, inputs.caps, facts_model, options, request.no_probe)
    if request.reserve_vram_mib:
        result = _note(result, f"{request.reserve_vram_mib} MiB of VRAM kept for other servers on the GPU "
                               "(--reserve-vram)")
    if inputs.co_resident:
        from tunehost.advise.router import co_resident_notes

        warned, said = co_resident_notes(inputs.co_resident, request.reserve_vram_mib * 1024 * 1024)
        result = replace(result, warnings=result.warnings + tuple(warned), notes=result.notes + tuple(said))
    measured = None
    if inputs.recorded is not None:  # what this box measured for this model (tunehost bench/tune record it)
        from tunehost.store import measured_on_host

        measured = measured_on_host(options.model_path, runs=inputs.recorded)
    launch = result.launch()
    if request.writable is not None:
        request.writable(launch)
    return Advice(launch=launch, plan=result, measured=measured, unit_check=_unit_check(host, launch, request),
                  refusals=tuple(host.refusals), snapshot=_where(request))


def _advise_router(host: "Host", inputs: _Inputs, request: AdviseRequest) -> Advice:
    """Router mode: one plan per model, any --models-max of them resident together (tunehost.advise.router)."""
    from tunehost.advise.plan import AdviseOptions, apply_caps, plan
    from tunehost.advise.router import (DEFAULT_MODELS_MAX, PRESET_FILE, LocalModel, model_name, plan_router,
                                        scan_models_dir)
    from tunehost.inputs import input_file_size
    from tunehost.model import read_model

    local = scan_models_dir(request.models_dir) if request.models_dir is not None else []
    local += [LocalModel(model_name(m), str(m)) for m in request.models]
    facts_models = [read_model(m.path) for m in local]
    common, caps = inputs.common, inputs.caps
    opts = [AdviseOptions(model_path=str(Path(m.path).expanduser().resolve()), mmproj=m.mmproj,
                          mmproj_bytes=input_file_size(Path(m.mmproj), "a GGUF file") if m.mmproj else 0, **common)
            for m in local]
    models_max = DEFAULT_MODELS_MAX if request.models_max is None else request.models_max
    rp = plan_router([m.name for m in local], lambda i, h: apply_caps(plan(facts_models[i], h, opts[i]), caps),
                     inputs.view, models_max, request.reserve_vram_mib * 1024 * 1024,
                     models_dir=str(request.models_dir.expanduser().resolve()) if request.models_dir else None,
                     plan_ctx=lambda i, h, c: apply_caps(plan(facts_models[i], h, replace(opts[i], ctx=c)), caps),
                     co_resident_found=inputs.co_resident)
    preset_file = request.preset.path if request.preset is not None else PRESET_FILE
    launch = rp.launch(common["server"], preset_file)
    if request.writable is not None:  # what the format cannot write is one error before the unit's check
        request.writable(launch)
    check = _unit_check(host, launch, request) if request.unit is not None else None
    return Advice(launch=launch, router=rp, preset_file=preset_file, unit_check=check, snapshot=_where(request))


def _where(request: AdviseRequest) -> str | None:
    return str(request.snapshot) if request.snapshot else None


def _unit_check(host: "Host", launch: "LaunchConfig", request: AdviseRequest) -> "UnitCheck | None":
    """--format systemd: whether the unit's account reaches every path it names (check_unit), before it is
    rendered; a router's preset as the caller found its place (created, or written by --write DIR)."""
    if request.unit is None:
        return None
    from tunehost.advise.unit_access import check_unit

    preset = request.preset or PresetFile("")
    return check_unit(host, launch, request.unit, preset_created=preset.created, preset_written=preset.written)


def ram_bandwidth(host: "Host") -> tuple[float | None, str | None, bool]:
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


def _dimm_peak(facts: "HostFacts") -> Any:
    """What the configured DIMMs allow (for the TG ceiling's RAM part); None when the modules are unknown."""
    from tunehost.facts.memory_layout import dimm_peak
    from tunehost.facts.ram import RamFacts

    try:
        return dimm_peak(facts.get(RamFacts))
    except Exception:  # the ceiling is context: unknown DIMMs must not stop advise
        return None


def _gguf_checks(model: Any, draft: Any) -> tuple[str | None, tuple[str, ...]]:
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


def _plan_with_probe(host: "Host", view: "HostView", caps: "ServerCaps | None", facts_model: Any,
                     options: "AdviseOptions", no_probe: bool) -> "Plan":
    """plan(), then llama-fit-params' placement where it can answer, then the build's spellings."""
    from tunehost.advise.flags import fit_params_path, help_crash, run_fit_params
    from tunehost.advise.plan import FitPlacement, apply_caps, plan

    first = plan(facts_model, view, options)  # validates, and says whether a GPU placement is needed
    if first.path in ("gpu", "moe", "split") and not no_probe:
        fit_bin = fit_params_path(host, view.llama_server)
        if fit_bin:
            probe, why = run_fit_params(host, fit_bin, fit_args(options.model_path, first))
            if probe is not None:
                options = replace(options, fit=FitPlacement(probe.gpu_layers, probe.cpu_expert_layers,
                                                            probe.overrides, probe.command, probe.tensor_split))
            else:
                options = replace(options, fit_note=f"placement is tunehost's estimate: {why}")
    result = apply_caps(plan(facts_model, view, options), caps)
    if host.live and not no_probe:  # llama.cpp's own memory estimate beside tunehost's
        result = _with_estimate(host, fit_params_path(host, view.llama_server), options.model_path, result)
    if caps is None and view.llama_server:
        crash = help_crash(host, view.llama_server)
        result = _note(result, f"could not read `{view.llama_server} --help`"
                               f"{f' ({crash})' if crash else ''}: flags assume a current llama.cpp build")
    return result


def _note(p: "Plan", text: str) -> "Plan":
    return replace(p, notes=p.notes + (text,))


def _with_estimate(host: "Host", fit_bin: str | None, model_path: str, result: "Plan") -> "Plan":
    """llama.cpp's own memory estimate for the finished plan's flags beside tunehost's budget (live hosts only)."""
    from tunehost.advise.flags import compare_estimate, run_fit_print

    if not fit_bin:
        return result
    args = fit_args(model_path, result)[:-2]  # the placement is the plan's: no fitting, so no -fitt
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


def fit_args(model_path: str, p: "Plan") -> list[str]:
    """llama-fit-params arguments that pin what the plan decided (it only fits what is left unset)."""
    from tunehost.advise.memory import HEADROOM_MMPROJ, HEADROOM_TEXT, MiB, ServerSettings

    margin = (HEADROOM_MMPROJ if p.value("-mm") else HEADROOM_TEXT) // MiB
    default = ServerSettings()  # llama.cpp's -b/-ub where the plan states none
    return ["-m", model_path, "-c", str(p.ctx * p.parallel), "-np", str(p.parallel), "-fa", "on",
            "-ctk", p.kv_type, "-ctv", p.kv_type, "-b", p.value("-b") or str(default.n_batch),
            "-ub", p.value("-ub") or str(default.n_ubatch),
            "-fitt", str(margin)]
