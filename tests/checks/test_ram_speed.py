"""ram-speed on real machines: one test per corpus dmidecode file (tests/data/corpus/dmidecode/, described with its
"diagnosis" line in tests/data/corpus/SOURCES.md), each replayed through a snapshot with the machine's chassis type
(/sys/class/dmi/id/chassis_type: 3 Desktop for linuxhw "Desktop" machines, 10 Notebook for "Notebook", 31 Convertible
for the ThinkPad X13 2-in-1, 23 Rack Mount for the servers), then the no-root / absent / garbage skips.

Composite snapshots (tests/data/snapshots/*, expectations in tests/data/expectations/*/ram.json), ram group files:
- desktop-12700f-rtx3060: cmd/dmidecode_-t_memory = corpus ddr4-3600-kit-ryzen3600-xmp-off-2133.txt (verbatim);
  fs/sys/class/dmi/id/* hand-written (MSI PRO B660M-A DDR4, chassis 3); node0 = CPUs 0-19, 16 GB.
- desktop-9950x3d-rtx5090: cmd/dmidecode_-t_memory = corpus ddr5-6000-kit-am5-7800x3d-expo-on-...txt (verbatim);
  dmi id = MSI MS-7E12 (the corpus board), chassis 3; node0 = CPUs 0-31, 32 GB.
- laptop-5800u-apu: hand-written dmidecode in dmidecode 3.3 format: 2x Samsung M471A1K43DB1-CWE DDR4-3200 SODIMM
  on P0 CHANNEL A/B at 3200 (the layout AMD laptops print); HP EliteBook 845 G8, chassis 10; node0 = CPUs 0-15.
- strix-halo-395: hand-written dmidecode 3.6 format: 8x 16 GB soldered LPDDR5X-8000 "Row Of Chips", 32-bit each
  (256-bit bus), reported as LPDDR5 like the corpus LPDDR5X files; Framework Desktop, chassis 3; node0 = CPUs 0-31.
- server-epyc9654-2s: cmd/dmidecode_-t_memory = corpus ddr5-rdimm-24dimm-2s-epyc9654-4800.txt (verbatim); dmi id =
  the corpus machine (OEM TG659V2), chassis 23; node0/node1 with the EPYC 9654 2S CPU numbering, distance 10/32,
  /proc/sys/kernel/numa_balancing = 1 (the distribution default on NUMA machines).
"""

from __future__ import annotations

import re

import pytest

from tunehost.check import Severity
from tunehost.checks.ram_speed import RamSpeedCheck
from tunehost.facts import HostFacts
from tunehost.facts.ram import CHASSIS_TYPE, CPUINFO, NEEDS_ROOT, NOT_INSTALLED, RamFacts, channel_of
from tunehost.host import open_host
from tunehost.parsers.udev_dmi import UDEV_DMI, parse_udev_dmi_memory

from tests.conftest import CORPUS, DATA, SNAPSHOTS, corpus
from tests.ram.udev_dmi import CORPUS_DUMPS, SAMPLE, UDEV, _NoDmidecode, udev_from_dmidecode, verdicts

DMI = "dmidecode -t memory"
OK, INFO, WARN, FAIL, SKIP = Severity.OK, Severity.INFO, Severity.WARN, Severity.FAIL, Severity.SKIP


def judge(make_snapshot, name: str | None = None, *, text: str | None = None, chassis: int | None = None,
          cpu: str | None = None, cmd_value=None, manifest=None):
    fs = {}
    if chassis is not None:
        fs[CHASSIS_TYPE] = f"{chassis}\n"
    if cpu:
        fs[CPUINFO] = f"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: {cpu}\n"
    if cmd_value is None:
        cmd_value = text if text is not None else corpus(f"dmidecode/{name}")
    cmd = {DMI: cmd_value} if cmd_value is not False else {}
    snap = make_snapshot(fs=fs, cmd=cmd, **({"manifest": manifest} if manifest else {}))
    return list(RamSpeedCheck().run(HostFacts(open_host(snap))))


def drop_device(text: str, locator: str) -> str:
    """The dmidecode text without the handle whose Locator is `locator` (a module pulled from its slot)."""
    blocks = text.split("\n\nHandle ")
    kept = [b for b in blocks if f"\tLocator: {locator}\n" not in b]
    assert len(kept) == len(blocks) - 1
    return "\n\nHandle ".join(kept)


