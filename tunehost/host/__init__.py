"""The host layer: the only code that reads the machine. See docs/architecture.md.

    host = open_host()                 # the live machine
    host = open_host("bug-1234/")      # a snapshot: nothing live is read, nothing runs, NVML is never loaded
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from tunehost.errors import TunehostError
from tunehost.host.commands import DEFAULT_TIMEOUT_S, CommandLog, CommandResult, LiveCommands, SnapshotCommands
from tunehost.host.files import AccessLog, HostFiles, Refused, read_confined
from tunehost.printable import one_line

SNAPSHOT_FORMAT = 1

__all__ = ["Host", "CommandResult", "open_host", "SNAPSHOT_FORMAT"]


class Host:
    """One machine, live or captured. Facts are gathered from it; nothing else reads the machine."""

    def __init__(self, files: HostFiles, commands: LiveCommands | SnapshotCommands, *, snapshot_dir: Path | None = None,
                 manifest: dict[str, Any] | None = None, refused: dict[str, str] | None = None):
        self.files = files
        self.commands = commands
        self.snapshot_dir = snapshot_dir
        self.manifest = manifest or {}
        self._samples: dict[str, Any] = {}
        self.sample_errors: dict[str, str] = {}
        self._root_real = os.path.realpath(snapshot_dir) if snapshot_dir is not None else ""
        self._refused: dict[str, str] = dict(refused or {})  # snapshot files refused beyond files/commands/samples
        # live only: whether this run may take the `measure` sample (load probes); doctor --quick turns it off
        self.measure = False
        self.measure_off_reason: str | None = None
        # live only: the length of each activity window (None: ACTIVITY_WINDOW_S; doctor --quick shortens it)
        self.activity_window_s: float | None = None
        # long samplers say what they are doing through this (the CLI shows it in a spinner)
        self.on_status: Callable[[str], None] | None = None

    @property
    def live(self) -> bool:
        return self.snapshot_dir is None

    def __repr__(self) -> str:
        return f"Host(snapshot={str(self.snapshot_dir)!r})" if self.snapshot_dir else "Host(live)"

    def run(self, argv: list[str] | tuple[str, ...], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult | None:
        """A command's result, or None when the command is not available on this host."""
        return self.commands.run(argv, timeout)

    def which(self, name: str) -> str | None:
        return self.commands.which(name)

    def sample(self, name: str) -> Any | None:
        """A named observation (see tunehost.host.samples); None when it could not be taken or was not recorded."""
        if name in self._samples:
            return self._samples[name]
        value: Any = None
        if self.snapshot_dir is not None:
            try:
                data = read_confined(self.snapshot_dir / "samples" / f"{name}.json", self._root_real)
            except Refused as exc:
                data = None
                self.sample_errors[name] = f"samples/{name}.json {exc.reason}"
            else:
                if data is None:
                    self.sample_errors[name] = f"the snapshot has no samples/{name}.json"
            if data is not None:
                try:
                    value = json.loads(data.decode("utf-8"))
                except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
                    self.sample_errors[name] = f"samples/{name}.json is not valid JSON ({exc.__class__.__name__})"
        else:
            from tunehost.host.samples import SAMPLERS

            fn = SAMPLERS.get(name)
            if fn is None:
                self.sample_errors[name] = f"no sampler named {name!r}"
            else:
                try:
                    value = fn(self)
                except Exception as exc:  # a sampler that breaks is "unknown", never a crash
                    self.sample_errors[name] = f"{name} sampling failed: {exc}"
        self._samples[name] = value
        return value

    def put_sample(self, name: str, value: Any) -> None:
        """Record an observation made without its sampler (e.g. why nothing was measured), so a snapshot replays it."""
        self._samples[name] = value

    @property
    def refusals(self) -> list[str]:
        """Why snapshot files were not read (links out of DIR, FIFOs, devices), one line each, in reading order:
        what a check skipped for, so the CLI can say it."""
        reasons = dict(self._refused)
        if self.files.refused_root is not None:
            reasons["fs"] = self.files.refused_root
        reasons.update({f"fs{p}": f"fs{p} {why}" for p, why in self.files.refused.items()
                        if why != self.files.refused_root})
        reasons.update(getattr(self.commands, "refused", {}))
        reasons.update({f"samples/{n}": why for n, why in self.sample_errors.items() if " not read" in why})
        return list(reasons.values())

    @property
    def recorded_samples(self) -> dict[str, Any]:
        return {k: v for k, v in self._samples.items() if v is not None}


