"""Each setting as a get/set pair on real-format roots: every online CPU, selector files, inverted no_turbo."""

from __future__ import annotations

import pytest

from tests.apply.fakehost import FakeTools, build_root, kernel_host
from tunehost.apply.settings import (
    SETTINGS, FileKnob, Skip, knob_from_record, parse_tuned_active,
)


def knobs(host, key, target):
    return SETTINGS[key].expand(host, target)


@pytest.mark.parametrize("driver", ["intel_pstate", "amd-pstate-epp", "acpi-cpufreq"])
def test_governor_covers_every_online_cpu(tmp_path, driver):
    host = kernel_host(build_root(tmp_path / "r", driver, cpus=6, online="0-2,4-5\n"))  # cpu3 offline
    found = knobs(host, "governor", "performance")
    assert [k.unit for k in found] == ["cpu0", "cpu1", "cpu2", "cpu4", "cpu5"]
    for k in found:
        assert k.get(host) in ("powersave", "schedutil")
        assert k.set(host, "performance", sim=True) == "performance"
        assert k.get(host) != "performance"  # sim changes nothing
        k.set(host, "performance")
        assert k.get(host) == "performance"
    assert (tmp_path / "r/sys/devices/system/cpu/cpufreq/policy0/scaling_governor").read_text() == "performance\n"
    assert (tmp_path / "r/sys/devices/system/cpu/cpufreq/policy3/scaling_governor").read_text() != "performance\n"


def test_governor_not_offered_is_skipped_per_cpu(tmp_path):
    host = kernel_host(build_root(tmp_path / "r", "intel_pstate", cpus=2))
    found = knobs(host, "governor", "schedutil")
    assert all(isinstance(k, Skip) for k in found)
    assert "schedutil is not offered by intel_pstate (available: performance powersave)" in found[0].reason


def test_no_cpufreq_is_one_skip_not_an_error(tmp_path):
    host = kernel_host(build_root(tmp_path / "r", None, cpus=2))
    for key in ("governor", "epp", "boost"):
        found = knobs(host, key, "on" if key == "boost" else "performance")
        assert len(found) == 1 and isinstance(found[0], Skip), key
    assert "no cpufreq on this host" in knobs(host, "governor", "performance")[0].reason


def test_unknown_online_cpus_skip(tmp_path):
    root = build_root(tmp_path / "r", "intel_pstate", cpus=2)
    (root / "sys/devices/system/cpu/online").unlink()
    assert "online CPUs are unknown" in knobs(kernel_host(root), "governor", "performance")[0].reason


def test_epp_absent_on_acpi_cpufreq_names_the_driver(tmp_path):
    host = kernel_host(build_root(tmp_path / "r", "acpi-cpufreq", cpus=2))
    found = knobs(host, "epp", "performance")
    assert all(isinstance(k, Skip) for k in found)
    assert "driver acpi-cpufreq has no EPP" in found[0].reason


def test_epp_on_amd_pstate_epp(tmp_path):
    host = kernel_host(build_root(tmp_path / "r", "amd-pstate-epp", cpus=2))
    k = knobs(host, "epp", "performance")[0]
    assert k.get(host) == "balance_performance"
    k.set(host, "performance")
    assert k.get(host) == "performance"


def test_boost_intel_no_turbo_is_inverted(tmp_path):
    root = build_root(tmp_path / "r", "intel_pstate", cpus=2)
    host = kernel_host(root)
    [k] = knobs(host, "boost", "on")
    assert k.codec == "inverted-bool" and k.get(host) == "off"  # no_turbo = 1
    assert k.set(host, "on") == "0"
    assert (root / "sys/devices/system/cpu/intel_pstate/no_turbo").read_text() == "0\n"
    assert k.get(host) == "on"


def test_boost_global_cpufreq_boost(tmp_path):
    host = kernel_host(build_root(tmp_path / "r", "acpi-cpufreq", cpus=2))
    [k] = knobs(host, "boost", "on")
    assert k.path.endswith("/cpufreq/boost") and k.get(host) == "off"
    k.set(host, "on")
    assert k.get(host) == "on"


def test_boost_per_policy_amd_pstate(tmp_path):
    host = kernel_host(build_root(tmp_path / "r", "amd-pstate-epp", cpus=3))
    found = knobs(host, "boost", "off")
    assert [k.unit for k in found] == ["cpu0", "cpu1", "cpu2"] and all(k.get(host) == "on" for k in found)


