"""`tunehost bench` as an operation (issue 31): the CLI opens the host once and builds its HostFacts once; the
planning path (--advised) reads only the facts it is given, so a snapshot replays it."""

from __future__ import annotations

import collections
import itertools
import json
from pathlib import Path

import pytest

from tests.bench.test_runner import SUPPORTED, FakeBench, reading
from tests.conftest import SNAPSHOTS, write_tiny_gguf
from tunehost import host as host_module
from tunehost.bench import runner, watch
from tunehost.bench.runner import BenchConfig, BenchSettings
from tunehost.facts import HostFacts
from tunehost.ops.bench import BenchRequest, plan_bench


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def test_bench_advised_opens_the_host_once_and_builds_its_facts_once(cli, monkeypatch, model):
    # only llama-bench, its --help, the RAM probe and the watch's readings are faked: the planner, the host
    # summary (py-cpuinfo and the doctor), the ceiling's GPUs/DIMMs/busy check and the store's identity are real
    fake = FakeBench(collections.defaultdict(lambda: 100.0), noise=(0.0, 0.01, -0.01), seconds=0.0)
    monkeypatch.setattr(runner, "default_invoke", lambda binary, timeout_s: fake)
    monkeypatch.setattr(runner, "_supported", lambda binary: SUPPORTED)
    monkeypatch.setattr(runner, "resolve_binary", lambda explicit: Path("/opt/llama/llama-bench"))
    monkeypatch.setattr(runner, "_probe_bandwidth", lambda host, probe_bytes: {
        "memory_read_gbps": 40.0, "memory_read_samples": [40.0, 39.5], "memory_read_threads": 2})
    quiet = reading(10, 20, 19.9)
    readings = itertools.chain([reading(0, 0, 0)], itertools.repeat(quiet))
    monkeypatch.setattr(watch, "read_reading", lambda host, **kw: next(readings))

    opened: list[object] = []
    real_open = host_module.open_host

    def counting_open(*args, **kwargs):
        opened.append(args)
        return real_open(*args, **kwargs)

    built: list[object] = []
    real_init = HostFacts.__init__

    def counting_init(self, host):
        built.append(host)
        real_init(self, host)

    monkeypatch.setattr(host_module, "open_host", counting_open)
    monkeypatch.setattr(HostFacts, "__init__", counting_init)
    result = cli("bench", "--model", str(model), "-p", "16", "-n", "8", "--advised", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(opened) == 1 and opened[0] == ()  # the live host, once
    assert len(built) == 1  # one HostFacts: planning, host summary, ceiling, watch and the store's identity
    assert doc["host"]["doctor"]["verdict"] is not None  # the doctor ran, on those facts
    assert doc["ceiling"]["tg_ceiling_ts"] is not None
    assert "-t" in doc["configs"][1]["flags"]  # advise's plan, as llama-bench options
    history = json.loads(cli("history", "--json").stdout)["runs"]
    assert len(history) == 1 and history[0]["command"] == "bench"  # recorded, with the same facts' identity


def test_bench_advised_plan_replays_from_a_snapshot_reading_nothing_live(monkeypatch, model):
    facts = HostFacts(host_module.open_host(SNAPSHOTS / "desktop-12700f-rtx3060"))

    def live(*args, **kwargs):
        raise AssertionError("the planning path read the live machine")

    monkeypatch.setattr(host_module, "open_host", live)
    monkeypatch.setattr(runner, "resolve_binary", live)  # llama-bench's options are given: no binary asked
    monkeypatch.setattr(runner, "_supported", live)
    monkeypatch.setattr("os.cpu_count", live)
    monkeypatch.setattr("tunehost.host.cpuinfo.live_cpu_flags", live)
    request = BenchRequest(BenchSettings(model=str(model)), baseline=("-t", "2"), advised=True)
    planned = plan_bench(request, facts, supported=SUPPORTED)
    assert planned.configs[0] == BenchConfig("baseline", ("-t", "2"))
    # the captured 12700F + RTX 3060: every layer on the GPU, one thread on each of its 8 P-cores (CPUs 0, 2, ..)
    assert planned.advised is not None and planned.advised.pin_cpus == (0, 2, 4, 6, 8, 10, 12, 14)
    assert planned.advised_flags is not None and planned.advised_flags.cpus == planned.advised.pin_cpus
    assert planned.configs[1] == BenchConfig("candidate", (
        "-ngl", "99", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0", "-b", "2048", "-ub", "512", "-t", "8",
        "-C", "0x5555", "--cpu-strict", "1"))
    again = plan_bench(request, HostFacts(facts.host), supported=SUPPORTED)
    assert again == planned  # the same snapshot, the same plan


def test_a_plain_request_plans_its_flags_without_the_planner(monkeypatch):
    def planner(*args, **kwargs):
        raise AssertionError("advise's planner ran for a request without --advised")

    monkeypatch.setattr("tunehost.ops.bench.advised_launch", planner)
    request = BenchRequest(BenchSettings(model="m.gguf"), baseline=("-t", "4"), candidate=("-t", "2"))
    planned = plan_bench(request, HostFacts(None))
    assert planned.configs == (BenchConfig("baseline", ("-t", "4")), BenchConfig("candidate", ("-t", "2")))
    assert planned.advised is None and planned.advised_flags is None


def test_the_kernel_release_is_read_through_the_host_live_or_recorded(tmp_path):
    import os
    import shutil

    from tunehost.host import cpuinfo

    assert cpuinfo.kernel_release(host_module.open_host()) == os.uname().release  # /proc's osrelease is uname -r
    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOTS / "ci-vm", snap)
    assert cpuinfo.kernel_release(host_module.open_host(snap)) is None  # not recorded: unknown, not this host's
    (snap / "fs" / "proc" / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (snap / "fs" / "proc" / "sys" / "kernel" / "osrelease").write_text("6.8.0-45-generic\n")
    assert cpuinfo.kernel_release(host_module.open_host(snap)) == "6.8.0-45-generic"
