"""ram-speed without root: systemd's `/run/udev/data/+dmi:id` (tunehost/parsers/udev_dmi.py). The helpers and data of
those tests, which are in tests/checks/test_ram_speed.py.

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


class _NoDmidecode:
    """Commands of a machine without dmidecode (what `host.run` answers when the tool is absent)."""

    def __init__(self):
        from tunehost.host.commands import CommandLog
        self.log = CommandLog()

    def run(self, argv, timeout=None):
        return None

    def which(self, name):
        return None
