"""Router mode and co-resident servers: several models as one VRAM/RAM plan (pure, except `scan_models_dir`).

llama-server started without a model is a router (tools/server/server-models.cpp): it starts one child server per
model on demand, at most `--models-max N` at once (common/arg.cpp; default 4, 0 = unlimited), and takes the models
from `--models-dir DIR` (common/preset.cpp `load_from_models_dir`: each `*.gguf` there named by its file name
without `.gguf`, each sub-directory a model named by the directory, its `mmproj*` file the projector) and/or an INI
file `--models-preset FILE` (one `[name]` section per model, keys = option names without dashes, `[*]` shared by
all; the router's own command-line options override both, so per-model choices live in the preset only).

The plan: each model alone first; then the worst case — the `models_max` largest GPU (and RAM) footprints resident
at once — must fit the free VRAM minus what other servers on the GPU need (`reserve`). When it does not, the model
with the largest GPU footprint gives up VRAM first (re-planned within a smaller budget: MoE more `--n-cpu-moe`, dense
fewer `-ngl`), then the next largest, until any `models_max` of them fit together: small models stay whole.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from tunehost.advise.host_view import HostView
from tunehost.errors import TunehostError
from tunehost.launch import Flag, LaunchConfig

GiB = 1024 ** 3
DEFAULT_MODELS_MAX = 4  # common/common.h: int models_max = 4
PRESET_FILE = "models.ini"  # the --models-preset file's name where none is given
# options the router sets for each child itself (server-models.cpp unset_reserved_args / update_args)
ROUTER_ONLY = ("--host", "--port", "--api-key-file", "--api-key", "-m", "--model")
# preset-only spellings: the file path options become `model`, `mmproj`, `model-draft` keys
PATH_KEYS = {"-m": "model", "-mm": "mmproj", "-md": "model-draft"}
DRAFT_PREFIXES = ("mtp-", "dspark-", "dflash-")  # common/preset.cpp draft_prefixes: sidecars, not models
MAX_MODELS = 64
MAX_MODELS_MAX = 2 ** 31 - 1  # llama-server reads --models-max as a C int (common/arg.cpp std::stoi)
MIN_CTX = 2048  # the shortest context per slot the shorter-context remedy proposes (advise.plan.MIN_SUGGESTED_CTX)
MAX_SHRINK_STEPS = 200  # re-plans of one model each while the worst case does not fit


@dataclass(frozen=True)
class LocalModel:
    """One model as the router names it."""

    name: str
    path: str
    mmproj: str | None = None


def scan_models_dir(directory: str | Path) -> list[LocalModel]:
    """The models llama-server's router finds in `--models-dir DIR` (common/preset.cpp load_from_models_dir)."""
    root = Path(directory)
    if not root.is_dir():
        raise TunehostError(f"--models-dir {directory}: not a directory")
    found: list[LocalModel] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if len(found) >= MAX_MODELS:
            raise TunehostError(f"--models-dir {directory}: more than {MAX_MODELS} models")
        if entry.is_dir():
            model = shard = mmproj = None
            for f in sorted(entry.iterdir(), key=lambda e: e.name):
                if not f.name.endswith(".gguf") or not f.is_file():
                    continue
                if "mmproj" in f.name:
                    mmproj = str(f)
                elif f.name.startswith(DRAFT_PREFIXES):
                    continue
                elif "-00001-of-" in f.name:
                    shard = str(f)
                else:
                    model = str(f)
            if shard or model:
                found.append(LocalModel(entry.name, shard or model, mmproj))  # type: ignore[arg-type]
        elif entry.name.endswith(".gguf") and entry.is_file() and "mmproj" not in entry.name \
                and not entry.name.startswith(DRAFT_PREFIXES):
            found.append(LocalModel(entry.name.replace(".gguf", ""), str(entry)))
    if not found:
        raise TunehostError(f"--models-dir {directory}: no GGUF model in it")
    return found


def model_name(path: str | Path) -> str:
    """The name the router would give a single-file model: its file name without `.gguf`."""
    return Path(path).name.replace(".gguf", "")


