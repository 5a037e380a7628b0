"""doctor's operation: one judgement of the host (`tunehost doctor`'s, `snapshot`'s and the gate's) and the
snapshot writer. It takes the HostFacts the CLI built and returns data; the CLI prints the lines it hands back.

    diagnosis = diagnose(facts, DoctorRequest(checks, quick=True))
    diagnosis.report          # tunehost.doctor.Report: every finding, the verdict
    diagnosis.notes           # for stderr: what a plugin printed while it ran
    diagnosis.refusals        # for stderr: what a snapshot could not answer
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunehost.doctor import Report
    from tunehost.facts import HostFacts
    from tunehost.host import Host

SPEED_DRIFT = "speed-drift"  # the check that judges the results store (the `results` sample)


@dataclass(frozen=True)
class DoctorRequest:
    checks: tuple[Any, ...]  # tunehost.check.Check instances, selected by the CLI
    warnings: tuple[str, ...] = ()  # the registry's (a plugin that did not load), carried into the report
    strict: bool = False
    quick: bool = False  # judge the settings only: no measurement on the live host


@dataclass(frozen=True)
class Diagnosis:
    report: "Report"
    notes: tuple[str, ...]  # for stderr, never in the report: what a plugin printed while it ran
    refusals: tuple[str, ...]  # what a snapshot could not answer (the checks that needed it skipped)


def measures(host: "Host", quick: bool) -> bool:
    """Whether a run takes the `measure` sample (the live host, unless --quick): the CLI shows a spinner then."""
    return bool(host.live) and not quick


def diagnose(facts: "HostFacts", request: DoctorRequest, *,
             on_status: Callable[[str], None] | None = None) -> Diagnosis:
    """Run the checks on ``facts``: measuring on the live host unless quick (``on_status`` hears what is being
    measured), with the results store's runs as the `results` sample when speed-drift runs."""
    from tunehost.doctor import run_doctor

    host = facts.host
    enable_measuring(host, quick=request.quick)
    if any(c.id == SPEED_DRIFT for c in request.checks):
        record_results(host)
    host.on_status = on_status if host.measure else None
    try:
        report = run_doctor(facts, list(request.checks), strict=request.strict, warnings=request.warnings)
    finally:
        host.on_status = None
    return Diagnosis(report, tuple(report.notes), tuple(host.refusals))


def write_snapshot(facts: "HostFacts", directory: Path) -> tuple[str, ...]:
    """Write what a recording host (open_host(record=True)) has read, plus what each consumer declared it reads
    beyond the checks (advise: tunehost.advise.flags.read_advise_inputs), as a snapshot. Returns the declared reads
    that failed (the snapshot is still useful for doctor without them)."""
    import tunehost.advise.flags  # noqa: F401 (advise declares its reads to the host layer)
    from tunehost.host.snapshot import take_declared_reads
    from tunehost.host.snapshot import write_snapshot as write

    problems = tuple(take_declared_reads(facts))
    write(facts.host, directory)
    return problems


def enable_measuring(host: "Host", *, quick: bool) -> None:
    """Let this run take the `measure` sample on the live host, unless --quick (a snapshot replays its own)."""
    host.measure = measures(host, quick)
    if host.measure:
        import tunehost.probes.sampler  # noqa: F401 (registers the `measure` sampler with the host layer)
    if quick:
        from tunehost.host.samples import QUICK_ACTIVITY_WINDOW_S

        host.measure_off_reason = "not measured (--quick)"
        host.activity_window_s = QUICK_ACTIVITY_WINDOW_S  # the CPU sample stays about half a second


def record_results(host: "Host") -> None:
    """Put the results store's raw runs on the live host as the `results` sample (speed-drift judges it; a
    snapshot writes it as samples/results.json). The store is above the checks in the layers: read here."""
    if host.live:
        from tunehost.facts.results import RESULTS_SAMPLE
        from tunehost.store import doctor_sample

        host.put_sample(RESULTS_SAMPLE, doctor_sample())
