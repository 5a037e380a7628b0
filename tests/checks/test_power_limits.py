"""power-limits on hand-written variations of the report fixtures (tests/data/clocks/*/SOURCE.md): same paths and
formats, each named after its quirk; and hostile input (garbage, missing files, links out of the snapshot)."""

from __future__ import annotations

import os

import pytest

from tunehost.checks.power_limits import PowerLimitsCheck
from tunehost.doctor import run_check
from tunehost.facts import HostFacts
from tunehost.facts.power_limits import PowerLimitFacts
from tunehost.host import open_host

from tests.power.build_clock_fixtures import rapl_zone
from tests.power.test_clock_fixtures import CLOCKS

PP = "/sys/firmware/acpi/platform_profile"
CHOICES = "/sys/firmware/acpi/platform_profile_choices"
RAPL0 = "/sys/class/powercap/intel-rapl:0"
MMIO0 = "/sys/class/powercap/intel-rapl-mmio:0"


def judge(make_snapshot, fs, cmd=None):
    return run_check(PowerLimitsCheck(), HostFacts(open_host(make_snapshot(fs=fs, cmd=cmd))))


def severities(findings):
    return [f.severity.value for f in findings]


def test_balanced_with_ppd_running_says_powerprofilesctl(make_snapshot):
    findings = judge(make_snapshot, {PP: "balanced\n", CHOICES: "low-power balanced performance\n"},
                     cmd={"powerprofilesctl get": "balanced\n"})
    assert severities(findings) == ["warn"]
    assert findings[0].fix.commands == ("powerprofilesctl set performance",)
    assert "power-profiles-daemon's balanced" in findings[0].fix.text


def test_low_power_on_battery_is_only_info(make_snapshot):
    fs = {PP: "low-power\n", CHOICES: "low-power balanced performance\n",
          "/sys/class/power_supply/AC/type": "Mains\n", "/sys/class/power_supply/AC/online": "0\n",
          "/sys/class/power_supply/BAT0/type": "Battery\n"}
    findings = judge(make_snapshot, fs)
    assert severities(findings) == ["info"] and "on battery" in findings[0].summary


def test_low_power_on_ac_is_a_warning(make_snapshot):
    fs = {PP: "low-power\n", CHOICES: "low-power balanced performance\n",
          "/sys/class/power_supply/ACAD/type": "Mains\n", "/sys/class/power_supply/ACAD/online": "1\n",
          "/sys/class/power_supply/BAT1/type": "Battery\n"}
    assert severities(judge(make_snapshot, fs)) == ["warn"]


def test_no_performance_choice_balanced_is_the_top(make_snapshot):
    # Acer-style lists without "performance" are judged against their best non-low choice
    assert severities(judge(make_snapshot, {PP: "balanced\n", CHOICES: "low-power quiet balanced\n"})) == ["ok"]
    assert severities(judge(make_snapshot, {PP: "quiet\n", CHOICES: "low-power quiet balanced\n"})) == ["warn"]


def test_pl1_below_half_the_rated_power_fails(make_snapshot):
    # a 15 W PL1 on a 45 W part (the thermald/DPTF pattern of intel/thermal_daemon#228, on an H-series TDP)
    fs = rapl_zone(RAPL0, "package-0", [("long_term", 15000000, 45000000), ("short_term", 90000000, 0)])
    findings = judge(make_snapshot, fs)
    assert severities(findings) == ["fail"] and "15 W" in findings[0].summary and "45 W" in findings[0].summary


def test_disabled_mmio_zone_does_not_rule(make_snapshot):
    fs = {**rapl_zone(RAPL0, "package-0", [("long_term", 28000000, 28000000)]),
          **rapl_zone(MMIO0, "package-0", [("long_term", 10000000, 28000000)], enabled="0")}
    findings = judge(make_snapshot, fs)
    assert severities(findings) == ["ok"] and "PL1 28 W" in findings[0].summary


def test_equal_msr_and_mmio_limits_are_healthy(make_snapshot):
    fs = {**rapl_zone(RAPL0, "package-0", [("long_term", 28000000, 28000000), ("short_term", 64000000, 0)]),
          **rapl_zone(MMIO0, "package-0", [("long_term", 28000000, 28000000), ("short_term", 64000000, 0)])}
    assert severities(judge(make_snapshot, fs)) == ["ok"]