def with_gpu_budget(host: HostView, free_bytes: int) -> HostView:
    """The host with at most `free_bytes` free on its discrete GPUs (a share of the VRAM, or what a reservation
    for other servers leaves)."""
    gpus = tuple(g if g.unified or g.free_bytes is None else replace(g, free_bytes=max(0, min(g.free_bytes, free_bytes)))
                 for g in host.gpus)
    return replace(host, gpus=gpus)


def reserve_vram(host: HostView, reserve_bytes: int) -> HostView:
    """The host with `reserve_bytes` of every discrete GPU's free VRAM kept for other servers."""
    gpus = tuple(g if g.unified or g.free_bytes is None else replace(g, free_bytes=max(0, g.free_bytes - reserve_bytes))
                 for g in host.gpus)
    return replace(host, gpus=gpus)


def vram_holders(host: HostView) -> list[str]:
    """Who holds VRAM now (already missing from the free VRAM every plan uses): "llama-server pid 812: 1.2 GiB"."""
    out = []
    for g in host.discrete_gpus:
        for pid, name, mib in g.vram_clients:
            size = f"{mib / 1024:.1f} GiB" if mib else "size unknown"
            out.append(f"{name or 'process'} pid {pid if pid is not None else '?'} on {g.name}: {size}")
    return out


@dataclass(frozen=True)
class CoResident:
    """An inference server beside the plan on its GPU (the processes sample and the GPU's process list): the VRAM
    it holds now is kept for it (it is not in the free VRAM planned on); `idle`: it runs but holds none now
    (Ollama between requests unloads its models), so nothing is kept for what it loads next."""

    kind: str  # "llama-server", "ollama", ... (tunehost.facts.processes INFERENCE_PROCESSES / SERVER_KINDS)
    pid: int | None
    gpu: str | None
    vram_bytes: int | None  # held now (None: the driver does not say per process)
    idle: bool = False
    router_child: bool = False  # a model of a running llama-server router (its parent is a llama-server)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "pid": self.pid, "gpu": self.gpu, "vram_bytes": self.vram_bytes,
                "idle": self.idle, "router_child": self.router_child}

    def line(self) -> str:
        from tunehost.printable import one_line

        who = f"{one_line(self.kind, 40)} (pid {self.pid if self.pid is not None else '?'})"
        if self.idle:
            return (f"{who} runs but holds no VRAM now: it loads models on demand (Ollama unloads them after "
                    "keep_alive), and nothing is kept for them; pass --reserve-vram MiB with what it loads")
        size = f"{self.vram_bytes / GiB:.1f} GiB" if self.vram_bytes is not None else "VRAM (size not reported)"
        what = "a model of a running llama-server router" if self.router_child else "a co-resident server"
        return (f"{who} on {one_line(self.gpu or 'the GPU', 60)}, {what}: its {size} are kept for it (left out of "
                "the free VRAM planned on, no --reserve-vram needed)")


def co_resident(host: HostView, processes: Any) -> tuple[CoResident, ...]:
    """The inference servers that share the plan's GPUs: each GPU process that is (or is a child of) an inference
    server, from the processes sample (`tunehost.facts.processes.ProcessFacts`; None: the GPU's names only), and
    every inference server that holds no VRAM now (idle). Display servers and other compute jobs are not servers."""
    from tunehost.facts.processes import INFERENCE_PROCESSES

    def find(pid: int | None) -> Any:
        return processes.process(pid) if processes is not None and pid is not None else None

    out: list[CoResident] = []
    holders: set[int] = set()
    for g in host.discrete_gpus:
        for pid, name, mib in g.vram_clients:
            proc, kind, child = find(pid), None, False
            p = proc
            for depth in range(4):  # the server itself, or the runner it started (ollama, a router's models)
                if p is None:
                    break
                if p.server in ("llama-server", "ollama", "koboldcpp", "llama-cpp-python", "vllm", "lmstudio",
                                "llamafile"):
                    kind = p.server
                    parent = find(p.ppid)
                    child = depth == 0 and kind == "llama-server" and parent is not None and \
                        parent.server == "llama-server"
                    holders.add(p.pid)
                    break
                p = find(p.ppid)
            if kind is None and name in INFERENCE_PROCESSES and name not in ("llama-bench", "llama-cli"):
                kind = INFERENCE_PROCESSES[name]
            if kind is None:
                continue
            if pid is not None:
                holders.add(pid)
            out.append(CoResident(kind, pid, g.name, mib * 1024 * 1024 if mib is not None else None,
                                  router_child=child))
    if processes is not None and host.discrete_gpus:
        for p in processes.servers:
            if p.server == "ollama" and p.pid not in holders:
                out.append(CoResident("ollama", p.pid, None, None, idle=True))
    return tuple(out)


