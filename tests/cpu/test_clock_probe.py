"""The clock load probe (tunehost/probes/clock_probe.py): on this machine, on a fake sysfs root (a live Host whose files
are a tmp tree), and its promises: children pinned, never left behind (also on KeyboardInterrupt), the budget kept
as a number of windows (no timing asserted), the sample's keys valid for MeasureFacts."""

from __future__ import annotations

import os

import pytest

from tunehost.facts.clocks import ClockFacts, Cppc, feedback_mhz, parse_feedback
from tunehost.facts.cpu import CpuFacts
from tunehost.facts.measure import MeasureFacts
from tunehost.facts.topology import CpuTopology
from tunehost.host import Host, open_host
from tunehost.probes import clock_probe
from tunehost.probes.clock_probe import choose_cpus, probe_clocks
from tunehost.host.commands import LiveCommands
from tunehost.host.files import HostFiles

CPU = "/sys/devices/system/cpu"
ALLOWED = sorted(os.sched_getaffinity(0))


def fake_host(root, files: dict[str, str]) -> Host:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return Host(HostFiles(root), LiveCommands())


def two_cpus(khz_file="scaling_cur_freq", khz="2500000") -> dict[str, str]:
    cpus = ALLOWED[:2]
    files = {f"{CPU}/online": ",".join(map(str, cpus)) + "\n"}
    for n in cpus:
        d = f"{CPU}/cpu{n}/cpufreq"
        files[f"{d}/scaling_driver"] = "intel_pstate\n"
        files[f"{d}/scaling_governor"] = "performance\n"
        files[f"{d}/cpuinfo_max_freq"] = "4000000\n"
        files[f"{d}/{khz_file}"] = f"{khz}\n"
        files[f"{CPU}/cpu{n}/topology/thread_siblings_list"] = f"{n}\n"
        files[f"{CPU}/cpu{n}/topology/core_id"] = f"{n}\n"
    return files


def test_this_machine_gives_clocks_or_the_reason():
    """CI's VM has no cpufreq: the probe must say so; a host with cpufreq must give valid clock keys."""
    host = open_host()
    result = probe_clocks(host, budget_s=0.8)
    if not CpuFacts.gather(host).has_cpufreq and not ClockFacts.gather(host).cppc:
        assert set(result) == {"clocks_skipped"} and "cpufreq" in result["clocks_skipped"]
    else:
        assert "clocks_skipped" in result or MeasureFacts.from_sample(result).cpu_mhz_all


def test_fake_root_scaling_cur_freq(tmp_path):
    result = probe_clocks(fake_host(tmp_path, two_cpus()), budget_s=0.8)
    cpus = ALLOWED[:2]
    assert result["cpu_mhz_source"] == "scaling_cur_freq"
    assert result["cpu_mhz_single"] == {str(cpus[0]): 2500.0}
    assert result["cpu_mhz_all"] == {str(n): 2500.0 for n in cpus}
    measured = MeasureFacts.from_sample({"format": 1, **result})
    assert measured.cpu_mhz_all == {n: 2500.0 for n in cpus} and not measured.problems


def test_cpuinfo_avg_freq_is_preferred(tmp_path):
    files = two_cpus()
    files.update({k.replace("scaling_cur_freq", "cpuinfo_avg_freq"): "3100000\n" for k in list(files)
                  if k.endswith("scaling_cur_freq")})
    result = probe_clocks(fake_host(tmp_path, files), budget_s=0.8)
    assert result["cpu_mhz_source"] == "aperf-mperf" and set(result["cpu_mhz_all"].values()) == {3100.0}


def test_proc_cpuinfo_is_the_last_resort(tmp_path):
    files = two_cpus(khz_file="scaling_setspeed", khz="<unsupported>")
    files["/proc/cpuinfo"] = "".join(f"processor\t: {n}\ncpu MHz\t\t: 1234.567\n\n" for n in ALLOWED[:2])
    result = probe_clocks(fake_host(tmp_path, files), budget_s=0.8)
    assert result["cpu_mhz_source"] == "cpuinfo" and set(result["cpu_mhz_all"].values()) == {1234.6}


def test_frozen_cppc_counters_are_not_a_clock(tmp_path):
    files = two_cpus(khz_file="scaling_setspeed", khz="<unsupported>")
    for n in ALLOWED[:2]:
        files[f"{CPU}/cpu{n}/acpi_cppc/nominal_freq"] = "4001\n"
        files[f"{CPU}/cpu{n}/acpi_cppc/feedback_ctrs"] = "ref:1000 del:250\n"
    result = probe_clocks(fake_host(tmp_path, files), budget_s=0.8)
    assert "did not change" in result["clocks_skipped"] and "cppc-feedback" in result["clocks_skipped"]