def test_amd_rapl_zone_without_limits_is_skipped(make_snapshot):
    # amd's RAPL shows up as intel-rapl with a name and energy counter but no constraint files
    fs = {f"{RAPL0}/name": "package-0\n", f"{RAPL0}/enabled": "0\n"}
    findings = judge(make_snapshot, fs)
    assert severities(findings) == ["skip"]


def test_subzones_are_not_package_limits(make_snapshot):
    fs = {**rapl_zone(RAPL0, "package-0", [("long_term", 45000000, 45000000)]),
          **rapl_zone(f"{RAPL0}:0", "core", [("long_term", 1000000, None)])}
    assert severities(judge(make_snapshot, fs)) == ["ok"]


@pytest.mark.parametrize("garbage", ["abc\n", "-5\n", "99999999999999999999999\n", "\x1b[31m\n", "", "nan\n"])
def test_garbage_limits_are_unknown_not_a_crash(make_snapshot, garbage):
    fs = {f"{RAPL0}/name": "package-0\n", f"{RAPL0}/constraint_0_name": "long_term\n",
          f"{RAPL0}/constraint_0_power_limit_uw": garbage, f"{RAPL0}/constraint_0_max_power_uw": garbage}
    assert severities(judge(make_snapshot, fs)) == ["skip"]


def test_garbage_platform_profile_is_skipped_with_reason(make_snapshot):
    findings = judge(make_snapshot, {PP: "\x1b[2Jperformance; rm -rf /\n"})
    assert severities(findings) == ["skip"] and "no profile name" in findings[0].summary
    assert "\x1b" not in findings[0].summary


def test_garbage_choices_and_zone_names_are_dropped(make_snapshot):
    fs = {PP: "balanced\n", CHOICES: "low-power $(reboot) balanced\n",
          **rapl_zone(RAPL0, "package-0\x1b[0m", [("long_term", 28000000, 28000000)])}
    limits = PowerLimitFacts.gather(open_host(make_snapshot(fs=fs)))
    assert limits.profile_choices == ("low-power", "balanced")
    assert limits.package_zones() == []   # a zone without a readable name is not judged
    assert severities(judge(make_snapshot, fs)) == ["ok"]


def test_link_out_of_the_snapshot_reads_as_absent(make_snapshot, tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("low-power\n")
    snap = make_snapshot(fs={CHOICES: "low-power balanced performance\n"})
    target = snap / "fs" / "sys/firmware/acpi/platform_profile"
    os.symlink(outside, target)
    findings = run_check(PowerLimitsCheck(), HostFacts(open_host(snap)))
    assert severities(findings) == ["skip"]


def test_nothing_readable_is_skipped(make_snapshot):
    findings = judge(make_snapshot, {})
    assert severities(findings) == ["skip"] and "platform_profile" in findings[0].summary


def test_mmio_limit_that_rules_is_named_and_raised():
    """asusctl#145: MMIO 45 W rules over the MSR's 175 W; the fix raises the MMIO zone, not the MSR one."""
    facts = HostFacts(open_host(CLOCKS / "asus-strix-g814jz-13980hx-mmio-45w-over-msr-175w"))
    [finding] = run_check(PowerLimitsCheck(), facts)
    assert "MMIO limit rules: PL1 45 W (intel-rapl-mmio:0)" in finding.summary and "175 W" in finding.summary
    assert finding.fix.commands[0] == ("echo 175000000 | sudo tee "
                                       "/sys/class/powercap/intel-rapl-mmio:0/constraint_0_power_limit_uw")


def test_thermald_low_pl1_restores_the_rated_power():
    facts = HostFacts(open_host(CLOCKS / "dell-vostro-3491-thermald-pl1-8.75w-of-15w"))
    [finding] = run_check(PowerLimitsCheck(), facts)
    assert "PL1 is 8.75 W (intel-rapl:0), below the CPU's rated 15 W" in finding.summary
    assert finding.fix.commands[0] == ("echo 15000000 | sudo tee "
                                       "/sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw")
    assert "thermald" in finding.fix.text
