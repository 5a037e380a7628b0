"""The server bench's host watch when the server is another user's, and when a router child exits: the server's
own CPU time never counts as other processes' work (per-process deltas, tunehost.bench.server.cpu); a server
this user cannot see makes the CPU load unknown (said once), never "disturbed" (other reasons still apply)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tunehost.bench.server.cpu import ServingCpu
from tunehost.bench.watch import CpuTimes, HostReading, judge
from tunehost.ops.server_bench import server_watcher
from tunehost.host import open_host


class Trees:
    """A fake process-tree reader: pid -> CPU seconds, changed by the test between readings."""

    def __init__(self, cpu: dict[int, float]):
        self.cpu = dict(cpu)

    def __call__(self, pids: set[int]) -> dict[int, float]:
        return dict(self.cpu)


def test_a_router_child_that_exits_keeps_what_it_used_and_the_total_never_drops():
    trees = Trees({100: 10.0, 101: 50.0, 102: 5.0})  # the router, two model children; their time before: not ours
    cpu = ServingCpu(trees)
    assert cpu.update({100}) == 0.0 and cpu.seen == {100, 101, 102}
    trees.cpu = {100: 11.0, 101: 58.0, 102: 6.0}
    assert cpu.update({100}) == pytest.approx(10.0)
    del trees.cpu[101]  # the child exits: its 58 s leave the tree's total, not the watch's count
    trees.cpu[100], trees.cpu[102] = 12.0, 7.0
    assert cpu.update({100}) == pytest.approx(12.0)  # 10 + 1 + 1: the gone child added its last delta only
    trees.cpu[103] = 2.5  # a child born during the watch: all its time
    assert cpu.update({100}) == pytest.approx(14.5)
    trees.cpu[101] = 0.5  # the exited child's pid reused by a new process: counted as new
    assert cpu.update({100}) == pytest.approx(15.0)
    assert cpu.update(set()) == pytest.approx(15.0)  # no pid now: what was counted stays


def test_nothing_known_before_a_server_process_is_seen():
    assert ServingCpu(Trees({})).update(set()) is None


def _reading(at: float, busy: float, own: float | None, steal: float = 0.0) -> HostReading:
    return HostReading(at, CpuTimes(busy, steal, at * 2), own, 0, 0, 0, None)


def test_an_invisible_server_makes_the_cpu_load_unknown_not_disturbed():
    report = judge(_reading(0.0, 0.0, None), _reading(10.0, 19.0, None), cpu_count=2)
    assert report.other_cpu_cores is None and not report.disturbed
    assert any("measured server's processes are not visible" in u for u in report.unknown)
    stolen = judge(_reading(0.0, 0.0, None), _reading(10.0, 19.0, None, steal=5.0), cpu_count=2)
    assert stolen.disturbed and "hypervisor stole" in stolen.reasons[0]  # other reasons still apply
    seen = judge(_reading(0.0, 0.0, 0.0), _reading(10.0, 19.0, 18.5), cpu_count=2)
    assert seen.other_cpu_cores == pytest.approx(0.05) and not seen.disturbed


def _targets(port: int = 8080):
    return [SimpleNamespace(target=SimpleNamespace(host="127.0.0.1", port=port))]


def test_the_watcher_says_once_that_the_server_is_not_visible_and_judges_cpu_unknown():
    lines: list[str] = []
    watcher = server_watcher(_targets(), open_host(), warn=lines.append, listening=lambda ports: set(),
                              serving=ServingCpu(Trees({})))
    watcher._gpu_option = False
    watcher.start()
    report = watcher.lap()
    watcher.lap()
    assert len(lines) == 1 and "no process listening on port 8080 is visible to this user" in lines[0]
    assert report.other_cpu_cores is None
    assert any("not visible" in u for u in report.unknown)
    assert not any("other processes used" in r for r in report.reasons)


def test_a_visible_server_counts_its_tree_as_the_measurements_own():
    lines: list[str] = []
    trees = Trees({4242: 1.0, 4243: 3.0})
    watcher = server_watcher(_targets(), open_host(), warn=lines.append, listening=lambda ports: {4242},
                              serving=ServingCpu(trees))
    watcher._gpu_option = False
    watcher.start()
    trees.cpu = {4242: 1.5}  # the child exited
    report = watcher.lap()
    assert lines == [] and report.other_cpu_cores is not None
    assert not any(name for name, pid, _ in report.busiest_others if pid in (4242, 4243))