def co_resident_notes(found: Sequence[CoResident], reserve_bytes: int) -> tuple[list[str], list[str]]:
    """(warnings, notes) that say what is kept for the servers beside the plan."""
    notes = [c.line() for c in found if not c.idle]
    warnings = [c.line() for c in found if c.idle]
    held = sum(c.vram_bytes or 0 for c in found)
    if reserve_bytes and held:
        notes.append(f"--reserve-vram ({reserve_bytes / GiB:.1f} GiB) is kept on top of the {held / GiB:.1f} GiB "
                     "those servers hold now: leave it out unless it is for another one")
    if any(c.router_child for c in found):
        notes.append("a llama-server router's models hold VRAM now: if this plan replaces that router, stop it and "
                     "run advise again to plan on the VRAM it frees")
    return warnings, notes


LOAD_GBPS = 2.0  # a model switch reads the GGUF again: an NVMe SSD's sequential read, stated where it is used


@dataclass(frozen=True)
class Remedy:
    """One way to keep the resident models whole instead of shrinking them: what to change (`flags`: the router
    flags or per-model options it sets), the TG each affected model gets with it, and what it costs."""

    kind: str  # "models-max" | "context" | "quant"
    text: str
    speeds: tuple[tuple[str, float, float], ...]  # (model, low, high) t/s with it
    cost: str
    flags: tuple[Flag, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "cost": self.cost,
                "speeds": [{"model": m, "low_tokens_per_s": lo, "high_tokens_per_s": hi} for m, lo, hi in self.speeds],
                "flags": [f.to_json() for f in self.flags]}


@dataclass(frozen=True)
class RouterPlan:
    names: tuple[str, ...]
    plans: tuple[Any, ...]  # tunehost.advise.plan.Plan, one per model
    models_max: int  # as given (0 = unlimited)
    resident: int  # how many can be loaded at once: min(models_max or n, n)
    gpu_free: int | None
    gpu_worst: int
    ram_available: int | None
    ram_worst: int
    reserve: int
    fits: bool
    scaled: tuple[tuple[str, int, int], ...] | None  # (model, GPU bytes alone, GPU bytes planned) for those reduced
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    models_dir: str | None = None
    remedies: tuple[Remedy, ...] = ()  # when models were shrunk or it does not fit: what keeps them whole
    now: tuple[tuple[str, float, float], ...] = ()  # (model, low, high) t/s as planned, for those shrunk
    co_resident: tuple[CoResident, ...] = ()  # inference servers beside the plan on its GPU

    def launch(self, server: str = "llama-server", preset_path: str = PRESET_FILE) -> LaunchConfig:
        """The router's launch configuration: its own flags, and one config per model (the preset's sections)."""
        configs = [p.launch() for p in self.plans]
        first = self.plans[0]
        shared = [f for f in configs[0].flags
                  if f.name not in ROUTER_ONLY and f.name not in PATH_KEYS
                  and all(any(g.name == f.name and g.value == f.value for g in c.flags) for c in configs[1:])]
        shared_names = {(f.name, f.value) for f in shared}
        models = tuple(replace(c, name=n, flags=tuple(f for f in c.flags if (f.name, f.value) not in shared_names
                                                      and f.name not in ROUTER_ONLY[:4]))
                       for n, c in zip(self.names, configs))
        router = []
        if self.models_dir:
            router.append(Flag("--models-dir", self.models_dir, "the models the router may load"))
        router.append(Flag("--models-preset", preset_path, "per-model placement, context and KV (the file below)"))
        router.append(Flag("--models-max", str(self.models_max), f"at most {self.resident} models resident: the "
                                                                 "worst case the VRAM/RAM plan was made for"))
        for name in ("--host", "--api-key-file"):
            f = first.flag(name)
            if f is not None:
                router.append(f)
        env = configs[0].env if all(c.env == configs[0].env for c in configs) else ()
        pins = {c.pin_cpus for c in configs}
        return LaunchConfig(model="", flags=tuple(router), server=server, env=env,
                            pin_cpus=configs[0].pin_cpus if len(pins) == 1 else None, nice=None,
                            mlock_wanted=any(c.mlock_wanted for c in configs), name="router", models=models,
                            preset=tuple(shared))

    def to_json(self) -> dict[str, Any]:
        return {"mode": "router", "models": [dict(p.to_json(), router_name=n) for n, p in zip(self.names, self.plans)],
                "models_max": self.models_max, "resident": self.resident, "gpu_free_bytes": self.gpu_free,
                "gpu_worst_case_bytes": self.gpu_worst, "ram_available_bytes": self.ram_available,
                "ram_worst_case_bytes": self.ram_worst, "reserved_vram_bytes": self.reserve, "fits": self.fits,
                "gpu_budget_reduced": [{"model": n, "alone_bytes": a, "planned_bytes": b}
                                       for n, a, b in self.scaled or ()], "warnings": list(self.warnings), "notes": list(self.notes),
                "remedies": [r.to_json() for r in self.remedies],
                "shrunk_speeds": [{"model": m, "low_tokens_per_s": lo, "high_tokens_per_s": hi}
                                  for m, lo, hi in self.now],
                "co_resident": [c.to_json() for c in self.co_resident]}


