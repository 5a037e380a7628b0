"""Reading the doctor reports of several hosts into one fleet report (data only; the table lives in the CLI).

Layout of the directory `tunehost fleet DIR` reads (what the Ansible role in ansible/ fetches):

    DIR/<host>/doctor.json     the `tunehost doctor --json` report of <host> (docs/snapshot.md)
    DIR/<host>.json            the same, flat (a report copied by hand)

Anything else in DIR (hidden entries, other files, a snapshot beside doctor.json) is ignored. Reports are hostile
input: links are never followed, sizes are bounded, every field is type-checked and every string kept is one
printable line. A report that cannot be read or does not match the contract makes its host *unreadable* (with the
file and the reason); the other hosts are still judged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from tunehost import __version__, printable
from tunehost.check import Severity
from tunehost.doctor import EXIT_ERROR, EXIT_NOT_READY, EXIT_READY
from tunehost.errors import TunehostError
from tunehost.doctor.registry import report_order

REPORT_NAME = "doctor.json"
FLAT_SUFFIX = ".json"
FLEET_FORMAT = 1

MAX_REPORT_BYTES = 4 * 1024 * 1024  # a real report is 7-17 kB; the cap keeps a huge or endless file from hurting
MAX_HOSTS = 1000
MAX_FINDINGS = 5000
MAX_CHECK_ID = 64
MAX_TEXT = 500  # a summary longer than this is cut: the table is for reading, the host's own report has it all
VERDICTS = ("ready", "not-ready")
SEVERITIES = {s.value: s for s in Severity}


class ReportProblem(Exception):
    """Why one host's report is unreadable (one line, without the file name)."""


def one_line(value: str, limit: int = MAX_TEXT) -> str:
    """Untrusted report text as one printable line of at most `limit` characters (tunehost.printable's rule)."""
    return printable.one_line(value, limit)


@dataclass(frozen=True)
class FleetFinding:
    severity: Severity
    summary: str


@dataclass(frozen=True)
class Cell:
    """What one check said on one host: every finding, judged by the worst."""

    check: str
    findings: tuple[FleetFinding, ...]

    @property
    def severity(self) -> Severity:
        return max((f.severity for f in self.findings), key=lambda s: s.rank)


@dataclass(frozen=True)
class HostReport:
    """One host of the fleet: its cells, or the reason its report could not be read (`problem`)."""

    host: str
    source: str  # the report's path relative to DIR ("box1/doctor.json")
    cells: tuple[Cell, ...] = ()
    verdict: str | None = None  # as the report states it
    tunehost: str | None = None
    snapshot: str | None = None
    problem: str | None = None

    @property
    def readable(self) -> bool:
        return self.problem is None

    def cell(self, check: str) -> Cell | None:
        return next((c for c in self.cells if c.check == check), None)

    def ready(self, *, strict: bool = False) -> bool:
        """The report's own verdict, and never ready with a fail (with strict: a warn or error) whatever it states."""
        if not self.readable or self.verdict != "ready":
            return False
        blocking = {Severity.FAIL, Severity.WARN, Severity.ERROR} if strict else {Severity.FAIL}
        return not any(c.severity in blocking for c in self.cells)

    def status(self, *, strict: bool = False) -> str:
        if not self.readable:
            return "unreadable"
        return "ready" if self.ready(strict=strict) else "not-ready"


@dataclass(frozen=True)
class Fleet:
    directory: str
    hosts: tuple[HostReport, ...]
    strict: bool = False

    @property
    def checks(self) -> list[str]:
        """Every check id any readable host reported, in report order."""
        return sorted({c.check for h in self.hosts for c in h.cells}, key=report_order)

    @property
    def verdict(self) -> str:
        """not-ready when any host is; otherwise incomplete when a report is unreadable; else ready."""
        statuses = {h.status(strict=self.strict) for h in self.hosts}
        if "not-ready" in statuses:
            return "not-ready"
        return "incomplete" if "unreadable" in statuses else "ready"

    @property
    def exit_code(self) -> int:
        return {"ready": EXIT_READY, "not-ready": EXIT_NOT_READY}.get(self.verdict, EXIT_ERROR)

    def to_json(self) -> dict:
        return {
            "fleet": FLEET_FORMAT,
            "tunehost": __version__,
            "directory": self.directory,
            "strict": self.strict,
            "checks": self.checks,
            "hosts": [_host_json(h, self.strict) for h in self.hosts],
            "verdict": self.verdict,
        }


def _host_json(host: HostReport, strict: bool) -> dict:
    return {
        "host": host.host,
        "report": host.source,
        "status": host.status(strict=strict),
        "problem": host.problem,
        "tunehost": host.tunehost,
        "snapshot": host.snapshot,
        "cells": {c.check: {"severity": c.severity.value,
                            "findings": [{"severity": f.severity.value, "summary": f.summary} for f in c.findings]}
                  for c in host.cells},
    }


def load_fleet(directory: str | os.PathLike, *, expected: Iterable[str] = (), strict: bool = False) -> Fleet:
    """Every host report under `directory`; `expected` hosts without one are unreadable ("no report").

    TunehostError when the directory itself is unusable or holds no report at all.
    """
    root = Path(directory)
    if not root.is_dir():
        raise TunehostError(f"{one_line(str(directory))}: not a directory "
                            f"(expected DIR/<host>/{REPORT_NAME} from the Ansible role)")
    hosts: dict[str, HostReport] = {}
    for entry in _entries(root):
        report = _read_entry(root, entry)
        if report is None:
            continue
        if report.host in hosts:
            other = hosts[report.host]
            report = HostReport(report.host, other.source,
                                problem=f"two reports for one host: {other.source} and {report.source}")
        hosts[report.host] = report
    for name in expected:
        name = one_line(name, 255)
        if name and name not in hosts:
            hosts[name] = HostReport(name, f"{name}/{REPORT_NAME}", problem="no report (the host was not reached, "
                                                                           "or doctor did not run there)")
    if not hosts:
        raise TunehostError(f"{one_line(str(directory))}: no host reports "
                            f"(expected DIR/<host>/{REPORT_NAME} or DIR/<host>.json)")
    return Fleet(one_line(str(directory), 1000), tuple(hosts[name] for name in sorted(hosts)), strict=strict)


