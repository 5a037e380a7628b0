"""Writing a format-1 snapshot (docs/snapshot.md) of the live host.

The writer records what a full doctor run reads — every file, every command, every sample — and stores exactly
that, so replaying the snapshot gives the same findings as the live run. Nothing else is copied: no environment,
no other users' command lines, no secrets.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from tunehost import __version__
from tunehost.bounds import json_text
from tunehost.errors import TunehostError
from tunehost.host import SNAPSHOT_FORMAT, Host
from tunehost.host.commands import CommandLog
from tunehost.host.identifiers import Pseudonyms, identifying_file, scrub_identifiers

# recorded in every snapshot whether or not a check needed them (docs/snapshot.md's canonical command lines)
CANONICAL_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("dmidecode", "-t", "memory"),
    ("nvidia-smi", "-q"),
    ("nvidia-smi", "-q", "-x"),
    ("powerprofilesctl", "get"),
    ("tuned-adm", "active"),
    ("systemctl", "get-default"),
)
# samples every snapshot carries (when they can be taken on this host)
CANONICAL_SAMPLES = ("activity", "processes", "listeners")
MAX_LISTED_FILE_BYTES = 64 * 1024


def check_target(directory: Path) -> None:
    """A snapshot goes into a new or empty directory: anything else is one TunehostError, said before any sampling."""
    if directory.is_symlink():
        raise TunehostError(f"{directory} is a symbolic link; choose a new directory")
    for place in (directory, *directory.parents):
        if place.is_dir():
            break
        if place.exists() or place.is_symlink():
            where = "" if place == directory else f" (in the path of {directory})"
            raise TunehostError(f"{place}{where} is a file, not a directory; choose a new directory")
    try:
        if directory.is_dir() and any(directory.iterdir()):
            raise TunehostError(f"{directory} exists and is not empty; choose a new directory")
    except OSError as exc:
        raise TunehostError(f"cannot use {directory} for a snapshot: {exc.strerror or exc}") from None


# What a consumer (advise, a plugin) reads beyond the checks, declared to the host layer by the consumer itself:
# {consumer: read(facts)}, `facts` the HostFacts the recording run built once over its host (typed loosely here:
# host/ names no upper layer). A recording run takes every declared read, so a replay finds the consumer's
# inputs; the recorder never asks a consumer what to read, and host/ imports none of them.
DECLARED_READS: dict[str, Callable[[Any], object]] = {}


def declare_reads(consumer: str) -> Callable[[Callable[[Any], object]], Callable[[Any], object]]:
    """Register `consumer`'s reads (a function of the recording run's HostFacts that reads through its host) for
    recording runs."""

    def register(read: Callable[[Any], object]) -> Callable[[Any], object]:
        DECLARED_READS[consumer] = read
        return read

    return register


def take_declared_reads(facts: Any) -> list[str]:
    """Take every declared read on `facts` (the HostFacts over the recording host); one line for each that failed
    (the snapshot is still useful without it)."""
    problems = []
    for consumer, read in sorted(DECLARED_READS.items()):
        try:
            read(facts)
        except Exception as exc:  # a consumer's read that breaks costs its inputs only
            problems.append(f"{consumer} inputs not recorded: {exc.__class__.__name__}: {exc}")
    return problems


def write_snapshot(host: Host, directory: Path, *, gather: Iterable[object] = ()) -> dict:
    """Write what `host` (opened with record=True) has read into `directory`. Returns the manifest."""
    if host.files.log is None or not isinstance(getattr(host.commands, "log", None), CommandLog):
        raise TunehostError("internal: the host was not opened for recording")
    for argv in CANONICAL_COMMANDS:
        host.run(argv)
    for name in CANONICAL_SAMPLES:
        host.sample(name)
    directory = Path(directory)
    check_target(directory)
    pseudonyms = Pseudonyms()  # one key per snapshot: a UUID reads the same in every file of it, nowhere else
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_fs(host, directory / "fs", pseudonyms)
        _write_cmds(host.commands.log, directory / "cmd", pseudonyms)
        _write_samples(host, directory / "samples", pseudonyms)
        manifest = {
            "format": SNAPSHOT_FORMAT,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "tunehost": __version__,
            "hostname": socket.gethostname(),
            "kernel": platform.release(),
            "uid": os.geteuid(),
        }
        (directory / "manifest.json").write_text(json_text(manifest, indent=2) + "\n")
    except OSError as exc:
        raise TunehostError(f"cannot write snapshot to {directory}: {exc.strerror or exc}") from None
    return manifest


def _target(fs: Path, host_path: str) -> Path:
    return fs / host_path.lstrip("/")


def _stored(data: bytes, pseudonyms: Pseudonyms) -> bytes:
    """A file's bytes as the snapshot keeps them: a text with its hardware identifiers scrubbed (identifiers.py)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    return scrub_identifiers(text, pseudonyms).encode("utf-8")


