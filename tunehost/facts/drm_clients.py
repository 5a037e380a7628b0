"""DRM facts for AMD and Intel (and nvidia-drm): GPU memory held per process from /proc/<pid>/fdinfo, and the
displays connected to each card from /sys/class/drm/cardN-<connector>/status.

The kernel's DRM usage stats (Documentation/gpu/drm-usage-stats.rst) print, per open DRM file:
`drm-driver:`, `drm-pdev:` (PCI address), `drm-client-id:` and memory per region: `drm-memory-<region>:` (the
original amdgpu key, kernel 5.19+), `drm-total-<region>:` / `drm-resident-<region>:` (the common keys of later 6.x
kernels; i915 and xe print regions on 6.8+). Units are a bare number (bytes), KiB or MiB.
Kernels before 5.19 (amdgpu) / 6.8 (i915) print no memory lines: then who holds VRAM is unknown.
Several fds of one process may share one client (dup, fork): each (pdev, client id) is counted once per process.
Reading another user's fdinfo needs root; a process whose fdinfo cannot be read is simply not seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from tunehost.bounds import whole_text
from tunehost.parsers.nvidia_smi import normalise_bus_id
from tunehost.printable import one_line

if TYPE_CHECKING:
    from tunehost.host import Host

PROC = "/proc"
DRM = "/sys/class/drm"
MIB = 1024 * 1024
# device-local memory regions per driver: amdgpu "vram", i915 "local0"/"local1", xe "vram0"/"vram1"
VRAM_REGION = re.compile(r"^(vram\d*|local\d+)$")
_UNITS = {"": 1, "B": 1, "KIB": 1024, "MIB": MIB, "GIB": 1024 * MIB}
MAX_FDS_PER_PROCESS = 4096   # a process with more open files than this is not scanned further (time bound)


@dataclass(frozen=True)
class DrmClient:
    """One open DRM file as its fdinfo shows it."""

    driver: str
    pdev: str | None
    client_id: str | None
    vram_bytes: int | None     # None: this kernel/driver prints no device-local memory line
    other_bytes: int | None    # GTT / system memory mapped for the GPU


def _size(text: str) -> int | None:
    match = re.fullmatch(r"\s*(\d{1,19})\s*([KMG]iB|B)?\s*", text, re.IGNORECASE)
    if not match:
        return None
    value = int(match.group(1)) * _UNITS[(match.group(2) or "").upper()]
    return value if value < 1 << 50 else None   # a petabyte of VRAM is garbage


def parse_fdinfo(text: str | None) -> DrmClient | None:
    """An fdinfo text -> DrmClient; None when it is not a DRM file (no `drm-driver:` line)."""
    keys: dict[str, str] = {}
    for line in (text or "").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.startswith("drm-"):
            keys.setdefault(name.strip(), value.strip())
    driver = keys.get("drm-driver")
    if not driver or not re.fullmatch(r"[\w.-]{1,64}", driver):
        return None
    # resident (what sits in the region now) beats total (allocated), beats the legacy amdgpu drm-memory-<region>
    regions: dict[str, int] = {}
    for prefix in ("drm-memory-", "drm-total-", "drm-resident-"):
        for key, value in keys.items():
            if key.startswith(prefix):
                size = _size(value)
                if size is not None:
                    regions[key[len(prefix):]] = size
    vram = [v for r, v in regions.items() if VRAM_REGION.match(r)]
    other = [v for r, v in regions.items() if not VRAM_REGION.match(r) and r not in ("cpu",)]
    client = keys.get("drm-client-id")
    return DrmClient(driver, normalise_bus_id(keys.get("drm-pdev")),
                     client if client and client.isdigit() else None,
                     sum(vram) if vram else None, sum(other) if other else None)


@dataclass(frozen=True)
class DrmProcess:
    pid: int
    name: str | None
    pdev: str
    driver: str
    vram_mib: int | None   # None: the driver prints no VRAM line (iGPU, old kernel)
    other_mib: int | None


@dataclass(frozen=True)
class DrmFacts:
    processes: tuple[DrmProcess, ...] = ()
    connected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # card name -> connected connectors
    scanned: int = 0              # processes whose fdinfo could be listed
    note: str | None = None       # why some or all holders may be missing

    def on(self, bus_id: str | None) -> tuple[DrmProcess, ...]:
        return tuple(p for p in self.processes if bus_id and p.pdev == bus_id)

    @classmethod
    def gather(cls, host: "Host") -> "DrmFacts":
        try:
            return _gather(host)
        except Exception as exc:  # facts never raise
            return cls(note=f"DRM clients could not be read: {exc.__class__.__name__}: {exc}")


def _gather(host: "Host") -> DrmFacts:
    by_key: dict[tuple[int, str], dict] = {}
    scanned = 0
    pids = _pids(host)
    # live: read only DRM files (a browser has thousands of other fds); while recording a snapshot the fd links are
    # not read, so no other file path of any process enters the snapshot
    by_link = host.live and getattr(host.files, "log", None) is None
    for pid_text in pids:
        fds = host.files.listdir(f"{PROC}/{pid_text}/fdinfo")
        if not fds:
            continue
        scanned += 1
        seen: set[tuple[str, str]] = set()
        for fd in fds[:MAX_FDS_PER_PROCESS]:
            if not fd.isdigit():
                continue
            if by_link:
                target = host.files.readlink(f"{PROC}/{pid_text}/fd/{fd}")
                if not target or not target.startswith("/dev/dri/"):
                    continue
            client = parse_fdinfo(host.files.read(f"{PROC}/{pid_text}/fdinfo/{fd}"))
            if client is None or client.pdev is None:
                continue
            ident = (client.pdev, client.client_id or f"fd{fd}")
            if ident in seen:
                continue
            seen.add(ident)
            row = by_key.setdefault((int(pid_text), client.pdev),
                                    {"driver": client.driver, "vram": None, "other": None})
            for key, value in (("vram", client.vram_bytes), ("other", client.other_bytes)):
                if value is not None:
                    row[key] = (row[key] or 0) + value
    processes = []
    for (pid, pdev), row in sorted(by_key.items()):
        name = host.files.read_value(f"{PROC}/{pid}/comm")
        processes.append(DrmProcess(pid, _clean(name), pdev, row["driver"],
                                    row["vram"] // MIB if row["vram"] is not None else None,
                                    row["other"] // MIB if row["other"] is not None else None))
    uid = host.manifest.get("uid") if not host.live else _euid()
    note = None
    if not pids:
        note = "no process list under /proc (not recorded in this snapshot)"
    elif uid != 0:
        note = ("run as root to see every process: fdinfo of other users' processes (the display server, "
                "another user's model server) is readable by root only")
    return DrmFacts(tuple(processes), _connectors(host), scanned, note)


def _pids(host: "Host") -> list[str]:
    """Live: the pids of the `processes` sample (listing /proc itself would make `tunehost snapshot` copy
    /proc/kmsg and friends); a snapshot: the pid directories it holds."""
    if not host.live:
        return [p for p in host.files.listdir(PROC) if whole_text(p) is not None]
    rows = host.sample("processes")
    return [str(r["pid"]) for r in rows if isinstance(r, dict) and isinstance(r.get("pid"), int)] \
        if isinstance(rows, list) else []


def _euid() -> int | None:
    import os

    return os.geteuid() if hasattr(os, "geteuid") else None


def _clean(name: str | None) -> str | None:
    if not name:
        return None
    return one_line(name, 64).strip() or None  # a process name reaches the terminal


def _connectors(host: "Host") -> dict[str, tuple[str, ...]]:
    """card name -> connectors whose status is "connected" (a monitor is plugged in)."""
    found: dict[str, list[str]] = {}
    for entry in host.files.listdir(DRM):
        match = re.fullmatch(r"(card\d+)-([\w-]{1,40})", entry)
        if not match:
            continue
        status = host.files.read_value(f"{DRM}/{entry}/status")
        found.setdefault(match.group(1), [])
        if status == "connected":
            found[match.group(1)].append(match.group(2))
    return {card: tuple(names) for card, names in found.items()}