def severities(findings):
    return [f.severity for f in findings]


def assert_findings_complete(findings):
    for f in findings:
        assert f.summary and "\n" not in f.summary
        if f.severity not in (OK, SKIP):
            assert f.fix is not None and f.fix.text, f.summary
        if f.severity is not SKIP:
            assert f.evidence.get(DMI), f.evidence


# -- one test per corpus file ----------------------------------------------------------------------------------------

def test_expo_off_speed_equals_configured_4800_needs_part_number(make_snapshot):
    findings = judge(make_snapshot, "ddr5-6000-kit-am5-7950x3d-expo-off-speed-eq-configured-4800.txt", chassis=3)
    assert severities(findings) == [FAIL]
    [f] = findings
    assert "XMP/EXPO is off" in f.summary and "4800" in f.summary and "6000" in f.summary
    assert "F5-6000J3238F16G" in f.summary and "20 %" in f.summary
    assert f.fix.commands == ("sudo systemctl reboot --firmware-setup",)
    assert "bandwidth" in f.detail and "MoE" in f.detail
    assert_findings_complete(findings)


def test_expo_on_configured_above_jedec_speed_is_healthy(make_snapshot):
    findings = judge(make_snapshot, "ddr5-6000-kit-am5-7800x3d-expo-on-configured-6000-above-jedec-speed.txt", chassis=3)
    assert severities(findings) == [OK]
    assert "6000" in findings[0].summary and "XMP/EXPO on" in findings[0].summary
    assert "dual channel" in findings[0].summary


def test_board_reports_xmp_rate_in_speed_field(make_snapshot):
    findings = judge(make_snapshot, "ddr5-6000-kit-z790-14700k-xmp-on-board-reports-6000.txt", chassis=3)
    assert severities(findings) == [OK] and "6000" in findings[0].summary


def test_am5_four_dimms_two_per_channel_at_3600(make_snapshot):
    findings = judge(make_snapshot, "ddr5-6000-kit-4dimm-am5-7950x-configured-3600.txt", chassis=3)
    assert severities(findings) == [WARN]
    [f] = findings
    assert "3600" in f.summary and "2 per channel" in f.summary and "40 %" in f.summary
    assert "5200-5600" in f.fix.text and "2 DIMMs" in f.fix.text
    assert_findings_complete(findings)


def test_both_dimms_on_one_channel_below_jedec(make_snapshot):
    findings = judge(make_snapshot, "ddr5-6000-kit-2dimm-am5-7700x-configured-3600-below-jedec.txt", chassis=3)
    assert severities(findings) == [FAIL, FAIL]
    speed, channel = findings
    assert "below even the JEDEC base DDR5-4800" in speed.summary and "XMP/EXPO is off" in speed.summary
    assert "one channel (P0 CHANNEL B)" in channel.summary and "single-channel" in channel.summary
    assert "A2 + B2" in channel.fix.text
    assert_findings_complete(findings)


def test_bogus_speed_12800_is_ignored(make_snapshot):
    findings = judge(make_snapshot, "ddr5-5600-kit-z790-bogus-speed-12800-configured-5600.txt", chassis=3)
    assert severities(findings) == [OK]
    assert "12800" in findings[0].summary and "bogus" in findings[0].summary and "5600" in findings[0].summary


def test_single_dimm_single_channel_at_4000(make_snapshot):
    findings = judge(make_snapshot, "ddr5-single-dimm-14900k-configured-4000-single-channel.txt", chassis=3)
    assert severities(findings) == [FAIL, FAIL]
    speed, channel = findings
    assert "4000" in speed.summary and "5600" in speed.summary and "JEDEC base DDR5-4800" in speed.summary
    assert "Single channel" in channel.summary and "half the memory bandwidth" in channel.summary
    assert "Controller0-DIMMA2" in channel.summary and "CMK64GX5M2B5600C40" in channel.fix.text
    assert_findings_complete(findings)


def test_xmp_off_ddr4_3600_at_jedec_2133(make_snapshot):
    findings = judge(make_snapshot, "ddr4-3600-kit-ryzen3600-xmp-off-2133.txt", chassis=3)
    assert severities(findings) == [FAIL]
    assert "XMP/EXPO is off" in findings[0].summary and "2133" in findings[0].summary
    assert "41 %" in findings[0].summary and "F4-3600C18-8GVK" in findings[0].summary


