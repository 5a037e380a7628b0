"""What `tunehost tune` searches: the knobs around advise's plan, each value checked against advise's memory model.

Each knob is one declaration in :data:`KNOBS` (in the manner of TuneD's declared get/set plugin commands): its
name, the values to try around the current incumbent, what a value changes in the LaunchConfig, and when the knob
applies. One knob per stage, in this order (the ones that matter most on a CPU first):

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
- ``priority``: --prio 2 against none, both ways from what the incumbent has. llama.cpp's --prio 2 (common/arg.cpp;
  ``set_process_priority`` and ggml-cpu's ``ggml_thread_apply_priority``) is nice -10 for the process and
  SCHED_FIFO 80 for the compute threads; raced only while the incumbent's pinning leaves a CPU to the system
  (real-time threads on every CPU could starve it). Without root or CAP_SYS_NICE llama-bench refuses it and the
  challenger is dropped with llama-bench's error.

``ubatch`` and ``batch`` are not searched for ``--objective tg``: llama-bench's tg test decodes one token per
llama_decode call, so neither can change it (they decide prompt processing: pp and balanced search them).

A value whose memory budget (:func:`tunehost.advise.memory.layer_budget` / ``moe_budget`` at the plan's context)
does not fit the free VRAM or available RAM is never measured. llama-bench options are checked against its
``--help`` by the caller (``supported``): a knob this build cannot express is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tunehost.advise.host_view import PRIO_NICE, why_no_prio
from tunehost.advise.memory import ServerSettings
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
PRIO = "2"  # llama.cpp's GGML_SCHED_PRIO_HIGH: setpriority -10, compute threads SCHED_FIFO 80 (ggml-cpu.c)


@dataclass(frozen=True)
class Space:
    """What every knob may look at: the model, the host, the plan's path, llama-bench's options, the objective."""

    model: "ModelFacts"
    host: "HostView"
    path: str  # gpu | moe | split | unified | cpu
    supported: frozenset[str] | None
    objective: str = "tg"
    n_prompt: int = 512


@dataclass(frozen=True)
class KnobSpec:
    """One declared knob: ``values(launch, space)`` the values to try around the incumbent's launch,
    ``change(launch, value)`` the launch with that value, ``label(value)`` its name in the race; ``applies(space)``
    when the knob is raced at all; ``not_for`` objectives it cannot change (then it is skipped, said so)."""

    name: str
    values: Callable[[LaunchConfig, Space], Iterable[Any]] = field(compare=False)
    change: Callable[[LaunchConfig, Any], LaunchConfig] = field(compare=False)
    label: Callable[[Any], str] = field(compare=False)
    applies: Callable[[Space], bool] = field(default=lambda space: True, compare=False)
    not_for: tuple[tuple[str, str], ...] = ()  # (objective, why)
    uses_cpus: bool = False  # its values keep different CPUs busy: the race judges its rounds as if all were used


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _effective(values: Sequence[int], current: int, cap: int) -> list[int]:
    """Values that change what llama.cpp does: min(value, cap) differs from the current one's and from each
    other's (a batch of 1024 runs a 512-token prompt as 512 would)."""
    seen = {min(current, cap)}
    out = []
    for v in values:
        if min(v, cap) not in seen:
            seen.add(min(v, cap))
            out.append(v)
    return out


def _switch(flag: str, *also_removed: str) -> dict[str, Any]:
    """A switch (``--no-mmap``): the other state than the incumbent's; True = the switch given."""
    return dict(values=lambda launch, space: [launch.flag(flag) is None],
                change=lambda launch, on: launch.with_flag(flag, None) if on else launch.without(flag, *also_removed))


# ---------------------------------------------------------------- the values each knob tries


def _thread_counts(launch: LaunchConfig, space: Space) -> list[int]:
    current = _int(launch.value("-t"))
    cores = len(space.host.cores) or None
    online = len(space.host.online_cpus or ()) or None
    return list(dict.fromkeys(v for v in (cores, online, (current - 1) if current and current > 1 else None) if v))


