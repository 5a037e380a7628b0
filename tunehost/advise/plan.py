"""The llama-server command line for one model on one host: pure, from ModelFacts + HostView + AdviseOptions.

Placement paths (`Plan.path`):
  gpu        everything fits in the free VRAM of the chosen discrete GPU: -ngl 99
  moe        a MoE that does not fit: attention, router and shared experts on the GPU, the routed experts of the
             first N layers in RAM: --n-cpu-moe N (fit_moe); the CPU part must fit MemAvailable
  split      a dense model (or a MoE whose attention alone does not fit): -ngl k (fit_layers), with its cost
  unified    an APU / Strix Halo: the GPU uses system RAM, so -ngl 99 is budgeted against carve-out + RAM
  cpu        no usable GPU: everything in RAM
`Plan.source` says whether the placement is tunehost's estimate or llama-fit-params' answer ("probe").

Rules for each flag are in the reasons the planner writes; docs/advise.md lists them with their llama.cpp
references.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from tunehost.advise.ceiling import (NGL_ALL, Bandwidths, Ceiling, KvRead, Placement, discrete_vram, gpu_bandwidth,
                                     tg_ceiling_for, with_soc_memory)
from tunehost.advise.host_view import GpuView, HostView, why_no_prio
from tunehost.advise.memory import (HEADROOM_MMPROJ, HEADROOM_TEXT, MemoryBudget, ServerSettings, context_detail,
                                    fit_layers, fit_moe, kv_cache_bytes, kv_read_per_layer, kv_type_fits, layer_budget,
                                    moe_budget, mtp_kv_bytes)
from tunehost.cpulist import format_cpu_list
from tunehost.errors import TunehostError
from tunehost.launch import Flag, LaunchConfig
from tunehost.model import ModelFacts

MiB = 1024 * 1024
GiB = 1024 * MiB
DEFAULT_CTX = 32768  # per slot, when --ctx is not given (llama.cpp's own default is the trained context)
MIN_SUGGESTED_CTX = 2048
RAM_SPARE = 1 * GiB  # left to the OS before --no-mmap/--mlock are advised
GRAPH_OPT_SPARE = 512 * MiB  # VRAM left beyond the plan before GGML_CUDA_GRAPH_OPT=1 is advised
MIN_CPU_WEIGHTS_FOR_MLOCK = 256 * MiB
SPEC_DRAFT_N_MAX = 3  # --spec-draft-n-max default (common/common.h): MTP keeps that many recurrent-state snapshots
SPEC_KINDS = ("mtp", "draft", "ngram")  # advise --spec: MTP heads (own or a companion GGUF), a draft model, n-grams
NGRAM_MOD_TABLE_BYTES = 4 * 1024 * 1024 * 4  # ngram-mod's hash table: 4 Mi llama_token entries (speculative.cpp)

# ---- inputs and outputs ----


@dataclass(frozen=True)
class FitPlacement:
    """llama-fit-params' placement (see tunehost.advise.flags.FitProbe), as the planner uses it."""

    gpu_layers: int  # -1 = all
    cpu_expert_layers: tuple[int, ...] | None = None  # routed experts kept in RAM, when that is all it overrides
    overrides: tuple[str, ...] = ()
    command: str = ""
    tensor_split: str | None = None  # -ts A,B: how it shared the layers among several GPUs


@dataclass(frozen=True)
class AdviseOptions:
    model_path: str
    ctx: int | None = None  # per slot; None: min(trained, DEFAULT_CTX)
    parallel: int = 1
    mmproj: str | None = None
    mmproj_bytes: int = 0
    draft: str | None = None
    draft_model: ModelFacts | None = None
    spec: str | None = None  # "mtp" | "draft" | "ngram" (SPEC_KINDS)
    host_addr: str | None = None
    api_key_file: str | None = None  # llama-server --api-key-file: clients must send one of its keys
    server: str = "llama-server"
    ram_bandwidth_gbps: float | None = None  # measured now, or by the snapshot's doctor run
    ram_peak: Any = None  # tunehost.facts.memory_layout.DimmPeak: what the configured DIMMs allow
    ram_bandwidth_note: str | None = None  # why no RAM bandwidth was measured (a busy host: what was running)
    host_busy: bool = False  # the live host was busy: ram_bandwidth_note says with what
    spec_draft_n_max: int | None = None  # llama-server --spec-draft-n-max (was --draft-max)
    rope_scaling: str | None = None  # the GGUF's RoPE scaling ("yarn x4 from 32768"): a --ctx above training is kept
    draft_vocab_problems: tuple[str, ...] = ()  # tunehost.advise.vocab.compare(target, draft)
    fit: FitPlacement | None = None  # llama-fit-params' answer
    fit_note: str | None = None  # why llama-fit-params was not used
    fit_option: bool = False  # this llama-server has --fit / --fit-target / --fit-ctx
    host_calibration: Any = None  # tunehost.advise.host_calibration.HostCalibration: what this host measured
    runtime: str = "llama.cpp"  # llama.cpp | ollama (--format ollama): the TG band's runtime share


@dataclass(frozen=True)
class BudgetRow:
    label: str
    gpu: int
    ram: int
    detail: str = ""


@dataclass(frozen=True)
class PlanBudget:
    """Bytes per item on the GPU and in RAM, against what is free. On unified memory `gpu` is GPU-mapped RAM."""

    rows: tuple[BudgetRow, ...]
    gpu_free: int | None
    ram_available: int | None
    gpu_label: str | None

    @property
    def gpu_total(self) -> int:
        return sum(r.gpu for r in self.rows)

    @property
    def ram_total(self) -> int:
        return sum(r.ram for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"rows": [{"label": r.label, "gpu_bytes": r.gpu, "ram_bytes": r.ram, "detail": r.detail}
                         for r in self.rows],
                "gpu_total_bytes": self.gpu_total, "ram_total_bytes": self.ram_total,
                "gpu_free_bytes": self.gpu_free, "ram_available_bytes": self.ram_available, "gpu": self.gpu_label}


@dataclass(frozen=True)
class Shortfall:
    """Why a plan does not fit: the memory it overflows ("VRAM" | "RAM" | "unified memory"), the bytes it needs
    there and the bytes free, and the line that says so."""

    memory: str
    needed: int
    free: int
    text: str