def test_xmp_on_ddr4_3600(make_snapshot):
    findings = judge(make_snapshot, "ddr4-3600-kit-ryzen5900x-xmp-on-3600.txt", chassis=3)
    assert severities(findings) == [OK] and "3600" in findings[0].summary


def test_configured_above_jedec_speed_2133_is_healthy(make_snapshot):
    findings = judge(make_snapshot, "ddr4-3600-kit-5800x3d-xmp-on-configured-above-jedec-2133.txt", chassis=3)
    assert severities(findings) == [OK] and "3600" in findings[0].summary


def test_half_rate_configured_1600_is_a_units_quirk(make_snapshot):
    findings = judge(make_snapshot, "ddr4-3200-kit-ryzen2600-configured-1600-half-rate-quirk.txt", chassis=3)
    assert severities(findings) == [OK]
    summary = findings[0].summary
    assert "DDR4 at 3200 MT/s" in summary and "units quirk" in summary and "1600" in summary
    assert "runs at 1600" not in summary


def test_soldered_lpddr5_6400_is_healthy_and_never_gets_xmp_advice(make_snapshot):
    findings = judge(make_snapshot, "lpddr5-6400-laptop-core-ultra7-155h.txt", chassis=10)
    assert severities(findings) == [OK]  # 8 "Row Of Chips" devices are 16-bit channels, not DIMMs: no channel finding
    assert "6400" in findings[0].summary and "128-bit bus" in findings[0].summary


def test_soldered_lpddr5x_7467_at_6400_is_info_not_fixable(make_snapshot):
    findings = judge(make_snapshot, "lpddr5x-7467-laptop-ultra7-155u-configured-6400.txt", chassis=31)
    assert severities(findings) == [INFO]
    [f] = findings
    assert "7467" in f.summary and "6400" in f.summary and "not user-tunable" in f.summary
    assert "LPDDR5X" in f.summary  # dmidecode says LPDDR5; above 6400 it can only be LPDDR5X
    assert not f.fix.commands and "XMP" not in f.fix.text
    assert_findings_complete(findings)


def test_lpddr5x_7500_reported_as_lpddr5_is_healthy(make_snapshot):
    findings = judge(make_snapshot, "lpddr5x-7500-laptop-ryzen-ai9-365.txt", chassis=10)
    assert severities(findings) == [OK] and "LPDDR5X at 7500" in findings[0].summary


def test_laptop_sodimm_below_rating_warns_without_xmp_remedy(make_snapshot):
    findings = judge(make_snapshot, "ddr5-sodimm-laptop-14900hx-5600-configured-4000.txt", chassis=10)
    assert severities(findings) == [WARN]
    [f] = findings
    assert "4000" in f.summary and "5600" in f.summary and "29 %" in f.summary and "no XMP/EXPO" in f.summary
    assert "Enable the XMP" not in f.fix.text
    assert_findings_complete(findings)


def test_dual_socket_epyc9654_all_channels_healthy(make_snapshot):
    findings = judge(make_snapshot, "ddr5-rdimm-24dimm-2s-epyc9654-4800.txt", chassis=23)
    assert severities(findings) == [OK]
    assert "12 channels per socket x 2 sockets" in findings[0].summary and "4800" in findings[0].summary


def test_server_cpu_limited_2666_is_info_not_fail(make_snapshot):
    findings = judge(make_snapshot, "ddr4-rdimm-16dimm-xeon4316-3200-configured-2666.txt", chassis=23,
                     cpu="Intel(R) Xeon(R) Silver 4316 CPU @ 2.30GHz")
    assert severities(findings) == [INFO]
    [f] = findings
    assert "2666" in f.summary and "3200" in f.summary and "CPU/platform-limited" in f.summary
    assert "Xeon(R) Silver 4316" in f.summary and "DDR4-2666" in f.summary
    assert_findings_complete(findings)


def test_unbalanced_server_9_of_12_channels(make_snapshot):
    findings = judge(make_snapshot, "ddr5-rdimm-9of12-channels-epyc9454p.txt", chassis=23)
    assert severities(findings) == [OK, WARN]
    speed, channels = findings
    assert "9 of 12 channels" in speed.summary
    assert "9 of 12 memory channels" in channels.summary and "F, J, L" in channels.summary
    assert "25 %" in channels.summary
    assert_findings_complete(findings)


