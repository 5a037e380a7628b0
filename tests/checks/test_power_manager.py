"""power-manager: parsers, PowerFacts and the check.

Data: tests/data/corpus/power/tuned-adm-active-accelerator-performance-strix-halo-395.txt (a README snippet with
"#"-prefixed output, trailing spaces and a "(base)" conda prompt) and
powerprofilesctl-list-amd_pstate-balanced-placeholder-unresolved-repo.txt (bare `powerprofilesctl`, leading blank
line, PlatformDriver placeholder) are real. The `tlp-stat -s` texts follow real outputs quoted in public READMEs
(TLP 1.5 "State = enabled"/"Mode = AC" and the TLP 1.9 docs' "tlp = enabled, last run"/"tlp-pd = enabled, running").
`systemctl is-active` output and the "not booted with systemd" message were taken on the CI container.
"""

import pytest

from tunehost.check import Severity
from tunehost.facts import HostFacts
from tunehost.facts.power import IS_ACTIVE_ARGV, MANAGERS, PPD, TLP, TUNED, PowerFacts
from tunehost.host import open_host
from tunehost.checks.power_manager import PowerManagerCheck
from tunehost.parsers.power import (parse_is_active, parse_ppd_get, parse_ppd_list, parse_tlp_conf, parse_tlp_status,
                                    parse_tuned_active)

from tests.conftest import corpus

TUNED_SNIPPET = "power/tuned-adm-active-accelerator-performance-strix-halo-395.txt"
PPD_LIST = "power/powerprofilesctl-list-amd_pstate-balanced-placeholder-unresolved-repo.txt"
IS_ACTIVE = " ".join(IS_ACTIVE_ARGV)
NO_SYSTEMD = ("", 1, "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
                     "Failed to connect to bus: Host is down\n")
TLP_16 = ("--- TLP 1.6.1 --------------------------------------------\n\n+++ TLP Status\nState          = enabled\n"
          "RDW state      = enabled\nLast run       = 03:59:30 PM,   2234 sec(s) ago\nMode           = AC\n"
          "Power source   = AC\n")
TLP_19 = ("+++ TLP Status\ntlp            = enabled, last run: 09:14:02\ntlp-rdw        = enabled\n"
          "tlp-pd         = enabled, running\nTLP profile    = balanced/BAT\nPower source   = battery\n")


def states(**running):
    return "\n".join("active" if running.get(u.replace("-", "_")) else "inactive" for u in MANAGERS) + "\n"


def run(snap):
    return list(PowerManagerCheck().run(HostFacts(open_host(snap))))


def sev(findings):
    return [f.severity.value for f in findings]


# ---- parsers ----

def test_tuned_adm_readme_snippet_with_hash_prefix_and_conda_base_artifact():
    parsed = parse_tuned_active(corpus(TUNED_SNIPPET))
    assert parsed.profile == "accelerator-performance"
    assert parsed.daemon_running is True and parsed.names == ("accelerator-performance",)


@pytest.mark.parametrize("text, profile, running, none", [
    ("Current active profile: throughput-performance\n", "throughput-performance", True, False),
    ("Current active profile: virtual-guest\nCurrent post-loaded profile: cpu-partitioning\n", "virtual-guest", True, False),
    ("No current active profile.\n", None, None, True),
    ("It seems that tuned daemon is not running, preset profile is not activated.\nPreset profile: balanced\n",
     "balanced", False, False),
    ("Cannot talk to TuneD daemon via DBus.\n", None, None, False),
    ("\x00\xff garbage ::: \n" * 3, None, None, False),
    ("", None, None, False),
])
def test_tuned_active_forms(text, profile, running, none):
    parsed = parse_tuned_active(text)
    assert (parsed.profile, parsed.daemon_running, parsed.no_profile) == (profile, running, none)


def test_tuned_post_loaded_profile_counts():
    parsed = parse_tuned_active("Current active profile: virtual-guest\nCurrent post-loaded profile: cpu-partitioning\n")
    assert parsed.names == ("virtual-guest", "cpu-partitioning")


def test_powerprofilesctl_list_leading_blank_line_and_placeholder_driver():
    parsed = parse_ppd_list(corpus(PPD_LIST))
    assert parsed.active == "balanced"
    assert set(parsed.profiles) == {"performance", "balanced", "power-saver"}
    assert parsed.driver("balanced", "CpuDriver") == "amd_pstate"
    assert parsed.driver("balanced", "PlatformDriver") == "placeholder"
    assert parsed.driver("performance", "Degraded") == "no"


