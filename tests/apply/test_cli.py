"""The tuning commands through the real Typer app, acting on a TUNEHOST_ROOT directory."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import write_snapshot, write_tiny_gguf
from tests.apply.fakehost import build_root, tree

GOV1 = "sys/devices/system/cpu/cpufreq/policy1/scaling_governor"
EPP1 = "sys/devices/system/cpu/cpufreq/policy1/energy_performance_preference"


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = build_root(tmp_path / "root", "intel_pstate", cpus=4)
    monkeypatch.setenv("TUNEHOST_ROOT", str(r))
    return r


def test_profiles_lists_each_with_what_it_sets(cli):
    result = cli("profiles")
    assert result.exit_code == 0
    out = result.stdout
    assert "throughput-quiet (includes throughput)" in out and "benchmark" in out
    assert "swappiness     10" in out and "governor       performance" in out
    data = json.loads(cli("profiles", "--json").stdout)
    quiet = next(p for p in data if p["name"] == "throughput-quiet")
    assert quiet["settings"]["boost"] is False and quiet["includes"] == ["throughput"]


def test_dry_run_prints_current_to_target_and_changes_nothing(cli, root, tmp_path):
    before = tree(root)
    result = cli("apply", "--profile", "throughput", "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "governor (cpu 0-3)" in out and "powersave -> performance" in out
    assert "epp (cpu 0-3)" in out and "balance_performance -> performance" in out
    assert "boost" in out and "off -> on" in out
    assert "thp" in out and "madvise -> always" in out and "60 -> 10" in out
    assert "skipped  tuned_profile" in out and "TuneD is not installed" in out
    assert "dry run: nothing was changed" in out
    assert tree(root) == before
    assert not (tmp_path / "state").exists()


def test_dry_run_with_persist_shows_the_files(cli, root):
    out = cli("apply", "-p", "throughput", "--dry-run", "--persist").stdout
    assert "persist  /etc/sysctl.d/90-tunehost.conf (new file)" in out and "vm.swappiness = 10" in out
    assert "persist  /etc/tmpfiles.d/tunehost.conf (new file)" in out


def test_apply_asks_and_no_stdin_aborts_with_nothing_changed(cli, root, tmp_path):
    before = tree(root)
    result = cli("apply", "--profile", "throughput")
    assert result.exit_code == 1
    assert "not confirmed: nothing was changed" in result.stderr
    assert tree(root) == before


def test_apply_confirmed_on_stdin(cli, root):
    result = cli("apply", "--profile", "throughput", input="y\n")
    assert result.exit_code == 0, result.output
    assert "applied (run" in result.stdout
    assert (root / GOV1).read_text() == "performance\n"


def test_apply_status_verify_drift_rollback(cli, root):
    before = tree(root)
    result = cli("apply", "--profile", "throughput", "--yes")
    assert result.exit_code == 0, result.output
    assert "set governor[cpu0]: powersave -> performance" in result.stdout
    assert "set swappiness: 60 -> 10" in result.stdout
    status = cli("status")
    assert status.exit_code == 0 and "throughput: applied on root" in status.stdout
    assert json.loads(cli("status", "--json").stdout)[0]["profile"] == "throughput"
    ok = cli("verify")
    assert ok.exit_code == 0 and "0 drifted" in ok.stdout
    again = cli("apply", "--profile", "throughput", "--yes")
    assert again.exit_code == 0 and "nothing to change" in again.stdout
    (root / EPP1).write_text("power\n")  # another actor, e.g. a daemon after resume
    drift = cli("verify")
    assert drift.exit_code == 2
    assert "DRIFT epp[cpu1]: performance -> now power" in drift.stdout
    back = cli("rollback")
    assert back.exit_code == 0, back.output
    said = " ".join(back.stdout.split())  # folded to the terminal's width
    assert ("LEFT epp[cpu1]: changed by someone else since (now power; tunehost set performance; "
            "was balance_performance before the apply): left as it is") in said
    assert "restored  governor[cpu0]: performance -> powersave" in back.stdout
    assert "rollback complete" in back.stdout
    assert tree(root) == {**before, EPP1: b"power\n"}  # all restored but what the other actor set
    assert "no profile applied" in cli("status").stdout
    assert cli("rollback").stdout.startswith("nothing to roll back")
    assert cli("verify").exit_code == 1


def test_apply_without_root_is_refused(cli, monkeypatch, tmp_path):
    monkeypatch.delenv("TUNEHOST_ROOT", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for args in (("apply", "--profile", "throughput", "--yes"), ("rollback",)):
        result = cli(*args)
        assert result.exit_code == 1
        assert result.stderr.strip().splitlines() == [
            f"tunehost: error: tunehost {args[0]} changes the live host and needs root: run it with sudo "
            "(nothing was changed)"]
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("text, message", [
    ("swappiness = 'ten'\n", "swappiness must be an integer"),
    ("bogus = 1\n", "unknown key 'bogus'"),
    ("include = ['bad']\n", "include cycle: bad -> bad"),
    ("include = ['nowhere']\n", "includes 'nowhere', which does not exist"),
    ("[[[\n", "is not valid TOML"),
])
def test_bad_profile_is_one_line_exit_1_nothing_changed(cli, root, tmp_path, monkeypatch, text, message):
    d = tmp_path / "myprofiles"
    d.mkdir()
    (d / "bad.toml").write_text(text)
    monkeypatch.setenv("TUNEHOST_PROFILES_DIR", str(d))
    before = tree(root)
    result = cli("apply", "--profile", "bad", "--yes")
    assert result.exit_code == 1
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert tree(root) == before


def test_missing_profile(cli, root):
    result = cli("apply", "--profile", "nope", "--yes")
    assert result.exit_code == 1 and "no profile named 'nope'" in result.stderr


def test_journal_directory_not_writable(cli, root, tmp_path, monkeypatch):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    monkeypatch.setenv("TUNEHOST_STATE_DIR", str(blocker / "state"))
    before = tree(root)
    result = cli("apply", "--profile", "throughput", "--yes")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"tunehost: error: the journal directory {blocker} (in the path of {blocker / 'state'}) is a file, not a "
        "directory; nothing was changed (set TUNEHOST_STATE_DIR to a directory)"]
    assert tree(root) == before


def test_a_write_the_host_refuses_reverts_and_exits_1(cli, root):
    readonly = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"  # a real sysfs file that refuses writes
    if not os.path.exists(readonly) or os.access(readonly, os.W_OK) and os.geteuid() != 0:
        pytest.skip(f"{readonly} is not here")
    swappiness = root / "proc/sys/vm/swappiness"
    swappiness.unlink()
    swappiness.symlink_to(readonly)
    before = tree(root)
    result = cli("apply", "--profile", "throughput", "--yes")
    assert result.exit_code == 1
    assert "apply failed: swappiness" not in result.stdout
    assert "tunehost: error: apply failed:" in result.stderr and "Permission denied" in result.stderr
    assert "every change was reverted" in result.stderr
    assert tree(root) == before
    assert "no profile applied" in cli("status").stdout


def test_bench_with_a_model_that_is_not_gguf_fails_before_any_change(cli, root, tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"\0" * 4096)  # a zero-filled download
    before = tree(root)
    result = cli("apply", "--profile", "throughput", "--yes", "--bench", str(bogus))
    assert result.exit_code == 1 and "not a GGUF" in result.stderr
    assert tree(root) == before


def test_bench_measures_before_and_after_the_change(cli, root, monkeypatch, tmp_path):
    from tests.bench.test_results import saved

    thp = root / "sys/kernel/mm/transparent_hugepage/enabled"
    model = write_tiny_gguf(tmp_path / "model.gguf")
    seen = []
    speeds = {"before": ([100.0, 101, 99], [40.0, 40.5, 39.5]), "after": ([100.0, 100.5, 99.5], [50.0, 50.5, 49.5])}

    def fake_measure(model, label, facts):
        seen.append((model, label, thp.read_text().strip()))
        return saved(*speeds[label], label=label)

    monkeypatch.setattr("tunehost.apply.bench_hook.measure", fake_measure)
    monkeypatch.setattr("tunehost.bench.runner.resolve_binary", lambda explicit: "/bin/true")
    result = cli("apply", "--profile", "throughput", "--yes", "--bench", str(model))
    assert result.exit_code == 0, result.output
    assert seen == [(str(model), "before", "always [madvise] never"), (str(model), "after", "[always] madvise never")]
    assert "bench before: pp512 100.0 t/s" in result.stdout and "bench after: pp512 100.0 t/s" in result.stdout
    assert "before/after applying throughput" in result.stdout
    assert "tg128" in result.stdout and "+25.0 %" in result.stdout


def test_power_daemon_option_is_validated(cli, root):
    result = cli("apply", "--profile", "throughput", "--dry-run", "--power-daemon", "systemd")
    assert result.exit_code == 1 and "power_daemon = 'systemd' is not one of ppd, tuned-ppd" in result.stderr
    out = cli("apply", "--profile", "throughput", "--dry-run", "--power-daemon", "tuned-ppd").stdout
    assert "skipped  power_daemon" in out and "tuned-ppd.service is not installed" in out


def laptop(tmp_path, name, online: str, chassis="10"):
    return write_snapshot(tmp_path / name, fs={
        "/sys/class/dmi/id/chassis_type": chassis + "\n",
        "/sys/class/power_supply/AC/type": "Mains\n", "/sys/class/power_supply/AC/online": online + "\n",
        "/sys/class/power_supply/BAT0/type": "Battery\n", "/sys/class/power_supply/BAT0/scope": "System\n"})


def test_recommend(cli, tmp_path):
    on_battery = cli("recommend", "--snapshot", str(laptop(tmp_path, "a", "0")))
    assert on_battery.exit_code == 0 and "recommended profile: throughput-quiet" in on_battery.stdout
    assert "on battery" in on_battery.stdout and "/sys/class/power_supply/AC/online: 0" in on_battery.stdout
    plugged = cli("recommend", "--snapshot", str(laptop(tmp_path, "b", "1"))).stdout
    assert "recommended profile: throughput" in plugged and "on AC power" in plugged
    desktop = write_snapshot(tmp_path / "d", fs={"/sys/class/dmi/id/chassis_type": "3\n"})
    assert "a desktop (desktop, chassis type 3)" in cli("recommend", "-s", str(desktop)).stdout
    mouse = write_snapshot(tmp_path / "m", fs={"/sys/class/dmi/id/chassis_type": "23\n",
                                               "/sys/class/power_supply/hidpp_battery_0/type": "Battery\n",
                                               "/sys/class/power_supply/hidpp_battery_0/scope": "Device\n"})
    assert "a server (rack mount chassis" in cli("recommend", "-s", str(mouse)).stdout
    unknown = cli("recommend", "-s", str(write_snapshot(tmp_path / "u"))).stdout
    assert "recommended profile: throughput" in unknown and "chassis type unknown" in unknown


def test_help_lists_the_tuning_commands(cli):
    out = cli("--help").stdout
    for name in ("apply", "verify", "rollback", "status", "profiles", "recommend"):
        assert name in out


def test_apply_after_an_interrupted_apply_asks_for_rollback_first(cli, root, tmp_path):
    from tests.apply.fakehost import Crash, kernel_host
    from tunehost.apply.engine import apply_plan, build_plan
    from tunehost.apply.journal import Journal
    from tunehost.apply.profiles import load_profile

    before = tree(root)
    journal = Journal()
    journal.ensure_writable()
    host = kernel_host(root, crash_at=3)
    with pytest.raises(Crash):
        apply_plan(host, build_plan(host, load_profile("throughput")), journal, root=str(root.resolve()))
    refused = cli("apply", "--profile", "throughput", "--yes")
    assert refused.exit_code == 1 and "was interrupted: run `tunehost rollback` first" in refused.stderr
    assert cli("verify").exit_code == 2 and "INTERRUPTED" in cli("verify").stdout
    back = cli("rollback")
    assert back.exit_code == 0 and "rolling back interrupted apply of profile throughput" in back.stdout
    assert tree(root) == before


def test_benchmark_profile_says_which_findings_it_accepts_and_how_to_gate(cli, root):
    # the intel_pstate root has turbo off (no_turbo = 1): exactly what the benchmark profile holds
    result = cli("apply", "--profile", "benchmark", "--dry-run")
    out, said = result.stdout, _said(result)
    assert "already  boost" in out
    assert "doctor findings profile benchmark accepts on purpose" in said
    assert "FAIL cpu-frequency: turbo is disabled (intel_pstate/no_turbo = 1) <- boost held on purpose" in said
    assert "`tunehost gate --skip cpu-frequency -- ...`" in said
    assert "MANUAL" not in out or "cpu-frequency" not in out.split("MANUAL", 1)[1].split("doctor findings")[0]


def _said(result) -> str:
    """The output with its folding undone (messages are folded to the terminal's width)."""
    return " ".join(result.stdout.split())


def test_status_shows_what_the_apply_skipped_as_unsupported_never_as_applied(cli, root, tmp_path):
    assert cli("apply", "--profile", "throughput", "--yes").exit_code == 0  # under a root TuneD and ppd are skipped
    status = cli("status", env={"COLUMNS": "80"})
    assert status.exit_code == 0, status.output
    out = status.stdout
    assert all(len(line) <= 80 for line in out.splitlines()), out
    said = _said(status)
    assert "governor = performance" in said and "swappiness = 10" in said
    assert "tuned_profile: NOT APPLIED, unsupported here: TuneD is not installed" in said
    assert "power_profile: NOT APPLIED, unsupported here" in said
    assert "tuned_profile = " not in said and "power_profile = " not in said
    data = json.loads(cli("status", "--json").stdout)[0]
    assert data["applied"]["governor"] == "changed" and data["applied"]["tuned_profile"] == "skipped"
    assert "TuneD is not installed" in data["skipped"]["tuned_profile"][0]
    # a journal written before tunehost recorded the skipped keys: a key with nothing expected was not applied
    journal = tmp_path / "state" / "journal.jsonl"
    lines = journal.read_text().splitlines()
    begin = json.loads(lines[0])
    assert begin["type"] == "begin" and begin.pop("skipped")
    journal.write_text("\n".join([json.dumps(begin)] + lines[1:]) + "\n")
    old = _said(cli("status"))
    assert "tuned_profile: NOT APPLIED, unsupported here" in old and "tuned_profile = " not in old
    assert "governor = performance" in old


def test_status_says_which_settings_were_already_so(cli, root):
    (root / "proc/sys/vm/swappiness").write_text("10\n")
    assert cli("apply", "--profile", "throughput", "--yes").exit_code == 0
    said = _said(cli("status"))
    assert "swappiness = 10 (was already so: rollback leaves it)" in said
    assert "governor = performance (" not in said


def test_rollback_of_a_stacked_apply_says_the_earlier_profile_is_still_in_effect(cli, root):
    assert cli("apply", "--profile", "throughput", "--yes").exit_code == 0
    assert cli("apply", "--profile", "benchmark", "--yes").exit_code == 0  # boost off on top of throughput
    first = json.loads(cli("status", "--json").stdout)[0]["run"]
    back = cli("rollback", env={"COLUMNS": "80"})
    assert back.exit_code == 0, back.output
    assert all(len(line) <= 80 for line in back.stdout.splitlines()), back.stdout
    said = _said(back)
    assert f"rollback complete: profile throughput (run {first}," in said
    assert "is still in effect; `tunehost rollback` again undoes it too" in said
    assert (root / GOV1).read_text() == "performance\n"  # throughput's change is still there, as said
    last = cli("rollback")
    assert last.exit_code == 0 and last.stdout.rstrip().endswith("rollback complete")
    assert "still in effect" not in last.stdout
    assert (root / GOV1).read_text() == "powersave\n"


def test_plan_profiles_and_recommend_fit_80_columns(cli, root):
    for args in (("apply", "--profile", "benchmark", "--dry-run", "--persist"), ("profiles",), ("recommend",)):
        result = cli(*args, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        shown = [line for line in result.stdout.splitlines() if not line.startswith(" " * 13)]  # a file's lines
        assert all(len(line) <= 80 for line in shown), result.stdout  # are shown verbatim, as they are written
    plan = cli("apply", "--profile", "throughput", "--dry-run", env={"COLUMNS": "80"}).stdout.splitlines()
    at = next(i for i, line in enumerate(plan) if line.startswith("  change   epp (cpu 0-3)"))
    assert plan[at + 1].strip() == "[/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference]"
    assert "  change   swappiness                   60 -> 10   [/proc/sys/vm/swappiness]" in plan


@pytest.mark.parametrize("skipped", ["not a list", [{"key": 5, "reason": "x"}, "no", {"key": "tuned_profile"}],
                                     [{"key": "tuned_profile", "unit": "", "reason": "evil\x1b[31m\nline2"}]])
def test_status_reads_a_hostile_skipped_record_as_plain_text(cli, root, tmp_path, skipped):
    assert cli("apply", "--profile", "throughput", "--yes").exit_code == 0
    journal = tmp_path / "state" / "journal.jsonl"
    lines = journal.read_text().splitlines()
    begin = json.loads(lines[0])
    begin["skipped"] = skipped
    journal.write_text("\n".join([json.dumps(begin)] + lines[1:]) + "\n")
    status = cli("status")
    assert status.exit_code == 0, status.output
    assert "\x1b" not in status.stdout and "\nline2" not in status.stdout
    said = _said(status)
    assert "tuned_profile: NOT APPLIED, unsupported here" in said and "governor = performance" in said
    if isinstance(skipped, list) and isinstance(skipped[-1], dict) and "reason" in skipped[-1]:
        assert "evil?[31m?line2" in said
