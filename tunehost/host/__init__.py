"""The host layer: the only code that reads the machine. See docs/architecture.md.

    host = open_host()                 # the live machine
    host = open_host("bug-1234/")      # a snapshot: nothing live is read, nothing runs, NVML is never loaded
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tunehost.errors import TunehostError
from tunehost.host.commands import DEFAULT_TIMEOUT_S, CommandLog, CommandResult, LiveCommands, SnapshotCommands
from tunehost.host.files import AccessLog, HostFiles

SNAPSHOT_FORMAT = 1

__all__ = ["Host", "CommandResult", "open_host", "SNAPSHOT_FORMAT"]


class Host:
    """One machine, live or captured. Facts are gathered from it; nothing else reads the machine."""

    def __init__(self, files: HostFiles, commands: LiveCommands | SnapshotCommands, *, snapshot_dir: Path | None = None,
                 manifest: dict[str, Any] | None = None):
        self.files = files
        self.commands = commands
        self.snapshot_dir = snapshot_dir
        self.manifest = manifest or {}
        self._samples: dict[str, Any] = {}
        self.sample_errors: dict[str, str] = {}
        # live only: whether this run may take the `measure` sample (load probes); doctor --quick turns it off
        self.measure = False
        self.measure_off_reason: str | None = None
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
            path = self.snapshot_dir / "samples" / f"{name}.json"
            if not _inside(path, self.snapshot_dir):
                self.sample_errors[name] = f"samples/{name}.json links out of the snapshot (not read)"
            elif path.is_file():
                try:
                    value = json.loads(path.read_text())
                except (OSError, ValueError) as exc:
                    self.sample_errors[name] = f"samples/{name}.json is not valid JSON ({exc.__class__.__name__})"
            else:
                self.sample_errors[name] = f"the snapshot has no samples/{name}.json"
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
    def recorded_samples(self) -> dict[str, Any]:
        return {k: v for k, v in self._samples.items() if v is not None}


def _inside(path: Path, root: Path) -> bool:
    """Whether `path`, links resolved, stays inside the snapshot `root` (a read never leaves the snapshot)."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a link loop
        return False


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
    """SNAPSHOT.md's manifest, strictly: an object whose "format" is the integer 1 (not true, 1.0 or "1"), and
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
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= 40 else text[:37] + "..."


def _open_snapshot(path: Path) -> Host:
    if not path.exists():
        raise TunehostError(f"snapshot {path} does not exist")
    if not path.is_dir():
        raise TunehostError(f"snapshot {path} is not a directory")
    manifest_path = path / "manifest.json"
    if not manifest_path.is_file():
        raise TunehostError(f"{path} is not a tunehost snapshot: no manifest.json")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise TunehostError(f"{manifest_path} is not valid JSON: {exc.__class__.__name__}") from None
    _check_manifest(manifest, manifest_path)
    which: dict[str, str | None] = {}
    which_file = path / "samples" / "which.json"
    if which_file.is_file() and _inside(which_file, path):
        try:
            loaded = json.loads(which_file.read_text())
            if isinstance(loaded, dict):
                which = {str(k): (str(v) if v else None) for k, v in loaded.items()}
        except (OSError, ValueError):
            pass
    files = HostFiles(path / "fs", confined=True)
    return Host(files, SnapshotCommands(path / "cmd", which), snapshot_dir=path, manifest=manifest)