@pytest.mark.parametrize("text, word", [("balanced\n", "balanced"), ("performance", "performance"),
                                         ("", None), ("Failed to connect to power-profiles-daemon\n", None),
                                         ("\xff\xfe", None)])
def test_ppd_get(text, word):
    assert parse_ppd_get(text) == word


def test_ppd_list_garbage_is_empty():
    assert parse_ppd_list("::::\n\x00\n* \n").active is None
    assert parse_ppd_list(None).profiles == {}


def test_tlp_stat_1_6_vs_1_9_format():
    old, new = parse_tlp_status(TLP_16), parse_tlp_status(TLP_19)
    assert (old.version, old.enabled, old.mode, old.power_source) == ("1.6.1", True, "AC", "AC")
    assert (new.enabled, new.mode, new.power_source, new.tlp_pd) == (True, "balanced/BAT", "battery", "enabled, running")
    assert parse_tlp_status("garbage = \n=\n") .enabled is None


def test_tlp_stat_p_corpus_has_no_status_section():
    # corpus/cpufreq/tlp-stat-p-*.txt is `tlp-stat -p`: version line only, no "+++ TLP Status"
    parsed = parse_tlp_status(corpus("cpufreq/tlp-stat-p-i5-6300u-capped-800mhz-no-turbo.txt"))
    assert parsed.version == "1.8.0" and parsed.enabled is None


def test_tlp_conf():
    assert parse_tlp_conf('# c\nTLP_ENABLE=0\nCPU_BOOST_ON_AC="1"  # x\nbad line\n') == {"TLP_ENABLE": "0",
                                                                                      "CPU_BOOST_ON_AC": "1"}


def test_is_active_needs_one_known_state_per_unit():
    units = ("a", "b")
    assert parse_is_active("active\ninactive\n", units) == {"a": "active", "b": "inactive"}
    assert parse_is_active("active\n", units) == {}
    assert parse_is_active("yes\nno\n", units) == {}


# ---- facts and check ----

def test_ppd_balanced_fails_with_exact_fix(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: (states(power_profiles_daemon=True), 0), "powerprofilesctl get": "balanced\n",
                              "powerprofilesctl": corpus(PPD_LIST)})
    [finding] = run(snap)
    assert finding.severity is Severity.FAIL and "balanced" in finding.summary
    assert "powerprofilesctl set performance" in finding.fix.commands
    assert any("tuned-ppd" in c for c in finding.fix.commands)
    assert finding.evidence["powerprofilesctl get"] == "balanced"
    assert "placeholder" in finding.evidence["PlatformDriver"]


def test_ppd_performance_is_info_recommending_tuned(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: states(power_profiles_daemon=True), "powerprofilesctl get": "performance\n"})
    [finding] = run(snap)
    assert finding.severity is Severity.INFO
    assert "sudo systemctl disable --now power-profiles-daemon" in finding.fix.commands


def test_ppd_performance_degraded_warns(make_snapshot):
    listing = "  performance:\n    CpuDriver:\tintel_pstate\n    Degraded:   yes (high-operating-temperature)\n\n* balanced:\n"
    listing = listing.replace("  performance:", "* performance:").replace("* balanced:", "  balanced:")
    snap = make_snapshot(cmd={IS_ACTIVE: states(power_profiles_daemon=True), "powerprofilesctl": listing})
    assert sev(run(snap)) == ["warn"]


def test_ppd_answering_without_systemd_counts_as_running(make_snapshot):
    # a container: no systemd, but powerprofilesctl reaches the host's daemon over D-Bus
    snap = make_snapshot(cmd={IS_ACTIVE: NO_SYSTEMD, "powerprofilesctl get": "power-saver\n"})
    assert sev(run(snap)) == ["fail"]


def test_comm_truncated_power_profiles_daemon_in_process_list(make_snapshot):
    # /proc/<pid>/comm keeps 15 characters: "power-profiles-"
    snap = make_snapshot(cmd={IS_ACTIVE: NO_SYSTEMD},
                         samples={"processes": [{"pid": 700, "name": "power-profiles-", "self": False}]})
    facts = PowerFacts.gather(open_host(snap))
    assert facts.running(PPD) is True
    [finding] = run(snap)
    assert finding.severity is Severity.WARN and "could not be read" in finding.summary