def _top(values: Sequence[int], k: int) -> int:
    return sum(sorted(values, reverse=True)[:k])


def plan_router(names: Sequence[str], plan_one: Callable[[int, HostView], Any], host: HostView, models_max: int,
                reserve_bytes: int = 0, models_dir: str | None = None,
                plan_ctx: Callable[[int, HostView, int], Any] | None = None,
                co_resident_found: Sequence[CoResident] | None = None) -> RouterPlan:
    """One plan per model such that any `models_max` of them fit together. `plan_one(i, host)` plans model i on a
    host view (tunehost.advise.plan.plan with that model's options); `plan_ctx(i, host, ctx)` the same at another
    context per slot (for the shorter-context remedy; None: that remedy is not offered). `co_resident_found`: the
    inference servers beside the plan on its GPU (co_resident; None: not looked for), said in the notes."""
    n = len(names)
    if n == 0:
        raise TunehostError("router mode needs at least one model")
    if len(set(names)) != n:
        raise TunehostError(f"two models share a router name: {', '.join(sorted({x for x in names if names.count(x) > 1}))}")
    if not 0 <= models_max <= MAX_MODELS_MAX:
        raise TunehostError(f"--models-max must be 0 (unlimited) to {MAX_MODELS_MAX}, not {str(models_max)[:40]}")
    resident = n if models_max == 0 else min(models_max, n)
    warnings: list[str] = []
    notes: list[str] = []
    base = reserve_vram(host, reserve_bytes) if reserve_bytes else host
    if reserve_bytes:
        notes.append(f"{reserve_bytes / GiB:.1f} GiB of VRAM reserved for other servers on the GPU (--reserve-vram)")
    held = vram_holders(host)
    if held and co_resident_found is None:
        notes.append("VRAM held now, already left out of the free VRAM planned on: " + "; ".join(held))
    if co_resident_found:
        more_warnings, more_notes = co_resident_notes(co_resident_found, reserve_bytes)
        warnings += more_warnings
        notes += more_notes
    discrete = [g for g in base.discrete_gpus if g.free_bytes is not None]
    free = max((g.free_bytes or 0 for g in discrete), default=None)
    plans = [plan_one(i, base) for i in range(n)]
    whole = list(plans)  # each model alone on the whole budget, before any gives up VRAM
    scaled = None
    if free is not None:
        alone = [p.budget.gpu_total for p in plans]
        needs, caps = list(alone), list(alone)
        for _ in range(MAX_SHRINK_STEPS):
            worst = _top(needs, resident)
            if worst <= free:
                break
            i = max(range(n), key=lambda k: needs[k])  # the largest footprint gives up VRAM first
            caps[i] = max(0, min(caps[i] - (worst - free), int(caps[i] * 0.97)))
            plans[i] = plan_one(i, with_gpu_budget(base, caps[i]))
            needs[i] = plans[i].budget.gpu_total
            if caps[i] == 0:
                break
        reduced = tuple((names[k], alone[k], plans[k].budget.gpu_total) for k in range(n)
                        if plans[k].budget.gpu_total < alone[k])
        scaled = reduced or None
    gpu_worst = _top([p.budget.gpu_total for p in plans], resident)
    ram_worst = _top([p.budget.ram_total for p in plans], resident)
    fits = all(p.fits for p in plans)
    if free is not None and gpu_worst > free:
        fits = False
        warnings.append(f"does not fit: {resident} models resident need up to {gpu_worst / GiB:.1f} GiB of VRAM, "
                        f"{free / GiB:.1f} GiB is free; lower --models-max or the contexts")
    unified = [g for g in base.unified_gpus]
    if free is None and unified and host.ram_available is not None:  # an APU: GPU-mapped and CPU parts share RAM
        u = unified[0]
        pool = (u.free_bytes or 0) + min(host.ram_available, u.gtt_free_bytes or host.ram_available)
        both = _top([p.budget.gpu_total + p.budget.ram_total for p in plans], resident)
        if both > pool:
            fits = False
            warnings.append(f"does not fit: {resident} models resident need up to {both / GiB:.1f} GiB of unified "
                            f"memory, {pool / GiB:.1f} GiB is free (carve-out + available RAM)")
    elif host.ram_available is not None and ram_worst > host.ram_available:
        fits = False
        warnings.append(f"does not fit: {resident} models resident need up to {ram_worst / GiB:.1f} GiB of RAM "
                        f"(their CPU parts), {host.ram_available / GiB:.1f} GiB is available")
    if scaled is not None:
        notes.append(f"any {resident} of the {n} models fit together only with less VRAM for the largest: "
                     + "; ".join(f"{m} {a / GiB:.1f} -> {b / GiB:.1f} GiB" for m, a, b in scaled)
                     + " (re-planned within that budget)")
    if models_max == 0 and n > 1:
        notes.append("--models-max 0 (unlimited): planned for every model resident at once")
    remedies: tuple[Remedy, ...] = ()
    now: tuple[tuple[str, float, float], ...] = ()
    if free is not None and (scaled is not None or not fits):
        shrunk = [k for k in range(n) if plans[k].budget.gpu_total < whole[k].budget.gpu_total]
        now = tuple((names[k], *_band(plans[k])) for k in shrunk if _band(plans[k]) is not None)  # type: ignore[misc]
        remedies = _remedies(_Shortage(tuple(names), tuple(whole), tuple(shrunk), resident, free, base), plan_ctx)
        best: dict[str, tuple[float, float, Remedy]] = {}
        for r in remedies:
            for m, lo, hi in r.speeds:
                if m not in best or lo > best[m][0]:
                    best[m] = (lo, hi, r)
        for m, lo, hi in now:
            if m in best and best[m][0] > hi:
                k, r = names.index(m), best[m][2]
                how = {"models-max": f"--models-max {r.flags[0].value if r.flags else '?'}",
                       "context": "a shorter context", "quant": "a smaller quantization"}[r.kind]
                warnings.append(f"{m} runs at {lo:.0f}-{hi:.0f} t/s in this plan ({plans[k].path}) so that {resident} "
                                f"models fit together; {how} gives it {best[m][0]:.0f}-{best[m][1]:.0f} t/s (see "
                                "the remedies and their cost)")
    return RouterPlan(tuple(names), tuple(plans), models_max, resident, free, gpu_worst, host.ram_available,
                      ram_worst, reserve_bytes, fits, scaled, tuple(warnings), tuple(notes), models_dir,
                      remedies, now, tuple(co_resident_found or ()))


