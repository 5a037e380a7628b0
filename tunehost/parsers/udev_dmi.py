"""Parsing systemd's copy of the SMBIOS memory tables: `/run/udev/data/+dmi:id` (readable by every user).

    parse_udev_dmi_memory(text) -> DmiMemory   # the same records parse_dmidecode_memory gives, one code path after

systemd's udev helper dmi_memory_id (src/udev/dmi_memory_id/dmi_memory_id.c) decodes SMBIOS type 16 and 17 at boot
and udev stores its output as `E:KEY=value` lines (`udevadm info` prints `E: KEY=value`, the helper itself
`KEY=value`; all three are read):
- `MEMORY_ARRAY_NUM_DEVICES`, `MEMORY_ARRAY_EC_TYPE` (only arrays whose Use is System Memory; "None" not printed);
- per type 17 structure n (numbered in table order, empty slots included): `MEMORY_DEVICE_<n>_SIZE` in bytes (absent
  when unknown), `_PRESENT=0` for an empty slot, `_FORM_FACTOR`, `_LOCATOR`, `_BANK_LOCATOR`, `_TYPE`,
  `_TYPE_DETAIL`, `_SPEED_MTS`, `_CONFIGURED_SPEED_MTS` (absent when 0), `_MANUFACTURER`, `_PART_NUMBER` (strings
  stripped, absent when empty), `_RANK`, `_DATA_WIDTH`, `_TOTAL_WIDTH`.
Type names are dmidecode's; systemd releases whose table ends at HBM2 print `<OUT OF SPEC>` for DDR5, as old
dmidecode does (resolved in facts/ram.py). Pure and total: garbage gives an empty DmiMemory, never an exception.
"""

from __future__ import annotations

import re

from tunehost.bounds import whole_text
from tunehost.parsers.dmidecode import DmiMemory, MemoryArray, MemoryDevice, _int, _value, parse_speed_mts

UDEV_DMI = "/run/udev/data/+dmi:id"
_LINE = re.compile(r"^(?:E:\s?)?(MEMORY_(?:ARRAY|DEVICE_(\d{1,4}))_([A-Z_]+))=(.*)$")
_MAX_DEVICES = 4096


def parse_udev_dmi_memory(text: str | None) -> DmiMemory:
    """The memory array and devices in a `+dmi:id` udev database file (or `udevadm info` output)."""
    if not text or not isinstance(text, str):
        return DmiMemory()
    array: dict[str, str] = {}
    devices: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        key, index, field, value = m[1], m[2], m[3], m[4].strip()
        if "\x1b" in value or len(value) > 200:
            continue  # not what systemd writes: escapes or runaway values are ignored
        if index is None:
            array[key.removeprefix("MEMORY_ARRAY_")] = value
        elif int(index) < _MAX_DEVICES:
            devices.setdefault(int(index), {})[field] = value
    if not array and not devices:
        return DmiMemory()
    arrays = (MemoryArray(handle="udev:array", error_correction=_value(array.get("EC_TYPE")),
                          number_of_devices=_int(array.get("NUM_DEVICES"))),) if array else ()
    parsed = []
    for n in sorted(devices):
        f = devices[n]
        size_mb = _size_mb(f.get("SIZE"))
        present = f.get("PRESENT") != "0" and size_mb is not None
        parsed.append(MemoryDevice(
            handle=f"udev:{n}", array_handle=arrays[0].handle if arrays else None,
            size_mb=size_mb if present else None, installed=present, form_factor=_value(f.get("FORM_FACTOR")),
            locator=_value(f.get("LOCATOR")), bank_locator=_value(f.get("BANK_LOCATOR")), type=_value(f.get("TYPE")),
            type_detail=_value(f.get("TYPE_DETAIL")), speed_mts=parse_speed_mts(f.get("SPEED_MTS")),
            configured_mts=parse_speed_mts(f.get("CONFIGURED_SPEED_MTS")),
            manufacturer=_value(f.get("MANUFACTURER")), part_number=_value(f.get("PART_NUMBER")),
            rank=_int(f.get("RANK")), data_width=_int(f.get("DATA_WIDTH")), total_width=_int(f.get("TOTAL_WIDTH")),
            raw=dict(f),
        ))
    return DmiMemory(arrays, tuple(parsed), None, True)


def _size_mb(raw: str | None) -> int | None:
    """Bytes -> MiB; None for absent, zero or garbage."""
    size = whole_text(raw)
    return size // (1024 * 1024) if size and size >= 1024 * 1024 else None