@dataclass(frozen=True)
class Plan:
    """One model's plan: how llama-server is started (`launch_config`: model, flags, environment, pinning,
    priority, --mlock blocked by the limit), and why: placement, budget, ceiling, warnings, notes."""

    launch_config: LaunchConfig
    path: str  # gpu | moe | split | unified | cpu
    source: str  # estimate | probe
    ctx: int  # per slot
    parallel: int
    kv_type: str
    pin_reason: str
    budget: PlanBudget
    ceiling: Ceiling | None
    mlock_fix: str | None = None  # how to raise the memlock limit when it blocks --mlock (launch_config.mlock_wanted)
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    suggestions: tuple[str, ...] = ()
    alternatives: tuple[tuple[str, tuple[Flag, ...]], ...] = ()
    shortfalls: tuple[Shortfall, ...] = ()  # why it does not fit (none: it fits)
    # the same ceiling when a slot's context is full: each token then also reads `ctx` tokens of KV cache
    ceiling_full: Ceiling | None = None

    @property
    def fits(self) -> bool:
        return not self.shortfalls

    # the launch configuration's parts, read where the plan is shown
    model = property(lambda self: self.launch_config.model)
    model_name = property(lambda self: self.launch_config.name)
    flags = property(lambda self: self.launch_config.flags)
    env = property(lambda self: self.launch_config.env)
    pin_cpus = property(lambda self: self.launch_config.pin_cpus)
    nice = property(lambda self: self.launch_config.nice)
    mlock_wanted = property(lambda self: self.launch_config.mlock_wanted)
    server = property(lambda self: self.launch_config.server)

    def flag(self, name: str) -> Flag | None:
        return self.launch_config.flag(name)

    def value(self, name: str) -> str | None:
        return self.launch_config.value(name)

    def argv(self) -> list[str]:
        return self.launch_config.argv()

    def launch(self) -> LaunchConfig:
        """The typed launch configuration every renderer, bench and tune consume."""
        return self.launch_config

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "model_name": self.model_name, "path": self.path, "placement_source": self.source,
            "fits": self.fits, "ctx_per_slot": self.ctx, "parallel": self.parallel, "kv_type": self.kv_type,
            "server": self.server, "flags": [f.to_json() for f in self.flags], "env": [e.to_json() for e in self.env],
            "cpu_affinity": format_cpu_list(self.pin_cpus) if self.pin_cpus else None,
            "cpu_affinity_reason": self.pin_reason, "nice": self.nice,
            "mlock_blocked_by_limit": self.mlock_wanted, "mlock_fix": self.mlock_fix,
            "budget": self.budget.to_json(), "ceiling": self.ceiling.to_json() if self.ceiling else None,
            "ceiling_full_context": self.ceiling_full.to_json() if self.ceiling_full else None,
            "warnings": list(self.warnings), "notes": list(self.notes), "suggestions": list(self.suggestions),
            "alternatives": [{"text": t, "flags": [f.to_json() for f in fl]} for t, fl in self.alternatives],
            "argv": self.argv(),
        }


@dataclass(frozen=True)
class PlacementChoice:
    """Where the layers go (ceiling.Placement: path, -ngl, --n-cpu-moe), the memory budget behind it, the -ot
    overrides llama-fit-params computed, and who decided (estimate | probe)."""

    placement: Placement
    budget: MemoryBudget
    overrides: tuple[str, ...] = ()
    source: str = "estimate"

    @property
    def path(self) -> str:
        return self.placement.path


@dataclass(frozen=True)
class PlannedLaunch:
    """_flags' answer: the launch configuration, why it is pinned where it is, and how to lift a memlock limit
    that keeps --mlock out (None when nothing blocks it)."""

    config: LaunchConfig
    pin_reason: str
    mlock_fix: str | None


@dataclass(frozen=True)
class PlanContext:
    """What every step of one plan() reads: the model, the host, the options, the server settings, the GPU the
    plan is made on (None: the CPU) with the VRAM the extras (draft, MTP, projector) take beside the model, the
    speculative decoding kind and the context per slot."""

    model: ModelFacts
    host: HostView
    options: AdviseOptions
    settings: ServerSettings
    gpu: GpuView | None
    extra_gpu: int
    spec: str | None
    ctx: int
    spec_n_max: int | None = None  # --spec-draft-n-max written (yours, or by model size); None: not a draft kind


def gib(n: int | float) -> str:
    return f"{n / GiB:.1f} GiB"


# ---- the planner ----


