"""ram-speed without root: systemd's `/run/udev/data/+dmi:id` (tunehost/parsers/udev_dmi.py).

Real udev files: tests/data/udev_dmi (systemd's own test data, README there). Equivalence: every corpus dmidecode dump
(tests/data/corpus/dmidecode) and every linuxhw/DMI sample dump (tests/data/linuxhw_dmi) is converted to the udev file
systemd would write for the same SMBIOS tables (`udev_from_dmidecode`, following dmi_memory_id.c), and must give the
same verdicts as the dmidecode text.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import CORPUS, DATA
from tunehost.check import Severity
from tunehost.checks.ram_speed import RamSpeedCheck
from tunehost.facts import HostFacts
from tunehost.facts.ram import CHASSIS_TYPE, NEEDS_ROOT, RamFacts
from tunehost.host import open_host
from tunehost.parsers.dmidecode import _blocks, parse_size_mb
from tunehost.parsers.udev_dmi import UDEV_DMI, parse_udev_dmi_memory

UDEV = DATA / "udev_dmi"
DMI = "dmidecode -t memory"
_DMIDECODE_KEYS = {  # dmidecode field -> systemd property suffix (strings: stripped, omitted when empty)
    "Locator": "LOCATOR", "Bank Locator": "BANK_LOCATOR", "Form Factor": "FORM_FACTOR", "Type": "TYPE",
    "Type Detail": "TYPE_DETAIL", "Manufacturer": "MANUFACTURER", "Part Number": "PART_NUMBER",
}


def udev_from_dmidecode(text: str) -> str:
    """The `+dmi:id` lines systemd's dmi_memory_id writes for the SMBIOS tables a dmidecode text shows."""
    lines, n = [], 0
    for _handle, dmi_type, f in _blocks(text):
        if dmi_type == 16 and f.get("Use") == "System Memory":
            if f.get("Error Correction Type") not in (None, "None"):
                lines.append(f"E:MEMORY_ARRAY_EC_TYPE={f['Error Correction Type']}")
            if (m := re.match(r"\d+", f.get("Number Of Devices", ""))):
                lines.append(f"E:MEMORY_ARRAY_NUM_DEVICES={m[0]}")
        if dmi_type != 17:
            continue
        for field, key in (("Total Width", "TOTAL_WIDTH"), ("Data Width", "DATA_WIDTH")):
            if (m := re.match(r"(\d+) bits", f.get(field, ""))):
                lines.append(f"E:MEMORY_DEVICE_{n}_{key}={m[1]}")
        size = f.get("Size", "")
        if size.startswith("No Module Installed") or size.startswith("Not Installed"):
            lines.append(f"E:MEMORY_DEVICE_{n}_PRESENT=0")
        elif (mb := parse_size_mb(size)) is not None:
            lines.append(f"E:MEMORY_DEVICE_{n}_SIZE={mb * 1024 * 1024}")
        for field, key in _DMIDECODE_KEYS.items():
            if f.get(field, "").strip():
                lines.append(f"E:MEMORY_DEVICE_{n}_{key}={f[field].strip()}")
        for field, key in (("Speed", "SPEED_MTS"), ("Configured Memory Speed", "CONFIGURED_SPEED_MTS"),
                           ("Configured Clock Speed", "CONFIGURED_SPEED_MTS"), ("Rank", "RANK")):
            if (m := re.match(r"(\d+)", f.get(field, ""))) and int(m[1]):
                lines.append(f"E:MEMORY_DEVICE_{n}_{key}={m[1]}")
        n += 1
    return "\n".join(lines) + "\n"


def verdicts(facts: RamFacts):
    return [(f.severity, f.summary) for f in RamSpeedCheck().run(HostFacts.of(facts))]


CORPUS_DUMPS = sorted((CORPUS / "dmidecode").glob("*.txt"))
SAMPLE = json.loads((DATA / "linuxhw_dmi" / "labels.json").read_text())["labels"]


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


class _NoDmidecode:
    """Commands of a machine without dmidecode (what `host.run` answers when the tool is absent)."""

    def __init__(self):
        from tunehost.host.commands import CommandLog
        self.log = CommandLog()

    def run(self, argv, timeout=None):
        return None

    def which(self, name):
        return None


def test_snapshot_writer_records_the_udev_file_a_no_root_run_read(tmp_path):
    """A recording host reads /run/udev/data/+dmi:id when dmidecode is absent, so `tunehost snapshot` stores it and
    the replay gives the same verdicts (files under a stand-in root; the writer copies what the run read)."""
    from tunehost.host import Host
    from tunehost.host.files import AccessLog, HostFiles
    from tunehost.host.snapshot import _write_fs

    text = (CORPUS / "dmidecode" / "ddr4-3600-kit-ryzen3600-xmp-off-2133.txt").read_text()
    root = tmp_path / "root"
    (root / "run/udev/data").mkdir(parents=True)
    (root / "run/udev/data/+dmi:id").write_text(udev_from_dmidecode(text))
    host = Host(HostFiles(root, log=AccessLog()), _NoDmidecode())
    live = verdicts(RamFacts.gather(host))
    assert live[0][0] is Severity.FAIL and UDEV_DMI in host.files.log.files
    snap = tmp_path / "snap"
    _write_fs(host, snap / "fs")
    (snap / "manifest.json").write_text('{"format": 1}')
    assert (snap / "fs" / "run/udev/data/+dmi:id").read_text() == udev_from_dmidecode(text)
    assert verdicts(RamFacts.gather(open_host(snap))) == live
