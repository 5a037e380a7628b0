"""apply / verify / rollback against writable real-format roots: byte-for-byte rollback, faults at every step,
crashes, drift, idempotency, persistence."""

from __future__ import annotations

import json
import os

import pytest

from tests.apply.fakehost import Crash, FakeTools, KernelFiles, build_root, kernel_host, tree
from tunehost.check import Finding, Fix, Severity
from tunehost.errors import TunehostError
from tunehost.apply.engine import apply_plan, build_plan, rollback, verify
from tunehost.apply.journal import Journal
from tunehost.apply.profiles import builtin_dir, load_profile, override
from tunehost.apply.settings import SETTINGS, Knob

DRIVERS = ["intel_pstate", "amd-pstate-epp", "acpi-cpufreq"]


def profile(name="throughput"):
    return load_profile(name, [builtin_dir()])


def new_journal(path):
    j = Journal(path)
    j.ensure_writable()
    return j


@pytest.fixture
def journal(tmp_path):
    return new_journal(tmp_path / "state")


def do_apply(host, journal, name="throughput", **kw):
    plan = build_plan(host, profile(name), **kw)
    return plan, apply_plan(host, plan, journal, root=str(host.files.root))


def assert_matches_profile(host, name="throughput"):
    for key, target in profile(name).targets().items():
        for knob in SETTINGS[key].expand(host, target):
            if isinstance(knob, Knob):
                assert knob.get(host) == target, knob.name


def tools_state(tools):
    return (tools.ppd, tools.tuned, dict(tools.units))


@pytest.mark.parametrize("driver", DRIVERS)
def test_apply_matches_profile_and_rollback_is_byte_for_byte(tmp_path, journal, driver):
    root = build_root(tmp_path / "root", driver, cpus=4)
    tools = FakeTools(ppd="balanced", tuned="balanced")
    host = kernel_host(root, tools)
    before, tools_before = tree(root), tools_state(tools)
    plan, outcome = do_apply(host, journal)
    assert outcome.ok and outcome.changed
    assert_matches_profile(host)
    assert tools.ppd == "performance" and tools.tuned == "throughput-performance"
    assert tree(root) != before
    assert verify(host, journal, root=str(root)).ok
    result = rollback(host, journal, root=str(root))
    assert result.complete and {u["outcome"] for u in result.undo} <= {"restored", "unchanged"}
    assert tree(root) == before
    assert tools_state(tools) == tools_before
    assert journal.active_runs() == []


def test_every_online_cpu_is_changed(tmp_path, journal):
    root = build_root(tmp_path / "root", "intel_pstate", cpus=8, online="0-5,7\n")
    host = kernel_host(root)
    _, outcome = do_apply(host, journal)
    changed = {name for name, _, _ in outcome.changed}
    assert {f"governor[cpu{n}]" for n in (0, 1, 2, 3, 4, 5, 7)} <= changed
    assert "governor[cpu6]" not in changed  # offline
    assert (root / "sys/devices/system/cpu/cpufreq/policy6/scaling_governor").read_text() == "powersave\n"


@pytest.fixture
def no_fsync(monkeypatch):
    """The loops below run dozens of applies; a simulated crash does not need the disk flushed."""
    monkeypatch.setattr("tunehost.apply.journal.os.fsync", lambda fd: None)


def count_writes(tmp_path, driver, persist=False):
    root = build_root(tmp_path / "count", driver)
    host = kernel_host(root, FakeTools())
    do_apply(host, new_journal(tmp_path / "count-state"), persist=persist)
    return host.files.writes


@pytest.mark.parametrize("persist", [False, True], ids=["runtime", "persist"])
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_write_failing_at_any_step_leaves_the_host_as_it_was(tmp_path, driver, persist, no_fsync):
    # with --persist the last writes create /etc/sysctl.d and /etc/tmpfiles.d: the revert removes them again
    steps = count_writes(tmp_path, driver, persist)
    assert steps >= 5
    for k in range(1, steps + 1):
        root = build_root(tmp_path / f"root{k}", driver)
        tools = FakeTools()
        host = kernel_host(root, tools, fail_at=k)
        journal = new_journal(tmp_path / f"state{k}")
        before, tools_before = tree(root), tools_state(tools)
        _, outcome = do_apply(host, journal, persist=persist)
        assert not outcome.ok and "injected failure" in outcome.failed, k
        assert tree(root) == before, f"step {k}"
        assert tools_state(tools) == tools_before
        runs = journal.runs()
        assert runs[-1].status == "reverted" and not journal.active_runs()


