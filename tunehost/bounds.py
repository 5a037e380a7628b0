"""Whether a value read from a host, a snapshot or a file can be real: the one place hostile numbers become unknown.

    whole_text("60\\n", 0, 200)  -> 60       a sysfs/procfs integer within the range the kernel allows
    whole(-1, 0)                 -> None     a JSON integer (never a bool) within a range
    number(float("nan"))         -> None     a finite JSON number within a range
    share(12, 10)                -> None     a part of a whole (0..1); a part larger than its whole is garbage

Each returns None for anything else (a string, a bool, NaN, infinity, negative, beyond the bound), and the caller
reports that fact as unknown with its reason, so "10000 % RAM available" or "during -1 s" is never printed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# The largest count any kernel counter or size reaches in practice (2^62); larger is a corrupt file, and the
# limit keeps int() away from 4,000-digit strings.
MAX_COUNT = 1 << 62
_WHOLE_TEXT = re.compile(r"-?[0-9]{1,19}")


# No llama-bench reaches 10^9 tokens/s (the fastest GPUs do ~10^5 t/s of prompt processing); a rate beyond this is
# damage, and bounding it keeps sums and means of samples finite (1e308 overflowed the mean).
MAX_TOKENS_PER_S = 1e9
# No context holds 2^27 (134 million) tokens; a test's prompt, generation or depth beyond it is damage.
MAX_TOKENS = 1 << 27


def tokens_per_s(value: Any) -> float | None:
    """A throughput: a finite number in (0, MAX_TOKENS_PER_S]; None for anything else."""
    return number(value, 0.0, MAX_TOKENS_PER_S, above_low=True)


def token_count(value: Any) -> int | None:
    """A token count (n_prompt, n_gen, n_depth): a whole number in [0, MAX_TOKENS]; None for anything else."""
    return whole(value, 0, MAX_TOKENS)


def require_tokens_per_s(value: Any) -> float:
    """tokens_per_s, or ValueError naming the value (shortened) and the bound."""
    rate = tokens_per_s(value)
    if rate is None:
        raise ValueError(f"{_shown(value)}: not a positive finite number up to {MAX_TOKENS_PER_S:g} t/s")
    return rate


def require_token_count(value: Any) -> int:
    """token_count, or ValueError naming the value (shortened) and the bound."""
    count = token_count(value)
    if count is None:
        raise ValueError(f"{_shown(value)}: not a token count (0 to {MAX_TOKENS})")
    return count


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def whole(value: Any, low: int = 0, high: int = MAX_COUNT) -> int | None:
    """A JSON integer in [low, high]; None for bools, floats, strings and anything out of range."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if low <= value <= high else None


def whole_text(text: str | None, low: int = 0, high: int = MAX_COUNT) -> int | None:
    """A file's integer ("60\\n", the first word of "123 kB") in [low, high]; None when it is anything else."""
    words = (text or "").split()
    if not words or not _WHOLE_TEXT.fullmatch(words[0]):
        return None
    return whole(int(words[0]), low, high)


def number(value: Any, low: float = 0.0, high: float = math.inf, *, above_low: bool = False) -> float | None:
    """A finite JSON number in [low, high] (or (low, high] with `above_low`); None for bools, NaN, infinity, text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    if not math.isfinite(value) or value < low or value > high or (above_low and value == low):
        return None
    return value


def number_text(text: str | None, low: float = 0.0, high: float = math.inf) -> float | None:
    """A decimal in text ("3200", "12.5") as a finite float in [low, high]; None for garbage, NaN or overflow."""
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number(value, low, high)


def share(part: int | float | None, total: int | float | None) -> float | None:
    """part / total as a fraction in [0, 1]; None when either is unknown, the total is not positive, or the part
    exceeds the total (the two figures cannot both be true)."""
    if part is None or total is None or total <= 0 or part < 0 or part > total:
        return None
    return part / total


# --- JSON from and to outside: strict (no NaN, no Infinity, no 1e999 read as infinity), bounded nesting ---------------

MAX_JSON_DEPTH = 64  # nesting a stored or printed document may have (tunehost writes at most ~6 levels)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: ValueError for NaN, Infinity, a number that overflows to infinity (1e999) and
    nesting deeper than MAX_JSON_DEPTH (Python's json would raise RecursionError, or parse 1e999 as inf)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    _check_parsed(value)
    return value


def _check_parsed(value: Any) -> None:
    """ValueError for a parsed document nested deeper than MAX_JSON_DEPTH or holding a non-finite float (1e999
    parses as inf); iterative, so a deep one cannot exhaust the stack here either."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError("a number beyond a finite float")
        elif isinstance(item, (dict, list)):
            if level > MAX_JSON_DEPTH:
                raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON null): what a JSON writer prints of an
    unknown number. Containers are copied (dicts, lists, tuples as lists); anything else is returned as is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def json_text(value: Any, **options: Any) -> str:
    """The one JSON writer for what tunehost prints or saves: strict JSON (allow_nan=False), an unknown
    (non-finite) number written as null, never as NaN or Infinity, which no other JSON reader accepts."""
    return json.dumps(finite_json(value), allow_nan=False, **options)
