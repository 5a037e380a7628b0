"""libdrm's table of AMD GPU marketing names: `/usr/share/libdrm/amdgpu.ids`.

amdgpu gives a consumer Radeon no `product_name` in sysfs (only boards with a FRU EEPROM, such as Instinct cards,
have one), so Mesa and every tool that names the card looks its PCI device and revision ids up in this file, which
libdrm installs (libdrm/data/amdgpu.ids; Debian's and Fedora's libdrm packages ship it). One line per product:

    # device_id,	revision_id,	product_name        <-- single tab after comma
    744C,	C8,	AMD Radeon RX 7900 XTX

after a version line ("1.0.0"). Pure `str -> data` that never raises: garbage gives an empty table.
"""

from __future__ import annotations

import re

from tunehost.printable import one_line

AMDGPU_IDS = "/usr/share/libdrm/amdgpu.ids"
MAX_NAME = 80
MAX_LINES = 20000
_LINE = re.compile(r"^\s*([0-9A-Fa-f]{4}),\s*([0-9A-Fa-f]{2}),\s*(\S.*?)\s*$")


def parse_amdgpu_ids(text: str | None) -> dict[tuple[str, str], str]:
    """{(device id, revision id): product name}, ids as 4 and 2 lower-case hex digits without 0x."""
    if not text or not isinstance(text, str):
        return {}
    table: dict[tuple[str, str], str] = {}
    for line in text.splitlines()[:MAX_LINES]:
        if line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        name = one_line(m[3])  # a name reaches the terminal, a report and advise's units' comments
        if len(name) <= MAX_NAME:
            table[(m[1].lower(), m[2].lower())] = name
    return table


def amdgpu_product_name(table: dict[tuple[str, str], str], device_id: str | None, revision: str | None) -> str | None:
    """The product name of a device id ("0x744c" or "744c") at a revision ("0xc8"): its own line, else the one name
    every line of that device id gives (no guess between two products that share an id: a 7900 XTX and a 7900 XT
    are both 744C, told apart by their revision)."""
    device = _hex(device_id, 4)
    if device is None:
        return None
    rev = _hex(revision, 2)
    if rev is not None and (device, rev) in table:
        return table[(device, rev)]
    names = {name for (dev, _), name in table.items() if dev == device}
    return names.pop() if len(names) == 1 else None


def _hex(value: str | None, digits: int) -> str | None:
    if not value:
        return None
    text = value.strip().lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{1,%d}" % digits, text):
        return None
    return text.zfill(digits)


__all__ = ["AMDGPU_IDS", "amdgpu_product_name", "parse_amdgpu_ids"]
