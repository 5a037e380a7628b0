"""Hardware identifiers never leave the host in a snapshot: serial numbers, asset tags, UUIDs.

A snapshot is made to be shared (a bug report, a stranger's box replayed here), and the outputs it stores name the
machine they came from: `dmidecode -t memory` gives each module's serial number and asset tag, systemd's copy of the
same tables (`/run/udev/data/+dmi:id`) too, `nvidia-smi -q` (text and XML) each board's serial number, GPU UUID and
PDI, and the NVML sample the UUIDs. No check reads any of them, so the writer replaces them before anything is stored:

- a serial number (a Raspberry Pi's /proc/cpuinfo has one too), asset tag or PDI becomes REDACTED (placeholders
  such as "Not Specified", "N/A" or "Unknown" stay what they are: they tell an empty slot or a field the firmware left
  blank, not a machine);
- a UUID becomes a pseudonym of the same shape (`GPU-…` stays `GPU-…`), the same for every place it appears in one
  snapshot (nvidia-smi's text, its XML, the NVML sample) and unrelated to the next snapshot's (a fresh random key
  each time), so a replay still pairs what belongs together and nothing links two snapshots of one machine;
- a file the checks only listed (kept so that exists() replays the same) is not stored when its name says it holds
  an identifier (`product_serial`, `product_uuid`, `vpd`...): `identifying_file`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Any

from tunehost.host.redact import REDACTED

# values that name no machine: what firmware and drivers print for a blank or absent field
PLACEHOLDERS = frozenset(v.lower() for v in (
    "", "N/A", "[N/A]", "Not Specified", "Not Provided", "Not Available", "Unknown", "None", "0", "00000000",
    "To Be Filled By O.E.M.", "Default string", "NO DIMM", "Not Installed", "Empty", "--",
))
# "Key : value" lines (dmidecode, nvidia-smi -q) whose value identifies a part
_TEXT_FIELD = re.compile(r"^([ \t]*(?:[A-Za-z ]*Serial(?: Number)?|Asset Tag|GPU PDI)[ \t]*:[ \t]*)(.*?)([ \t]*)$",
                         re.MULTILINE | re.IGNORECASE)
# nvidia-smi -q -x elements whose text identifies a part
_XML_FIELD = re.compile(r"(<(serial|chassis_serial_number|gpu_pdi|pdi)>)([^<]*)(</\2>)", re.IGNORECASE)
# systemd's E:KEY=value lines (+dmi:id): any key that names a serial number, an asset tag or a UUID
_UDEV_FIELD = re.compile(r"^((?:E:\s?)?[A-Z0-9_]*(?:SERIAL|ASSET_TAG|UUID)[A-Z0-9_]*=)(.*)$", re.MULTILINE)
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# names of files that hold an identifier (sysfs DMI, PCI vital product data, disks, NICs' permanent addresses)
_IDENTIFYING_NAME = re.compile(r"serial|uuid|^vpd$|asset_tag|^rom$|^wwid$|^eui$|^nguid$", re.IGNORECASE)


def identifying_file(path: str) -> bool:
    """Whether a file's name says it holds a hardware identifier (never stored unless a check read it)."""
    return bool(_IDENTIFYING_NAME.search(os.path.basename(path)))


class Pseudonyms:
    """UUID pseudonyms for one snapshot: the same input gives the same pseudonym, a new Pseudonyms another one."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else os.urandom(32)

    def uuid(self, value: str) -> str:
        digest = hmac.new(self._key, value.lower().encode(), hashlib.sha256).hexdigest()
        return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    def text(self, text: str) -> str:
        """Every UUID in `text` replaced (a prefix such as GPU- or MIG- is kept, it is outside the match)."""
        return _UUID.sub(lambda m: self.uuid(m.group(0)), text)

    def value(self, value: Any) -> Any:
        """A sample's value with every UUID in its strings replaced (dicts and lists walked, keys kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def _redacted(value: str, *, xml: bool = False) -> str:
    if value.strip().lower() in PLACEHOLDERS:
        return value
    return "&lt;redacted&gt;" if xml else REDACTED


def scrub_identifiers(text: str, pseudonyms: Pseudonyms) -> str:
    """A command's output or a file's text with serial numbers, asset tags and PDIs redacted and UUIDs replaced."""
    text = _TEXT_FIELD.sub(lambda m: m.group(1) + _redacted(m.group(2)) + m.group(3), text)
    text = _XML_FIELD.sub(lambda m: m.group(1) + _redacted(m.group(3), xml=True) + m.group(4), text)
    text = _UDEV_FIELD.sub(lambda m: m.group(1) + _redacted(m.group(2)), text)
    return pseudonyms.text(text)


__all__ = ["PLACEHOLDERS", "Pseudonyms", "identifying_file", "scrub_identifiers"]