def test_strix_halo_tuned_accelerator_performance_is_ok():
    [finding] = run("tests/data/snapshots/strix-halo-395")
    assert finding.severity is Severity.OK and "accelerator-performance" in finding.summary


@pytest.mark.parametrize("profile, severity", [("throughput-performance", "ok"), ("balanced", "warn"),
                                               ("powersave", "warn"), ("my-custom", "info")])
def test_tuned_profiles(make_snapshot, profile, severity):
    snap = make_snapshot(cmd={IS_ACTIVE: states(tuned=True), "tuned-adm active": f"Current active profile: {profile}\n"})
    [finding] = run(snap)
    assert finding.severity.value == severity
    if severity == "warn":
        assert finding.fix.commands == ("sudo tuned-adm profile throughput-performance",)


def test_tuned_ppd_is_no_conflict(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: states(tuned=True, tuned_ppd=True), "powerprofilesctl get": "balanced\n",
                              "tuned-adm active": "Current active profile: balanced\n"})
    findings = run(snap)
    assert sev(findings) == ["warn"] and "tuned-ppd" in findings[0].summary


def test_ppd_and_tuned_without_tuned_ppd_conflict(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: states(power_profiles_daemon=True, tuned=True),
                              "powerprofilesctl get": "performance\n",
                              "tuned-adm active": "Current active profile: throughput-performance\n"})
    findings = run(snap)
    assert sev(findings)[0] == "fail" and "tuned" in findings[0].summary
    assert "sudo systemctl enable --now tuned-ppd" in findings[0].fix.commands


def test_laptop_ppd_plus_tlp_conflict():
    findings = run("tests/data/snapshots/laptop-5800u-apu")
    assert sev(findings) == ["fail", "fail", "warn"]
    assert "power-profiles-daemon and tlp" in findings[0].summary
    assert "sudo systemctl mask power-profiles-daemon" in findings[0].fix.commands


def test_auto_cpufreq_with_tlp_conflicts(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: states(auto_cpufreq=True, tlp=True), "tlp-stat -s": TLP_16})
    findings = run(snap)
    assert sev(findings) == ["fail", "warn", "warn"]
    assert findings[0].fix.commands == ("sudo auto-cpufreq --remove",)


def test_tlp_19_with_tlp_pd_on_battery(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: states(tlp=True, tlp_pd=True), "tlp-stat -s": TLP_19})
    [finding] = run(snap)
    assert finding.severity is Severity.WARN and "battery" in finding.summary
    assert finding.fix.commands[-1] == "sudo tlp start"


def test_thermald_alone_is_info_plus_ok(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: states(thermald=True)})
    assert sev(run(snap)) == ["info", "ok"]


def test_systemd_absent_in_container_judged_from_processes(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: NO_SYSTEMD}, samples={"processes": [{"pid": 1, "name": "bash"}]})
    [finding] = run(snap)
    assert finding.severity is Severity.OK and "process list" in finding.summary
    assert "not been booted with systemd" in finding.evidence["systemctl is-active"]


def test_nothing_known_is_skip(make_snapshot):
    [finding] = run(make_snapshot())
    assert finding.severity is Severity.SKIP and "systemctl is not available" in finding.summary


def test_garbage_outputs_never_crash(make_snapshot):
    junk = "\x00\xff<xml>\n* :\n= = =\n"
    snap = make_snapshot(cmd={IS_ACTIVE: junk, "powerprofilesctl get": junk, "powerprofilesctl": junk,
                              "tuned-adm active": junk, "tlp-stat -s": junk}, fs={"/etc/tlp.conf": junk},
                         samples={"processes": {"not": "a list"}})
    findings = run(snap)
    assert findings and all(f.severity is not Severity.ERROR for f in findings)


def test_tlp_disabled_in_conf(make_snapshot):
    snap = make_snapshot(cmd={IS_ACTIVE: states(), "tlp-stat -s": TLP_16}, fs={"/etc/tlp.conf": "TLP_ENABLE=0\n"})
    assert PowerFacts.gather(open_host(snap)).running(TLP) is False
    assert PowerFacts.gather(open_host(snap)).running(TUNED) is False