def test_a_failing_command_reverts_everything(tmp_path, journal):
    root = build_root(tmp_path / "root")
    tools = FakeTools(fail=("powerprofilesctl set performance",))
    host = kernel_host(root, tools)
    before = tree(root)
    _, outcome = do_apply(host, journal)
    assert not outcome.ok and "powerprofilesctl set performance" in outcome.failed
    assert tools.tuned == "balanced" and tools.ppd == "balanced"  # tuned was switched first, then put back
    assert "tuned-adm profile balanced" in tools.calls
    assert tree(root) == before


def test_a_read_only_file_fails_cleanly(tmp_path, journal):
    root = build_root(tmp_path / "root", cpus=4)
    host = kernel_host(root, readonly=("/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",))
    before = tree(root)
    _, outcome = do_apply(host, journal)
    assert not outcome.ok and "Permission denied" in outcome.failed
    assert tree(root) == before


@pytest.mark.parametrize("persist", [False, True], ids=["runtime", "persist"])
@pytest.mark.parametrize("after_write", [False, True])
def test_rollback_completes_an_interrupted_apply(tmp_path, after_write, persist, no_fsync):
    steps = count_writes(tmp_path, "intel_pstate", persist)
    for k in range(1, steps + 1):
        root = build_root(tmp_path / f"root{k}")
        tools = FakeTools()
        before, tools_before = tree(root), tools_state(tools)
        journal = new_journal(tmp_path / f"state{k}")
        crashing = kernel_host(root, tools, crash_at=k, crash_after_write=after_write)
        with pytest.raises(Crash):
            do_apply(crashing, journal, persist=persist)
        [run] = journal.runs()
        assert run.interrupted and run.active
        last = max(run.intents)
        assert last not in run.results  # the intent of the interrupted change has no result
        assert not verify(kernel_host(root, tools), journal, root=str(root)).ok
        outcome = rollback(kernel_host(root, tools), journal, root=str(root))
        assert outcome.complete
        assert tree(root) == before, f"crash at write {k}"
        assert tools_state(tools) == tools_before
        assert journal.active_runs() == []


def test_drift_is_reported_and_left_alone_by_rollback(tmp_path, journal):
    root = build_root(tmp_path / "root", "intel_pstate", cpus=4)
    host = kernel_host(root)
    before = tree(root)
    do_apply(host, journal)
    epp = root / "sys/devices/system/cpu/cpufreq/policy1/energy_performance_preference"
    epp.write_text("balance_power\n")  # e.g. reset after suspend by another actor
    report = verify(host, journal, root=str(root))
    assert not report.ok
    assert [(d.name, d.target, d.current) for d in report.drift] == [("epp[cpu1]", "performance", "balance_power")]
    outcome = rollback(host, journal, root=str(root))
    left = [u for u in outcome.undo if u["outcome"] == "left"]
    assert [u["name"] for u in left] == ["epp[cpu1]"] and left[0]["value"] == "balance_power"
    assert outcome.complete
    assert epp.read_text() == "balance_power\n"
    expected = dict(before)
    expected[str(epp.relative_to(root))] = b"balance_power\n"
    assert tree(root) == expected


def test_applying_twice_changes_nothing_the_second_time(tmp_path, journal):
    root = build_root(tmp_path / "root")
    tools = FakeTools()
    host = kernel_host(root, tools)
    _, first = do_apply(host, journal)
    assert first.changed
    after_first, journal_text, writes = tree(root), journal.path.read_text(), host.files.writes
    plan, second = do_apply(host, journal)
    assert plan.empty and second.run is None and not second.changed
    assert tree(root) == after_first and journal.path.read_text() == journal_text
    assert host.files.writes == writes
    assert tools.calls.count("powerprofilesctl set performance") == 1
    assert tools.calls.count("tuned-adm profile throughput-performance") == 1


