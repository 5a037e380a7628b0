"""tune's planning half replays from a snapshot (issue 31): advise's plan as the incumbent, the race's stages and
the settings come from the HostFacts the caller opened, with nothing live read. Only the race itself measures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SNAPSHOTS, write_tiny_gguf
from tests.tune.test_tune_cli import SUPPORTED
from tunehost import host as host_module
from tunehost.facts import HostFacts
from tunehost.ops import tune as op
from tunehost.tune.space import KNOBS


@pytest.fixture
def replay(monkeypatch, tmp_path: Path):
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    facts = HostFacts(host_module.open_host(SNAPSHOTS / "desktop-12700f-rtx3060"))

    def live(*args, **kwargs):
        raise AssertionError("tune's planning read the live machine")

    monkeypatch.setattr(host_module, "open_host", live)
    monkeypatch.setattr("os.cpu_count", live)
    monkeypatch.setattr("tunehost.host.cpuinfo.live_cpu_flags", live)
    monkeypatch.setattr("tunehost.host.proc.run_bounded", live)
    monkeypatch.setattr(op, "_llama_bench", lambda explicit: (tmp_path / "bin" / "llama-bench", SUPPORTED))
    return model, facts


def test_tune_plans_its_race_from_a_snapshot_reading_nothing_live(replay):
    model, facts = replay
    options = op.TuneOptions(model=str(model), n_gen=16)
    prepared = op._prepare(facts.host, facts, options)
    # the captured 12700F + RTX 3060: every layer on the GPU, one thread on each of its 8 P-cores (CPUs 0, 2, ..)
    assert prepared.plan.label == op.PLAN_LABEL
    assert prepared.plan.launch.pin_cpus == (0, 2, 4, 6, 8, 10, 12, 14)
    assert ("-ngl", "99") == tuple(prepared.plan.args[:2])
    assert "-C" in prepared.plan.args and prepared.plan.args[prepared.plan.args.index("-C") + 1] == "0x5555"
    stages = {k.name: k for k in prepared.knobs}
    assert list(stages) == [spec.name for spec in KNOBS]
    assert stages["threads"].variants(prepared.plan)  # the race has challengers to measure
    assert prepared.settings.model == str(model) and prepared.settings.n_gen == 16
    again = op._prepare(facts.host, HostFacts(facts.host), options)
    assert again.plan == prepared.plan  # the same snapshot, the same incumbent
    assert [k.name for k in again.knobs] == list(stages)
