"""The honest comparison engine: warm up, interleave baseline and candidate, stop only when the answer is clear.

How a measurement runs (docs/bench.md explains why):

1. every option in the flags is checked against the binary's ``--help`` (and against the options tunehost sets
   itself) before anything runs;
2. warm-up: one unrecorded llama-bench run per configuration (``-r 1``): it pages the model in, wakes the CPU
   and fails fast on a flag llama-bench rejects at run time (its own per-test warm-up stays on as well);
3. counted rounds: each round runs every configuration once with ``-r REPS``; the order alternates
   (A B, B A, A B, ...) so drift and any "second in line" effect hit both sides equally;
4. each round gives one paired observation per test, log(candidate / baseline) of that round's medians; after
   ``min_rounds`` rounds the anytime-valid interval over rounds is computed (:func:`tunehost.bench.stats.compare_rounds`,
   a confidence sequence, so looking after every round does not inflate the false-verdict rate); while it is too
   wide to decide (:func:`tunehost.bench.stats.needs_more_rounds`) another round runs, as long as the projected
   end stays inside the budget and ``max_rounds`` is not reached;
5. the host is watched through the counted rounds (:mod:`tunehost.bench.watch`); a disturbed run's verdicts
   read "disturbed".

:func:`run_rounds` is the engine (the llama-bench call and the clock are injected, so tests drive it with fakes);
:func:`measure` does everything around it and returns a :class:`~tunehost.bench.results.SavedResult`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunehost.bench.llama_bench import BenchResult
from tunehost.bench.results import (
    Comparison, ConfigResult, Invocation, SavedResult, Side, compare_configs, config_from_invocations, now_utc,
    rounds_of,
)
from tunehost.errors import TunehostError

from tunehost.bench.watch import WatchReport

if TYPE_CHECKING:
    from tunehost.advise.ceiling import KvRead
    from tunehost.advise.host_calibration import StoredBandwidth
    from tunehost.bench.watch import HostWatcher
    from tunehost.facts import HostFacts
    from tunehost.host import Host
    from tunehost.launch import LaunchConfig
    from tunehost.model import ModelFacts

DEFAULT_N_PROMPT = 512
DEFAULT_N_GEN = 128
DEFAULT_REPS = 3
DEFAULT_BUDGET_S = 120.0
MIN_RUN_DEADLINE_S = 60.0  # one llama-bench run's deadline is max(this, --budget): run_deadline_s
MIN_ROUNDS = 5  # = stats.MIN_ROUNDS: no verdict from fewer rounds, so the engine never stops before them
MAX_ROUNDS = 200  # the budget usually ends a run first (a tiny model fits ~200 rounds in 120 s); the interval is valid wherever it stops
HEAD_BYTES = 1024 * 1024  # the model's identity: sha256 of its first MiB (GGUF header + tensor table start)

# llama-bench options tunehost sets itself -> what to use instead
CONTROLLED_OPTIONS: dict[str, str] = {
    **dict.fromkeys(("-m", "--model"), "give the model with tunehost's --model"),
    **dict.fromkeys(("-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hft", "--hf-token"),
                    "download the model first and give its path with --model"),
    **dict.fromkeys(("-p", "--n-prompt"), "use tunehost's -p"),
    **dict.fromkeys(("-n", "--n-gen"), "use tunehost's -n"),
    **dict.fromkeys(("-d", "--n-depth"), "use tunehost's --depth"),
    "-pg": "tunehost measures pp and tg separately (-p, -n)",
    **dict.fromkeys(("-r", "--repetitions"), "use tunehost's --reps"),
    **dict.fromkeys(("-o", "--output", "-oe", "--output-err"), "tunehost reads llama-bench's JSONL itself"),
    "--progress": "tunehost asks for progress itself",
    **dict.fromkeys(("-h", "--help", "--list-devices", "--version"), "it does not run a benchmark"),
}
# llama-server spells several items of ONE value with commas where llama-bench, which keeps commas for "several
# values", wants another separator (tools/llama-bench/llama-bench.cpp: -ot overrides ';', -ts shares '/')
_WITHIN_VALUE = {"-ot": ";", "--override-tensor": ";", "-ts": "/", "--tensor-split": "/"}
_OPTION = re.compile(r"^--?[A-Za-z][\w-]*$")
_RANGE = re.compile(r"^-?\d+-\d+([+*]\d+)?$")
# options that take no value in llama-bench
_SWITCHES = frozenset({"--no-warmup", "-v", "--verbose", "--offline", "--progress", "-h", "--help",
                       "--list-devices", "--version"})

Invoke = Callable[[Sequence[str], Callable[[str], None] | None], list[BenchResult]]


@dataclass(frozen=True)
class BenchConfig:
    """One side of a comparison: a name and the llama-bench flags it adds (``()`` = llama-bench's defaults)."""

    name: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchSettings:
    model: str
    n_prompt: int = DEFAULT_N_PROMPT
    n_gen: int = DEFAULT_N_GEN
    depth: int = 0
    reps: int = DEFAULT_REPS
    budget_s: float = DEFAULT_BUDGET_S
    min_rounds: int = MIN_ROUNDS
    max_rounds: int = MAX_ROUNDS
    warmup: bool = True
    progress_lines: bool = True  # add --progress (llama-bench prints a line per repetition on stderr)
    # around the rounds (:func:`measure`): which llama-bench, what to read of the host, the result's label
    llama_bench: str | os.PathLike[str] | None = None  # the binary or its directory; None: tunehost's search
    label: str | None = None
    ceiling: bool = True  # the memory-bandwidth ceiling on TG (tg_ceiling)
    describe: bool = True  # the host summary (describe_host: CPU, the doctor's findings)
    watch: bool = True  # watch the host through the counted rounds (HostWatcher)
    timeout_s: float | None = None  # one llama-bench run's deadline; None: run_deadline_s(budget_s)

    def to_json(self) -> dict[str, Any]:
        return {"n_prompt": self.n_prompt, "n_gen": self.n_gen, "n_depth": self.depth, "reps": self.reps,
                "budget_s": self.budget_s, "min_rounds": self.min_rounds, "max_rounds": self.max_rounds,
                "warmup": "one unrecorded llama-bench run per configuration (-r 1)" if self.warmup else "none",
                "order": "alternating: A B, B A, A B, ..."}


@dataclass(frozen=True)
class MeasureHooks:
    """What :func:`measure` reports to and asks of its caller: progress and status lines, the llama-bench runner
    (tests: a fake), and a quiet RAM bandwidth from the results store (asked only when the host is busy)."""

    on_progress: "Callable[[Progress], None] | None" = None
    on_status: Callable[[str], None] | None = None
    invoke: "Invoke | None" = None
    stored_bandwidth: "Callable[[], StoredBandwidth | None] | None" = None


@dataclass(frozen=True)
class BenchFlags:
    """A launch configuration as llama-bench options (:func:`bench_flags`), and the CPUs it is pinned to."""

    flags: tuple[str, ...]
    cpus: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Progress:
    """What the engine is doing, for a progress bar."""

    phase: str  # "warm-up", "round", "done"
    config: str
    round: int  # 0 for warm-up
    rounds_planned: int
    done: int  # invocations finished
    planned: int  # invocations planned so far (grows when rounds are added)
    elapsed_s: float
    eta_s: float | None
    line: str | None = None  # llama-bench's latest progress line


@dataclass(frozen=True)
class RoundsOutcome:
    """What :func:`run_rounds` measured."""

    configs: tuple[BenchConfig, ...]
    invocations: tuple[Invocation, ...]
    results: Mapping[str, Mapping[str, BenchResult]] = field(hash=False)  # config -> test -> last BenchResult
    rounds: int
    stop_reason: str
    wall_s: float
    watch: "WatchReport | None" = None
    round_watch: tuple["WatchReport", ...] = ()  # one report per counted round (tunehost.bench.watch.reasons_for)


# ---------------------------------------------------------------- flags


def parse_flags(text: str | None, *, what: str = "flags") -> tuple[str, ...]:
    """FLAGS as one shell-quoted string ("-t 8 -fa on") -> argument list."""
    if not text:
        return ()
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise TunehostError(f"{what} {text!r} cannot be split: {exc}") from None


def check_flags(flags: Sequence[str], supported: frozenset[str] | None, *, what: str) -> None:
    """One clear TunehostError for the first problem: an option tunehost sets itself, one this llama-bench does not
    list in --help, or several values for one option (tunehost compares one configuration against another)."""
    seen: set[str] = set()
    i = 0
    while i < len(flags):
        token = flags[i]
        if not _OPTION.match(token):
            raise TunehostError(f"{what}: {token!r} is not an option (values follow their option: \"-t 4\")")
        if token in CONTROLLED_OPTIONS:
            raise TunehostError(f"{what}: {token} is set by tunehost; {CONTROLLED_OPTIONS[token]}")
        if supported is not None and token not in supported:
            raise TunehostError(f"{what}: this llama-bench has no option {token} (see `llama-bench --help`)")
        if token in seen:
            raise TunehostError(f"{what}: {token} is given twice; one value per option (tunehost compares one "
                                "configuration against another: put the other in --candidate)")
        seen.add(token)
        if token in _SWITCHES:
            i += 1
            continue
        if i + 1 >= len(flags):
            raise TunehostError(f"{what}: {token} needs a value")
        value = flags[i + 1]
        if "," in value or _RANGE.match(value):
            within = _WITHIN_VALUE.get(token)
            hint = (f" (llama-bench separates the parts of one {token} value with '{within}')" if within else "")
            raise TunehostError(f"{what}: {token} {value} asks for several values; tunehost compares one "
                                f"configuration against another (put the other in --candidate){hint}")
        i += 2


def bench_args(settings: BenchSettings, flags: Sequence[str], *, reps: int | None = None) -> list[str]:
    """The llama-bench arguments of one run (without the binary and -o, which run_llama_bench adds)."""
    args = ["-m", settings.model, "-p", str(settings.n_prompt), "-n", str(settings.n_gen)]
    if settings.depth:
        args += ["-d", str(settings.depth)]
    args += ["-r", str(reps or settings.reps), *flags]
    if settings.progress_lines:
        args.append("--progress")
    return args


def command_line(binary: str | os.PathLike[str], args: Sequence[str]) -> str:
    """The exact command line a user can paste to reproduce one run."""
    return shlex.join([str(binary), *args, "-o", "jsonl"])


# ---------------------------------------------------------------- the engine


@dataclass(frozen=True)
class RoundsHooks:
    """What :func:`run_rounds` drives and reports to (tests: fakes): the llama-bench runner, or ``invoke_for``
    picking one per configuration (the server bench measures two running servers, one per configuration, and their
    flags alone may be equal: an A/A run); the host watcher; the progress callback; the clock."""

    invoke: Invoke
    watcher: "HostWatcher | None" = None
    on_progress: Callable[[Progress], None] | None = None
    clock: Callable[[], float] = time.monotonic
    invoke_for: Callable[[BenchConfig], Invoke] | None = None

    def runner(self, config: BenchConfig) -> Invoke:
        return self.invoke if self.invoke_for is None else self.invoke_for(config)


def run_rounds(configs: Sequence[BenchConfig], settings: BenchSettings, hooks: RoundsHooks) -> RoundsOutcome:
    """Warm up, then interleaved rounds until every test is decided, the budget or max_rounds is reached."""
    if not configs:
        raise ValueError("nothing to measure")
    if settings.n_prompt <= 0 and settings.n_gen <= 0:
        raise TunehostError("nothing to measure: -p and -n are both 0")
    engine = _Rounds(configs, settings, hooks)
    if settings.warmup:
        engine.warm_up()
    engine.run()
    return engine.outcome()


class _Rounds:
    """The state of one engine run: every invocation so far, each configuration's latest results and counted
    durations (the ETA and the budget check), the rounds played and planned, each round's watch report."""

    def __init__(self, configs: Sequence[BenchConfig], settings: BenchSettings, hooks: RoundsHooks):
        self.configs, self.settings, self.hooks = configs, settings, hooks
        self.watcher = hooks.watcher
        self.start = hooks.clock()
        self.invocations: list[Invocation] = []
        self.results: dict[str, dict[str, BenchResult]] = {c.name: {} for c in configs}
        self.durations: dict[str, list[float]] = {c.name: [] for c in configs}
        self.n_warm = len(configs) if settings.warmup else 0
        self.rounds_planned = settings.min_rounds
        self.done = 0  # invocations finished
        self.rounds = 0
        self.round_watch: list[WatchReport] = []
        self.stop_reason = "max rounds"
        self.cpus: int | None = None  # the CPUs the configurations keep busy (set when the counted rounds begin)

    # ---- progress

    def planned(self) -> int:
        return self.n_warm + self.rounds_planned * len(self.configs)

    def eta(self) -> float | None:
        known = [sum(d) / len(d) for d in self.durations.values() if d]
        if not known:
            return None
        per = sum(known) / len(known)
        return max(0.0, (self.planned() - self.done) * per)

    def emit(self, phase: str, config: str, round_no: int, line: str | None = None) -> None:
        if self.hooks.on_progress is not None:
            self.hooks.on_progress(Progress(phase, config, round_no, self.rounds_planned, self.done, self.planned(),
                                            self.hooks.clock() - self.start, self.eta(), line))

    # ---- the rounds

    def run_one(self, config: BenchConfig, round_no: int) -> None:
        """One llama-bench invocation of ``config``: a warm-up (round 0, ``-r 1``) or a counted one."""
        clock, settings = self.hooks.clock, self.settings
        counted = round_no > 0
        args = bench_args(settings, config.flags, reps=settings.reps if counted else 1)
        phase = "round" if counted else "warm-up"
        self.emit(phase, config.name, round_no)
        mark = self.watcher.energy_mark() if counted and self.watcher is not None and \
            hasattr(self.watcher, "energy_mark") else None
        began = clock()
        got = self.hooks.runner(config)(args, lambda line: self.emit(phase, config.name, round_no, line))
        took = clock() - began
        energy = self.watcher.energy_since(mark) if mark is not None else None  # exactly this run's energy
        by_test = _one_per_test(got, config)
        if counted:
            self.durations[config.name].append(took)
        self.invocations.append(Invocation(config=config.name, round=round_no, counted=counted,
                                           started_s=began - self.start, duration_s=took, argv=tuple(args),
                                           samples={t: r.samples_ts or (r.avg_ts,) for t, r in by_test.items()},
                                           energy=energy.to_json() if energy is not None else None,
                                           tokens=sum(r.n_gen * len(r.samples_ts or (r.avg_ts,))
                                                      for r in by_test.values())))
        self.results[config.name] = by_test
        self.done += 1
        if self.watcher is not None and counted:
            self.watcher.tick()

    def warm_up(self) -> None:
        for config in self.configs:
            self.run_one(config, 0)

    def run(self) -> None:
        """Counted rounds, the order alternating, until :meth:`stop_now` names a reason."""
        if self.watcher is not None:
            self.watcher.start()
        lap = getattr(self.watcher, "lap", None)
        self.cpus = _cpus_used(self.configs, getattr(self.watcher, "cpu_count", None) or os.cpu_count() or 1)
        while True:
            order = list(self.configs) if self.rounds % 2 == 0 else list(reversed(self.configs))
            for config in order:
                self.run_one(config, self.rounds + 1)
            self.rounds += 1
            if lap is not None:
                self.round_watch.append(lap(self.cpus))
            if self.rounds < self.settings.min_rounds:
                continue
            reason = self.stop_now()
            if reason is not None:
                self.stop_reason = reason
                break
            self.rounds_planned = self.rounds + 1
        self.rounds_planned = self.rounds

    def stop_now(self) -> str | None:
        """Why the engine stops after this round (from ``min_rounds`` on), or None: another round."""
        from tunehost.bench import stats

        settings, rounds = self.settings, self.rounds
        if rounds >= settings.max_rounds:
            return f"max rounds ({settings.max_rounds})"
        # the estimate leaves disturbed rounds out (quiet_rounds_only), so the engine decides on the quiet ones:
        # a disturbed round is made up for (within the budget), never counted towards min_rounds or a decision
        disturbed = {n for n, w in enumerate(self.round_watch, start=1) if w.disturbed}
        quiet = [i for i in self.invocations if i.round not in disturbed]
        if rounds - len(disturbed) >= settings.min_rounds and not _undecided(self.configs, quiet, stats):
            return "decided"
        round_s = sum(sum(self.durations[c.name][-1:]) for c in self.configs)
        if self.hooks.clock() - self.start + round_s > settings.budget_s:
            return f"budget ({settings.budget_s:g} s)"
        return None

    def outcome(self) -> RoundsOutcome:
        report = self.watcher.stop() if self.watcher is not None else None
        if report is not None and self.cpus is not None:
            from tunehost.bench.watch import rejudge

            report = rejudge(report, self.cpus)  # judged for the CPUs the configurations use
        self.emit("done", self.configs[-1].name, self.rounds)
        return RoundsOutcome(tuple(self.configs), tuple(self.invocations), self.results, self.rounds,
                             self.stop_reason, self.hooks.clock() - self.start, report, tuple(self.round_watch))


def _cpus_used(configs: Sequence[BenchConfig], cpu_count: int) -> int | None:
    """The CPUs the busiest configuration keeps busy (what a round's "disturbed" is judged against); None when
    one of them leaves the thread count to llama-bench."""
    from tunehost.bench.watch import cpus_used_by

    used = [cpus_used_by(c.flags, cpu_count) for c in configs]
    return None if any(u is None for u in used) else max(u for u in used if u is not None)


def _one_per_test(got: Sequence[BenchResult], config: BenchConfig) -> dict[str, BenchResult]:
    by_test: dict[str, BenchResult] = {}
    for result in got:
        if result.test in by_test:
            raise TunehostError(f"{config.name}: llama-bench ran {result.test} more than once in one run "
                                f"(flags {' '.join(config.flags)!r} give several values); one value per option")
        by_test[result.test] = result
    if not by_test:
        raise TunehostError(f"{config.name}: llama-bench returned no results")
    return by_test


def _undecided(configs: Sequence[BenchConfig], invocations: Sequence[Invocation], stats: Any) -> bool:
    """Whether any test still needs rounds: a comparison whose interval over rounds is too wide to decide, or (one
    config) a level whose own confidence sequence is wider than ± the practical threshold (docs/bench.md).

    The same stats.compare_rounds the saved result reports, so the engine stops on exactly what it shows."""
    if len(configs) == 1:
        return any(stats.level_radius(r) > stats.PRACTICAL_THRESHOLD
                   for r in rounds_of(invocations, configs[0].name).values())
    base = rounds_of(invocations, configs[0].name)
    for other in configs[1:]:
        cand = rounds_of(invocations, other.name)
        for test, runs in base.items():
            if test in cand and len(cand[test]) == len(runs) \
                    and stats.needs_more_rounds(stats.compare_rounds(runs, cand[test], paired=True, describe=False)):
                return True
    return False


# ---------------------------------------------------------------- around the engine


def model_identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Path, size and the sha256 of the first MiB: enough to tell two model files apart without reading 40 GB.

    The GGUF header is read first (tunehost.model), so a file that is not a GGUF, or is cut short, is one clear
    error before llama-bench runs."""
    from tunehost.model import read_model

    read_model(path)
    from tunehost.inputs import input_file_size, read_input_file

    model = Path(path)
    size = input_file_size(model, "a GGUF file")
    head = read_input_file(model, "a GGUF file", limit=HEAD_BYTES)[:HEAD_BYTES]
    if not head.startswith(b"GGUF"):
        raise TunehostError(f"{path} is not a GGUF model file (no GGUF magic)")
    return {"path": str(model.resolve()), "name": model.name, "size_bytes": size,
            "sha256_head": hashlib.sha256(head).hexdigest(), "head_bytes": len(head)}


def tg_ceiling(model: str | os.PathLike[str], flags: Sequence[str] = (), facts: "HostFacts | None" = None, *,
               probe_bytes: int = 512 * 1024 * 1024,
               stored_bandwidth: "Callable[[], StoredBandwidth | None] | None" = None,
               depth: int = 0, depths: Sequence[int] = ()) -> dict[str, Any] | None:
    """The memory-bandwidth ceiling on token generation for the placement ``flags`` give (-ngl, --n-cpu-moe):
    GPU-resident weights at VRAM bandwidth, CPU-resident ones at the host-RAM bandwidth, plus the same with host RAM
    at the peak the configured DIMMs allow (tunehost.advise.ceiling, shared with advise).

    A busy host's bandwidth is never used silently (issue 29): when tunehost.facts.processes.busy_reason calls the
    live host busy, the RAM figure is, in order, a quiet measurement of earlier runs (``stored_bandwidth``, read
    only then), the DIMMs' peak, or a probe anyway marked unreliable. ``ram_source`` says which
    (tunehost.advise.host_calibration's *_SOURCE), ``ram_busy`` why the host was busy.

    ``facts``: the host's (its GPUs, DIMMs and processes; None: no host, the RAM probe alone). Measured before the
    rounds (never while llama-bench runs); {"error": ...} when the model cannot be read. ``depth``: the context depth
    the tests generate at (llama-bench -d): a token then also reads that much KV cache, of the types -ctk/-ctv give,
    with its layer or in host RAM under -nkvo 1 (``depth`` and ``kv_bytes_per_token`` in the result). ``depths``: the
    same ceiling at each of these depths too, on the same bandwidths (``at_depth``: depth -> ceiling; the server
    bench's prompt depths)."""
    from tunehost.advise.bandwidth import bytes_per_token
    from tunehost.advise.ceiling import placement_from_flags, tg_ceiling_for
    from tunehost.advise.host_calibration import BUSY_SOURCE, DIMM_SOURCE, MEASURED_SOURCE, STORE_SOURCE
    from tunehost.model import read_model

    try:
        facts_model = read_model(model)
        per_token = bytes_per_token(facts_model)
    except (TunehostError, OSError, ValueError, KeyError) as exc:
        return {"error": f"model not readable for the ceiling: {exc}"}
    host = facts.host if facts is not None else None
    gpu, unified, bw = _host_bandwidths(facts)
    placement = placement_from_flags(facts_model, flags, gpu=gpu, unified=unified)
    bandwidth = None
    source = busy = None
    if placement.path != "gpu":
        busy = busy_now(host)
        stored = stored_bandwidth() if busy and stored_bandwidth is not None else None
        if busy and stored is not None:
            source, bw = STORE_SOURCE, replace(bw, ram_gbps=stored.gbps, ram_basis=stored.basis())
        elif busy and bw.dimm_gbps:
            from tunehost.advise.ceiling import CPU_DIMM_EFFICIENCY

            source = DIMM_SOURCE
            bw = replace(bw, ram_gbps=round(bw.dimm_gbps, 1), ram_basis=(
                f"= the DIMMs' peak (the host is busy: not measured; published CPU runs reach "
                f"{CPU_DIMM_EFFICIENCY:.0%} of it, the band allows for that)"))
        else:
            source = BUSY_SOURCE if busy else MEASURED_SOURCE
            bandwidth = _probe_bandwidth(host, probe_bytes)
            bw = replace(bw, ram_gbps=bandwidth["memory_read_gbps"],
                         ram_basis="measured on a busy host: unreliable" if busy else "")
    ceiling = tg_ceiling_for(facts_model, placement, bw, kv=_kv_read(facts_model, flags, depth))
    data: dict[str, Any] = ceiling.to_json() if ceiling is not None else {}
    data.update({"bytes_per_token": per_token, "tg_ceiling_ts": round(ceiling.tokens_per_s, 2)
                 if ceiling is not None and ceiling.tokens_per_s else None,
                 "layers": facts_model.block_count, "moe": facts_model.is_moe,
                 "recurrent": facts_model.has_recurrent, "threads": flag_threads(flags),
                 "ram_source": source, "ram_busy": busy})
    if depths:
        at = {d: tg_ceiling_for(facts_model, placement, bw, kv=_kv_read(facts_model, flags, d)) for d in depths}
        data["at_depth"] = {str(d): c.to_json() for d, c in at.items() if c is not None}
    if bandwidth is not None:
        samples = bandwidth["memory_read_samples"]
        data.update({"bandwidth_gbps": bandwidth["memory_read_gbps"],
                     "bandwidth_spread": round((max(samples) - min(samples)) / max(samples), 3) if samples else None,
                     "probe_threads": bandwidth["memory_read_threads"]})
    return data


def flag_threads(flags: Sequence[str]) -> int | None:
    """The one CPU thread count `-t`/`--threads` gives (the ceiling's "threads": the host calibration fits runs at
    each count apart); None when absent (llama-bench's default) or not one count ("4,8" is a sweep)."""
    from tunehost.advise.ceiling import flag_value
    from tunehost.advise.host_calibration import MAX_THREADS
    from tunehost.bounds import whole_text

    return whole_text(flag_value(flags, ("-t", "--threads")), 1, MAX_THREADS)


def _kv_read(model: "ModelFacts", flags: Sequence[str], depth: int) -> "KvRead | None":
    """The KV cache a token generated `depth` tokens deep reads under llama-bench's `flags` (-ctk, -ctv, -nkvo)."""
    from tunehost.advise.ceiling import KvRead, flag_value
    from tunehost.advise.memory import ServerSettings, kv_read_per_layer, kv_type_fits

    if depth <= 0:
        return None
    types = [flag_value(flags, names) or "f16" for names in (("-ctk", "--cache-type-k"), ("-ctv", "--cache-type-v"))]
    if not all(kv_type_fits(model, t) for t in types):
        types = ["f16", "f16"]  # a type llama.cpp would refuse: llama-bench fails before a ceiling matters
    per_layer = kv_read_per_layer(model, ServerSettings(type_k=types[0], type_v=types[1]), depth)
    return KvRead(depth, per_layer, _no_kv_offload(flags))


NO_KV_OFFLOAD = ("-nkvo", "--no-kv-offload")


def _no_kv_offload(flags: Sequence[str]) -> bool:
    """-nkvo: llama-bench's takes 0|1, llama-server's is a switch (followed by the next option, or nothing)."""
    from tunehost.advise.ceiling import flag_value

    if not any(token.partition("=")[0] in NO_KV_OFFLOAD for token in flags):
        return False
    value = flag_value(flags, NO_KV_OFFLOAD) or ""
    return value.startswith("-") or value.lower() not in ("0", "false", "off")


def busy_now(host: "Host | None") -> str | None:
    """Why the live host is too busy for a bandwidth probe (tunehost.facts.processes.busy_reason), else None; a
    snapshot or no host: None (nothing live to judge)."""
    if host is None or not host.live:
        return None
    from tunehost.facts.processes import ProcessFacts, busy_reason

    return busy_reason(ProcessFacts.gather(host))


def _probe_bandwidth(host: "Host | None", probe_bytes: int) -> dict[str, Any]:
    from tunehost.probes.bandwidth import measure_read_bandwidth

    if host is not None and host.live:
        from tunehost.probes.sampler import probe_memory

        return probe_memory(host)  # one pinned thread per physical core, as doctor measures
    probe = measure_read_bandwidth(probe_bytes)
    return {"memory_read_gbps": round(probe.gbps, 2), "memory_read_samples": list(probe.samples),
            "memory_read_threads": probe.threads}


def _host_bandwidths(facts: "HostFacts | None") -> tuple[bool, bool, Any]:
    """(a GPU takes layers, that GPU is unified memory, Bandwidths with VRAM and the DIMMs' peak)."""
    from tunehost.advise.ceiling import Bandwidths, discrete_vram, with_soc_memory

    if facts is None or facts.host is None:
        return False, False, Bandwidths()
    from tunehost.facts.gpu import GpuFacts
    from tunehost.facts.ram import RamFacts
    from tunehost.facts.memory_layout import dimm_peak

    try:
        peak = dimm_peak(facts.get(RamFacts))
    except Exception:  # the DIMM peak is context; unknown modules must not stop a benchmark
        peak = None
    try:
        gpus = facts.get(GpuFacts).gpus
    except Exception:
        gpus = ()
    discrete = [g for g in gpus if not g.integrated]
    target = discrete[0] if discrete else (gpus[0] if gpus else None)
    vram = (discrete_vram(target.name, target.memory_bus_width_bits, target.memory_clock_max_mhz,
                          target.compute_capability) if target is not None and not target.integrated else {})
    bw = Bandwidths.with_dimms(peak, **vram)
    if target is not None and target.integrated and target.vendor == "nvidia":  # a DGX Spark's GB10, a Jetson
        bw = with_soc_memory(bw, target.name)
    return target is not None, target is not None and target.integrated, bw


def run_deadline_s(budget_s: float) -> float:
    """How long one llama-bench run may take: the whole --budget (no single run may outlast it), at least
    MIN_RUN_DEADLINE_S so a tiny budget still lets one warm-up load a model. docs/bench.md."""
    return max(MIN_RUN_DEADLINE_S, budget_s)


def default_invoke(binary: str | os.PathLike[str], *, timeout_s: float) -> Invoke:
    from tunehost.bench.llama_bench import run_llama_bench

    def invoke(args: Sequence[str], on_line: Callable[[str], None] | None) -> list[BenchResult]:
        return run_llama_bench(binary, args, timeout=timeout_s, on_progress=on_line)

    return invoke


def resolve_binary(explicit: str | os.PathLike[str] | None) -> Path:
    """llama-bench: the given path, else tunehost's search ($TUNEHOST_LLAMA_BIN_DIR, $LLAMA_CPP_DIR, PATH, cache)."""
    from tunehost.bench.llama_bench import find_llama_bench

    return find_llama_bench(explicit)


def run_only_named(facts: "HostFacts", explicit: str | os.PathLike[str] | None) -> None:
    """When the user named llama-bench (--llama-bench PATH), the host's llama.cpp facts (the doctor summary, the
    build) run no other llama-bench, not even with `--version` (LlamaBuildFacts.gather_named); no-op otherwise."""
    if explicit is None or not facts.live or facts.host is None:
        return
    from tunehost.facts.llama import LlamaBuildFacts

    binary = resolve_binary(explicit)
    facts.provide(LlamaBuildFacts.gather_named(facts.host, {"llama-bench": str(binary)}))


def measure(settings: BenchSettings, configs: Sequence[BenchConfig], facts: "HostFacts",
            hooks: MeasureHooks = MeasureHooks()) -> SavedResult:
    """Measure ``settings.model`` with the real llama-bench: the first configuration alone, or the first (the
    baseline) against the second (the candidate).

    ``facts``: the live host's facts, built once by the caller (the host summary, the ceiling and the watch read
    through it; this never opens the host). Everything is checked before anything runs (model, binary, every
    flag). The returned result carries the comparison (with a candidate), the host summary, what happened on the
    host, and the command lines. ``apply --bench`` calls :func:`measure_model` before and after a change, then
    :func:`compare_saved`. Each llama-bench run is killed (its process group) at ``settings.timeout_s``, by default
    :func:`run_deadline_s` of the budget. ``hooks.stored_bandwidth``: a quiet RAM bandwidth from the results store,
    asked only when the host is busy (:func:`tg_ceiling`).
    """
    status = hooks.on_status or (lambda message: None)
    model = settings.model
    identity = model_identity(model)
    binary = resolve_binary(settings.llama_bench)
    run_only_named(facts, settings.llama_bench)
    supported = _supported(binary) if hooks.invoke is None else None
    for config in configs:
        check_flags(config.flags, supported, what=f"--{config.name}")
    if settings.reps < 1:
        raise TunehostError("--reps must be at least 1")
    settings = replace(settings, min_rounds=max(1, settings.min_rounds),
                       max_rounds=max(settings.min_rounds, settings.max_rounds),
                       progress_lines=supported is None or "--progress" in supported)
    host = facts.host
    host_summary: dict[str, Any] = {}
    if settings.describe:
        from tunehost.bench.watch import describe_host

        status("reading the host (doctor checks, CPU)")
        host_summary = describe_host(facts)
    ceiling_data = None
    if settings.ceiling and settings.n_gen > 0:
        status("measuring memory bandwidth for the token-generation ceiling")
        ceiling_data = tg_ceiling(model, configs[0].flags, facts, stored_bandwidth=hooks.stored_bandwidth,
                                  depth=settings.depth)
    watcher = None
    if settings.watch and host is not None:
        from tunehost.bench.watch import HostWatcher

        watcher = HostWatcher(host)
    timeout_s = run_deadline_s(settings.budget_s) if settings.timeout_s is None else settings.timeout_s
    outcome = run_rounds(configs, settings, RoundsHooks(hooks.invoke or default_invoke(binary, timeout_s=timeout_s),
                                                        watcher=watcher, on_progress=hooks.on_progress))
    return build_result(outcome, settings, Provenance(binary, identity, host_summary, ceiling_data))


def _supported(binary: Path) -> frozenset[str]:
    from tunehost.bench.llama_bench import supported_options

    return supported_options(binary)


@dataclass(frozen=True)
class Provenance:
    """Where a result's numbers came from, beside the rounds themselves (:func:`build_result`): the llama-bench
    binary, the model's identity (:func:`model_identity`), the host summary and the TG ceiling."""

    binary: str | os.PathLike[str]
    model_id: Mapping[str, Any] = field(hash=False)
    host_summary: Mapping[str, Any] | None = field(default=None, hash=False)
    ceiling: Mapping[str, Any] | None = field(default=None, hash=False)


def build_result(outcome: RoundsOutcome, settings: BenchSettings, provenance: Provenance) -> SavedResult:
    """The SavedResult of an engine run (pure), labelled ``settings.label``."""
    binary = provenance.binary
    configs: list[ConfigResult] = []
    for config in outcome.configs:
        last = next((i for i in reversed(outcome.invocations) if i.config == config.name and i.counted), None)
        command = command_line(binary, last.argv) if last else None
        configs.append(config_from_invocations(config.name, config.flags, outcome.invocations,
                                               outcome.results[config.name], command))
    comparison = _paired_comparison(outcome, configs) if len(configs) == 2 else None
    first = next(iter(next(iter(outcome.results.values())).values()))
    model = dict(provenance.model_id, model_type=first.model_type, n_params=first.n_params)
    notes = []
    if outcome.stop_reason.startswith(("budget", "max rounds")) and comparison is not None \
            and any(r.statistical_verdict == "no clear difference" for r in comparison.rows):
        notes.append(f"stopped at the {outcome.stop_reason} before the interval was narrow enough: a larger "
                     "--budget could still separate a small difference from noise")
    settings_json = dict(settings.to_json(), rounds=outcome.rounds, stop_reason=outcome.stop_reason,
                         wall_s=round(outcome.wall_s, 3))
    from tunehost.bench.results import energy_per_config

    energy = energy_per_config(outcome.invocations, [c.name for c in outcome.configs], quiet_rounds_only(outcome))
    return SavedResult(
        source="measured", configs=tuple(configs), model=model,
        llama_bench={"path": str(binary), "build_commit": first.build_commit, "build_number": first.build_number,
                     "backend": first.backend},
        settings=settings_json, host=dict(provenance.host_summary or {}), comparison=comparison,
        invocations=outcome.invocations, watch=outcome.watch, round_watch=outcome.round_watch,
        ceiling=dict(provenance.ceiling) if provenance.ceiling else None,
        label=settings.label, created=now_utc(), notes=tuple(notes), energy=energy,
    )


def _paired_comparison(outcome: RoundsOutcome, configs: Sequence[ConfigResult]) -> Comparison:
    """The candidate against the baseline, paired round by round; the rounds the watch marks disturbed are left
    out of the estimate (as in drift), and the verdict reads "disturbed" when too few quiet rounds remain."""
    disturbed = outcome.watch is not None and outcome.watch.disturbed
    notes = [f"host disturbed: {'; '.join(outcome.watch.reasons)}"] if disturbed and outcome.watch else []
    counted = outcome.invocations
    left_out = quiet_rounds_only(outcome)
    if left_out:  # the rounds the store marks disturbed never enter the paired estimate (as in drift)
        rounds_left = outcome.rounds - len(left_out)
        reason = next(w.reasons[0] for w in outcome.round_watch if w.disturbed)
        counted = tuple(i for i in outcome.invocations if i.round not in left_out)
        disturbed = rounds_left < MIN_ROUNDS
        notes = [f"{len(left_out)} of {outcome.rounds} rounds disturbed by other processes were left out of "
                 f"the paired estimate ({reason})"
                 + (f"; {rounds_left} quiet rounds are too few for a verdict" if disturbed else "")]
    return compare_configs(Side(configs[0], rounds=rounds_of(counted, configs[0].name)),
                           Side(configs[1], rounds=rounds_of(counted, configs[1].name)),
                           interleaved=True, disturbed=disturbed, notes=notes)


def quiet_rounds_only(outcome: RoundsOutcome) -> frozenset[int]:
    """The round numbers (1-based) the per-round watch marks disturbed, when it has one report per round; empty
    otherwise (then the whole run's watch alone decides "disturbed")."""
    if not outcome.round_watch or len(outcome.round_watch) != outcome.rounds:
        return frozenset()
    return frozenset(n for n, w in enumerate(outcome.round_watch, start=1) if w.disturbed)


def measure_model(model: str | os.PathLike[str], facts: "HostFacts", *, label: str | None = None,
                  **settings: Any) -> SavedResult:
    """``apply --bench``'s entry point: llama-bench's defaults on ``model``, labelled ("before" / "after");
    ``settings``: BenchSettings fields other than the defaults."""
    return measure(BenchSettings(model=str(model), label=label, **settings), [BenchConfig("baseline")], facts)


# ---------------------------------------------------------------- --advised


def bench_flags(launch: "LaunchConfig", supported: frozenset[str] | None = None) -> BenchFlags:
    """A launch configuration's llama-server flags in llama-bench's spellings; flags with no llama-bench
    equivalent are dropped, and the CPUs it is pinned to become llama-bench's own pinning.

    llama-bench (tools/llama-bench/llama-bench.cpp) spells: -t, -C/--cpu-mask (hex), --cpu-strict 0|1, -ngl,
    -ncmoe/--n-cpu-moe, -ctk, -ctv, -fa on|off|auto, -b, -ub, -ot (overrides joined by ';', not ','), -ts (shares
    joined by '/'), --numa, --prio; --no-mmap / --mlock became
    ``-lm none|mlock|mmap+mlock`` (older builds: ``-mmp 0``; there was never an mlock option before -lm).
    ``pin_cpus`` (the CPUs a shell would give `taskset -c`) becomes ``-C <hex mask> --cpu-strict 1``.
    """
    out: list[str] = []
    no_mmap = mlock = False
    for flag in launch.flags:
        name, value = flag.name, flag.value
        if name in ("--no-mmap",):
            no_mmap = True
            continue
        if name == "--mlock":
            mlock = True
            continue
        if name in ("--no-repack", "-nr"):  # llama-server's switch; llama-bench takes --repack 0|1
            out += ["--repack", "0"]
            continue
        spelled = _BENCH_SPELLING.get(name)
        if spelled is None:
            continue
        if value is None:
            continue
        if spelled in _WITHIN_VALUE:
            value = value.replace(",", _WITHIN_VALUE[spelled])
        out += [spelled, value]
    cpus = tuple(launch.pin_cpus) if launch.pin_cpus else None
    if cpus:
        out += ["-C", cpus_to_mask(cpus), "--cpu-strict", "1"]
    if no_mmap or mlock:
        if supported is None or "-lm" in supported or "--load-mode" in supported:
            out += ["-lm", "mlock" if (no_mmap and mlock) else ("none" if no_mmap else "mmap+mlock")]
        elif no_mmap and ("-mmp" in supported or "--mmap" in supported):
            out += ["-mmp", "0"]
    if supported is not None:
        out = _keep_supported(out, supported)
    return BenchFlags(tuple(out), cpus)


# llama-server spelling -> llama-bench spelling
_BENCH_SPELLING = {
    "-t": "-t", "--threads": "-t",
    "-ngl": "-ngl", "--gpu-layers": "-ngl", "--n-gpu-layers": "-ngl",
    "--n-cpu-moe": "-ncmoe", "-ncmoe": "-ncmoe",
    "-ctk": "-ctk", "--cache-type-k": "-ctk", "-ctv": "-ctv", "--cache-type-v": "-ctv",
    "-fa": "-fa", "--flash-attn": "-fa",
    "-b": "-b", "--batch-size": "-b", "-ub": "-ub", "--ubatch-size": "-ub",
    "-ot": "-ot", "--override-tensor": "-ot",
    "--numa": "--numa", "--prio": "--prio", "-sm": "-sm", "--split-mode": "-sm", "-ts": "-ts",
    "--tensor-split": "-ts", "-mg": "-mg", "--main-gpu": "-mg", "-nkvo": "-nkvo",
    "-C": "-C", "--cpu-mask": "-C", "--cpu-strict": "--cpu-strict", "--poll": "--poll",
}


def cpus_to_mask(cpus: "Sequence[int]") -> str:
    """(0, 1, 2, 3, 8) -> "0x10f"."""
    mask = 0
    for cpu in cpus:
        mask |= 1 << cpu
    if not mask:
        raise TunehostError("an empty CPU set")
    return hex(mask)


def _keep_supported(args: list[str], supported: frozenset[str]) -> list[str]:
    kept: list[str] = []
    i = 0
    while i < len(args):
        name = args[i]
        has_value = i + 1 < len(args) and not _OPTION.match(args[i + 1])
        if name in supported:
            kept += args[i:i + 2] if has_value else [name]
        i += 2 if has_value else 1
    return kept
