"""`tunehost advise --snapshot` replays the snapshot: the CLI opens it once, the operation (tunehost.ops.advise)
reads through it, and nothing live is opened, run or measured — in every format, one model or a router."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import dense_tensors, write_gguf

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "desktop-12700f-rtx3060"


@pytest.fixture
def no_live_host(monkeypatch) -> list[object]:
    """Every open_host call, recorded; opening the live host, starting a live command runner, running a command
    or probing the RAM fails the test."""
    import tunehost.host as host_layer
    from tunehost.host import commands, proc
    from tunehost.probes import sampler

    opened: list[object] = []
    real_open = host_layer.open_host

    def open_host(snapshot=None, **kwargs):
        if snapshot is None:
            pytest.fail("advise --snapshot opened the live host")
        opened.append(snapshot)
        return real_open(snapshot, **kwargs)

    def forbidden(what: str):
        return lambda *a, **k: pytest.fail(f"advise --snapshot used {what}")

    monkeypatch.setattr(host_layer, "open_host", open_host)
    monkeypatch.setattr(host_layer, "LiveCommands", forbidden("a live command runner"))
    monkeypatch.setattr(commands, "_run_bounded", forbidden("a live command"))
    monkeypatch.setattr(proc, "run_bounded", forbidden("a live command"))
    monkeypatch.setattr(sampler, "probe_memory", forbidden("the RAM bandwidth probe"))
    return opened


@pytest.mark.parametrize("fmt", ["human", "shell", "systemd", "json", "ollama"])
def test_advise_replays_a_snapshot_and_reads_nothing_live(cli, tmp_path, no_live_host, fmt) -> None:
    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    r = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--format", fmt)
    assert r.exit_code == 0, r.stderr
    assert no_live_host == [SNAPSHOT]  # the CLI opened the snapshot once, and nothing else
    assert "llama-server" in r.stdout or "ollama" in r.stdout
    if fmt == "json":
        data = json.loads(r.stdout)
        assert data["snapshot"] == str(SNAPSHOT) and data["measured"] is None  # no live results store read
        assert data["launch"]["model"] == str(model.resolve())
    if fmt == "systemd":  # the unit's access check reads the snapshot's paths: it can say nothing about this box
        assert "tunehost: warning:" in r.stderr


def test_advise_router_replays_a_snapshot_and_reads_nothing_live(cli, tmp_path, no_live_host) -> None:
    a = write_gguf(tmp_path / "a.gguf", "llama", dense_tensors(2), n_layer=2)
    b = write_gguf(tmp_path / "b.gguf", "llama", dense_tensors(2), n_layer=2)
    r = cli("advise", "--model", str(a), "--model", str(b), "--snapshot", str(SNAPSHOT), "--format", "json",
            "--preset-file", str(tmp_path / "models.ini"))
    assert r.exit_code == 0, r.stderr
    assert no_live_host == [SNAPSHOT]
    data = json.loads(r.stdout)
    assert data["mode"] == "router" and data["snapshot"] == str(SNAPSHOT)
    assert [m["router_name"] for m in data["models"]] == ["a", "b"]


def test_the_operation_takes_the_callers_host_and_never_opens_one(tmp_path, monkeypatch) -> None:
    """tunehost.ops.advise.advise plans with the Host and HostFacts it is given: open_host is never called."""
    import tunehost.host as host_layer
    from tunehost.facts import HostFacts
    from tunehost.ops.advise import AdviseRequest, advise

    host = host_layer.open_host(SNAPSHOT)
    monkeypatch.setattr(host_layer, "open_host", lambda *a, **k: pytest.fail("the operation opened a host"))
    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    advice = advise(host, HostFacts(host), AdviseRequest(models=(model,), snapshot=SNAPSHOT))
    assert advice.plan is not None and advice.router is None and advice.fits
    assert advice.launch is advice.plan.launch() and advice.launch.model == str(model.resolve())
    assert advice.measured is None and advice.unit_check is None


@pytest.mark.parametrize("snapshot, record, reliable", [
    ("desktop-12700f-rtx3060", {"inside": 26, "runs": 27, "median_width": 1.67, "worst_low": 0.99}, True),
    ("server-epyc9654-2s", {"inside": 26, "runs": 29, "median_width": 1.65, "worst_low": 0.41}, False),
])
def test_a_real_snapshots_band_states_its_kinds_record(cli, tmp_path, no_live_host, snapshot, record, reliable) -> None:
    """The RTX 3060 box's GPU band held its kind's published runs; the dual EPYC's CPU band is a rough guide."""
    path = SNAPSHOT.parent / snapshot
    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    r = cli("advise", "--model", str(model), "--snapshot", str(path), "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["ceiling"]["band"]["record"] == {**record, "reliable": reliable}
    human = " ".join(cli("advise", "--model", str(model), "--snapshot", str(path)).stdout.split())
    held = f"it held {record['inside']} of {record['runs']} published runs of this kind out of sample"
    assert held in human and ("a rough guide here" in human) is not reliable
