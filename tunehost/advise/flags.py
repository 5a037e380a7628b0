"""Which flags a llama-server build has (from its `--help`), and the plan's flags adapted to that build.

`parse_help(text)` reads the option lines llama.cpp prints (common/arg.cpp, `common_arg::to_string`):

    -ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers to store in VRAM ...
    -fa,   --flash-attn [on|off|auto]       set Flash Attention use ...
    --spec-type [none|draft-mtp|ngram-simple|...]

and older builds' forms (`-fa, --flash-attn   enable Flash Attention` with no value). `adapt(flags, caps)` keeps
each flag the build knows, rewrites the ones that changed spelling, and drops the rest with a note:

    --flash-attn on         -> -fa (builds where flash attention was an on/off switch), else dropped
    --n-cpu-moe N           -> -ot "blk\\.(0|...|N-1)\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU" (before --n-cpu-moe)
    --no-mmap / --mlock     -> --load-mode none|mlock|mmap+mlock (builds from late 2026 replaced both with -lm)
    --spec-type draft-mtp   -> --spec-type mtp (the first spelling, PR #22673), else dropped
    -md PATH                -> --spec-draft-model PATH where only that spelling exists
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Iterable, Mapping

from tunehost.host.snapshot import declare_reads

if TYPE_CHECKING:
    from tunehost.facts import HostFacts
    from tunehost.host import Host
    from tunehost.launch import Flag

HELP_TIMEOUT_S = 20.0
_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")
_CHOICES = re.compile(r"^[\[{]([A-Za-z0-9_.+|,-]+)[\]}]$")
# llama.cpp's LLM_FFN_EXPS_REGEX per block (common/common.h llm_ffn_exps_block_regex): routed experts only,
# never the shared expert (ffn_*_shexp) or the router (ffn_gate_inp)
EXPERT_TENSORS = r"ffn_(up|down|gate|gate_up)_(ch|)exps"


@dataclass(frozen=True)
class ServerCaps:
    """The options one llama-server build lists in --help: every spelling, and the value choices it shows."""

    names: frozenset[str] = frozenset()
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # every spelling -> ("on", "off", "auto")
    takes_value: frozenset[str] = frozenset()  # spellings followed by a value hint (N, TYPE, [on|off|auto], ...)
    source: str | None = None  # the command line it was read from

    def has(self, *names: str) -> bool:
        return any(n in self.names for n in names)

    def values(self, *names: str) -> tuple[str, ...]:
        for n in names:
            if n in self.choices:
                return self.choices[n]
        return ()


def parse_help(text: str | None) -> ServerCaps:
    """Option spellings and value choices from `llama-server --help` output (stdout and stderr joined)."""
    names: set[str] = set()
    takes: set[str] = set()
    choices: dict[str, tuple[str, ...]] = {}
    last: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.lstrip(" ")
        if not line.startswith("-") or len(raw) - len(line) > 4:  # deeper indents continue a description
            allowed = re.search(r"allowed values:\s*([A-Za-z0-9_, ]+)$", raw)
            if allowed and last:  # -ctk/-ctv list their types on a continuation line
                for s in last:
                    choices[s] = tuple(v.strip() for v in allowed.group(1).split(",") if v.strip())
            continue
        head = re.split(r"\s{2,}", re.sub(r",\s+", ", ", line.rstrip()), maxsplit=1)[0]  # "-fa,   --flash-attn"
        spellings: list[str] = []
        hint: list[str] = []
        for part in head.split(","):
            tokens = part.split()
            if tokens and _FLAG.match(tokens[0]):
                spellings.append(tokens[0])
                hint.extend(tokens[1:])
        last = spellings
        if not spellings:
            continue
        names.update(spellings)
        if hint:
            takes.update(spellings)
            match = _CHOICES.match(hint[0])
            if match and "|" in match.group(1):
                values = tuple(v for v in match.group(1).split("|") if v)
                for s in spellings:
                    choices[s] = values
    return ServerCaps(frozenset(names), choices, frozenset(takes))


def read_caps(host: "Host", server: str | None) -> ServerCaps | None:
    """`<llama-server> --help` through the host layer; None when it is not available or printed no options."""
    if not server:
        return None
    result = host.run([server, "--help"], timeout=HELP_TIMEOUT_S)
    if result is None:
        return None
    caps = parse_help((result.stdout or "") + "\n" + (result.stderr or ""))
    if not caps.names:
        return None
    return replace(caps, source=f"{server} --help")


@declare_reads("advise")
def read_advise_inputs(facts: "HostFacts") -> None:
    """What `tunehost advise --snapshot` reads beyond the checks: the memlock and nice limits (/proc/self/limits,
    /proc/self/status) and llama-server's --help, read through the recording run's host (`facts`, built once by the
    caller) so that it stores them."""
    from tunehost.advise.host_view import HostView

    read_caps(facts.host, HostView.from_facts(facts).llama_server)


def help_crash(host: "Host", server: str) -> str | None:
    """Why `<llama-server> --help` died by a signal on this CPU (the host answers from its cache or the snapshot);
    None when it did not."""
    result = host.run([server, "--help"], timeout=HELP_TIMEOUT_S)
    return None if result is None else crash_note(host, result.rc, "llama-server")


def crash_note(host: "Host", rc: int, program: str) -> str | None:
    """Why `program` ended with status `rc` when a signal killed it, for this host's CPU; None otherwise."""
    if rc >= 0:
        return None
    from tunehost.facts.llama_exit import explain_exit
    from tunehost.host.cpuinfo import cpu_flags

    return explain_exit(program, rc, cpu_flags(host))