def test_mixed_modules_slowest_wins(make_snapshot):
    findings = judge(make_snapshot, "ddr5-mixed-modules-optiplex-i5-14500.txt", chassis=3)
    assert severities(findings) == [INFO]
    [f] = findings
    assert "Mixed modules" in f.summary and "4800" in f.summary and "5600" in f.summary and "slowest" in f.summary
    assert "XMP" not in f.summary


def test_speed_7600_configured_5200_xmp_not_applied(make_snapshot):
    findings = judge(make_snapshot, "ddr5-7600-kit-z790-13400-speed-7600-configured-5200.txt", chassis=3)
    assert severities(findings) == [FAIL]
    assert "5200" in findings[0].summary and "7600" in findings[0].summary and "32 %" in findings[0].summary


def test_speed_8000_configured_6600_reduced_profile_is_lost_bandwidth(make_snapshot):
    # issue 20 (e): a kit a few percent below its XMP/EXPO speed is real lost bandwidth, not info
    findings = judge(make_snapshot, "ddr5-8000-kit-z790-13700f-speed-8000-configured-6600.txt", chassis=3)
    assert severities(findings) == [WARN]
    assert "6600" in findings[0].summary and "8000" in findings[0].summary and "18 %" in findings[0].summary


# -- without a chassis type: the form factor decides ------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("ddr5-sodimm-laptop-14900hx-5600-configured-4000.txt", [WARN]),          # SODIMM -> laptop/mini PC
    ("ddr4-rdimm-16dimm-xeon4316-3200-configured-2666.txt", [INFO]),          # registered -> server
    ("ddr4-3600-kit-ryzen3600-xmp-off-2133.txt", [FAIL]),                     # DIMM -> desktop
    ("lpddr5x-7467-laptop-ultra7-155u-configured-6400.txt", [INFO]),          # Row Of Chips -> soldered
])
def test_no_chassis_type_falls_back_to_form_factor(make_snapshot, name, expected):
    assert severities(judge(make_snapshot, name)) == expected


def test_rdimm_in_a_tower_chassis_is_judged_as_server(make_snapshot):
    findings = judge(make_snapshot, "ddr4-rdimm-16dimm-xeon4316-3200-configured-2666.txt", chassis=7)
    assert severities(findings) == [INFO]


def test_single_sodimm_in_laptop_warns(make_snapshot):
    text = corpus("dmidecode/ddr5-sodimm-laptop-14900hx-5600-configured-4000.txt")
    findings = judge(make_snapshot, text=drop_device(text, "Controller1-ChannelA-DIMM1"), chassis=10)
    assert severities(findings) == [WARN, WARN] and "Single channel" in findings[1].summary


def test_single_dimm_without_channel_names(make_snapshot):
    # Dell-style "DIMM1"/"DIMM2" locators name no channel: one of two slots populated is almost surely single channel
    text = corpus("dmidecode/ddr5-mixed-modules-optiplex-i5-14500.txt")
    findings = judge(make_snapshot, text=drop_device(text, "DIMM1"), chassis=3)
    assert severities(findings) == [OK, FAIL]
    assert "1 of 2 memory slots" in findings[1].summary


# -- channel names ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("locator, bank, slot", [
    ("DIMM 0", "P0 CHANNEL B", ("P0", "B")), ("Controller1-ChannelA-DIMM1", "BANK 0", ("P0", "C1-A")),
    ("Controller0-DIMMA2", "BANK 0", ("P0", "C0-A")), ("DDR5-A2", "BANK 0", ("P0", "A")),
    ("Controller1-DIMM0", "BANK 0", ("P0", "C1")),
    ("CPU2 DIMM A1", "P1 CHANNEL A", ("P1", "A")), ("ChannelB-DIMM0", "BANK 2", ("P0", "B")),
    ("A1", "Not Specified", None), ("DIMM1", None, None), (None, None, None),
])
def test_channel_of(locator, bank, slot):
    assert channel_of(locator, bank) == slot


# -- skips: no dmidecode, no root, garbage ------------------------------------------------------------------------

