"""lm-sensors `sensors` text -> chips and their temperature readings.

Handles both degree spellings ("+39.0°C" from a terminal, "+39.0 C" as hw-probe stores it), limits in parentheses
on the reading's line or on continuation lines ("(crit = +87.8°C)"), N/A readings, and non-temperature lines
(voltages, fans, power), which are skipped. Garbage -> no chips, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tunehost.bounds import number_text

_TEMP = re.compile(r"^([+-]?\d+(?:\.\d+)?)\s*(?:°|\ufffd|\xb0)?\s*C(?![a-zA-Z])")
# bounded repetitions only, starting at a word's start: linear on any line (a 20,000-letter word took 5 s)
_LIMIT = re.compile(r"(?<!\w)(\w{1,32})\s{0,8}=\s{0,8}([+-]?\d{1,12}(?:\.\d{1,6})?)\s{0,8}(?:°|\ufffd|\xb0)?\s{0,8}C(?![a-zA-Z])")
MAX_LINE_CHARS = 4096  # a `sensors` line is under 100 characters; a longer one is garbage, skipped unread
# limits outside this range are sensor placeholders (nvme "high = +65261.8 C", "low = -273.1 C")
_SANE = (-60.0, 200.0)
MAX_READING_C = 1000.0  # kept for the checks to judge up to here; a 400-digit reading is garbage, not infinity


@dataclass(frozen=True)
class SensorReading:
    label: str                   # "Package id 0", "Core 4", "Tctl", "Tccd1", "edge", "temp1"
    value_c: float | None        # None for N/A
    high_c: float | None = None
    crit_c: float | None = None
    raw: str = ""                # the line(s) as printed


@dataclass(frozen=True)
class SensorChip:
    name: str                    # "k10temp-pci-00c3"
    adapter: str | None
    readings: tuple[SensorReading, ...]

    @property
    def driver(self) -> str:
        """"k10temp-pci-00c3" -> "k10temp"; "ucsi_source_psy_USBC000:002-isa-0000" -> its prefix."""
        parts = self.name.rsplit("-", 2)
        return parts[0] if len(parts) == 3 else self.name


def parse_sensors(text: str | None) -> tuple[SensorChip, ...]:
    """`sensors` output -> its chips with temperature readings only. Never raises."""
    chips: list[SensorChip] = []
    if not text:
        return ()
    name: str | None = None
    adapter: str | None = None
    readings: list[SensorReading] = []

    def close() -> None:
        if name is not None:
            chips.append(SensorChip(name, adapter, tuple(readings)))

    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or len(line) > MAX_LINE_CHARS:
            continue
        if not raw[:1].isspace() and not re.search(r"\s", line) and not line.endswith(":"):
            # a chip header: one word, e.g. "k10temp-pci-00c3", "ucsi_source_psy_USBC000:002-isa-0000"
            close()
            name, adapter, readings = line.strip(), None, []
            continue
        if name is None:
            continue
        if raw[:1].isspace():
            # a continuation line of the previous reading: "(crit = +87.8°C)"
            if readings and line.strip().startswith("("):
                prev = readings[-1]
                high, crit = _limits(line, prev.high_c, prev.crit_c)
                readings[-1] = SensorReading(prev.label, prev.value_c, high, crit, prev.raw + "\n" + line)
            continue
        label, sep, rest = line.partition(":")
        if not sep:
            continue
        label, rest = label.strip(), rest.strip()
        if label == "Adapter":
            adapter = rest
            continue
        match = _TEMP.match(rest)
        if match:
            value: float | None = number_text(match.group(1), -MAX_READING_C, MAX_READING_C)
        elif rest.upper().startswith("N/A"):
            value = None
        else:
            continue  # a voltage, a fan, a power reading
        high, crit = _limits(rest[match.end():] if match else rest, None, None)
        readings.append(SensorReading(label, value, high, crit, line.strip()))
    close()
    return tuple(c for c in chips if c.readings or c.adapter)


def _limits(text: str, high: float | None, crit: float | None) -> tuple[float | None, float | None]:
    for key, value in _LIMIT.findall(text):
        number = number_text(value, -MAX_READING_C, MAX_READING_C)
        if number is None or not _SANE[0] < number < _SANE[1]:
            continue
        if key == "high" or key == "max":
            high = number
        elif key == "crit":
            crit = number
    return high, crit