def test_thp_selector_reads_bracket_writes_plain_word(tmp_path):
    root = build_root(tmp_path / "r")
    host = kernel_host(root)
    [k] = knobs(host, "thp", "always")
    assert k.get(host) == "madvise"
    assert k.set(host, "always") == "always"
    assert host.files.written[-1] == ("/sys/kernel/mm/transparent_hugepage/enabled", "always\n")
    assert (root / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "[always] madvise never\n"
    assert k.get(host) == "always"


def test_thp_mode_the_kernel_does_not_offer_is_skipped(tmp_path):
    host = kernel_host(build_root(tmp_path / "r", defrag="always defer [madvise] never"))
    [s] = knobs(host, "thp_defrag", "defer+madvise")
    assert isinstance(s, Skip) and "not offered by this kernel" in s.reason


def test_selector_plain_word_reads_as_itself(tmp_path):
    root = build_root(tmp_path / "r", thp="always")
    host = kernel_host(root)
    assert knobs(host, "thp", "always")[0].get(host) == "always"


def test_swappiness(tmp_path):
    root = build_root(tmp_path / "r")
    host = kernel_host(root)
    [k] = knobs(host, "swappiness", "10")
    assert k.get(host) == "60"
    k.set(host, "10")
    assert (root / "proc/sys/vm/swappiness").read_text() == "10\n"


def test_knob_round_trips_through_a_journal_record(tmp_path):
    host = kernel_host(build_root(tmp_path / "r"))
    for key, target in (("governor", "performance"), ("thp", "always"), ("boost", "on")):
        for k in knobs(host, key, target):
            assert knob_from_record(k.to_record()) == k


def test_power_profile_and_tuned_through_commands(tmp_path):
    tools = FakeTools(ppd="balanced", tuned="balanced")
    host = kernel_host(build_root(tmp_path / "r"), tools)
    [pp] = knobs(host, "power_profile", "performance")
    [tp] = knobs(host, "tuned_profile", "throughput-performance")
    assert pp.get(host) == "balanced" and tp.get(host) == "balanced"
    assert pp.set(host, "performance", sim=True) == "performance" and tools.ppd == "balanced"
    pp.set(host, "performance")
    tp.set(host, "throughput-performance")
    assert pp.get(host) == "performance" and tp.get(host) == "throughput-performance"
    assert "powerprofilesctl set performance" in tools.calls and "tuned-adm profile throughput-performance" in tools.calls
    tp.set(host, "off")
    assert tools.tuned == "off" and tp.get(host) == "off"


def test_tools_not_installed_are_skipped(tmp_path):
    host = kernel_host(build_root(tmp_path / "r"), FakeTools(ppd=None, tuned=None))
    assert "TuneD is not installed" in knobs(host, "tuned_profile", "throughput-performance")[0].reason
    assert "power-profiles-daemon is not running" in knobs(host, "power_profile", "performance")[0].reason
    assert "tuned-ppd.service is not installed" in knobs(host, "power_daemon", "tuned-ppd")[0].reason


def test_power_daemon_switch_to_tuned_ppd(tmp_path):
    root = build_root(tmp_path / "r")
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    for unit in ("tuned-ppd", "power-profiles-daemon"):
        (root / f"usr/lib/systemd/system/{unit}.service").write_text("[Unit]\n")
    tools = FakeTools(ppd="balanced")
    host = kernel_host(root, tools)
    [k] = knobs(host, "power_daemon", "tuned-ppd")
    assert k.get(host) == "ppd"
    k.set(host, "tuned-ppd")
    assert k.get(host) == "tuned-ppd"
    changes = [c for c in tools.calls if "is-active" not in c]
    assert changes == ["systemctl stop power-profiles-daemon", "systemctl start tuned-ppd"]
    k.set(host, "ppd")
    assert k.get(host) == "ppd"


@pytest.mark.parametrize("text, profile", [
    ("Current active profile: throughput-performance\n", "throughput-performance"),
    ("No current active profile.\n", "off"),
    ("Cannot talk to TuneD daemon via DBus. Is TuneD daemon running?\n", None),
])
def test_parse_tuned_active(text, profile):
    assert parse_tuned_active(text) == profile


def test_file_knob_rejects_non_boolean_for_boost():
    with pytest.raises(ValueError):
        FileKnob("boost", "", "/x", "bool").encode("maybe")