def test_dmidecode_not_installed_is_skip(make_snapshot):
    [f] = judge(make_snapshot, cmd_value=False)
    assert f.severity is SKIP and f.summary == NOT_INSTALLED and "apt install dmidecode" in f.summary


def test_permission_denied_needs_root(make_snapshot):
    stderr = "/sys/firmware/dmi/tables/smbios_entry_point: Permission denied\nScanning /dev/mem for entry point.\n" \
             "/dev/mem: Permission denied\n"
    [f] = judge(make_snapshot, cmd_value=("# dmidecode 3.3\n", 1, stderr))
    assert f.severity is SKIP and f.summary == NEEDS_ROOT and "sudo tunehost doctor" in f.summary
    assert "Permission denied" in f.evidence[DMI]


def test_no_type_17_entries_when_not_root_needs_root(make_snapshot):
    [f] = judge(make_snapshot, cmd_value="# dmidecode 3.3\n")
    assert f.severity is SKIP and f.summary == NEEDS_ROOT


def test_no_type_17_entries_as_root_is_a_vm(make_snapshot):
    [f] = judge(make_snapshot, cmd_value="# dmidecode 3.3\nGetting SMBIOS data from sysfs.\nSMBIOS 2.8 present.\n",
                manifest={"format": 1, "uid": 0})
    assert f.severity is SKIP and "VMs" in f.summary


def test_no_smbios_in_a_container_as_root(make_snapshot):
    # dmidecode 3.4 run as root in this project's CI container: no /sys/firmware/dmi/tables, no /dev/mem
    [f] = judge(make_snapshot, cmd_value=("# dmidecode 3.4\nScanning /dev/mem for entry point.\n", 1,
                                          "/dev/mem: No such file or directory\n"), manifest={"format": 1, "uid": 0})
    assert f.severity is SKIP and "no SMBIOS tables" in f.summary and "/dev/mem" in f.summary


def test_failure_as_root_says_why(make_snapshot):
    [f] = judge(make_snapshot, cmd_value=("", 2, "dmidecode: unexpected error\n"), manifest={"format": 1, "uid": 0})
    assert f.severity is SKIP and "exit status 2" in f.summary and "unexpected error" in f.summary


@pytest.mark.parametrize("garbage", ["\x00\x01\x02garbage", "<html>500</html>", "Segmentation fault\n"])
def test_garbage_output_is_skip(make_snapshot, garbage):
    [f] = judge(make_snapshot, cmd_value=garbage)
    assert f.severity is SKIP and "not recognisable" in f.summary


def test_garbled_rc_file_is_untrusted(make_snapshot, tmp_path):
    snap = make_snapshot(cmd={DMI: corpus("dmidecode/ddr4-3600-kit-ryzen5900x-xmp-on-3600.txt")})
    (snap / "cmd" / "dmidecode_-t_memory.rc").write_text("zero")
    [f] = RamSpeedCheck().run(HostFacts(open_host(snap)))
    assert f.severity is SKIP and f.summary == NEEDS_ROOT


def test_configured_speed_unknown_is_skip(make_snapshot):
    text = corpus("dmidecode/ddr4-3600-kit-ryzen5900x-xmp-on-3600.txt").replace(
        "Configured Memory Speed: 3600 MT/s", "Configured Memory Speed: Unknown")
    findings = judge(make_snapshot, text=text, chassis=3)
    assert severities(findings) == [SKIP] and "Configured Memory Speed" in findings[0].summary


def test_unknown_rating_is_skip_never_a_guess(make_snapshot):
    text = re.sub(r"\tSpeed: \d+ MT/s", "\tSpeed: Unknown", corpus("dmidecode/ddr5-mixed-modules-optiplex-i5-14500.txt"))
    findings = judge(make_snapshot, text=text, chassis=3)
    assert severities(findings) == [SKIP] and "rating is unknown" in findings[0].summary


def test_chassis_garbage_is_ignored(make_snapshot):
    snap = make_snapshot(fs={CHASSIS_TYPE: "not-a-number\n"},
                         cmd={DMI: corpus("dmidecode/ddr4-3600-kit-ryzen3600-xmp-off-2133.txt")})
    facts = RamFacts.gather(open_host(snap))
    assert facts.chassis_type is None and facts.modules
    assert severities(RamSpeedCheck().run(HostFacts.of(facts))) == [FAIL]