def test_stacked_applies_roll_back_one_at_a_time(tmp_path, journal):
    root = build_root(tmp_path / "root", "acpi-cpufreq")
    host = kernel_host(root)
    before = tree(root)
    do_apply(host, journal, "throughput")
    after_throughput = tree(root)
    do_apply(host, journal, "benchmark")
    assert_matches_profile(host, "benchmark")
    assert [r.profile for r in journal.active_runs()] == ["throughput", "benchmark"]
    rollback(host, journal, root=str(root))
    assert tree(root) == after_throughput
    rollback(host, journal, root=str(root))
    assert tree(root) == before
    assert rollback(host, journal, root=str(root)).run is None


def test_the_intent_is_journalled_before_each_change(tmp_path, journal):
    root = build_root(tmp_path / "root")
    seen = []

    class Watching(KernelFiles):
        def write(self, path, text):
            records = [json.loads(line) for line in journal.path.read_text().splitlines()]
            last = records[-1]
            seen.append((path, last["type"], last.get("knob", {}).get("path", last.get("path"))))
            super().write(path, text)

    host = kernel_host(root)
    host.files = Watching(root)
    do_apply(host, journal, persist=True)
    assert seen and all(kind == "intent" and where == path for path, kind, where in seen)
    types = [json.loads(line)["type"] for line in journal.path.read_text().splitlines()]
    assert types[0] == "begin" and types[-1] == "end"
    assert types[1:-1] == ["intent", "result"] * ((len(types) - 2) // 2)


def test_persist_writes_boot_config_and_rollback_removes_or_restores_it(tmp_path, journal):
    root = build_root(tmp_path / "root", "intel_pstate")
    (root / "etc/sysctl.d").mkdir(parents=True)
    (root / "etc/tmpfiles.d").mkdir(parents=True)
    (root / "etc/sysctl.d/90-tunehost.conf").write_text("vm.swappiness = 33\n")  # an older file is backed up
    host = kernel_host(root)
    before = tree(root)
    plan, outcome = do_apply(host, journal, persist=True)
    assert outcome.ok and set(outcome.files) == {"/etc/sysctl.d/90-tunehost.conf", "/etc/tmpfiles.d/tunehost.conf"}
    sysctl = (root / "etc/sysctl.d/90-tunehost.conf").read_text()
    tmpfiles = (root / "etc/tmpfiles.d/tunehost.conf").read_text()
    assert "vm.swappiness = 10" in sysctl
    assert "w /sys/kernel/mm/transparent_hugepage/enabled - - - - always" in tmpfiles
    assert "w /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor - - - - performance" in tmpfiles
    assert "w /sys/devices/system/cpu/cpu[0-9]*/cpufreq/energy_performance_preference - - - - performance" in tmpfiles
    assert "w /sys/devices/system/cpu/intel_pstate/no_turbo - - - - 0" in tmpfiles
    assert verify(host, journal, root=str(root)).ok
    rollback(host, journal, root=str(root))
    assert tree(root) == before


def test_persist_directories_it_created_are_removed_by_rollback_unless_used(tmp_path, journal):
    root = build_root(tmp_path / "root")
    assert (root / "etc").is_dir() and not (root / "etc/sysctl.d").exists() and not (root / "etc/tmpfiles.d").exists()
    host = kernel_host(root)
    before = tree(root)
    do_apply(host, journal, persist=True)
    assert (root / "etc/sysctl.d/90-tunehost.conf").is_file() and (root / "etc/tmpfiles.d/tunehost.conf").is_file()
    [intent] = [r for r in journal.runs()[-1].intents.values() if r.get("path") == "/etc/sysctl.d/90-tunehost.conf"]
    assert intent["created_dirs"] == ["/etc/sysctl.d"]
    rollback(host, journal, root=str(root))
    assert tree(root) == before  # /etc/sysctl.d and /etc/tmpfiles.d are gone again
    do_apply(host, journal, persist=True)
    (root / "etc/tmpfiles.d/other.conf").write_text("d /run/other\n")  # someone else uses a directory tunehost made
    rollback(host, journal, root=str(root))
    assert not (root / "etc/sysctl.d").exists() and (root / "etc/tmpfiles.d/other.conf").is_file()
    assert not (root / "etc/tmpfiles.d/tunehost.conf").exists()


def tuned_ppd_host(tmp_path, **tools_kw):
    root = build_root(tmp_path / "root")
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    for unit in ("tuned-ppd", "power-profiles-daemon"):
        (root / f"usr/lib/systemd/system/{unit}.service").write_text("[Unit]\n")
    tools = FakeTools(tuned_ppd=True, **tools_kw)
    return root, tools, kernel_host(root, tools)


def test_persist_keeps_the_power_daemon_switch_across_reboots_and_rollback_undoes_it(tmp_path, journal):
    root, tools, host = tuned_ppd_host(tmp_path)
    before, boot_before = tree(root), dict(tools.boot)
    chosen = override(profile(), power_daemon="tuned-ppd")
    plan = build_plan(host, chosen, persist=True)
    boot = [c for c in plan.to_change if c.knob.name == "power_daemon_boot"]
    assert [(c.current, c.target) for c in boot] == [("ppd", "tuned-ppd")]
    outcome = apply_plan(host, plan, journal, root=str(root))
    assert outcome.ok and ("power_daemon_boot", "ppd", "tuned-ppd") in outcome.changed
    assert tools.units == {"power-profiles-daemon": False, "tuned-ppd": True}
    assert tools.boot == {"power-profiles-daemon": "disabled", "tuned-ppd": "enabled"}
    assert tools.calls.index("systemctl disable power-profiles-daemon") < tools.calls.index("systemctl enable tuned-ppd")
    assert verify(host, journal, root=str(root)).ok
    tools.boot["power-profiles-daemon"] = "enabled"  # a package update re-enabled it
    [drift] = verify(host, journal, root=str(root)).drift
    assert (drift.name, drift.current, drift.target) == ("power_daemon_boot", "both", "tuned-ppd")
    tools.boot["power-profiles-daemon"] = "disabled"
    assert rollback(host, journal, root=str(root)).complete
    assert tools.boot == boot_before and tools.units == {"power-profiles-daemon": True, "tuned-ppd": False}
    assert tree(root) == before


def test_without_persist_the_power_daemon_switch_does_not_touch_boot(tmp_path, journal):
    root, tools, host = tuned_ppd_host(tmp_path)
    plan = build_plan(host, override(profile(), power_daemon="tuned-ppd"))
    assert not [c for c in plan.changes if c.knob.name == "power_daemon_boot"]
    apply_plan(host, plan, journal, root=str(root))
    assert tools.boot == {"power-profiles-daemon": "enabled", "tuned-ppd": "disabled"}
    assert not [c for c in tools.calls if c.startswith(("systemctl enable", "systemctl disable"))]


def test_a_masked_daemon_cannot_be_enabled_and_the_switch_is_reverted(tmp_path, journal):
    root, tools, host = tuned_ppd_host(tmp_path)
    tools.boot["tuned-ppd"] = "masked"
    before, state_before, boot_before = tree(root), tools_state(tools), dict(tools.boot)
    plan = build_plan(host, override(profile(), power_daemon="tuned-ppd"), persist=True)
    outcome = apply_plan(host, plan, journal, root=str(root))
    assert not outcome.ok and "systemctl enable tuned-ppd" in outcome.failed and "is masked" in outcome.failed
    assert tools_state(tools) == state_before and tools.boot == boot_before and tree(root) == before


def test_persist_file_changed_by_someone_else_is_left(tmp_path, journal):
    root = build_root(tmp_path / "root")
    (root / "etc/sysctl.d").mkdir(parents=True)
    host = kernel_host(root)
    do_apply(host, journal, persist=True)
    (root / "etc/sysctl.d/90-tunehost.conf").write_text("# mine now\n")
    assert any(d.name == "/etc/sysctl.d/90-tunehost.conf" for d in verify(host, journal, root=str(root)).drift)
    outcome = rollback(host, journal, root=str(root))
    assert [u["name"] for u in outcome.undo if u["outcome"] == "left"] == ["/etc/sysctl.d/90-tunehost.conf"]
    assert (root / "etc/sysctl.d/90-tunehost.conf").read_text() == "# mine now\n"


def test_unsupported_settings_are_skipped_not_errors(tmp_path, journal):
    root = build_root(tmp_path / "root", None)  # a VM: no cpufreq, no tools
    host = kernel_host(root)
    plan, outcome = do_apply(host, journal)
    assert {s.key for s in plan.skipped} == {"tuned_profile", "power_profile", "governor", "epp", "boost"}
    assert outcome.ok and {n for n, _, _ in outcome.changed} == {"thp", "swappiness"}


def test_manual_steps_come_from_doctor_findings(tmp_path):
    host = kernel_host(build_root(tmp_path / "root", None))
    findings = [
        Finding("ram-speed", Severity.FAIL, "DDR5-6000 kit runs at 4800 MT/s (XMP/EXPO off)", {},
                Fix("Enable XMP/EXPO in the BIOS")),
        Finding("pcie-link", Severity.WARN, "GPU link x8 of x16", {}, Fix("Move the GPU to an x16 slot")),
        Finding("thp", Severity.WARN, "THP is never", {}, Fix("set always", ("echo always > ...",))),
        Finding("swap", Severity.OK, "fine"),
        Finding("cpu-governor", Severity.WARN, "powersave", {}, Fix("performance")),  # no cpufreq here: manual
    ]
    plan = build_plan(host, profile(), findings=findings)
    assert [(d.check, d.fix) for d in plan.manual] == [
        ("ram-speed", "Enable XMP/EXPO in the BIOS"), ("pcie-link", "Move the GPU to an x16 slot"),
        ("cpu-governor", "performance")]
    assert [(d.check, d.fixed_by) for d in plan.doctor if d.fixed_by] == [("thp", ("thp",))]


def test_verify_and_rollback_refuse_another_root(tmp_path, journal):
    root = build_root(tmp_path / "root")
    host = kernel_host(root)
    do_apply(host, journal)
    with pytest.raises(TunehostError, match="acted on root"):
        verify(host, journal, root="/")
    with pytest.raises(TunehostError, match="acted on root"):
        rollback(host, journal, root="/")


def test_verify_with_nothing_applied_is_an_error(tmp_path, journal):
    with pytest.raises(TunehostError, match="nothing to verify"):
        verify(kernel_host(build_root(tmp_path / "root")), journal, root="/")


def test_journal_directory_not_writable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TunehostError, match="is a file, not a directory; nothing was changed"):
        Journal(blocker / "state").ensure_writable()
    with pytest.raises(TunehostError, match=f"journal directory {blocker} is a file, not a directory"):
        Journal(blocker).ensure_writable()


