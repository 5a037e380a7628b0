"""Parsing `dmidecode -t memory`: SMBIOS type 16 (Physical Memory Array) and type 17 (Memory Device).

    parse_dmidecode_memory(text) -> DmiMemory

Pure and total: garbage gives a DmiMemory with no arrays and no devices (``recognized`` False), never an exception.
Quirks handled here (each has a test in tests/ram/test_dmidecode_parser.py):
- sizes in MB, GB or TB, or "No Module Installed" / "Not Installed" / "Unknown" for an empty slot;
- speeds in "MT/s" (dmidecode >= 3.2) or "MHz" (older dmidecode; the number is the data rate either way);
- "Configured Memory Speed" (dmidecode >= 3.0) and its old name "Configured Clock Speed";
- trailing blanks in part numbers ("F5-6000J3636F16G    ");
- placeholder values ("Unknown", "Not Specified", "None", "--", "Undefined") read as absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from tunehost.bounds import MAX_COUNT, number_text

_HANDLE = re.compile(r"^Handle\s+(0x[0-9A-Fa-f]+),\s*DMI type\s+(\d+)", re.M)
_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z/]*)")
_PLACEHOLDERS = {"", "unknown", "not specified", "none", "--", "undefined", "not provided", "n/a",
                 "to be filled by o.e.m.", "no dimm", "empty", "0000", "00000000", "not available"}
MAX_SIZE_MB = float(1 << 40)  # a module of an exabyte is garbage
MAX_SPEED_MTS = 1_000_000.0  # 1,000 times DDR5's fastest: garbage beyond
_SIZE_UNITS = {"kb": 1 / 1024, "mb": 1, "gb": 1024, "tb": 1024 * 1024, "bytes": 1 / (1024 * 1024)}


@dataclass(frozen=True)
class MemoryArray:
    """SMBIOS type 16: one physical memory array (usually one per socket)."""

    handle: str
    location: str | None = None
    use: str | None = None
    error_correction: str | None = None
    maximum_capacity: str | None = None
    number_of_devices: int | None = None

    @property
    def ecc(self) -> bool:
        return bool(self.error_correction) and "ecc" in self.error_correction.lower()


@dataclass(frozen=True)
class MemoryDevice:
    """SMBIOS type 17: one slot (populated or empty) or one soldered package/channel."""

    handle: str
    array_handle: str | None = None
    size_mb: int | None = None          # None: empty slot or unknown size
    installed: bool = False              # a module is present (Size is a real size)
    form_factor: str | None = None      # DIMM, SODIMM, Row Of Chips, Other, ...
    locator: str | None = None
    bank_locator: str | None = None
    type: str | None = None             # DDR4, DDR5, LPDDR5, ...
    type_detail: str | None = None
    speed_mts: int | None = None        # "Speed": the module's maximum (SPD JEDEC, or the XMP rate on some boards)
    configured_mts: int | None = None   # "Configured Memory Speed" / "Configured Clock Speed"
    manufacturer: str | None = None
    part_number: str | None = None
    rank: int | None = None
    data_width: int | None = None       # bits
    total_width: int | None = None      # bits (72/80 with ECC)
    raw: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def registered(self) -> bool:
        detail = (self.type_detail or "").lower()
        return "registered" in detail and "unregistered" not in detail or "lrdimm" in detail or "load reduced" in detail

    @property
    def non_volatile(self) -> bool:
        """A flash/ROM chip SMBIOS lists as a memory device (HP's "SYSTEM ROM"): not RAM, never a module."""
        t = (self.type or "").upper()
        return t in {"FLASH", "ROM", "EEPROM", "EPROM", "FEPROM"} or "non-volatile" in (self.type_detail or "").lower()

    @property
    def soldered(self) -> bool:
        """Memory on the board: "Row Of Chips", or any LPDDR (LPDDR is never on a socketed DIMM, except LPCAMM)."""
        ff = (self.form_factor or "").lower()
        return ff in {"row of chips", "chip"} or (self.type or "").upper().startswith("LPDDR") and ff != "camm"


@dataclass(frozen=True)
class DmiMemory:
    arrays: tuple[MemoryArray, ...] = ()
    devices: tuple[MemoryDevice, ...] = ()
    version: str | None = None      # "3.5" from "# dmidecode 3.5"
    recognized: bool = False         # the text looked like dmidecode output at all

    @property
    def installed(self) -> tuple[MemoryDevice, ...]:
        """The installed RAM modules (flash/ROM chips listed as memory devices left out)."""
        return tuple(d for d in self.devices if d.installed and not d.non_volatile)


def _value(raw: str | None) -> str | None:
    if raw is None:
        return None
    value = raw.strip()
    return None if value.lower() in _PLACEHOLDERS else value


def parse_size_mb(raw: str | None) -> int | None:
    """"16 GB" -> 16384, "8192 MB" -> 8192; None for "No Module Installed", "Unknown" or garbage."""
    value = _value(raw)
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match:
        return None
    factor = _SIZE_UNITS.get(match.group(2).lower())
    if factor is None:
        return None
    number = number_text(match.group(1), 0.0, MAX_SIZE_MB / factor)
    size = int(round(number * factor)) if number is not None else 0
    return size if size > 0 else None


def parse_speed_mts(raw: str | None) -> int | None:
    """"3200 MT/s" or "3200 MHz" -> 3200; None for "Unknown" or garbage (both units carry the data rate)."""
    value = _value(raw)
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match or match.group(2).lower() not in {"mt/s", "mhz", ""}:
        return None
    speed = number_text(match.group(1), 0.0, MAX_SPEED_MTS)
    return int(speed) if speed and speed >= 1 else None


def _int(raw: str | None) -> int | None:
    value = _value(raw)
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match:
        return None
    value = number_text(match.group(1), 0.0, float(MAX_COUNT))
    return int(value) if value is not None else None


def _blocks(text: str) -> list[tuple[str, int, dict[str, str]]]:
    """(handle, dmi type, {key: value}) for every handle; nested list lines (two tabs) are skipped."""
    found: list[tuple[str, int, dict[str, str]]] = []
    matches = list(_HANDLE.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[match.end():end]
        fields: dict[str, str] = {}
        for line in body.splitlines()[1:]:
            if not line.strip() or line.startswith("\t\t") or ":" not in line:
                continue
            key, _, value = line.strip().partition(":")
            fields.setdefault(key.strip(), value.strip())
        found.append((match.group(1), int(match.group(2)), fields))
    return found


def parse_dmidecode_memory(text: str | None) -> DmiMemory:
    """Parse `dmidecode -t memory` (or a full `dmidecode` dump: only types 16 and 17 are kept)."""
    if not text or not isinstance(text, str):
        return DmiMemory()
    version_match = re.search(r"^#\s*dmidecode\s+([\d.]+)", text, re.M)
    arrays: list[MemoryArray] = []
    devices: list[MemoryDevice] = []
    blocks = _blocks(text)
    for handle, dmi_type, f in blocks:
        if dmi_type == 16:
            arrays.append(MemoryArray(
                handle=handle, location=_value(f.get("Location")), use=_value(f.get("Use")),
                error_correction=_value(f.get("Error Correction Type")),
                maximum_capacity=_value(f.get("Maximum Capacity")),
                number_of_devices=_int(f.get("Number Of Devices")),
            ))
        elif dmi_type == 17:
            size = parse_size_mb(f.get("Size"))
            configured = f.get("Configured Memory Speed", f.get("Configured Clock Speed"))
            part = _value(f.get("Part Number"))
            devices.append(MemoryDevice(
                handle=handle, array_handle=_value(f.get("Array Handle")), size_mb=size, installed=size is not None,
                form_factor=_value(f.get("Form Factor")), locator=_value(f.get("Locator")),
                bank_locator=_value(f.get("Bank Locator")), type=_value(f.get("Type")),
                type_detail=_value(f.get("Type Detail")), speed_mts=parse_speed_mts(f.get("Speed")),
                configured_mts=parse_speed_mts(configured), manufacturer=_value(f.get("Manufacturer")),
                part_number=part, rank=_int(f.get("Rank")), data_width=_int(f.get("Data Width")),
                total_width=_int(f.get("Total Width")), raw=dict(f),
            ))
    recognized = bool(version_match) or bool(blocks) or "SMBIOS" in text
    return DmiMemory(tuple(arrays), tuple(devices), version_match.group(1) if version_match else None, recognized)