def test_hand_built_facts_without_a_host():
    facts = RamFacts.from_text(corpus("dmidecode/ddr5-6000-kit-am5-7950x3d-expo-off-speed-eq-configured-4800.txt"),
                               chassis_type=3)
    assert severities(RamSpeedCheck().run(HostFacts.of(facts))) == [FAIL]
    assert severities(RamSpeedCheck().run(HostFacts.of(RamFacts.from_text("garbage")))) == [SKIP]


# -- composite snapshots ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("snapshot, expected", [
    ("desktop-12700f-rtx3060", [FAIL]), ("desktop-9950x3d-rtx5090", [OK]), ("laptop-5800u-apu", [OK]),
    ("strix-halo-395", [OK]), ("server-epyc9654-2s", [OK]),
])
def test_composite_snapshots(snapshot, expected):
    findings = list(RamSpeedCheck().run(HostFacts(open_host(SNAPSHOTS / snapshot))))
    assert severities(findings) == expected
    assert_findings_complete(findings)


def test_strix_halo_soldered_256_bit_bus():
    [f] = RamSpeedCheck().run(HostFacts(open_host(SNAPSHOTS / "strix-halo-395")))
    assert "LPDDR5X at 8000" in f.summary and "256-bit bus" in f.summary and "256 GB/s" in f.summary


@pytest.mark.parametrize("path", CORPUS_DUMPS + [DATA / "linuxhw_dmi" / e["file"] for e in SAMPLE],
                         ids=[p.stem[:50] for p in CORPUS_DUMPS] + [e["file"][:50] for e in SAMPLE])
def test_same_machine_same_verdicts_from_dmidecode_and_udev(path):
    text = path.read_text()
    for chassis in (3, 10, 23):
        from_dmidecode = verdicts(RamFacts.from_text(text, chassis_type=chassis))
        from_udev = verdicts(RamFacts.from_text(udev_from_dmidecode(text), chassis_type=chassis, udev=True))
        assert from_udev == from_dmidecode


def test_real_udev_file_thinkcentre_m720s():
    text = (UDEV / "systemd-test-Lenovo-Thinkcentre-m720s.txt").read_text()
    mem = parse_udev_dmi_memory(text)
    assert mem.recognized and len(mem.devices) == 4 and len(mem.installed) == 3
    assert [d.part_number for d in mem.installed] == ["M378A1K43CB2-CTD", "BLT8G4D26AFTA.16FBD", "BLT8G4D26AFTA.16FBD"]
    assert {(d.speed_mts, d.configured_mts, d.size_mb) for d in mem.installed} >= {(2667, 2400, 8192)}
    [f, *rest] = RamSpeedCheck().run(HostFacts.of(RamFacts.from_text(text, chassis_type=3, udev=True)))
    # Ballistix 2666 XMP kits at 2400, no CPU or board known: a reduced profile loses bandwidth (issue 20 (e))
    assert f.severity is Severity.WARN and "2400" in f.summary and "2666" in f.summary
    assert f.evidence[UDEV_DMI].startswith("1x M378A1K43CB2-CTD 8 GB DDR4 DIMM")


def test_real_udev_file_hp_z600_flash_chip_is_not_a_module():
    text = (UDEV / "systemd-test-HP-Z600.txt").read_text()
    mem = parse_udev_dmi_memory(text)
    assert len(mem.devices) == 7 and len(mem.installed) == 4 and mem.arrays[0].ecc
    [f] = RamSpeedCheck().run(HostFacts.of(RamFacts.from_text(text, chassis_type=7, udev=True)))
    assert f.severity is Severity.SKIP and "Configured Memory Speed" in f.summary