def _write_fs(host: Host, fs: Path, pseudonyms: Pseudonyms) -> None:
    log = host.files.log
    assert log is not None
    fs.mkdir(parents=True, exist_ok=True)
    for path, names in sorted(log.dirs.items()):
        _target(fs, path).mkdir(parents=True, exist_ok=True)
        for name in names:
            child = os.path.join(path, name)
            if child in log.files or child in log.links:
                continue
            local = host.files.local(child)  # where the host's file is (the host's root need not be /)
            if local is None:
                continue
            if os.path.isdir(local):
                _target(fs, child).mkdir(parents=True, exist_ok=True)
            elif os.path.isfile(local) and not identifying_file(child):
                # listed but not read: keep small readable files so exists()/listdir() replay the same (never one
                # that holds a serial number or a UUID: no check reads those)
                try:
                    with open(local, "rb") as fh:
                        data = fh.read(MAX_LISTED_FILE_BYTES + 1)
                except OSError:
                    continue
                if len(data) <= MAX_LISTED_FILE_BYTES:
                    out = _target(fs, child)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(_stored(data, pseudonyms))
    for path, data in sorted(log.files.items()):
        out = _target(fs, path)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.is_dir():
            continue
        out.write_bytes(_stored(data, pseudonyms))
    for path, target in sorted(log.links.items()):
        out = _target(fs, path)
        if out.exists() or out.is_symlink():
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        # a relative link that stays inside fs/ (docs/snapshot.md): resolve on the host, re-root, relativise
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
        os.symlink(os.path.relpath(_target(fs, resolved), out.parent), out)


_NVSMI_TEXT_PROCESS = re.compile(r"^(\s+Name\s+:\s+)(\S.*)$", re.MULTILINE)
_NVSMI_XML_PROCESS = re.compile(r"(<process_name>)(.*?)(</process_name>)", re.DOTALL)


def _executable_name(command_line: str) -> str:
    first = command_line.strip().split()[0] if command_line.strip() else ""
    return os.path.basename(first) or first


def scrub_command_output(argv: tuple[str, ...], stdout: str, pseudonyms: Pseudonyms | None = None) -> str:
    """Other processes' command lines never enter a snapshot: nvidia-smi lists them in full; keep the executable name.
    Hardware identifiers (serial numbers, UUIDs: identifiers.py) never either, whatever the command."""
    stdout = scrub_identifiers(stdout, pseudonyms or Pseudonyms())
    if not argv or os.path.basename(argv[0]) != "nvidia-smi":
        return stdout
    stdout = _NVSMI_TEXT_PROCESS.sub(lambda m: m.group(1) + _executable_name(m.group(2)), stdout)
    return _NVSMI_XML_PROCESS.sub(lambda m: m.group(1) + _executable_name(m.group(2)) + m.group(3), stdout)


def _write_cmds(log: CommandLog, cmd: Path, pseudonyms: Pseudonyms) -> None:
    cmd.mkdir(parents=True, exist_ok=True)
    for name, result in sorted(log.results.items()):
        (cmd / name).write_text(scrub_command_output(result.argv, result.stdout, pseudonyms))
        if result.rc != 0:
            (cmd / f"{name}.rc").write_text(f"{result.rc}\n")
        if result.stderr:
            (cmd / f"{name}.stderr").write_text(scrub_identifiers(result.stderr, pseudonyms))


def _write_samples(host: Host, samples: Path, pseudonyms: Pseudonyms) -> None:
    samples.mkdir(parents=True, exist_ok=True)
    for name, value in sorted(host.recorded_samples.items()):
        value = pseudonyms.value(value)  # the NVML sample's UUIDs read as nvidia-smi's do in this snapshot
        (samples / f"{name}.json").write_text(json_text(value, indent=1, sort_keys=True) + "\n")
    which = host.commands.log.which  # type: ignore[union-attr]
    if which:
        (samples / "which.json").write_text(json_text(which, indent=1, sort_keys=True) + "\n")
