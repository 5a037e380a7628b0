"""`tunehost bench` as an operation: plan the configurations, measure them, record the run; never prints.

The CLI (tunehost/cli/bench.py) parses the options, opens the host once, builds its HostFacts once, and calls

    planned = plan_bench(request, facts)      # which llama-bench flags each side runs (--advised: advise's plan)
    outcome = run_bench(planned, facts, hooks, Recording())

then renders ``outcome.result``. :func:`plan_bench` reads nothing but ``facts`` and the model file, so a
snapshot's facts replay what ``--advised`` would run there; :func:`run_bench` measures the live host the facts
describe (the host summary, the ceiling, the watch and the store's host identity all read through them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tunehost.bench import runner
from tunehost.bench.runner import BenchConfig, BenchFlags, BenchSettings, MeasureHooks

if TYPE_CHECKING:
    from tunehost.advise.host_calibration import StoredBandwidth
    from tunehost.bench.results import SavedResult
    from tunehost.facts import HostFacts
    from tunehost.launch import LaunchConfig


@dataclass(frozen=True)
class BenchRequest:
    """What to measure: the settings, the baseline's llama-bench flags, and the candidate's (its flags, or
    ``advised``: what `tunehost advise` recommends for the model on this host)."""

    settings: BenchSettings
    baseline: tuple[str, ...] = ()
    candidate: tuple[str, ...] | None = None
    advised: bool = False


@dataclass(frozen=True)
class BenchPlan:
    """The configurations a bench runs, in order (baseline first), and advise's launch behind ``--advised``."""

    settings: BenchSettings
    configs: tuple[BenchConfig, ...]
    advised: "LaunchConfig | None" = None
    advised_flags: BenchFlags | None = None


@dataclass(frozen=True)
class Recording:
    """Whether and how the run goes into the results store (docs/history.md)."""

    record: bool = True
    command: str = "bench"
    extra: Mapping[str, Any] | None = field(default=None, hash=False)
    # called with the result once it is measured, before the store is touched: the caller prints and saves it
    # there, so a store that fails afterwards never costs the measurement (docs/history.md)
    report: Callable[["SavedResult"], None] | None = field(default=None, hash=False, compare=False)


@dataclass(frozen=True)
class BenchOutcome:
    """A measured bench: the result, its row in the results store (None: not recorded) and why not (one line
    each, for the CLI to show as warnings)."""

    result: "SavedResult"
    run_id: int | None = None
    warnings: tuple[str, ...] = ()


def advised_launch(model: str | os.PathLike[str], facts: "HostFacts") -> "LaunchConfig":
    """The launch configuration `tunehost advise` gives ``model`` on the host of ``facts`` (no probes)."""
    from tunehost.advise.host_view import HostView
    from tunehost.advise.plan import AdviseOptions, plan
    from tunehost.model import read_model

    made = plan(read_model(model), HostView.from_facts(facts), AdviseOptions(model_path=str(model)))
    return made.launch()


def plan_bench(request: BenchRequest, facts: "HostFacts", *,
               supported: frozenset[str] | None = None) -> BenchPlan:
    """The configurations ``request`` runs. ``--advised``: advise's launch configuration for the model on the host
    of ``facts``, as llama-bench options this llama-bench has (``supported``; when None they are asked of the
    binary the settings name). Reads only ``facts`` and the model file: replayable from a snapshot."""
    configs = [BenchConfig("baseline", tuple(request.baseline))]
    launch = flags = None
    if request.advised:
        runner.run_only_named(facts, request.settings.llama_bench)  # before advise reads the host's builds
        if supported is None:
            supported = runner._supported(runner.resolve_binary(request.settings.llama_bench))
        launch = advised_launch(request.settings.model, facts)
        flags = runner.bench_flags(launch, supported)
        configs.append(BenchConfig("candidate", flags.flags))
    elif request.candidate is not None:
        configs.append(BenchConfig("candidate", tuple(request.candidate)))
    return BenchPlan(request.settings, tuple(configs), launch, flags)


def run_bench(planned: BenchPlan, facts: "HostFacts", hooks: MeasureHooks = MeasureHooks(),
              recording: Recording = Recording()) -> BenchOutcome:
    """Measure ``planned`` on the live host of ``facts`` (runner.measure), hand it to ``recording.report``, then
    record it (``recording``): a store that cannot record is found before measuring (a damaged or newer one is
    refused then), and one that fails after is a warning, never a lost measurement. On a busy host the TG ceiling
    rests on a quiet bandwidth this host recorded earlier, read from the store then."""
    from tunehost.store.records import check_recording

    if hooks.stored_bandwidth is None:
        hooks = replace(hooks, stored_bandwidth=lambda: stored_quiet_bandwidth(facts))
    writable, warnings = check_recording() if recording.record else (False, ())  # refused before measuring
    result = runner.measure(planned.settings, planned.configs, facts, hooks)
    if recording.report is not None:
        recording.report(result)
    if not writable:
        return BenchOutcome(result, None, warnings)
    run_id, warnings = record(result, facts, command=recording.command, extra=recording.extra)
    return BenchOutcome(result, run_id, warnings)


def record(result: "SavedResult", facts: "HostFacts", *, command: str = "bench",
           extra: Mapping[str, Any] | None = None) -> tuple[int | None, tuple[str, ...]]:
    """Record a measured run in the results store: (its id, or None when the store cannot be written, and the
    warning lines saying so). A store that cannot be written never loses the result itself."""
    from tunehost.store.records import bench_run, record_run

    return record_run(lambda: bench_run(result, facts, command=command, extra=extra))


def stored_quiet_bandwidth(facts: "HostFacts") -> "StoredBandwidth | None":
    """The quiet RAM bandwidth the host of ``facts`` measured in earlier runs (the results store), for a ceiling on
    a busy host; None without one (no store, or one that cannot be read: the ceiling then says which other basis
    it used)."""
    from tunehost.advise.host_calibration import quiet_bandwidth
    from tunehost.store import runs_on_host

    return quiet_bandwidth(runs_on_host(facts))