def _entries(root: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(root) as it:
            entries = []
            for entry in it:
                if entry.name.startswith("."):
                    continue
                entries.append(entry)
                if len(entries) > 10 * MAX_HOSTS:
                    raise TunehostError(f"{one_line(str(root))}: more than {10 * MAX_HOSTS} entries; "
                                        "is this the directory of fetched reports?")
    except OSError as exc:
        raise TunehostError(f"{one_line(str(root))}: cannot list: {exc.strerror or exc}") from None
    hostish = [e for e in entries if e.name.endswith(FLAT_SUFFIX) or e.is_dir(follow_symlinks=False)
               or e.is_symlink()]
    if len(hostish) > MAX_HOSTS:
        raise TunehostError(f"{one_line(str(root))}: more than {MAX_HOSTS} host entries; "
                            "is this the directory of fetched reports?")
    return sorted(hostish, key=lambda e: e.name)


def _read_entry(root: Path, entry: os.DirEntry) -> HostReport | None:
    """The host report `entry` stands for, or None when it is not a host (a plain file that is not *.json)."""
    flat = not entry.is_dir(follow_symlinks=False) and entry.name.endswith(FLAT_SUFFIX)
    host = one_line(entry.name[: -len(FLAT_SUFFIX)] if flat else entry.name, 255)
    source = one_line(entry.name if flat else f"{entry.name}/{REPORT_NAME}", 300)
    if entry.is_symlink():
        return HostReport(host, source, problem="is a symbolic link: links are not followed (copy the report in)")
    if not flat and not entry.is_dir(follow_symlinks=False):
        return None
    path = Path(entry.path) if flat else Path(entry.path) / REPORT_NAME
    try:
        return parse_report(host, source, read_report_bytes(path))
    except ReportProblem as exc:
        return HostReport(host, source, problem=str(exc))


def read_report_bytes(path: Path) -> bytes:
    """The file's bytes: a regular file reached without following a link, at most MAX_REPORT_BYTES."""
    from tunehost.host.files import Refused, open_regular

    try:
        data = open_regular(str(path), MAX_REPORT_BYTES + 1)
    except Refused as exc:
        raise ReportProblem(exc.reason) from None
    if data is None:
        raise ReportProblem(f"no {REPORT_NAME} (doctor did not run there, or its report was not fetched)")
    if len(data) > MAX_REPORT_BYTES:
        raise ReportProblem(f"larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB: not a doctor report")
    return data


def parse_report(host: str, source: str, data: bytes) -> HostReport:
    """A `doctor --json` document (docs/snapshot.md) validated field by field; ReportProblem says what is wrong."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ReportProblem("not UTF-8 text: not a doctor report") from None
    except RecursionError:
        raise ReportProblem("JSON nested too deeply: not a doctor report") from None
    except ValueError as exc:
        raise ReportProblem(f"not JSON ({one_line(str(exc), 120)})") from None
    if not isinstance(doc, dict):
        raise ReportProblem("not a doctor report (a JSON object with findings and verdict)")
    verdict = doc.get("verdict")
    if verdict not in VERDICTS:
        raise ReportProblem(f"verdict is {_shown(verdict)}, expected 'ready' or 'not-ready'")
    findings = doc.get("findings")
    if not isinstance(findings, list):
        raise ReportProblem("findings is not a list")
    if len(findings) > MAX_FINDINGS:
        raise ReportProblem(f"more than {MAX_FINDINGS} findings: not a doctor report")
    cells: dict[str, list[FleetFinding]] = {}
    for index, raw in enumerate(findings):
        check, finding = _finding(raw, index)
        cells.setdefault(check, []).append(finding)
    return HostReport(
        host, source,
        cells=tuple(Cell(check, tuple(fs)) for check, fs in sorted(cells.items(), key=lambda kv: report_order(kv[0]))),
        verdict=verdict, tunehost=_optional_text(doc.get("tunehost"), "tunehost"),
        snapshot=_optional_text(doc.get("snapshot"), "snapshot"))


def _finding(raw: Any, index: int) -> tuple[str, FleetFinding]:
    where = f"finding {index + 1}"
    if not isinstance(raw, dict):
        raise ReportProblem(f"{where} is not an object")
    check, severity, summary = raw.get("check"), raw.get("severity"), raw.get("summary")
    if not (isinstance(check, str) and 0 < len(check) <= MAX_CHECK_ID
            and all(ch.isprintable() and not ch.isspace() for ch in check)):
        raise ReportProblem(f"{where}: check id {_shown(check)} is not a check id")
    if not isinstance(severity, str) or severity not in SEVERITIES:
        raise ReportProblem(f"{where} ({check}): severity {_shown(severity)} is not one of {', '.join(SEVERITIES)}")
    if not isinstance(summary, str):
        raise ReportProblem(f"{where} ({check}): summary is not text")
    return check, FleetFinding(SEVERITIES[severity], one_line(summary))


def _optional_text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ReportProblem(f"{name} is not text")
    return one_line(value, 300)


def _shown(value: Any) -> str:
    """A bad value, briefly, for the reason line."""
    if isinstance(value, str):
        return one_line(repr(value), 40)
    return "missing" if value is None else type(value).__name__
