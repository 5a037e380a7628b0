"""Every check survives garbage: a real snapshot whose every file, command output and sample is replaced by junk
must give findings (mostly skips), never an `error` (a check that crashed) and never a traceback."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from tests.conftest import SNAPSHOTS
from tunehost.check import Severity
from tunehost.doctor import run_doctor
from tunehost.facts import HostFacts
from tunehost.host import open_host
from tunehost.doctor.registry import load_checks

GARBAGE = {
    "empty": lambda rng, old: b"",
    "binary": lambda rng, old: bytes(rng.randrange(256) for _ in range(64)),
    "words": lambda rng, old: b"garbage: [not] a -1 value\n\tUnknown\n",
    "numbers": lambda rng, old: b"-99999999999999999999 nan 1e309 0x\n",
    "truncated": lambda rng, old: old[: len(old) // 2],
    "shuffled-lines": lambda rng, old: b"\n".join(rng.sample(old.split(b"\n"), len(old.split(b"\n")))),
}
SAMPLE_GARBAGE = ["not json", "[]", "{}", "null", '{"processes": 5, "vmstat_delta": "x"}', '[{"pid": "x"}]', "3",
                  '{"format": 1, "memory_read_gbps": NaN, "cpu_mhz_all": {"0": -5}, "cpu_mhz_single": [1]}',
                  '{"format": 1, "cpu_mhz_all": {"x": 4000}, "memory_read_threads": 1e400}']


CLOCKS = SNAPSHOTS.parent / "clocks"  # real clamped/limited hosts (cpu-clocks, power-limits)
UDEV_DMI = SNAPSHOTS.parent / "udev_dmi"
DRM = SNAPSHOTS.parent / "gpu" / "drm"
BASES = {"desktop-12700f-rtx3060": SNAPSHOTS / "desktop-12700f-rtx3060", "strix-halo-395": SNAPSHOTS / "strix-halo-395",
         "ci-vm": SNAPSHOTS / "ci-vm",
         "framework16-clamped": CLOCKS / "framework16-7940hs-clamped-1ghz-after-resume",
         "asus-mmio-limits": CLOCKS / "asus-strix-g814jz-13980hx-mmio-45w-over-msr-175w"}


def _add_udev_and_drm(snap) -> None:
    """Files the newer readers take, so garbage reaches them too: systemd's udev memory data and DRM fdinfo."""
    udev = next(iter(sorted(p for p in UDEV_DMI.rglob("*") if p.is_file() and "MEMORY_DEVICE" in p.read_text(
        errors="replace"))), None)
    if udev is not None:
        target = snap / "fs" / "run" / "udev" / "data" / "+dmi:id"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(udev.read_bytes())
    fdinfo = snap / "fs" / "proc" / "4242" / "fdinfo"
    fdinfo.mkdir(parents=True, exist_ok=True)
    (fdinfo / "7").write_bytes((DRM / "amdgpu_top-issue87-amdgpu-fdinfo.txt").read_bytes())
    (fdinfo.parent / "comm").write_text("Xorg\n")


@pytest.mark.parametrize("kind", sorted(GARBAGE))
@pytest.mark.parametrize("base", sorted(BASES))
def test_no_check_crashes_on_garbage(tmp_path, base, kind):
    rng = random.Random(f"{base}-{kind}")
    snap = tmp_path / base
    shutil.copytree(BASES[base], snap, symlinks=True)
    _add_udev_and_drm(snap)
    for path in sorted(p for p in snap.rglob("*") if p.is_file() and not p.is_symlink() and p.name != "manifest.json"):
        if path.parent.name == "samples":
            path.write_text(rng.choice(SAMPLE_GARBAGE))
        else:
            path.write_bytes(GARBAGE[kind](rng, path.read_bytes()))
    report = run_doctor(HostFacts(open_host(snap)), load_checks().checks)
    crashed = [(f.check, f.summary, dict(f.evidence)) for f in report.findings if f.severity is Severity.ERROR]
    assert not crashed
    json.dumps(report.to_json())