def expert_override(layers: Iterable[int]) -> str:
    """The -ot value that keeps the routed experts of `layers` in RAM (what --n-cpu-moe N writes for 0..N-1)."""
    ids = sorted(set(layers))
    alternation = "|".join(str(i) for i in ids)
    block = ids[0] if len(ids) == 1 else f"({alternation})"
    return rf"blk\.{block}\.{EXPERT_TENSORS}=CPU"


# the planner's spelling of each option -> every spelling llama.cpp has used for it (common/arg.cpp)
ALIASES: dict[str, tuple[str, ...]] = {
    "-t": ("-t", "--threads"),
    "-tb": ("-tb", "--threads-batch"),
    "-c": ("-c", "--ctx-size"),
    "-np": ("-np", "--parallel"),
    "-b": ("-b", "--batch-size"),
    "-ub": ("-ub", "--ubatch-size"),
    "-fa": ("-fa", "--flash-attn"),
    "-ctk": ("-ctk", "--cache-type-k"),
    "-ctv": ("-ctv", "--cache-type-v"),
    "-ngl": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "--n-cpu-moe": ("--n-cpu-moe", "-ncmoe"),
    "-ot": ("-ot", "--override-tensor"),
    "--mlock": ("--mlock",),
    "--no-mmap": ("--no-mmap",),
    "--load-mode": ("-lm", "--load-mode"),
    "--prio": ("--prio",),
    "--numa": ("--numa",),
    "--host": ("--host",),
    "-m": ("-m", "--model"),
    "-mm": ("-mm", "--mmproj"),
    "-md": ("-md", "--model-draft", "--spec-draft-model"),
    "-cd": ("-cd", "--ctx-size-draft", "--spec-draft-ctx-size"),
    "-ngld": ("-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--spec-draft-ngl"),
    "--spec-type": ("--spec-type",),
    "--spec-draft-n-max": ("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n"),
    "--spec-draft-n-min": ("--spec-draft-n-min", "--draft-min", "--draft-n-min"),
}
# llama.cpp removed these (common/arg.cpp "removed params": arg_removed) in favour of the --spec-* names
REMOVED_SPEC_OPTIONS: dict[str, str] = {
    "--draft": "--spec-draft-n-max", "--draft-n": "--spec-draft-n-max", "--draft-max": "--spec-draft-n-max",
    "--draft-min": "--spec-draft-n-min", "--draft-n-min": "--spec-draft-n-min",
}


def _known(caps: ServerCaps, name: str) -> str | None:
    """The spelling this build lists for the planner's option `name`, or None."""
    if name in caps.names:
        return name
    for spelling in ALIASES.get(name, ()):
        if spelling in caps.names:
            return spelling
    return None


