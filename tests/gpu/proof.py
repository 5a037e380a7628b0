"""What the tests of a lent machine's scripts/gpu_proof output share: reading its files, and replaying its snapshot
against the doctor.json it was captured with."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

# checks whose judgement rests on settings, not on a sample of its own moment: a replay says them word for word
STATIC_CHECKS = frozenset({"ram-speed", "cpu-governor", "cpu-epp", "cpu-frequency", "power-limits", "thp", "numa",
                           "pcie-link", "resizable-bar", "gpu-power-cap", "apu-memory", "headless"})


def reader(root: Path) -> Callable[[str], Any]:
    """load(rel): the JSON file `rel` under `root`."""
    return lambda rel: json.loads((root / rel).read_text())


def by_check(doc: dict, check: str) -> list[dict]:
    return [f for f in doc["findings"] if f["check"] == check]


def assert_replays(cli: Callable[..., Any], proof: Path) -> tuple[dict, dict]:
    """Replay `proof`/snapshot with doctor: every built-in check judged, the same verdict and severities as the
    `proof`/doctor.json taken on the machine, every static judgement word for word. llama-build is left out: gpu_proof
    takes the snapshot before the build it would find. Returns (recorded, replay)."""
    from tunehost.doctor.registry import BUILTIN_ORDER

    recorded = json.loads((proof / "doctor.json").read_text())
    assert {f["check"] for f in recorded["findings"]} == set(BUILTIN_ORDER)
    result = cli("doctor", "--json", "--snapshot", str(proof / "snapshot"))
    replay = json.loads(result.stdout)
    assert replay["verdict"] == recorded["verdict"] == "ready" and result.exit_code == 0
    count = lambda doc: Counter((f["check"], f["severity"]) for f in doc["findings"] if f["check"] != "llama-build")  # noqa: E731
    assert count(replay) == count(recorded)
    said = lambda doc: [(f["check"], f["summary"]) for f in doc["findings"] if f["check"] in STATIC_CHECKS]  # noqa: E731
    assert len(said(recorded)) == len(STATIC_CHECKS) and said(replay) == said(recorded)
    return recorded, replay