def plan(model: ModelFacts, host: HostView, options: AdviseOptions) -> Plan:
    """Every llama-server flag for `model` on `host`, with the memory budget behind the placement. Pure."""
    _validate(model, options)
    warnings: list[str] = list(host.cpu_warnings)
    notes: list[str] = list(host.notes)
    spec = options.spec or ("draft" if options.draft else None)
    companion = is_mtp_companion(options.draft_model)
    if companion:  # a -md GGUF of NextN/MTP blocks: llama.cpp drafts with it as draft-mtp, never draft-simple
        spec = "mtp"
    n_max = spec_draft_n_max(model, options, spec, companion)
    trained = model.context_length
    ctx = options.ctx or min(trained or DEFAULT_CTX, DEFAULT_CTX)
    if trained and ctx > trained:
        if options.rope_scaling:
            warnings.append(f"--ctx {ctx} is larger than the context {model.name or 'the model'} declares "
                            f"({trained}); kept, because the GGUF declares RoPE scaling ({options.rope_scaling}), "
                            "which llama.cpp applies; quality beyond the trained length is the scaling's")
        else:
            warnings.append(f"--ctx {ctx} is larger than the context {model.name or 'the model'} was trained for "
                            f"({trained}) and the GGUF declares no RoPE scaling: clamped to {trained} (past it "
                            "the model produces garbage; a GGUF converted with YaRN/linear scaling allows more)")
            ctx = trained
    if options.draft_vocab_problems and not companion:
        warnings.append(f"--draft {options.draft}: its vocabulary is not the target's, so llama-server refuses to "
                        "start with it (common/speculative.cpp: \"the target and draft vocabs are not compatible\"): "
                        + "; ".join(options.draft_vocab_problems[:3]) + ". Use a draft from the same model family")
    kv_type = "f16" if spec in ("mtp", "draft") or not kv_type_fits(model, "q8_0") else "q8_0"
    # llama.cpp keeps --spec-draft-n-max recurrent-state snapshots per sequence for MTP (common.h need_n_rs_seq)
    settings = ServerSettings(n_ctx=ctx * options.parallel, n_parallel=options.parallel, type_k=kv_type,
                              type_v=kv_type, flash_attn=True,
                              mmproj=bool(options.mmproj), n_rs_seq=(n_max or 0) if spec == "mtp" else 0)
    extras = _extras(model, options, settings, spec)
    extra_gpu = sum(r.gpu for r in extras)

    gpu, why_no_gpu = _choose_gpu(host)
    if why_no_gpu:
        notes.append(why_no_gpu)
    c = PlanContext(model, host, options, settings, gpu, extra_gpu, spec, ctx, n_max)
    choice = _place(c, warnings, notes)
    path, budget = choice.path, choice.budget

    ram_need = budget.cpu_total + sum(r.ram for r in extras)
    gpu_need = budget.gpu_total + extra_gpu
    pool_free = _unified_pool(gpu, host) if path == "unified" and gpu is not None else None
    shortfalls = _shortfalls(path, gpu, host, (gpu_need, ram_need), pool_free)
    warnings.extend(s.text for s in shortfalls if s.memory != "VRAM")  # (VRAM: the placement's warning says so)
    fits = not shortfalls

    if model.memory_note:
        notes.append(model.memory_note)
    budget_view = _budget_view(c, budget, extras, path, pool_free)
    suggestions = _suggestions(c, path, fits)
    launch = _flags(c, choice, warnings, notes)
    alternatives = ()
    if options.fit_option and gpu is not None and path in ("gpu", "moe", "split"):
        margin = max(1, (HEADROOM_MMPROJ if options.mmproj else HEADROOM_TEXT) // MiB)
        alternatives = ((
            "let llama-server place the layers itself at start-up, against the memory free then: this build fits "
            "by default (--fit on), but only what is left unset, and an explicit -ngl (or -ot) stops it placing "
            "layers (common/fit.cpp). Drop -ngl/--n-cpu-moe and write", (
                Flag("--fit", "on", "llama.cpp's default, stated: adjust the unset placement options to the free "
                                    "device memory"),
                Flag("--fit-target", str(margin), f"leave {margin} MiB free per device"),
                Flag("--fit-ctx", str(ctx * options.parallel), "never shrink the context below this"),
            )),)
    if options.fit_note:
        notes.append(options.fit_note)
    if spec:
        notes.append("speculative decoding pays only where drafts are accepted: `tunehost bench --serve --draft-ab -- "
                     "llama-server ARGS` (ARGS: the command line above) races it against the same server without "
                     "drafting and reports the acceptance and the net TG speed")
    ceiling = _ceiling(model, choice.placement, gpu, options, host)
    full = _ceiling(model, choice.placement, gpu, options, host, kv=_full_context_kv(model, settings, ctx)) \
        if ceiling is not None else None
    if options.host_busy and options.ram_bandwidth_note:
        basis = ceiling.bandwidths.ram_basis if ceiling is not None else ""
        warnings.append(f"the host is busy, so no RAM bandwidth is taken from it now: {options.ram_bandwidth_note}"
                        + (f". The TG figures use {basis}" if basis else
                           ". The TG figures leave host RAM out (the DIMMs' peak is unknown)")
                        + "; run advise again when the host is idle for a measured figure")
    return Plan(
        launch_config=launch.config, path=path, source=choice.source, ctx=ctx, parallel=options.parallel,
        kv_type=kv_type, pin_reason=launch.pin_reason, budget=budget_view, ceiling=ceiling,
        mlock_fix=launch.mlock_fix, warnings=tuple(warnings), notes=tuple(dict.fromkeys(notes)),
        suggestions=tuple(suggestions), alternatives=alternatives, shortfalls=tuple(shortfalls),
        ceiling_full=full if full is not None and full.kv_bytes else None)


def _full_context_kv(model: ModelFacts, settings: ServerSettings, ctx: int) -> KvRead | None:
    """The KV cache a token reads at the end of a slot's `ctx` tokens, at the plan's cache types; None when the
    model's KV rows do not take them (the plan then says so elsewhere)."""
    try:
        return KvRead(ctx, kv_read_per_layer(model, settings, ctx))
    except ValueError:
        return None


def apply_caps(p: Plan, caps: Any) -> Plan:
    """The plan with its flags adapted to one llama-server build (tunehost.advise.flags.adapt)."""
    from tunehost.advise.flags import adapt

    flags, changes = adapt(p.flags, caps)
    warnings = p.warnings
    host_addr = next((f.value for f in flags if f.name == "--host"), None)
    if p.flag("--api-key-file") and not any(f.name == "--api-key-file" for f in flags) \
            and listens_beyond_loopback(host_addr):  # an old build without the option: exposed after all
        warnings += (exposed_warning(host_addr or ""),)
    return replace(p, launch_config=replace(p.launch_config, flags=flags), notes=p.notes + changes,
                   warnings=warnings)


def _validate(model: ModelFacts, options: AdviseOptions) -> None:
    if options.ctx is not None and options.ctx <= 0:
        raise TunehostError(f"--ctx must be a positive number of tokens, not {options.ctx}")
    if options.parallel <= 0:
        raise TunehostError(f"--parallel must be at least 1, not {options.parallel}")
    if options.spec not in (None, *SPEC_KINDS):
        raise TunehostError(f"--spec must be {', '.join(SPEC_KINDS[:-1])} or {SPEC_KINDS[-1]}, not {options.spec!r}")
    if options.spec == "draft" and options.draft_model is None:
        raise TunehostError("--spec draft needs --draft PATH (the small model that drafts tokens)")
    if options.spec == "mtp" and options.draft and not is_mtp_companion(options.draft_model):
        raise TunehostError(f"--spec mtp --draft {options.draft}: that GGUF has no NextN/MTP tensors, so it is not "
                            "an MTP companion; leave out --draft to use the model's own MTP heads, or use "
                            "--spec draft for an ordinary draft model")
    if options.spec == "ngram" and options.draft:
        raise TunehostError("--spec ngram drafts from the text already in the context: leave out --draft")
    if not model.context_length and not options.ctx:
        raise TunehostError(f"{options.model_path}: the model declares no context length; pass --ctx")


def _extras(model: ModelFacts, options: AdviseOptions, settings: ServerSettings, spec: str | None
            ) -> tuple[BudgetRow, ...]:
    rows = []
    if is_mtp_companion(options.draft_model):
        d = options.draft_model
        assert d is not None
        # the MTP context of a companion runs on its own weights (common.cpp: shares_model = !has_draft), its KV at
        # the draft's cache types (-ctkd/-ctvd, f16 by default: common.h), as large as the main context
        kv = mtp_kv_bytes(d, replace(settings, type_k="f16", type_v="f16", mmproj=False, n_rs_seq=0))
        rows.append(BudgetRow("MTP draft", d.weights.total + kv, 0,
                              f"{d.name or 'companion'}: weights {gib(d.weights.total)} + KV {gib(kv)} (f16)"))
        return (*rows, *_mmproj_row(options))
    mtp_kv = mtp_kv_bytes(model, settings) if spec == "mtp" else 0
    if mtp_kv:
        rows.append(BudgetRow("MTP context", mtp_kv, 0, f"KV of the {model.nextn_layers} NextN block"
                              f"{'s' if model.nextn_layers > 1 else ''} at the same context ({settings.type_k})"))
    if spec == "ngram":
        rows.append(BudgetRow("n-gram table", 0, NGRAM_MOD_TABLE_BYTES, "ngram-mod's hash of the context's n-grams "
                              "(common/speculative.cpp: 4 Mi token entries)"))
    if options.draft_model is not None:
        d = options.draft_model
        kv = kv_cache_bytes(d, replace(settings, mmproj=False))
        rows.append(BudgetRow("draft model", d.weights.total + kv, 0,
                              f"{d.name or 'draft'}: weights {gib(d.weights.total)} + KV {gib(kv)}"))
    return (*rows, *_mmproj_row(options))


def _mmproj_row(options: AdviseOptions) -> tuple[BudgetRow, ...]:
    excess = options.mmproj_bytes - (HEADROOM_MMPROJ - HEADROOM_TEXT) // 2
    if options.mmproj and excess > 0:
        return (BudgetRow("vision projector", excess, 0, "beyond what the 2 GiB vision headroom covers"),)
    return ()


def is_mtp_companion(draft: ModelFacts | None) -> bool:
    """Whether a --draft GGUF is an MTP companion: it carries NextN/MTP tensors (`blk.N.nextn.*`, Gemma 4's
    assistant `nextn.pre_projection`). llama.cpp infers draft-mtp from `blk.{n_layer-1}.nextn.eh_proj.weight`
    (common/speculative.cpp common_speculative_types_from_gguf); the Gemma 4 assistant needs --spec-type said."""
    return draft is not None and any(".nextn." in t.name or t.name.startswith("nextn.") for t in draft.tensors)


def spec_draft_n_max(model: ModelFacts, options: AdviseOptions, spec: str | None, companion: bool) -> int | None:
    """Tokens to draft per step (--spec-draft-n-max) for a draft model or MTP: yours when given, else by size.

    Verifying k drafted tokens is one batch of k+1: nearly free while a token's weights are read from memory
    (a large dense model), dearer where compute or routing grows with the batch (small models; a MoE routes each
    token to other experts). MTP heads lose accuracy per position (one head applied again and again), so llama.cpp's
    default of 3 is the middle: 2 below 8B parameters, 4 for 40B+ dense. A draft model pays for itself when it is
    much smaller than the target: 8 at 20x or more, 5 at 8x, else 3. None for n-gram drafting (--spec-default sets
    ngram-mod's own 48..64) and without speculative decoding."""
    if spec not in ("mtp", "draft"):
        return None
    if options.spec_draft_n_max is not None:
        return options.spec_draft_n_max
    target = model.n_params
    if spec == "draft" and not companion and options.draft_model is not None:
        small = options.draft_model.n_params
        if not target or not small:
            return SPEC_DRAFT_N_MAX
        ratio = target / small
        return 8 if ratio >= 20 else 5 if ratio >= 8 else 3
    if not target:
        return SPEC_DRAFT_N_MAX
    if target < 8e9:
        return 2
    return 4 if target >= 40e9 and not model.is_moe else SPEC_DRAFT_N_MAX


def _n_max_reason(c: "PlanContext", companion: bool) -> str:
    o, model = c.options, c.model
    if o.spec_draft_n_max is not None:
        return "tokens drafted per step, as you asked (--draft-max before llama.cpp renamed it)"
    size = f"{model.n_params / 1e9:.1f}B" if model.n_params else "size unknown"
    if c.spec == "draft" and not companion and o.draft_model is not None and o.draft_model.n_params and model.n_params:
        return (f"tokens drafted per step: the draft is {model.n_params / o.draft_model.n_params:.0f}x smaller than "
                "the target (8 at 20x+, 5 at 8x+, else 3); `tunehost bench --serve --draft-ab` measures it")
    return (f"tokens drafted per step for a {size} {'MoE' if model.is_moe else 'dense'} model (MTP: 2 below 8B, "
            "llama.cpp's 3, 4 for 40B+ dense); `tunehost bench --serve --draft-ab` measures acceptance and net speed")


def _choose_gpu(host: HostView) -> tuple[GpuView | None, str | None]:
    """The GPU to plan on: the discrete GPU with the most free VRAM, else a unified one; (None, why) for none."""
    if host.gpu_backends is not None and not any(b != "CPU" and b not in ("BLAS", "RPC") for b in host.gpu_backends):
        return None, "this llama-server build has no GPU backend: planning for the CPU"
    discrete = [g for g in host.discrete_gpus if g.vendor in ("nvidia", "amd", "intel")]
    known = [g for g in discrete if g.free_bytes is not None]
    if known:
        best = max(known, key=lambda g: g.free_bytes or 0)
        why = None
        if len(discrete) > 1:
            why = (f"{len(discrete)} GPUs: planned on {best.name} (most free VRAM); splitting across GPUs "
                   "(-ts) is not planned")
        return best, why
    if discrete:
        return None, f"{discrete[0].name}: free VRAM unknown, planning for the CPU (pass --snapshot of a host " \
                     "where the driver answers, or check nvidia-smi)"
    unified = [g for g in host.unified_gpus if g.vendor in ("amd", "nvidia")]  # APUs, a DGX Spark's GB10, Jetson
    if unified:
        return unified[0], None
    if not host.gpus_known:
        return None, "GPU facts unknown: planning for the CPU"
    return None, None


def _shortfalls(path: str, gpu: GpuView | None, host: HostView, need: tuple[int, int],
                pool_free: int | None) -> list[Shortfall]:
    """Where the plan does not fit: ``need`` is (GPU side, RAM side) in bytes."""
    gpu_need, ram_need = need
    out = []
    if path == "unified":
        if pool_free is not None and gpu_need + ram_need > pool_free:
            out.append(Shortfall("unified memory", gpu_need + ram_need, pool_free,
                                 f"does not fit: the plan needs {gib(gpu_need + ram_need)} of unified memory, "
                                 f"{gib(pool_free)} is free (GPU carve-out + available RAM)"))
        return out
    if path in ("gpu", "moe", "split") and gpu is not None and gpu.free_bytes is not None \
            and gpu_need > gpu.free_bytes:
        out.append(Shortfall("VRAM", gpu_need, gpu.free_bytes, f"does not fit in {gpu.name}'s "
                             f"{gib(gpu.free_bytes)} free VRAM: the plan needs {gib(gpu_need)}"))
    if host.ram_available is not None and ram_need > host.ram_available:
        out.append(Shortfall("RAM", ram_need, host.ram_available,
                             f"does not fit: the CPU side needs {gib(ram_need)} of RAM, only "
                             f"{gib(host.ram_available)} is available (MemAvailable); it would page from disk"))
    return out


def _unified_pool(gpu: GpuView, host: HostView) -> int | None:
    """Memory a unified GPU can use: its free carve-out plus the RAM it may map (GTT, bounded by MemAvailable)."""
    if host.ram_available is None and gpu.free_bytes is None:
        return None
    ram = host.ram_available or 0
    if gpu.gtt_free_bytes is not None:
        ram = min(ram, gpu.gtt_free_bytes)
    return (gpu.free_bytes or 0) + ram


def _place(c: PlanContext, warnings: list[str], notes: list[str]) -> PlacementChoice:
    """Where the layers go on c.gpu (llama-fit-params' answer when the options carry one), with its budget."""
    model, settings, gpu = c.model, c.settings, c.gpu
    n = model.block_count
    if gpu is None:
        return PlacementChoice(Placement("cpu", 0, 0), layer_budget(model, settings, 0))
    if gpu.unified:
        return PlacementChoice(Placement("unified", n + 1, 0), layer_budget(model, settings, n + 1))
    free = (gpu.free_bytes or 0) - c.extra_gpu
    if c.options.fit is not None:
        probed = _probe_place(model, settings, c.options.fit, notes)
        own = _estimate_place(c, free, [], [])
        said = fit_disagreement(n, (probed.placement.ngl, probed.placement.n_cpu_moe),
                                (own.placement.ngl, own.placement.n_cpu_moe))
        if said:
            notes.append(said)
        return probed
    return _estimate_place(c, free, warnings, notes)


def fit_disagreement(n_layer: int, probe: tuple[int, int], own: tuple[int, int]) -> str | None:
    """One line when llama-fit-params' (-ngl, --n-cpu-moe) differs from tunehost's own estimate; None when they agree."""
    def text(ngl: int, ncmoe: int) -> str:
        return ("-ngl all" if ngl > n_layer else f"-ngl {ngl}") + (f" --n-cpu-moe {ncmoe}" if ncmoe else "")

    if probe == own or (probe[0] > n_layer and own[0] > n_layer and probe[1] == own[1]):
        return None
    delta = ""
    if probe[0] > n_layer and own[0] > n_layer:
        more = own[1] - probe[1]
        delta = (f": tunehost would keep {abs(more)} more layer{'s' if abs(more) != 1 else ''} of experts "
                 f"{'in RAM' if more > 0 else 'on the GPU'}")
    return (f"llama-fit-params placed {text(*probe)}, tunehost's own estimate is {text(*own)}{delta}; "
            "the plan follows llama-fit-params (it measures the allocations of this build)")


def _probe_place(model: ModelFacts, settings: ServerSettings, fit: FitPlacement, notes: list[str]
                 ) -> PlacementChoice:
    """The placement llama-fit-params printed, with tunehost's budget for it."""
    n = model.block_count
    k = n + 1 if fit.gpu_layers < 0 or fit.gpu_layers > n else fit.gpu_layers
    experts = fit.cpu_expert_layers
    if experts and k == n + 1:
        if experts != tuple(range(len(experts))):
            # recent llama-fit-params overflows the experts of the LAST layers (-ot blk.K..blk.n-1); the same count
            # from the front is --n-cpu-moe N, the same bytes in RAM for layers of one size
            notes.append(f"llama-fit-params keeps the routed experts of {len(experts)} layers "
                         f"({experts[0]}-{experts[-1]}) in RAM; written as --n-cpu-moe {len(experts)}, the same "
                         "number of layers counted from the first")
        return PlacementChoice(Placement("moe", k, len(experts)), moe_budget(model, settings, len(experts)),
                               source="probe")
    if experts is None and fit.overrides:
        notes.append("llama-fit-params overrides tensors in a way tunehost does not model; "
                     "the budget below is tunehost's estimate for its -ngl")
        return PlacementChoice(Placement("split" if k <= n else "gpu", k, 0), layer_budget(model, settings, k),
                               fit.overrides, "probe")
    if k == 0:
        return PlacementChoice(Placement("cpu", 0, 0), layer_budget(model, settings, 0), source="probe")
    return PlacementChoice(Placement("gpu" if k == n + 1 else "split", k, 0), layer_budget(model, settings, k),
                           source="probe")


def _estimate_place(c: PlanContext, free: int, warnings: list[str], notes: list[str]) -> PlacementChoice:
    """tunehost's own placement for `free` bytes of VRAM of c.gpu."""
    model, settings, gpu, extra_gpu = c.model, c.settings, c.gpu, c.extra_gpu
    assert gpu is not None
    n = model.block_count
    full = layer_budget(model, settings, n + 1)
    if full.fits_gpu(free):
        return PlacementChoice(Placement("gpu", n + 1, 0), full)
    if model.is_moe:
        p = fit_moe(model, settings, free)
        if p.fits:
            return PlacementChoice(Placement("moe", p.gpu_layers, p.n_cpu_moe), p.budget)
        warnings.append(f"even with every routed expert in RAM, attention and KV need {gib(p.budget.gpu_total)} "
                        f"of VRAM ({gib(free)} free): falling back to a layer split")
    p = fit_layers(model, settings, free)
    warnings.append(f"does not fit in {gpu.name}'s {gib(gpu.free_bytes or 0)} free VRAM: full offload needs "
                    f"{gib(full.gpu_total + extra_gpu)}"
                    + (f"; best split -ngl {p.gpu_layers} of {n + 1} layers" if p.gpu_layers else
                       "; not even one layer fits, so it runs on the CPU"))
    if p.gpu_layers == 0:
        return PlacementChoice(Placement("cpu", 0, 0), p.budget)
    return PlacementChoice(Placement("split", p.gpu_layers, 0), p.budget)


def _budget_view(c: PlanContext, b: MemoryBudget, extras: Iterable[BudgetRow], path: str, pool_free: int | None
                 ) -> PlanBudget:
    settings, gpu, host = c.settings, c.gpu, c.host
    rows = [BudgetRow("weights", b.weights_gpu, b.weights_cpu),
            BudgetRow("KV cache", b.kv_gpu, b.kv_cpu, context_detail(c.model, settings)),
            BudgetRow("compute buffers", b.compute_gpu, b.compute_cpu, f"ubatch {settings.n_ubatch}"),
            *extras]
    if b.headroom:
        rows.append(BudgetRow("headroom", b.headroom, 0, "driver context, allocator slack"
                              + (", vision projector" if settings.mmproj else "")))
    if path == "unified":
        label = f"{gpu.name} (unified: carve-out + RAM)" if gpu else None
        return PlanBudget(tuple(rows), pool_free, host.ram_available, label)
    if gpu is None:
        return PlanBudget(tuple(rows), None, host.ram_available, None)
    return PlanBudget(tuple(rows), gpu.free_bytes, host.ram_available, f"{gpu.name} (free now)")


def _suggestions(c: PlanContext, path: str, fits: bool) -> list[str]:
    """For a model that does not fit on the GPU: the context that would, and the file size that would."""
    model, settings, gpu, extra_gpu = c.model, c.settings, c.gpu, c.extra_gpu
    if gpu is None or gpu.unified or path not in ("split", "cpu") or gpu.free_bytes is None:
        return []
    out = []
    free = gpu.free_bytes - extra_gpu
    n = model.block_count
    lo, hi, best = MIN_SUGGESTED_CTX, settings.n_ctx // settings.n_parallel, None
    while lo <= hi:  # largest per-slot context (multiple of 256) that allows full offload
        mid = (lo + hi) // 2 // 256 * 256 or 256
        s = replace(settings, n_ctx=mid * settings.n_parallel)
        if layer_budget(model, s, n + 1).fits_gpu(free):
            best, lo = mid, mid + 256
        else:
            hi = mid - 256
    if best:
        out.append(f"--ctx {best} would fit entirely on the GPU (KV {gib(kv_cache_bytes(model, replace(settings, n_ctx=best * settings.n_parallel)))})")
    full = layer_budget(model, settings, n + 1)
    room = free - (full.gpu_total - full.weights_gpu)  # VRAM left for weights after KV, compute and headroom
    if room > 0 and model.weights.total:
        on_gpu_share = full.weights_gpu / model.weights.total
        max_file = int(room / on_gpu_share) if on_gpu_share else 0
        bpw = ""
        if model.n_params:
            bpw = f" (about {max_file * 8 / model.n_params:.1f} bits per weight; this file has " \
                  f"{model.weights.total * 8 / model.n_params:.1f})"
        out.append(f"a quantization of at most {gib(max_file)} would fit at this context{bpw}")
    elif model.weights.total:
        out.append("at this context not even the KV cache and compute buffers fit: lower --ctx first")
    return out


def _flags(c: PlanContext, choice: PlacementChoice, warnings: list[str], notes: list[str]) -> PlannedLaunch:
    """Every flag of the launch configuration, each with its reason, for the placement `choice`."""
    model, host, o, s, spec, ctx = c.model, c.host, c.options, c.settings, c.spec, c.ctx
    flags: list[Flag] = [Flag("-m", o.model_path, "the model")]
    total_ctx = ctx * o.parallel
    flags.append(Flag("-c", str(total_ctx),
                      f"{ctx} tokens per slot" + (f" x {o.parallel} slots (-c is the total)" if o.parallel > 1 else "")
                      + ("" if o.ctx else f"; tunehost's default (the model was trained for "
                                          f"{model.context_length}); pass --ctx for more")))
    flags.append(Flag("-np", str(o.parallel),
                      "one user: the whole context goes to one slot (llama-server's default makes 4 slots that "
                      "share -c)" if o.parallel == 1 else f"{o.parallel} concurrent requests, each with {ctx} tokens"))
    flags += _placement_flags(c, choice, notes)
    flags.append(Flag("-fa", "on", "flash attention: less compute-buffer memory, and required for a quantized "
                                   "V cache"))
    kv_reason = ("half the bytes of f16 at a negligible quality cost" if s.type_k == "q8_0" else
                 "f16: speculative decoding (MTP/draft) verifies tokens against the KV cache, and q8_0 has driven "
                 "MTP acceptance near zero in users' tests; keep it unquantized unless you measured q8_0 with it"
                 if spec in ("mtp", "draft") else
                 "f16: this model's KV rows are not whole q8_0 blocks of 32 values, so llama.cpp cannot quantize them")
    flags.append(Flag("-ctk", s.type_k, f"KV cache K type: {kv_reason}"))
    flags.append(Flag("-ctv", s.type_v, f"KV cache V type: {kv_reason}"))
    flags.append(Flag("-b", str(s.n_batch), "logical batch (llama.cpp's default, stated so the budget matches)"))
    flags.append(Flag("-ub", str(s.n_ubatch), "physical batch; the compute buffer is sized for it"
                      + (" (>= 512 so an image's tokens decode in one ubatch)" if o.mmproj else "")))
    pin, pin_reason = _pinning(host, warnings, notes)
    if host.threads:
        flags.append(Flag("-t", str(host.threads), _threads_reason(host)))
        flags.append(Flag("-tb", str(host.threads), "prompt processing on the same cores: more threads than pinned "
                                                    "CPUs would oversubscribe them"))
    prio = None
    if pin:
        why = why_no_prio(host, pin)
        notes.append("no --prio: real-time compute threads help only where a measurement shows it (a busy desktop); "
                     + ("`tunehost tune` measures it on this host" if why is None else f"tune does not race it here: {why}"))
    if host.numa_nodes and host.numa_nodes > 1:
        flags.append(Flag("--numa", "distribute", f"{host.numa_nodes} NUMA nodes: spread threads and memory "
                                                  "evenly over them"))
        notes.append(f"{host.numa_nodes} NUMA nodes: one llama-server per node (pinned to it) is often faster "
                     "than one spanning them")
    mlock_wanted, mlock_fix = _memory_flags(flags, host, choice.budget, choice.path, warnings, notes)
    if o.mmproj:
        flags.append(Flag("-mm", o.mmproj, "the vision projector (budgeted with 2 GiB headroom)"))
    flags += _spec_flags(c, choice.path, warnings)
    flags.append(Flag("--host", o.host_addr or "127.0.0.1",
                      "listen where you asked" if o.host_addr else "loopback only: llama-server has no API key "
                                                                    "by default; pass --host to expose it"))
    if o.api_key_file:
        flags.append(Flag("--api-key-file", o.api_key_file, "clients must send one of the keys in this file "
                                                            "(one per line): the server answers no one else"))
    elif listens_beyond_loopback(o.host_addr):
        warnings.append(exposed_warning(o.host_addr or ""))
    env = _environment(c, choice, notes)
    config = LaunchConfig(model=o.model_path, flags=tuple(flags), server=o.server, env=tuple(env), pin_cpus=pin,
                          nice=prio, mlock_wanted=mlock_wanted, name=model.name)
    return PlannedLaunch(config, pin_reason, mlock_fix)


def _placement_flags(c: PlanContext, choice: PlacementChoice, notes: list[str]) -> list[Flag]:
    """-ngl / --n-cpu-moe for the placement, and llama-fit-params' -ts / -ot where it computed them."""
    model, host, o, gpu, extra_gpu = c.model, c.host, c.options, c.gpu, c.extra_gpu
    path, ngl, n_cpu_moe = choice.placement.path, choice.placement.ngl, choice.placement.n_cpu_moe
    overrides, b = choice.overrides, choice.budget
    flags: list[Flag] = []
    n = model.block_count
    if path in ("gpu", "unified"):
        flags.append(Flag("-ngl", str(max(NGL_ALL, n + 1)), f"all {n} layers and the output on the GPU"
                          + (f": {gib(b.gpu_total + extra_gpu)} planned of {gib(gpu.free_bytes or 0)} free"
                             if path == "gpu" and gpu else ": unified memory, the GPU reads the weights from RAM")))
    elif path == "moe":
        flags.append(Flag("-ngl", str(max(NGL_ALL, n + 1)), "attention, router, shared experts, KV and output on "
                                                            "the GPU"))
        flags.append(Flag("--n-cpu-moe", str(n_cpu_moe),
                          f"routed experts of the first {n_cpu_moe} of {n} layers stay in RAM "
                          f"({gib(b.weights_cpu - model.weights.token_embd)}); the smallest N that fits "
                          f"{gpu.name if gpu else 'the GPU'}. Shared experts (_shexp) are not touched by it"))
    elif path == "split":
        flags.append(Flag("-ngl", str(ngl), f"the last {ngl - 1} of {n} layers and the output on the GPU: the most "
                                            "that fits; the rest runs on the CPU at RAM speed"))
    elif gpu is None and host.gpus:
        flags.append(Flag("-ngl", "0", "no usable GPU for this plan: everything on the CPU"))
    if o.fit is not None and o.fit.tensor_split and path != "cpu":
        flags.append(Flag("-ts", o.fit.tensor_split, "the share of layers per GPU that llama-fit-params computed "
                                                      "from each GPU's free VRAM"))
        notes.append(f"llama-fit-params spread the model over several GPUs (-ts {o.fit.tensor_split}); the budget "
                     "table shows only the GPU with the most free VRAM")
    if overrides:
        flags.append(Flag("-ot", ",".join(overrides), "tensor placement computed by llama-fit-params"))
    return flags


def _spec_flags(c: PlanContext, path: str, warnings: list[str]) -> list[Flag]:
    """Speculative decoding: a draft model (-md, -ngld, --spec-type draft-simple), MTP (the model's own heads, or a
    companion GGUF with -md: --spec-type draft-mtp) or n-gram drafting (--spec-default: ngram-mod)."""
    model, o, spec, gpu = c.model, c.options, c.spec, c.gpu
    flags: list[Flag] = []
    companion = is_mtp_companion(o.draft_model)
    on_gpu = gpu is not None and path in ("gpu", "moe", "unified")
    if spec == "draft" and o.draft:
        flags.append(Flag("-md", o.draft, "draft model for speculative decoding"))
        if on_gpu:
            flags.append(Flag("-ngld", str(NGL_ALL), "the draft model entirely on the GPU (budgeted above)"))
        flags.append(Flag("-cd", str(c.ctx * o.parallel), "the draft's context matches the main one"))
        flags.append(Flag("--spec-type", "draft-simple", "speculate with the draft model: current llama.cpp loads "
                          "-md but drafts with it only when --spec-type names draft-simple (common/speculative.cpp; "
                          "the type is inferred only for MTP/EAGLE3/DFlash GGUFs)"))
    if spec == "mtp" and companion:
        flags.append(Flag("-md", o.draft or "", "the MTP companion: a GGUF of NextN/MTP blocks that drafts from the "
                          "model's hidden state (budgeted above as \"MTP draft\")"))
        if on_gpu:
            flags.append(Flag("-ngld", str(NGL_ALL), "the MTP blocks on the GPU beside the model"))
    if c.spec_n_max is not None:
        flags.append(Flag("--spec-draft-n-max", str(c.spec_n_max), _n_max_reason(c, companion)))
    if spec == "mtp":
        inferred = companion and o.draft_model is not None and any(
            t.name == f"blk.{o.draft_model.block_count - 1}.nextn.eh_proj.weight" for t in o.draft_model.tensors)
        flags.append(Flag("--spec-type", "draft-mtp", "speculative decoding with multi-token prediction heads "
                          "(llama.cpp PR #22673)" + ("; llama.cpp would infer it from the companion's "
                                                     "nextn.eh_proj, stated" if inferred else
                                                     "; said explicitly: llama.cpp infers it only from a "
                                                     "companion's blk.N.nextn.eh_proj" if companion else "")))
        if not companion and model.tensors and not any(".nextn." in t.name for t in model.tensors):
            warnings.append("--spec mtp: this GGUF has no MTP (nextn) tensors; llama-server will refuse "
                            "--spec-type draft-mtp. Use a GGUF converted with its MTP heads, or pass its MTP "
                            "companion GGUF with --draft")
    if spec == "ngram":
        flags.append(Flag("--spec-type", "ngram-mod", "n-gram drafting, what --spec-default turns on (24-token "
                          "match, drafts of 48-64: common.h): tokens already in the context are proposed again, "
                          "for code edits, agents and tool calls that repeat their input; no draft model, no VRAM"))
    return flags


def _environment(c: PlanContext, choice: PlacementChoice, notes: list[str]) -> list[Flag]:
    """GGML_CUDA_GRAPH_OPT=1 for a single NVIDIA GPU holding the whole model with VRAM to spare."""
    host, gpu, extra_gpu, path, b = c.host, c.gpu, c.extra_gpu, choice.path, choice.budget
    env: list[Flag] = []
    nvidia = [g for g in host.discrete_gpus if g.vendor == "nvidia"]
    if path == "gpu" and gpu is not None and gpu.vendor == "nvidia" and len(nvidia) == 1 \
            and (host.gpu_backends is None or "CUDA" in host.gpu_backends):
        spare_vram = (gpu.free_bytes or 0) - b.gpu_total - extra_gpu
        if spare_vram >= GRAPH_OPT_SPARE:
            env.append(Flag("GGML_CUDA_GRAPH_OPT", "1",
                            f"CUDA graph optimization (concurrent streams inside the graph; single GPU only, off by "
                            f"default in ggml-cuda.cu); {gib(spare_vram)} of VRAM is spare for its extra buffers"))
        else:
            notes.append(f"no GGML_CUDA_GRAPH_OPT=1: only {gib(max(spare_vram, 0))} of VRAM spare beyond the plan "
                         f"(wants {GRAPH_OPT_SPARE // MiB} MiB)")
    return env


def listens_beyond_loopback(host_addr: str | None) -> bool:
    """Whether llama-server --host ADDR answers other machines (a name ending in .sock is a UNIX socket)."""
    from tunehost.facts.processes import is_loopback

    return bool(host_addr) and not host_addr.endswith(".sock") and not is_loopback(host_addr)


def exposed_warning(host_addr: str) -> str:
    """What advise says about a non-loopback --host without an API key (llama.cpp common/arg.cpp: --api-key,
    --api-key-file, one key per line)."""
    return (f"--host {host_addr} exposes llama-server beyond this machine with no authentication: anyone who can "
            "reach the port can use the model. Add "
            "--api-key-file FILE (one key per line, chmod 600; `tunehost advise --api-key-file FILE` adds it), or "
            "--api-key KEY (visible in `ps` and in the unit), or keep --host 127.0.0.1 behind a reverse proxy "
            "that authenticates")


def _threads_reason(host: HostView) -> str:
    if host.cpus_given:
        return f"one thread per physical core of --cpus ({host.threads})"
    parts = [f"{host.threads} physical"]
    if host.hybrid:
        parts.append(" performance cores (no E-cores: lock-step threads wait for the slowest)")
    else:
        parts.append(" cores")
    if host.smt:
        parts.append(", one thread per core (SMT siblings share the core's FPU and add nothing to matrix math)")
    if host.performance_cores and host.threads < host.performance_cores:
        parts.append("; one core left to the OS and the HTTP thread")
    return "".join(parts)


def _pinning(host: HostView, warnings: list[str], notes: list[str]) -> tuple[tuple[int, ...] | None, str]:
    if not host.pin_cpus:
        notes.append("no CPU pinning: the CPU topology is unknown")
        return None, ""
    cpus = format_cpu_list(host.pin_cpus)
    if host.cpus_given:
        return host.pin_cpus, f"the CPUs you gave (--cpus {cpus})"
    what = "the first SMT thread of each performance core" if host.hybrid and host.smt else \
        "the performance cores" if host.hybrid else "the first SMT thread of each core" if host.smt else "the cores"
    return host.pin_cpus, f"{what}: the scheduler cannot move a lock-step thread onto a busy or slow CPU"


def _memory_flags(flags: list[Flag], host: HostView, b: MemoryBudget, path: str, warnings: list[str],
                  notes: list[str]) -> tuple[bool, str | None]:
    """--no-mmap and --mlock when RAM allows; (mlock blocked by the memlock limit?, how to raise it)."""
    cpu_weights = b.weights_cpu
    if path == "unified":
        if host.ram_available is not None:
            flags.append(Flag("--no-mmap", None, "unified memory: the weights are copied into GPU-visible memory "
                                                 "anyway; mmap would keep a second copy in the page cache"))
        return False, None
    if path == "gpu" or cpu_weights < MIN_CPU_WEIGHTS_FOR_MLOCK:  # only token_embd stays in RAM
        return False, None
    need = b.cpu_total
    if host.ram_available is None:
        notes.append("no --no-mmap/--mlock: available RAM unknown")
        return False, None
    if need + RAM_SPARE > host.ram_available:
        notes.append(f"no --no-mmap/--mlock: the CPU side ({gib(need)}) leaves less than {gib(RAM_SPARE)} of the "
                     f"{gib(host.ram_available)} available; with mmap the kernel can at least page weights")
        return False, None
    if path == "cpu" and host.thp != "always":
        # a CPU-only plan reads its weights from the mapped page cache: measured faster here (docs/advise.md)
        notes.append(f"mmap kept (llama.cpp's default): with THP {host.thp or 'unknown'}, weights read into anonymous "
                     "memory get 4 KiB pages; a 2-vCPU VM measured --no-mmap 12 % slower in TG (THP always: no "
                     "difference); `tunehost tune` races it on your box")
    else:
        why = ("the GPU backend then keeps them in pinned host memory" if path in ("split", "moe") else
               "THP is always, so they get huge pages")
        flags.append(Flag("--no-mmap", None, f"read the {gib(cpu_weights)} of CPU-side weights into RAM once ({why}): "
                                             "no page faults or page-cache eviction mid-generation"))
    allowed = host.memlock_allows(need)
    fix = "ulimit -l unlimited (shell; /etc/security/limits.conf for a login) or LimitMEMLOCK=infinity (systemd)"
    if allowed:
        flags.append(Flag("--mlock", None, f"lock those {gib(need)} in RAM so nothing swaps or evicts them "
                                           "(the memlock limit allows it)"))
        return False, None
    limit = "unknown" if allowed is None else f"{host.memlock_limit // 1024} KiB" if host.memlock_limit else "0"
    warnings.append(f"--mlock left out: the memlock limit ({limit}) is below the {gib(need)} to lock; raise it "
                    f"with {fix}, then add --mlock")
    return True, fix


def _ceiling(model: ModelFacts, placement: Placement, gpu: GpuView | None, options: AdviseOptions,
             host: HostView | None = None, kv: KvRead | None = None) -> Ceiling | None:
    from tunehost.advise.ceiling import CPU_DIMM_EFFICIENCY

    vram = (discrete_vram(gpu.name, gpu.memory_bus_width_bits, gpu.memory_clock_max_mhz, gpu.compute_capability)
            if gpu is not None and not gpu.unified else {})
    ram_gbps, ram_basis = options.ram_bandwidth_gbps, ""
    peak = getattr(options.ram_peak, "configured_gbps", None)
    if ram_gbps is None and peak:  # nothing measured (a snapshot without one, a busy host): the DIMMs' peak
        ram_gbps = round(peak, 1)
        why = options.ram_bandwidth_note or "not measured"
        ram_basis = (f"= the DIMMs' peak ({why}; published CPU runs reach {CPU_DIMM_EFFICIENCY:.0%} of it, "
                     "the band below allows for that)")
    ratio = None
    if gpu is not None and gpu.power_limit_w and gpu.power_default_limit_w:
        ratio = round(gpu.power_limit_w / gpu.power_default_limit_w, 3)
    bw = Bandwidths.with_dimms(options.ram_peak, **vram, ram_gbps=ram_gbps, ram_basis=ram_basis, power_ratio=ratio)
    if gpu is not None and gpu.unified and gpu.vendor == "nvidia":  # a DGX Spark's GB10, a Jetson
        bw = with_soc_memory(bw, gpu.name)
    c = tg_ceiling_for(model, placement, bw, _band_context(placement, gpu, options, host), kv=kv)
    if c is not None and c.tokens_per_s is None and options.ram_bandwidth_note and any(
            m != "VRAM" and g is None for m, _, g in c.parts):
        c = replace(c, note=f"RAM bandwidth unknown ({options.ram_bandwidth_note})")
    if c is not None and options.host_calibration is not None:
        c = _host_band(model, c, options, host.threads if host is not None else None)
    return c


def _band_context(placement: Placement, gpu: GpuView | None, options: AdviseOptions, host: HostView | None) -> Any:
    """What the band needs beyond bytes and bandwidths: the CPU that reads the RAM part (its cores, CCDs, ISA), the
    iGPU family of a unified placement and the runtime (llama.cpp, or Ollama for --format ollama)."""
    from tunehost.advise.ceiling import BandContext, CpuView, igpu_family

    cpu = None
    if host is not None and placement.path in ("cpu", "moe", "split"):
        cpu = CpuView(host.threads, host.cpu_ccds, host.cpu_isa, host.cpu_vendor)
    igpu = igpu_family(gpu.name) if gpu is not None and gpu.unified else None
    return BandContext(cpu=cpu, runtime=options.runtime, igpu=igpu)


def _host_band(model: ModelFacts, c: Ceiling, options: AdviseOptions, threads: int | None) -> Ceiling:
    """The band from this host's own runs of the same class (dense/MoE/hybrid x GPU/split/CPU) and, where the CPU
    reads weights, at the plan's thread count (``threads``: its -t), where it has some: RAM at the fit's basis (the
    DIMMs' peak, else the median bandwidth measured with the runs; measured now only when the runs recorded none).
    Runs at other thread counts only: the published band stays, with a note saying so."""
    from tunehost.advise.ceiling import band_class
    from tunehost.advise.host_calibration import FitKey, host_band, read_seconds

    calibration = options.host_calibration
    key = FitKey.of(band_class(c.path, model.is_moe, hybrid=model.has_recurrent), c.path,
                    recurrent=model.has_recurrent, threads=threads)
    fit = calibration.fit_for(key)
    if fit is None:
        others = calibration.other_threads(key.cls, recurrent=key.recurrent) if key.threads else []
        if others and c.band is not None:
            counts = ", ".join(str(t) for t in others)
            note = (f"this host's runs of this kind were at {counts} thread{'s' if others != [1] else ''}, this plan "
                    f"uses {key.threads}: `tunehost bench` with -t {key.threads} calibrates the band for it")
            return replace(c, band=replace(c.band, notes=(*c.band.notes, note)))
        return c
    ram_bytes = sum(b for m, b, _ in c.parts if m != "VRAM")
    vram_bytes = sum(b for m, b, _ in c.parts if m == "VRAM")
    basis = ""
    if fit.basis == "dimm":
        ram_gbps = c.bandwidths.dimm_gbps or fit.median_gbps("RAM")
    else:  # the efficiency is relative to what the probe read with those runs: a probe now may read otherwise
        ram_gbps = fit.median_gbps("RAM") or options.ram_bandwidth_gbps
        if ram_bytes and ram_gbps:
            basis = f"RAM at {ram_gbps:.1f} GB/s as measured with those runs"
    read_s = read_seconds(ram_bytes, ram_gbps, vram_bytes, c.bandwidths.gpu_gbps or fit.median_gbps("VRAM"))
    if read_s is None:
        return c
    band = host_band(fit, read_s, model.block_count, c.band.bound if c.band is not None else "memory bandwidth",
                     basis=basis)
    return replace(c, band=band) if band is not None else c


__all__ = ["AdviseOptions", "BudgetRow", "Ceiling", "FitPlacement", "Flag", "PlacementChoice", "Plan", "PlanBudget",
           "PlanContext", "PlannedLaunch", "apply_caps", "gpu_bandwidth", "plan"]