def open_host(snapshot: str | Path | None = None, *, record: bool = False) -> Host:
    """The live host, or a snapshot directory. Raises TunehostError for a snapshot that cannot be read."""
    if snapshot is None:
        files = HostFiles("/", log=AccessLog() if record else None)
        return Host(files, LiveCommands(CommandLog() if record else None))
    return _open_snapshot(Path(snapshot))


# manifest.json keys the writer adds (docs/snapshot.md) and the JSON type each must have; unknown keys are ignored
MANIFEST_TEXT_KEYS = ("created", "tunehost", "hostname", "kernel")
MAX_UID = (1 << 32) - 1


def _check_manifest(manifest: object, manifest_path: Path) -> None:
    """docs/snapshot.md's manifest, strictly: an object whose "format" is the integer 1 (not true, 1.0 or "1"), and
    whose known keys have their documented types, so a wrong one is one clear error rather than a wrong answer."""
    if not isinstance(manifest, dict) or "format" not in manifest:
        raise TunehostError(f"{manifest_path} has no \"format\" field")
    fmt = manifest["format"]
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt != SNAPSHOT_FORMAT:
        raise TunehostError(f"{manifest_path}: snapshot format {_shown(fmt)} is not supported "
                            f"(this tunehost reads {SNAPSHOT_FORMAT})")
    for key in MANIFEST_TEXT_KEYS:
        if key in manifest and not isinstance(manifest[key], str):
            raise TunehostError(f"{manifest_path}: \"{key}\" must be a string, not {_shown(manifest[key])}")
    uid = manifest.get("uid")
    if "uid" in manifest and (isinstance(uid, bool) or not isinstance(uid, int) or not 0 <= uid <= MAX_UID):
        raise TunehostError(f"{manifest_path}: \"uid\" must be a user id (a whole number from 0), not {_shown(uid)}")


def _shown(value: object) -> str:
    # one short printable line of a hostile value
    text = json.dumps(value) if isinstance(value, (bool, int, float, str)) or value is None else type(value).__name__
    return one_line(text, 40)


def _open_snapshot(path: Path) -> Host:
    if not path.exists():
        raise TunehostError(f"snapshot {path} does not exist")
    if not path.is_dir():
        raise TunehostError(f"snapshot {path} is not a directory")
    manifest_path = path / "manifest.json"
    root_real = os.path.realpath(path)
    try:
        manifest_bytes = read_confined(manifest_path, root_real)
    except Refused as exc:
        raise TunehostError(f"{manifest_path} {exc.reason}") from None
    if manifest_bytes is None:
        raise TunehostError(f"{path} is not a tunehost snapshot: no manifest.json")
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"))
    except (RecursionError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise TunehostError(f"{manifest_path} is not valid JSON: {exc.__class__.__name__}") from None
    _check_manifest(manifest, manifest_path)
    which: dict[str, str | None] = {}
    refused: dict[str, str] = {}
    try:
        which_bytes = read_confined(path / "samples" / "which.json", root_real)
    except Refused as exc:
        which_bytes, refused["samples/which.json"] = None, f"samples/which.json {exc.reason}"
    if which_bytes is not None:
        try:
            loaded = json.loads(which_bytes.decode("utf-8"))
            if isinstance(loaded, dict):
                which = {str(k): (str(v) if v else None) for k, v in loaded.items()}
        except (RecursionError, ValueError):
            pass
    files = HostFiles(path / "fs", confined=True, within=path)
    return Host(files, SnapshotCommands(path / "cmd", which, root=path), snapshot_dir=path, manifest=manifest,
                refused=refused)