def _cpu_sets(launch: LaunchConfig, space: Space) -> list[tuple[str, tuple[int, ...] | None]]:
    host = space.host
    options: list[tuple[str, tuple[int, ...] | None]] = []
    current = tuple(launch.pin_cpus or ())
    one_per_core = tuple(sorted(core[0] for core in host.cores if core))
    if one_per_core and one_per_core not in (current, tuple(host.online_cpus or ())):
        options.append(("one CPU per core", one_per_core))  # E-cores too
    if host.online_cpus and tuple(host.online_cpus) != current:
        options.append(("all CPUs", tuple(host.online_cpus)))
    if launch.pin_cpus:
        options.append(("no pinning", None))
    return options


def _ubatches(launch: LaunchConfig, space: Space) -> list[int]:
    s = ServerSettings.from_launch(launch)
    return _effective([v for v in UBATCHES if v <= s.n_batch], s.n_ubatch, min(s.n_batch, space.n_prompt))


def _batches(launch: LaunchConfig, space: Space) -> list[int]:
    s = ServerSettings.from_launch(launch)
    return _effective([v for v in BATCHES if v >= s.n_ubatch], s.n_batch, space.n_prompt)


def _kv_types(launch: LaunchConfig, space: Space) -> list[str]:
    from tunehost.advise.memory import kv_type_fits

    if launch.flag("-md") is not None or (launch.value("--spec-type") or "").startswith("draft-"):
        # drafting (MTP or a draft model) keeps f16: llama-bench does not draft, so it cannot see q8_0 drive the
        # acceptance down (docs/advise.md); `bench --serve --draft-ab` measures a drafting server instead
        return ["f16"]
    return [t for t in KV_TYPES if t == "f16" or kv_type_fits(space.model, t)]


def _with_kv(launch: LaunchConfig, kv: str) -> LaunchConfig:
    out = launch.with_flag("-ctk", kv).with_flag("-ctv", kv)
    return out if kv == "f16" else out.with_flag("-fa", "on")  # a quantized V cache needs flash attention


def _flash(launch: LaunchConfig, space: Space) -> list[str]:
    return ["on", "off"] if ServerSettings.from_launch(launch).type_v == "f16" else []


def _offloads(launch: LaunchConfig, space: Space) -> list[tuple[str, int]]:
    if space.path == "split":
        ngl = _int(launch.value("-ngl"))
        return [("-ngl", ngl - d) for d in (1, 2) if ngl and ngl - d > 0]
    n = _int(launch.value("--n-cpu-moe"))
    return [("--n-cpu-moe", n + d) for d in (1, 2) if n is not None and n + d <= space.model.block_count]


def _priorities(launch: LaunchConfig, space: Space) -> list[str | None]:
    """No --prio where the incumbent has it; --prio 2 where it has none and advise's rule allows racing it here
    (tunehost.advise.host_view.why_no_prio: its pinning leaves a CPU free, this process may reach nice -10)."""
    if launch.flag("--prio"):
        return [None]
    return [PRIO] if why_no_prio(space.host, launch.pin_cpus) is None else []


def _with_prio(launch: LaunchConfig, prio: str | None) -> LaunchConfig:
    if prio is None:
        return replace(launch.without("--prio"), nice=None)
    return replace(launch.with_flag("--prio", prio), nice=PRIO_NICE)


def _llama_bench_has(option: str) -> Callable[[Space], bool]:
    return lambda space: space.supported is None or option in space.supported


# ---------------------------------------------------------------- the knobs, in stage order