def test_no_root_snapshot_reads_the_udev_file(make_snapshot):
    """The same machine: root (dmidecode) and no root (udev file) give the same findings."""
    text = (CORPUS / "dmidecode" / "ddr4-3600-kit-ryzen3600-xmp-off-2133.txt").read_text()
    fs = {CHASSIS_TYPE: "3\n", UDEV_DMI: udev_from_dmidecode(text)}
    denied = ("# dmidecode 3.3\n", 1, "/sys/firmware/dmi/tables/smbios_entry_point: Permission denied\n")
    as_root = list(RamSpeedCheck().run(HostFacts(open_host(make_snapshot(fs={CHASSIS_TYPE: "3\n"}, cmd={DMI: text})))))
    no_root = list(RamSpeedCheck().run(HostFacts(open_host(make_snapshot(fs=fs, cmd={DMI: denied})))))
    absent = list(RamSpeedCheck().run(HostFacts(open_host(make_snapshot(fs=fs)))))
    assert [(f.severity, f.summary) for f in no_root] == [(f.severity, f.summary) for f in as_root]
    assert [(f.severity, f.summary) for f in absent] == [(f.severity, f.summary) for f in as_root]
    assert no_root[0].severity is Severity.FAIL and UDEV_DMI in no_root[0].evidence
    assert "no root" in no_root[0].evidence[DMI]


def test_no_root_and_no_udev_file_still_says_needs_root(make_snapshot):
    denied = ("# dmidecode 3.3\n", 1, "/dev/mem: Permission denied\n")
    [f] = RamSpeedCheck().run(HostFacts(open_host(make_snapshot(cmd={DMI: denied}))))
    assert f.severity is Severity.SKIP and f.summary == NEEDS_ROOT


@pytest.mark.parametrize("text", ["", "garbage", "E:MEMORY_DEVICE_0_SIZE=-5\n", "E:MEMORY_DEVICE_0_SIZE=abc\n",
                                  "E:MEMORY_DEVICE_99999999_SIZE=8589934592\n", None, 42,
                                  "E:MEMORY_DEVICE_0_SIZE=8589934592\nE:MEMORY_DEVICE_0_SPEED_MTS=\x1b[31m3200\n",
                                  "E:MEMORY_DEVICE_0_SIZE=8589934592\nE:MEMORY_DEVICE_0_CONFIGURED_SPEED_MTS=NaN\n"])
def test_garbage_udev_file_never_raises(text):
    mem = parse_udev_dmi_memory(text)  # type: ignore[arg-type]
    findings = list(RamSpeedCheck().run(HostFacts.of(RamFacts.from_text(text if isinstance(text, str) else "",
                                                                        udev=True))))
    assert findings and all(f.severity in (Severity.SKIP, Severity.OK, Severity.WARN, Severity.FAIL) for f in findings)
    assert len(mem.installed) <= 1


def test_snapshot_writer_records_the_udev_file_a_no_root_run_read(tmp_path):
    """A recording host reads /run/udev/data/+dmi:id when dmidecode is absent, so `tunehost snapshot` stores it and
    the replay gives the same verdicts (files under a stand-in root; the writer copies what the run read)."""
    from tunehost.host import Host
    from tunehost.host.files import AccessLog, HostFiles
    from tunehost.host.identifiers import Pseudonyms
    from tunehost.host.snapshot import _write_fs

    text = (CORPUS / "dmidecode" / "ddr4-3600-kit-ryzen3600-xmp-off-2133.txt").read_text()
    root = tmp_path / "root"
    (root / "run/udev/data").mkdir(parents=True)
    (root / "run/udev/data/+dmi:id").write_text(udev_from_dmidecode(text))
    host = Host(HostFiles(root, log=AccessLog()), _NoDmidecode())
    live = verdicts(RamFacts.gather(host))
    assert live[0][0] is Severity.FAIL and UDEV_DMI in host.files.log.files
    snap = tmp_path / "snap"
    _write_fs(host, snap / "fs", Pseudonyms())
    (snap / "manifest.json").write_text('{"format": 1}')
    assert (snap / "fs" / "run/udev/data/+dmi:id").read_text() == udev_from_dmidecode(text)
    assert verdicts(RamFacts.gather(open_host(snap))) == live


# --- no configured speed (issue 34): judged from the modules' rating and the platform's maximum -------------------
# real linuxhw/DMI dumps from tests/data/linuxhw_dmi_mobile (README there), with the CPU the dump names
MOBILE = DATA / "linuxhw_dmi_mobile"


def _mobile(make_snapshot, prefix: str, chassis: int, cpu: str | None):
    [path] = [p for p in MOBILE.iterdir() if p.name.startswith(prefix)]
    return judge(make_snapshot, text=path.read_text(), chassis=chassis, cpu=cpu)


