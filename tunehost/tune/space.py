"""What `tunehost tune` searches: the knobs around advise's plan, each value checked against advise's memory model.

One knob per stage, in this order (the ones that matter most on a CPU first); each gives the challengers of the
current incumbent:

- ``threads``: -t (and -tb) = the plan's, the physical cores, every online CPU, one less than the plan's;
- ``cpu set``: the plan's pinning (one logical CPU per performance core) against one logical CPU per core (E-cores
  too, on a hybrid CPU), every online CPU and no pinning;
- ``ubatch``: -ub 128 / 256 / 512 / 1024 (at most -b);
- ``batch``: -b 512 / 1024 / 2048 / 4096 / 8192 (at least -ub; one value at or above the prompt's length: a larger
  -b than the prompt changes nothing);
- ``kv cache``: -ctk/-ctv f16 and q8_0 (q8_0 only where the model's KV rows are whole q8_0 blocks);
- ``flash attention``: -fa on / off (off only with an f16 V cache: a quantized V needs flash attention);
- ``mmap``: --no-mmap (weights read into RAM) against mmap, only when RAM holds the CPU side plus 1 GiB;
- ``repack``: --no-repack against llama.cpp's default CPU weight repacking (CPU placements);
- ``offload``: -ngl one and two layers fewer (split) / --n-cpu-moe one and two more (MoE): less VRAM, so they fit;
- ``priority``: without --prio (where the plan raises it).

``ubatch`` and ``batch`` are not searched for ``--objective tg``: llama-bench's tg test decodes one token per
llama_decode call, so neither can change it (they decide prompt processing: pp and balanced search them).

A value whose memory budget (:func:`tunehost.advise.memory.layer_budget` / ``moe_budget`` at the plan's context)
does not fit the free VRAM or available RAM is never measured. llama-bench options are checked against its
``--help`` by the caller (``supported``): a knob this build cannot express is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tunehost.bench.runner import bench_flags
from tunehost.launch import LaunchConfig
from tunehost.tune.race import Candidate, Knob

if TYPE_CHECKING:
    from tunehost.advise.host_view import HostView
    from tunehost.model import ModelFacts

UBATCHES = (128, 256, 512, 1024)
BATCHES = (512, 1024, 2048, 4096, 8192)
NOT_FOR_TG = "llama-bench's tg test decodes one token at a time: -ub and -b change only prompt processing"
KV_TYPES = ("f16", "q8_0")


def candidate(label: str, launch: LaunchConfig, supported: frozenset[str] | None) -> Candidate:
    return Candidate(label, launch, bench_flags(launch, supported).flags)


def knobs(model: "ModelFacts", host: "HostView", path: str, supported: frozenset[str] | None,
          objective: str = "tg", n_prompt: int = 512) -> list[Knob]:
    """The stages for a plan on ``path`` (gpu | moe | split | unified | cpu), for ``objective`` (tg | pp |
    balanced) with prompts of ``n_prompt`` tokens."""
    fits = _fits_checker(model, host, path)

    def make(label: str, launch: LaunchConfig) -> Candidate:
        return candidate(label, launch, supported)

    def keep(incumbent: Candidate, options: Sequence[tuple[str, LaunchConfig]]) -> list[Candidate]:
        out = []
        for label, launch in options:
            c = make(label, launch)
            if c.args != incumbent.args and fits(launch) and c.args not in {o.args for o in out}:
                out.append(c)
        return out

    def threads(inc: Candidate) -> list[Candidate]:
        current = _int(inc.launch.value("-t"))
        cores = len(host.cores) or None
        online = len(host.online_cpus or ()) or None
        values = [v for v in (cores, online, (current - 1) if current and current > 1 else None) if v]
        return keep(inc, [(f"-t {v}", inc.launch.with_flag("-t", str(v)).with_flag("-tb", str(v)))
                          for v in dict.fromkeys(values)])

    def cpu_set(inc: Candidate) -> list[Candidate]:
        options = []
        current = tuple(inc.launch.pin_cpus or ())
        one_per_core = tuple(sorted(core[0] for core in host.cores if core))
        if one_per_core and one_per_core not in (current, tuple(host.online_cpus or ())):
            options.append(("one CPU per core", replace(inc.launch, pin_cpus=one_per_core)))  # E-cores too
        if host.online_cpus and tuple(host.online_cpus) != current:
            options.append(("all CPUs", replace(inc.launch, pin_cpus=tuple(host.online_cpus))))
        if inc.launch.pin_cpus:
            options.append(("no pinning", replace(inc.launch, pin_cpus=None)))
        return keep(inc, options)

    def effective(values: Sequence[int], current: int, cap: int) -> list[int]:
        """Values that change what llama.cpp does: min(value, cap) differs from the current one's and from each
        other's (a batch of 1024 runs a 512-token prompt as 512 would)."""
        seen = {min(current, cap)}
        out = []
        for v in values:
            if min(v, cap) not in seen:
                seen.add(min(v, cap))
                out.append(v)
        return out

    def ubatch(inc: Candidate) -> list[Candidate]:
        batch = _int(inc.launch.value("-b")) or 2048
        current = _int(inc.launch.value("-ub")) or 512
        values = effective([v for v in UBATCHES if v <= batch], current, min(batch, n_prompt))
        return keep(inc, [(f"-ub {v}", inc.launch.with_flag("-ub", str(v))) for v in values])

    def batch(inc: Candidate) -> list[Candidate]:
        ubatch = _int(inc.launch.value("-ub")) or 512
        current = _int(inc.launch.value("-b")) or 2048
        values = effective([v for v in BATCHES if v >= ubatch], current, n_prompt)
        return keep(inc, [(f"-b {v}", inc.launch.with_flag("-b", str(v))) for v in values])

    def kv(inc: Candidate) -> list[Candidate]:
        from tunehost.advise.memory import kv_type_fits

        options = []
        for t in KV_TYPES:
            if t != "f16" and not kv_type_fits(model, t):
                continue
            launch = inc.launch.with_flag("-ctk", t).with_flag("-ctv", t)
            if t != "f16":
                launch = launch.with_flag("-fa", "on")  # a quantized V cache needs flash attention
            options.append((f"KV {t}", launch))
        return keep(inc, options)

    def flash(inc: Candidate) -> list[Candidate]:
        if (inc.launch.value("-ctv") or "f16") != "f16":
            return []
        return keep(inc, [(f"-fa {v}", inc.launch.with_flag("-fa", v)) for v in ("on", "off")])

    def mmap(inc: Candidate) -> list[Candidate]:
        if path == "gpu":
            return []
        if inc.launch.flag("--no-mmap"):
            return keep(inc, [("mmap", inc.launch.without("--no-mmap", "--mlock"))])
        return keep(inc, [("--no-mmap", inc.launch.with_flag("--no-mmap", None))])

    def repack(inc: Candidate) -> list[Candidate]:
        if path not in ("cpu", "split", "moe") or supported is not None and "--repack" not in supported:
            return []
        if inc.launch.flag("--no-repack"):
            return keep(inc, [("repack", inc.launch.without("--no-repack"))])
        return keep(inc, [("--no-repack", inc.launch.with_flag("--no-repack", None))])

    def offload(inc: Candidate) -> list[Candidate]:
        if path == "split":
            ngl = _int(inc.launch.value("-ngl"))
            return keep(inc, [(f"-ngl {ngl - d}", inc.launch.with_flag("-ngl", str(ngl - d)))
                              for d in (1, 2) if ngl and ngl - d > 0])
        if path == "moe":
            n = _int(inc.launch.value("--n-cpu-moe"))
            return keep(inc, [(f"--n-cpu-moe {n + d}", inc.launch.with_flag("--n-cpu-moe", str(n + d)))
                              for d in (1, 2) if n is not None and n + d <= model.block_count])
        return []

    def priority(inc: Candidate) -> list[Candidate]:
        if not inc.launch.flag("--prio"):
            return []
        return keep(inc, [("no --prio", replace(inc.launch.without("--prio"), nice=None))])

    not_tg = NOT_FOR_TG if objective == "tg" else None
    return [Knob("threads", threads), Knob("cpu set", cpu_set), Knob("ubatch", ubatch, not_tg),
            Knob("batch", batch, not_tg), Knob("kv cache", kv),
            Knob("flash attention", flash), Knob("mmap", mmap), Knob("repack", repack), Knob("offload", offload),
            Knob("priority", priority)]


