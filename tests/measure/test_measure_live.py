"""The real probes on this host (CI: a 2-vCPU VM without cpufreq): a figure or a stated reason, nothing left behind."""

from __future__ import annotations

import json
import os
import threading

import psutil
import pytest

from tunehost.probes.bandwidth import measure_read_bandwidth
from tunehost.facts import HostFacts
from tunehost.facts.measure import MeasureFacts
from tunehost.host import open_host
from tunehost.host import samples as samples_module
from tunehost.probes.sampler import take_measurement


def leftovers() -> tuple[set[int], set[int]]:
    """Threads and child processes alive now (by identity: one left over from an earlier test may end meanwhile)."""
    return {t.ident for t in threading.enumerate()}, {c.pid for c in psutil.Process().children(recursive=True)}


def new_since(before: tuple[set[int], set[int]]) -> tuple[set[int], set[int]]:
    threads, children = leftovers()
    return threads - before[0], children - before[1]


@pytest.mark.live
def test_live_measurement_gives_a_bandwidth_or_says_why_and_leaves_nothing_behind():
    before = leftovers()
    host = open_host()
    host.measure = True
    data = take_measurement(host)
    assert new_since(before) == (set(), set())
    facts = MeasureFacts.from_sample(json.loads(json.dumps(data)))  # what a snapshot would replay
    assert not facts.problems, facts.problems
    if facts.skipped:
        assert "busy" in facts.skipped  # the only reason a quiet Linux host does not measure
        return
    assert facts.memory_read_gbps and facts.memory_read_gbps > 0.1
    assert facts.memory_read_threads == len(data["memory_probe_cpus"]) >= 1
    assert set(data["memory_probe_cpus"]) <= os.sched_getaffinity(0)
    # the clocks: measured, or a reason (a VM without cpufreq says so)
    assert facts.cpu_mhz_all or facts.clocks_skipped


def test_an_interrupted_probe_leaves_no_thread_and_no_memory(monkeypatch):
    import numpy as np

    calls = {"n": 0}
    real_sum = np.sum

    def interrupted(chunk):
        calls["n"] += 1
        if calls["n"] > 3:  # after the warm-up pass: Ctrl-C arrives in the middle of a timed pass
            raise KeyboardInterrupt
        return real_sum(chunk)

    monkeypatch.setattr(np, "sum", interrupted)
    before = leftovers()
    rss = psutil.Process().memory_info().rss
    with pytest.raises(KeyboardInterrupt):
        measure_read_bandwidth(256 * 2**20, cpus=sorted(os.sched_getaffinity(0))[:2], repeats=3)
    assert new_since(before)[0] == set()
    assert psutil.Process().memory_info().rss < rss + 128 * 2**20  # the 256 MiB array is gone


def test_probe_threads_are_pinned_one_per_cpu(monkeypatch):
    pinned: list[set[int]] = []
    real = os.sched_setaffinity
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: (pinned.append(set(cpus)), real(pid, cpus)))
    cpus = sorted(os.sched_getaffinity(0))
    result = measure_read_bandwidth(16 * 2**20, cpus=cpus, repeats=1)
    assert result.threads == len(cpus)
    assert sorted(min(p) for p in pinned) == cpus and all(len(p) == 1 for p in pinned)
    assert os.sched_getaffinity(0) == set(cpus)  # the calling thread itself was never pinned


@pytest.fixture
def measure_calls(monkeypatch):
    calls = []
    monkeypatch.setitem(samples_module.SAMPLERS, "measure", lambda host: calls.append(host) or {"format": 1})
    return calls


def test_doctor_measures_only_when_a_measured_check_runs(cli, measure_calls):
    cli("doctor", "--json", "--check", "thp")
    assert measure_calls == []
    cli("doctor", "--json", "--check", "memory-bandwidth")
    assert len(measure_calls) == 1


def test_a_busy_host_is_not_measured(make_snapshot, monkeypatch):
    from tunehost.facts.processes import ProcessFacts, busy_reason

    snap = make_snapshot(samples={
        "processes": [{"pid": 7, "ppid": 1, "name": "llama-server", "server": "llama-server",
                       "flags": {"host": "127.0.0.1", "port": "8080", "api_key": False}}],
        "activity": {"interval_s": 0.5, "cpu_count": 8, "cpu_percent_total": 650.0,
                     "processes": [{"pid": 7, "name": "llama-server", "cpu_percent": 650.0, "self": False}]}})
    reason = busy_reason(ProcessFacts.gather(open_host(snap)))
    assert reason and "inference server is at work" in reason and "llama-server pid 7" in reason
    hog = make_snapshot(samples={"processes": [], "activity": {
        "interval_s": 0.5, "cpu_count": 2, "cpu_percent_total": 95.0,
        "processes": [{"pid": 9, "name": "ffmpeg", "cpu_percent": 95.0, "self": False},
                      {"pid": 10, "name": "pytest", "cpu_percent": 99.0, "self": True}]}})
    assert "busy" in busy_reason(ProcessFacts.gather(open_host(hog)))
    quiet = make_snapshot(samples={"processes": [], "activity": {
        "interval_s": 0.5, "cpu_count": 2, "cpu_percent_total": 3.0,
        "processes": [{"pid": 9, "name": "sshd", "cpu_percent": 3.0, "self": False}]}})
    assert busy_reason(ProcessFacts.gather(open_host(quiet))) is None


def test_snapshot_quick_records_why_nothing_was_measured(cli, tmp_path, measure_calls):
    result = cli("snapshot", "--quick", str(tmp_path / "snap"))
    assert result.exit_code == 0, result.output
    assert measure_calls == []
    recorded = json.loads((tmp_path / "snap" / "samples" / "measure.json").read_text())
    assert recorded == {"format": 1, "skipped": "not measured (--quick)"}


@pytest.mark.live
def test_bench_doctor_script_times_the_three_commands_side_by_side():
    from tests.conftest import load_script

    script = load_script("bench_doctor")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert script.main(["--rounds", "1", "--json"]) == 0
    result = json.loads(out.getvalue())
    assert set(result["commands"]) == {"python -c pass", "tunehost doctor --quick", "tunehost doctor"}
    assert all(row["median_s"] > 0 for row in result["commands"].values())
    assert result["measuring_adds_s"] == pytest.approx(result["commands"]["tunehost doctor"]["median_s"]
                                                       - result["commands"]["tunehost doctor --quick"]["median_s"],
                                                       abs=0.002)