def test_a_journal_only_root_can_read_says_so(tmp_path, monkeypatch):
    journal = new_journal(tmp_path / "state")
    journal.append({"type": "begin", "run": "r1", "profile": "throughput"})

    real_open = os.open

    def denied(name, *args, **kwargs):
        if str(name) == str(journal.path):
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr("os.open", denied)  # what a non-root user meets on /var/lib/tunehost
    with pytest.raises(TunehostError, match=r"journal.jsonl: permission denied .*run this with sudo"):
        journal.active_runs()


def test_journal_tolerates_a_line_cut_short_by_a_crash(tmp_path, journal):
    root = build_root(tmp_path / "root")
    do_apply(kernel_host(root), journal)
    with open(journal.path, "a") as fh:
        fh.write('{"type": "intent", "run": "x", "st')
    assert len(journal.active_runs()) == 1


def test_a_finding_about_what_the_profile_holds_on_purpose_is_not_a_manual_step(tmp_path):
    root = build_root(tmp_path / "root", "intel_pstate")  # no_turbo = 1: boost already off
    host = kernel_host(root)
    turbo_off = Finding("cpu-frequency", Severity.FAIL, "turbo is disabled", {}, Fix("enable turbo"))
    bench = build_plan(host, profile("benchmark"), findings=[turbo_off])
    assert bench.manual == [] and bench.doctor[0].intended == ("boost",)
    throughput = build_plan(host, profile("throughput"), findings=[turbo_off])
    assert throughput.doctor[0].fixed_by == ("boost",)
