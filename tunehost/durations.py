"""The one parser for durations on the command line: every --budget, --timeout, --start-timeout, --wait-quiet.

    parse_duration("90", option="--budget")      # 90.0 (a bare number is seconds)
    parse_duration("2m", option="--budget")      # 120.0
    parse_duration("1m30s", option="--budget")   # 90.0
    parse_duration("1h", option="--timeout")     # 3600.0

Units: s, m, h (any case), largest first, each at most once, one space allowed around a unit ("10 m", "1h 30m");
a part may have decimals ("1.5m"). Anything else
(empty, negative, nan, inf, exponents, "2x", "30s1m") is one TunehostError line naming the option; so is a value
outside the option's range. Pure: no I/O.
"""

from __future__ import annotations

import math
import re

from tunehost.errors import TunehostError

DAY_S = 24 * 3600.0
WEEK_S = 7 * DAY_S
MAX_TEXT = 40  # longer input is not a duration (and is not echoed whole)
UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_NUMBER = r"[0-9]{1,12}(?:\.[0-9]{1,9})?"
_BARE = re.compile(rf"({_NUMBER})")
_PARTS = re.compile(rf"(?:({_NUMBER}) ?h ?)?(?:({_NUMBER}) ?m ?)?(?:({_NUMBER}) ?s)?")  # "10m", "10 m", "1h 30m"
EXAMPLES = "90, 90s, 2m, 1m30s or 1h"


def parse_duration(text: str | None, *, option: str, minimum: float = 0.0, maximum: float = WEEK_S,
                   allow_minimum: bool = True) -> float:
    """Seconds from ``text``: a bare number (seconds) or parts like 1h30m, 2m, 90s.

    The value must lie in [minimum, maximum] (``allow_minimum=False``: above ``minimum``). One clear TunehostError
    line for anything else, naming ``option``."""
    value = _seconds(text)
    if value is None:
        raise TunehostError(f"{option} must be a duration like {EXAMPLES} (a bare number is seconds), "
                            f"not {_shown(text)}")
    too_low = value < minimum or (not allow_minimum and value <= minimum)
    if too_low or value > maximum:
        low = f"{'more than' if not allow_minimum else 'at least'} {format_duration(minimum)}"
        raise TunehostError(f"{option} must be {low} and at most {format_duration(maximum)}, not {_shown(text)}")
    return value


def format_duration(seconds: float) -> str:
    """A duration as this parser reads it back (``parse_duration(format_duration(x)) == x`` for whole seconds and
    milliseconds up to 10**11 s): 0 -> "0 s", 90 -> "90 s", 600 -> "10 m", 86400 -> "24 h", 1.5 -> "1.5 s"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{_plain_number(seconds / 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{_plain_number(seconds / 60)} m"
    return f"{_plain_number(seconds)} s"


def _plain_number(value: float) -> str:
    """No exponent (the parser reads none), at most the 9 decimals it reads."""
    return f"{value:.9f}".rstrip("0").rstrip(".") or "0"


def _seconds(text: str | None) -> float | None:
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        return None
    word = text.strip().lower()
    if not word:
        return None
    bare = _BARE.fullmatch(word)
    if bare:
        value = float(bare.group(1))
    else:
        parts = _PARTS.fullmatch(word)
        if not parts or not any(parts.groups()):
            return None
        value = sum(float(part) * unit for part, unit in zip(parts.groups(), UNITS.values()) if part is not None)
    return value if math.isfinite(value) else None


def _shown(text: object) -> str:
    from tunehost.printable import one_line

    return repr(one_line(str(text), MAX_TEXT)) if text is not None else "nothing"


__all__ = ["DAY_S", "EXAMPLES", "WEEK_S", "format_duration", "parse_duration"]