def test_feedback_counters_give_the_delivered_clock():
    # FrameworkComputer/SoftwareFirmwareIssueTracker#91's method: nominal_freq * d(delivered) / d(reference)
    cppc = Cppc(nominal_mhz=4001, nominal_perf=149)
    assert feedback_mhz(parse_feedback("ref:1000 del:1000"), parse_feedback("ref:5000 del:2000"), cppc) == 1000.25
    assert feedback_mhz((10, 10), (10, 20), cppc) is None          # reference did not advance
    assert feedback_mhz((10, 10), (20, 20), Cppc()) is None        # no nominal frequency
    assert parse_feedback("garbage") is None


def test_nothing_readable_skips_with_reason(tmp_path):
    result = probe_clocks(fake_host(tmp_path, {f"{CPU}/online": "0\n"}), budget_s=0.8)
    assert set(result) == {"clocks_skipped"}


def test_a_snapshot_is_never_probed():
    from tests.conftest import SNAPSHOTS
    assert "snapshot" in probe_clocks(open_host(SNAPSHOTS / "ci-vm"))["clocks_skipped"]


def test_a_budget_too_small_for_a_window_skips(tmp_path):
    result = probe_clocks(fake_host(tmp_path, two_cpus()), budget_s=0.1)
    assert "budget" in result["clocks_skipped"]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def recording_spawn(monkeypatch):
    groups = []
    real_spawn = clock_probe.spawn_busy

    def spawn(cpus, lifetime_s):
        group = real_spawn(cpus, lifetime_s)
        groups.append(group)
        return group

    monkeypatch.setattr(clock_probe, "spawn_busy", spawn)
    return groups


def test_children_are_pinned_and_reaped(monkeypatch):
    groups = recording_spawn(monkeypatch)
    seen_affinity = {}

    def reader(cpus, window):
        for cpu in cpus:
            seen_affinity[cpu] = os.sched_getaffinity(groups[-1].pids[cpu])
        return {cpu: 1000.0 for cpu in cpus}

    got = clock_probe.run_phase(ALLOWED[:2], reader, 0.01)
    assert got == {cpu: 1000.0 for cpu in ALLOWED[:2]}
    assert seen_affinity == {cpu: {cpu} for cpu in ALLOWED[:2]}
    [group] = groups
    assert group.launcher.returncode is not None
    assert group_members(group.launcher.pid) == []


def test_keyboard_interrupt_leaves_no_child_behind(tmp_path, monkeypatch):
    groups = recording_spawn(monkeypatch)

    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(clock_probe.time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        probe_clocks(fake_host(tmp_path, two_cpus()), budget_s=0.8)
    [group] = groups
    assert group.pids and group.launcher.returncode is not None
    assert group_members(group.launcher.pid) == []
    for pid in group.pids.values():
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().rpartition(")")[2][:3]


def test_a_cpu_that_cannot_be_used_gets_no_child():
    group = clock_probe.spawn_busy([ALLOWED[0], 100_000], lifetime_s=2.0)
    try:
        assert list(group.pids) == [ALLOWED[0]]
    finally:
        clock_probe.stop_busy(group)
    assert group_members(group.launcher.pid) == []


def test_busy_children_end_by_themselves_when_nobody_stops_them():
    group = clock_probe.spawn_busy([ALLOWED[0]], lifetime_s=0.1)
    try:
        group.launcher.wait(timeout=10)   # the launcher's lifetime passes: it reaps its children and exits
        assert group_members(group.launcher.pid) == []
    finally:
        clock_probe.stop_busy(group)


def test_single_core_picks_one_cpu_per_core_type_and_the_preferred_core():
    from tunehost.facts.topology import EFFICIENCY, PERFORMANCE, LogicalCpu

    hybrid = CpuTopology(cpus=tuple([LogicalCpu(n, siblings=(n, n + 1), kind=PERFORMANCE) for n in (0, 2)]
                                    + [LogicalCpu(n + 1, siblings=(n, n + 1), kind=PERFORMANCE) for n in (0, 2)]
                                    + [LogicalCpu(n, siblings=(n,), kind=EFFICIENCY) for n in (4, 5, 6, 7)]),
                         hybrid_source="cpu_core/cpu_atom")
    single, every = choose_cpus(hybrid, ClockFacts(), set(range(8)))
    assert single == [0, 4] and every == [0, 2, 4, 5, 6, 7]       # SMT siblings 1 and 3 left out
    single, every = choose_cpus(hybrid, ClockFacts(), {2, 3, 6})   # a cpuset
    assert single == [2, 6] and every == [2, 6]

    amd = CpuTopology(cpus=tuple(LogicalCpu(n, siblings=(n % 4, n % 4 + 4)) for n in range(8)))
    ranked = ClockFacts(cppc={n: Cppc(highest_perf=232 if n % 4 == 2 else 196) for n in range(8)})
    single, every = choose_cpus(amd, ranked, set(range(8)))
    assert single == [2] and every == [0, 1, 2, 3]


def test_children_that_cannot_start_are_a_skip_reason(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError("fork refused")

    monkeypatch.setattr(clock_probe.subprocess, "Popen", refuse)
    result = probe_clocks(fake_host(tmp_path, two_cpus()), budget_s=0.8)
    assert result == {"clocks_skipped": "the busy-loop children could not start (PermissionError)"}