@dataclass(frozen=True)
class _Shortage:
    """What the remedies work from: every model planned alone on the whole budget (`whole`), which of them the
    resident worst case shrank, how many are resident, the free VRAM and the host view planned on."""

    names: tuple[str, ...]
    whole: tuple[Any, ...]
    shrunk: tuple[int, ...]
    resident: int
    free: int
    host: HostView


def _band(p: Any) -> tuple[float, float] | None:
    band = p.ceiling.band if p.ceiling is not None else None
    return (round(band.low, 1), round(band.high, 1)) if band is not None else None


def _speeds(names: Sequence[str], plans: Sequence[Any], which: Sequence[int]) -> tuple[tuple[str, float, float], ...]:
    out = []
    for k in which:
        b = _band(plans[k])
        if b is not None:
            out.append((names[k], *b))
    return tuple(out)


def _remedies(s: _Shortage, plan_ctx: Callable[[int, HostView, int], Any] | None) -> tuple[Remedy, ...]:
    """The alternatives to shrinking, each with the TG it gives and its cost: fewer models resident (each switch
    reloads a model), a shorter context for the shrunk ones, a smaller quantization of the largest."""
    n = len(s.names)
    alone = [p.budget.gpu_total for p in s.whole]
    fits_alone = [k for k in range(n) if s.whole[k].fits]
    out: list[Remedy] = []
    k = max((m for m in range(1, s.resident) if _top(alone, m) <= s.free), default=0)
    if k:
        gib = [(p.budget.gpu_total + p.budget.ram_total) / GiB for p in s.whole]
        biggest = max(range(n), key=lambda i: gib[i])
        out.append(Remedy(
            "models-max", f"--models-max {k}: at most {k} model{'s' if k > 1 else ''} resident, each whole as "
                          "planned alone", _speeds(s.names, s.whole, s.shrunk or fits_alone),
            f"a request for a model not loaded waits for it to load (and one resident to unload): up to "
            f"{gib[biggest]:.1f} GiB read ({s.names[biggest]}), about {gib[biggest] * GiB / LOAD_GBPS / 1e9:.0f} s "
            f"at {LOAD_GBPS:.0f} GB/s (NVMe), less from the page cache; `tunehost bench --server URL --model NAME` "
            "measures the router's load wait",
            (Flag("--models-max", str(k), "fewer models resident, each whole"),)))
    if plan_ctx is not None and s.shrunk:
        for factor in (2, 4, 8):
            ctxs = {i: max(MIN_CTX, s.whole[i].ctx // factor // 256 * 256) for i in range(n)  # any may be resident
                    if s.whole[i].ctx > MIN_CTX}
            trial = {i: plan_ctx(i, s.host, c) for i, c in ctxs.items()}
            needs = [trial[i].budget.gpu_total if i in trial else alone[i] for i in range(n)]
            if _top(needs, s.resident) <= s.free and all(p.fits for p in trial.values()):
                plans = [trial.get(i, s.whole[i]) for i in range(n)]
                ctxs = {i: c for i, c in ctxs.items() if c < s.whole[i].ctx}
                out.append(Remedy(
                    "context", "a shorter context for " + ", ".join(f"{s.names[i]} ({s.whole[i].ctx} -> {c} tokens "
                                                                     "per slot)" for i, c in ctxs.items()),
                    _speeds(s.names, plans, s.shrunk),
                    "longer prompts and conversations no longer fit those models; the rest is unchanged",
                    tuple(Flag("-c", str(c * s.whole[i].parallel), f"{s.names[i]}: {c} tokens per slot")
                          for i, c in ctxs.items())))
                break
            if not ctxs or all(c == MIN_CTX for c in ctxs.values()):
                break
    if s.shrunk:
        i = max(s.shrunk, key=lambda j: alone[j])
        over = _top(alone, s.resident) - s.free
        weights = next((r.gpu for r in s.whole[i].budget.rows if r.label == "weights"), 0)
        target = weights - over
        band = _band(s.whole[i])
        if band is not None and weights and target > weights // 3:
            scale = weights / target  # TG is bound by the bytes each token reads: fewer bytes, that much faster
            out.append(Remedy(
                "quant", f"a smaller quantization of {s.names[i]}: its weights at most {target / GiB:.1f} GiB "
                         f"(now {weights / GiB:.1f} GiB on the GPU)",
                ((s.names[i], round(band[0] * scale, 1), round(band[1] * scale, 1)),),
                "a lower-bit quantization loses some quality; the speed is its band scaled by the bytes read per "
                "token (an estimate until measured)"))
    return tuple(out)


__all__ = ["DEFAULT_MODELS_MAX", "PRESET_FILE", "CoResident", "LocalModel", "Remedy", "RouterPlan", "co_resident",
           "co_resident_notes", "model_name", "plan_router", "reserve_vram", "scan_models_dir", "vram_holders",
           "with_gpu_budget"]