def _fits_checker(model: "ModelFacts", host: "HostView", path: str) -> Any:
    """launch -> whether advise's memory model says it fits (RAM available, free VRAM of the largest GPU)."""
    from tunehost.advise.memory import ServerSettings, layer_budget, moe_budget
    from tunehost.advise.plan import RAM_SPARE

    free_vram = max((g.free_bytes or 0 for g in host.discrete_gpus), default=None)

    def fits(launch: LaunchConfig) -> bool:
        try:
            settings = ServerSettings(
                n_ctx=_int(launch.value("-c")) or 0, n_parallel=_int(launch.value("-np")) or 1,
                type_k=launch.value("-ctk") or "f16", type_v=launch.value("-ctv") or "f16",
                n_batch=_int(launch.value("-b")) or 2048, n_ubatch=_int(launch.value("-ub")) or 512,
                flash_attn=(launch.value("-fa") or "on") != "off")
            ngl = _int(launch.value("-ngl"))
            ncmoe = _int(launch.value("--n-cpu-moe"))
            if path == "moe" and ncmoe is not None:
                budget = moe_budget(model, settings, ncmoe)
            else:
                budget = layer_budget(model, settings, 0 if path == "cpu" else (ngl if ngl is not None
                                                                                 else model.block_count + 1))
        except (ValueError, KeyError, ZeroDivisionError):
            return False
        spare = RAM_SPARE if launch.flag("--no-mmap") else 0
        if host.ram_available is not None and budget.cpu_total + spare > host.ram_available:
            return False
        if path in ("gpu", "moe", "split") and free_vram and budget.gpu_total > free_vram:
            return False
        return True

    return fits


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