KNOBS: tuple[KnobSpec, ...] = (
    KnobSpec("threads", _thread_counts, lambda launch, v: launch.with_flag("-t", str(v)).with_flag("-tb", str(v)),
             lambda v: f"-t {v}", uses_cpus=True),
    KnobSpec("cpu set", _cpu_sets, lambda launch, v: replace(launch, pin_cpus=v[1]), lambda v: v[0], uses_cpus=True),
    KnobSpec("ubatch", _ubatches, lambda launch, v: launch.with_flag("-ub", str(v)), lambda v: f"-ub {v}",
             not_for=(("tg", NOT_FOR_TG), ("tokens-per-joule", NOT_FOR_TG))),
    KnobSpec("batch", _batches, lambda launch, v: launch.with_flag("-b", str(v)), lambda v: f"-b {v}",
             not_for=(("tg", NOT_FOR_TG), ("tokens-per-joule", NOT_FOR_TG))),
    KnobSpec("kv cache", _kv_types, _with_kv, lambda v: f"KV {v}"),
    KnobSpec("flash attention", _flash, lambda launch, v: launch.with_flag("-fa", v), lambda v: f"-fa {v}"),
    KnobSpec("mmap", **_switch("--no-mmap", "--mlock"), label=lambda on: "--no-mmap" if on else "mmap",
             applies=lambda space: space.path != "gpu"),
    KnobSpec("repack", **_switch("--no-repack"), label=lambda on: "--no-repack" if on else "repack",
             applies=lambda space: space.path in ("cpu", "split", "moe") and _llama_bench_has("--repack")(space)),
    KnobSpec("offload", _offloads, lambda launch, v: launch.with_flag(v[0], str(v[1])), lambda v: f"{v[0]} {v[1]}",
             applies=lambda space: space.path in ("split", "moe")),
    KnobSpec("priority", _priorities, _with_prio, lambda v: "no --prio" if v is None else f"--prio {v}",
             applies=_llama_bench_has("--prio")),
)


def candidate(label: str, launch: LaunchConfig, supported: frozenset[str] | None) -> Candidate:
    return Candidate(label, launch, bench_flags(launch, supported).flags)


def knobs(model: "ModelFacts", host: "HostView", path: str, supported: frozenset[str] | None,
          objective: str = "tg", n_prompt: int = 512) -> list[Knob]:
    """The stages for a plan on ``path`` (gpu | moe | split | unified | cpu), for ``objective`` (tg | pp |
    balanced) with prompts of ``n_prompt`` tokens: one per declared knob (:data:`KNOBS`), in order."""
    space = Space(model, host, path, supported, objective, n_prompt)
    fits = _fits_checker(model, host, path)
    return [Knob(spec.name, _variants(spec, space, fits), dict(spec.not_for).get(objective), spec.uses_cpus)
            for spec in KNOBS]


def _variants(spec: KnobSpec, space: Space, fits: Callable[[LaunchConfig], bool]) -> Callable[[Candidate], list[Candidate]]:
    """The knob's challengers of an incumbent: each value's launch that changes llama-bench's flags, fits advise's
    memory model and is not another value's twin."""

    def variants(incumbent: Candidate) -> list[Candidate]:
        if not spec.applies(space):
            return []
        out: list[Candidate] = []
        for value in spec.values(incumbent.launch, space):
            launch = spec.change(incumbent.launch, value)
            c = candidate(spec.label(value), launch, space.supported)
            if c.args != incumbent.args and fits(launch) and c.args not in {o.args for o in out}:
                out.append(c)
        return out

    return variants


def _fits_checker(model: "ModelFacts", host: "HostView", path: str) -> Callable[[LaunchConfig], bool]:
    """launch -> whether advise's memory model says it fits (RAM available, free VRAM of the largest GPU)."""
    from tunehost.advise.memory import layer_budget, moe_budget
    from tunehost.advise.plan import RAM_SPARE

    free_vram = max((g.free_bytes or 0 for g in host.discrete_gpus), default=None)

    def fits(launch: LaunchConfig) -> bool:
        try:
            settings = ServerSettings.from_launch(launch)
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