def adapt(flags: Iterable["Flag"], caps: ServerCaps | None) -> tuple[tuple["Flag", ...], tuple[str, ...]]:
    """The flags this build accepts, and one note per flag changed or dropped. Without caps nothing changes."""
    flags = tuple(flags)
    if caps is None:
        return flags, ()
    out: list[Flag] = []
    notes: list[str] = []
    load_mode: list[str] = []
    for flag in flags:
        name = flag.name
        if name in ("--mlock", "--no-mmap") and not caps.has(name) and caps.has("-lm", "--load-mode"):
            load_mode.append(name)
            continue
        spelling = _known(caps, name)
        if name == "-fa":
            if spelling is None:
                notes.append("dropped --flash-attn: this llama-server has no flash attention option")
                continue
            if spelling not in caps.takes_value:
                out.append(replace(flag, name=spelling, value=None,
                                   reason=flag.reason + " (this build's -fa is a switch without a value)"))
                notes.append("--flash-attn on written as -fa: this build's flash attention option takes no value")
                continue
        if name == "--n-cpu-moe" and spelling is None:
            ot = _known(caps, "-ot")
            if ot is not None and flag.value:
                n = int(flag.value)
                out.append(replace(flag, name=ot, value=expert_override(range(n)),
                                   reason=flag.reason + " (as -ot: this build has no --n-cpu-moe)"))
                notes.append(f"--n-cpu-moe {n} written as -ot with llama.cpp's expert regex: this build predates "
                             "--n-cpu-moe")
                continue
        if name == "--spec-type" and spelling is not None and flag.value:
            allowed = caps.values(spelling)
            if allowed and flag.value == "draft-simple" and flag.value not in allowed:
                notes.append("dropped --spec-type draft-simple: this build drafts with -md alone")
                continue
            if allowed and flag.value not in allowed:
                alt = next((v for v in ("draft-mtp", "mtp") if v in allowed), None) \
                    if flag.value in ("draft-mtp", "mtp") else None
                if alt is None:
                    notes.append(f"dropped --spec-type {flag.value}: this build offers {'|'.join(allowed)}")
                    continue
                notes.append(f"--spec-type {flag.value} written as --spec-type {alt} (this build's spelling)")
                flag = replace(flag, value=alt)
        if name in ("-ctk", "-ctv") and spelling is not None and flag.value:
            allowed = caps.values(spelling)
            if allowed and flag.value not in allowed:
                notes.append(f"dropped {name} {flag.value}: this build allows {', '.join(allowed)}")
                continue
        if spelling is None:
            notes.append(f"dropped {name}: this llama-server does not list it in --help")
            continue
        out.append(replace(flag, name=spelling) if spelling != name else flag)
    if load_mode:
        mode = {("--no-mmap",): "none", ("--mlock",): "mmap+mlock"}.get(tuple(sorted(set(load_mode))), "mlock")
        from tunehost.launch import Flag

        spelling = _known(caps, "--load-mode") or "--load-mode"  # the -lm short form reads poorly
        out.append(Flag(spelling, mode, "load the weights into RAM"
                        + (" and lock them there" if "--mlock" in load_mode else "")
                        + " (this build's --load-mode replaces --no-mmap/--mlock)"))
        notes.append(f"{' '.join(load_mode)} written as {spelling} {mode}: this build replaced them with --load-mode")
    return tuple(out), tuple(notes)


def fit_supported(caps: ServerCaps | None) -> bool:
    """Whether this llama-server has --fit / --fit-target / --fit-ctx (llama_params_fit, late 2025 on)."""
    return caps is not None and caps.has("--fit", "-fit") and caps.has("--fit-target", "-fitt")


__all__ = ["ServerCaps", "FitProbe", "parse_help", "read_caps", "help_crash", "crash_note", "adapt", "expert_override",
           "fit_supported", "fit_unusable", "parse_fit_params", "fit_params_path", "run_fit_params", "EXPERT_TENSORS", "FitEstimate",
           "parse_fit_print", "run_fit_print", "compare_estimate"]


# ---- llama-fit-params: llama.cpp's own placement (tools/fit-params/fit-params.cpp) ----

FIT_TIMEOUT_S = 120.0
_FIT_LINE = re.compile(r"(?:^|\s)-c\s+(\d{1,12})\s+-ngl\s+(-?\d{1,12})(?!\d)", re.ASCII)  # "٤٩" is no count
# llama-fit-params' output is read like any other program's: what tunehost writes into a command from it is held to
# what llama.cpp itself accepts (common/arg.cpp: -ts takes fewer than llama_max_devices() = 16 proportions, -ot is
# `tensor-regex=BUFFER_TYPE,...` with a backend's buffer type name), and to a printable, bounded form
FIT_MAX_LAYERS = 4096  # no GGUF has more blocks (the largest models have ~200); -1 = every layer
FIT_MAX_DEVICES = 16  # src/llama.cpp llama_max_devices()
FIT_MAX_OVERRIDES = 1024
_FIT_BUFT = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]{0,63}")
_FIT_PATTERN = re.compile(r"[!-~]{1,512}")  # printable ASCII, no blank: a tensor-name regex
# one -ts proportion as tunehost writes it: ASCII decimal digits (Python's float() also reads "1_0", "٣" and "１",
# which would reach the command as they came and which llama.cpp's std::stof reads otherwise or not at all)
_FIT_SHARE = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")
_EXPERT_LAYER = re.compile(r"^blk\\\.(\d+)\\\.ffn_\(up\|down\|gate(?:\|gate_up)?\)_(?:\(ch\|\))?exps$")