def test_no_configured_speed_rating_at_the_cpu_maximum_is_ok(make_snapshot):
    # MacBook Pro 9,1: 2x DDR3-1600 SODIMM, Configured Clock Speed absent, Ivy Bridge i7-3615QM (DDR3-1600)
    f = _mobile(make_snapshot, "Notebook__Apple__MacBookPro9", 10, "Intel(R) Core(TM) i7-3615QM CPU @ 2.30GHz")
    assert f[0].severity == OK
    assert "rated 1600" in f[0].summary and "DDR3-1600" in f[0].summary
    assert "configured speed is not reported" in f[0].summary   # says what was not read
    assert "configured speed not reported" in f[0].evidence["judged from"]


def test_no_configured_speed_rating_above_the_cpu_maximum_is_cpu_limited_info(make_snapshot):
    # MacBook Pro 8,1: DDR3-1600 modules, Sandy Bridge i5-2435M runs DDR3 at most at 1333
    f = _mobile(make_snapshot, "Notebook__Apple__MacBookPro8", 10, "Intel(R) Core(TM) i5-2435M CPU @ 2.40GHz")
    assert f[0].severity == INFO and "CPU-limited" in f[0].summary and "1600" in f[0].summary
    assert "DDR3-1333" in f[0].summary and f[0].fix is not None


def test_no_configured_speed_without_a_cpu_says_what_was_not_read(make_snapshot):
    f = _mobile(make_snapshot, "Notebook__Apple__MacBookPro9", 10, None)
    assert f[0].severity == SKIP
    assert "configured memory speed" in f[0].summary and "platform's maximum (CPU not reported)" in f[0].summary


def test_no_configured_speed_on_a_desktop_stays_skip(make_snapshot):
    # the same SODIMMs judged as a desktop tower with DIMMs would be: XMP may be off, only the configured speed tells
    text = (next(MOBILE.glob("Notebook__Apple__MacBookPro9*"))).read_text().replace("SODIMM", "DIMM")
    f = judge(make_snapshot, text=text, chassis=3, cpu="Intel(R) Core(TM) i7-3770K CPU @ 3.50GHz")
    assert f[0].severity == SKIP and "XMP/EXPO" in f[0].summary


def test_no_configured_speed_two_rdimms_per_channel_is_skip(make_snapshot):
    # Intel S5520UR: 12 RDIMMs on 6 channels of two Xeon E5645: the board lowers the speed by its own table
    f = _mobile(make_snapshot, "Server__Intel__S5520", 17, "Intel(R) Xeon(R) CPU           E5645  @ 2.40GHz")
    assert f[0].severity == SKIP and "2 RDIMMs per channel" in f[0].summary


def test_no_configured_speed_one_rdimm_per_channel_type_other_uses_the_cpus_only_type(make_snapshot):
    # Supermicro X8DTL: "Type: Other" RDIMMs, one per channel; Westmere-EP runs DDR3 only (1333)
    f = _mobile(make_snapshot, "Server__Supermicro__X8__X8DTL", 17, "Intel(R) Xeon(R) CPU           E5645  @ 2.40GHz")
    assert f[0].severity == OK and "DDR3-1333" in f[0].summary


def test_no_configured_speed_garbage_speed_field_is_skip_with_the_reason(make_snapshot):
    text = (next(MOBILE.glob("Notebook__Apple__MacBookPro9*"))).read_text().replace("Speed: 1600 MT/s", "Speed: 7 MT/s")
    f = judge(make_snapshot, text=text, chassis=10, cpu="Intel(R) Core(TM) i7-3615QM CPU @ 2.30GHz")
    assert f[0].severity == SKIP and "the modules' rating" in f[0].summary


def test_no_configured_speed_a_ddr3_800_speed_is_not_doubled_past_the_cpus_maximum(make_snapshot):
    # Intel D425KT: one DDR3 module "Speed: 800 MT/s" with an Atom D425 (DDR3-800, one channel). The AM3 quirk reads
    # a DDR3 Speed below 1066 as a clock (1600); the CPU's maximum says the 800 is the data rate
    f = _mobile(make_snapshot, "Mini_Pc__Intel__D425KT", 35, "Intel(R) Atom(TM) CPU D425   @ 1.80GHz")
    assert f[0].severity == OK and "rated 800" in f[0].summary and "DDR3-800" in f[0].summary
