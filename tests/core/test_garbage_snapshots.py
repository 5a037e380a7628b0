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
from tunehost.registry import load_checks

GARBAGE = {
    "empty": lambda rng, old: b"",
    "binary": lambda rng, old: bytes(rng.randrange(256) for _ in range(64)),
    "words": lambda rng, old: b"garbage: [not] a -1 value\n\tUnknown\n",
    "numbers": lambda rng, old: b"-99999999999999999999 nan 1e309 0x\n",
    "truncated": lambda rng, old: old[: len(old) // 2],
    "shuffled-lines": lambda rng, old: b"\n".join(rng.sample(old.split(b"\n"), len(old.split(b"\n")))),
}
SAMPLE_GARBAGE = ["not json", "[]", "{}", "null", '{"processes": 5, "vmstat_delta": "x"}', '[{"pid": "x"}]', "3"]


@pytest.mark.parametrize("kind", sorted(GARBAGE))
@pytest.mark.parametrize("base", ["desktop-12700f-rtx3060", "strix-halo-395", "ci-vm"])
def test_no_check_crashes_on_garbage(tmp_path, base, kind):
    rng = random.Random(f"{base}-{kind}")
    snap = tmp_path / base
    shutil.copytree(SNAPSHOTS / base, snap, symlinks=True)
    for path in sorted(p for p in snap.rglob("*") if p.is_file() and not p.is_symlink() and p.name != "manifest.json"):
        if path.parent.name == "samples":
            path.write_text(rng.choice(SAMPLE_GARBAGE))
        else:
            path.write_bytes(GARBAGE[kind](rng, path.read_bytes()))
    report = run_doctor(HostFacts(open_host(snap)), load_checks().checks)
    crashed = [(f.check, f.summary, dict(f.evidence)) for f in report.findings if f.severity is Severity.ERROR]
    assert not crashed
    json.dumps(report.to_json())