@dataclass(frozen=True)
class FitProbe:
    """What `llama-fit-params` printed: `-c N -ngl K [-ts A,B] [-ot "pattern=BUFT,..."]` (its last stdout line)."""

    n_ctx: int
    gpu_layers: int  # -1: every layer
    tensor_split: str | None = None
    overrides: tuple[str, ...] = ()  # "pattern=BUFFER_TYPE"
    command: str = ""

    @property
    def cpu_expert_layers(self) -> tuple[int, ...] | None:
        """The layers whose routed experts the overrides keep in RAM, when that is all they do; else None."""
        layers = []
        for item in self.overrides:
            pattern, _, buft = item.rpartition("=")
            match = _EXPERT_LAYER.match(pattern)
            if not match or not buft.upper().startswith("CPU"):
                return None
            layers.append(int(match.group(1)))
        return tuple(sorted(layers))


def fit_unusable(probe: FitProbe) -> str | None:
    """Why llama-fit-params' placement cannot be written into a command (a context or layer count out of range, a
    tensor split that is not finite proportions, an override that is not `regex=BUFFER_TYPE`), or None."""
    from tunehost.bounds import MAX_TOKENS
    from tunehost.printable import one_line

    if not 0 < probe.n_ctx <= MAX_TOKENS:
        return f"-c {probe.n_ctx} is not a context size"
    if not -1 <= probe.gpu_layers <= FIT_MAX_LAYERS:
        return f"-ngl {probe.gpu_layers} is not a layer count"
    if probe.tensor_split is not None:
        parts = re.split(r"[,/]+", probe.tensor_split)
        shares = [float(p) for p in parts] \
            if len(parts) < FIT_MAX_DEVICES and all(_FIT_SHARE.fullmatch(p) for p in parts) else []
        if not shares or not all(math.isfinite(x) and 0 <= x <= 1e6 for x in shares) or not any(shares):
            return (f"-ts '{one_line(probe.tensor_split, 40)}' is not up to {FIT_MAX_DEVICES - 1} finite, "
                    "non-negative proportions")
    if len(probe.overrides) > FIT_MAX_OVERRIDES:
        return f"{len(probe.overrides)} -ot overrides (at most {FIT_MAX_OVERRIDES})"
    for item in probe.overrides:
        pattern, eq, buft = item.rpartition("=")
        bad = not eq or not _FIT_PATTERN.fullmatch(pattern) or not _FIT_BUFT.fullmatch(buft)
        if not bad:
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError):
                bad = True
        if bad:
            return f"-ot '{one_line(item, 60)}' is not a tensor pattern=buffer type"
    return None


def parse_fit_params(stdout: str | None, command: str = "") -> FitProbe | None:
    """The placement line of `llama-fit-params` output; None when there is none."""
    for line in reversed((stdout or "").strip().splitlines()):
        match = _FIT_LINE.search(line)
        if not match:
            continue
        ts = re.search(r"\s-ts\s+(\S+)", line)
        ot = re.search(r'\s-ot\s+"([^"]*)"', line) or re.search(r"\s-ot\s+(\S+)", line)
        overrides = tuple(o for o in (ot.group(1).split(",") if ot else ()) if o)
        return FitProbe(int(match.group(1)), int(match.group(2)), ts.group(1) if ts else None, overrides, command)
    return None


def fit_params_path(host: "Host", server: str | None) -> str | None:
    """llama-fit-params beside the llama-server binary named by a path (the same build), else on PATH."""
    if server and "/" in server:
        beside = server.rsplit("/", 1)[0] + "/llama-fit-params"
        if host.files.exists(beside):
            return beside
    return host.which("llama-fit-params")


def run_fit_params(host: "Host", binary: str, args: list[str]) -> tuple[FitProbe | None, str | None]:
    """Run llama-fit-params with the plan's model/context/KV arguments; (probe, None) or (None, why not)."""
    argv = [binary, *args]
    result = host.run(argv, timeout=FIT_TIMEOUT_S)
    line = " ".join(argv)
    if result is None:
        return None, f"{binary} is not runnable here"
    if result.rc == 124:
        return None, f"llama-fit-params timed out after {FIT_TIMEOUT_S:g} s"
    if result.rc < 0:
        return None, crash_note(host, result.rc, "llama-fit-params")
    if not result.ok:
        last = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or [f"exit status {result.rc}"]
        return None, f"llama-fit-params failed: {last[0][:200]}"
    probe = parse_fit_params(result.stdout, line)
    if probe is None:
        return None, "llama-fit-params printed no placement"
    unusable = fit_unusable(probe)
    if unusable is not None:  # its output is untrusted: never written into a command as it came
        return None, f"llama-fit-params printed a placement tunehost cannot use ({unusable})"
    return probe, None


# ---- llama-fit-params --fit-print on: llama.cpp's own memory estimate for a placement (common/fit.cpp) ----

_FIT_PRINT_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_.:-]{0,63}) (\d{1,9}) (\d{1,9}) (\d{1,9})\s*$")
FIT_DISAGREE = 0.05  # beyond this share of llama.cpp's figure, tunehost's budget and llama.cpp's are said to differ


@dataclass(frozen=True)
class DeviceEstimate:
    """One line of `--fit-print on` output: MiB of weights, context (KV + recurrent state) and compute buffer."""

    device: str  # "CUDA0", "Vulkan0", ... or "Host"
    model_mib: int
    context_mib: int
    compute_mib: int


@dataclass(frozen=True)
class FitEstimate:
    """llama.cpp's estimate for the plan's own flags: it loads the model and creates the context without allocating
    (common_fit_print -> common_get_device_memory_data_impl, no_alloc), so every figure is what this build would
    allocate, per device."""

    devices: tuple[DeviceEstimate, ...]
    command: str = ""

    @property
    def context_mib(self) -> int:
        return sum(d.context_mib for d in self.devices)

    @property
    def model_mib(self) -> int:
        return sum(d.model_mib for d in self.devices)

    @property
    def compute_mib(self) -> int:
        return sum(d.compute_mib for d in self.devices)


def parse_fit_print(stdout: str | None, command: str = "") -> FitEstimate | None:
    """`NAME model context compute` lines (MiB), one per device and one for Host; None when there are none."""
    devices = []
    for line in (stdout or "").splitlines()[-64:]:
        match = _FIT_PRINT_LINE.match(line.strip())
        if match:
            devices.append(DeviceEstimate(match.group(1), *(int(match.group(i)) for i in (2, 3, 4))))
    return FitEstimate(tuple(devices), command) if devices else None


def run_fit_print(host: "Host", binary: str, args: list[str]) -> tuple[FitEstimate | None, str | None]:
    """`llama-fit-params --fit-print on` with the plan's flags; (estimate, None) or (None, why not)."""
    argv = [binary, *args, "-fitp", "on"]
    result = host.run(argv, timeout=FIT_TIMEOUT_S)
    if result is None:
        return None, f"{binary} is not runnable here"
    if not result.ok:
        last = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or [f"exit status {result.rc}"]
        return None, f"llama-fit-params --fit-print failed: {last[0][:200]}"
    estimate = parse_fit_print(result.stdout, " ".join(argv))
    return (estimate, None) if estimate else (None, "llama-fit-params --fit-print printed no estimate")


def compare_estimate(estimate: FitEstimate, kv_bytes: int, gpu_weights_bytes: int, compute_bytes: int
                     ) -> tuple[str, ...]:
    """Notes putting llama.cpp's figures beside tunehost's; a KV/state difference, or a GPU-weights difference, beyond
    FIT_DISAGREE is said as a disagreement. Host "model" is not compared: llama.cpp counts only the weights it copies
    into RAM there (the token embeddings of an mmap'd file), not the mapped file; tunehost's compute buffer is a
    deliberate over-estimate, so it is only shown."""
    mib = 1024 * 1024
    per_device = "; ".join(f"{d.device}: weights {d.model_mib}, KV+state {d.context_mib}, compute {d.compute_mib}"
                           for d in estimate.devices)
    gpu_model = sum(d.model_mib for d in estimate.devices if d.device != "Host")
    ours = f"GPU weights {gpu_weights_bytes // mib}, " if gpu_model or gpu_weights_bytes else ""
    notes = [f"llama.cpp's own estimate for this plan (llama-fit-params --fit-print, MiB): {per_device}; tunehost: "
             f"{ours}KV+state {kv_bytes // mib}, compute {compute_bytes // mib}"]
    for label, theirs, ours in (("KV cache and recurrent state", estimate.context_mib, kv_bytes / mib),
                                ("GPU weights", gpu_model, gpu_weights_bytes / mib)):
        if theirs and abs(ours - theirs) > FIT_DISAGREE * theirs + 1:
            notes.append(f"tunehost's {label} ({ours:.0f} MiB) differs from llama.cpp's ({theirs} MiB) by "
                         f"{(ours - theirs) / theirs:+.0%}: llama.cpp's figure is the one it will allocate")
    return tuple(notes)
