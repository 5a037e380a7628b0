"""Untrusted text made safe to show or to write into a command line or a systemd unit.

GGUF metadata (general.name, ...), snapshot files, command output and user arguments all reach terminals, shell
lines and units: an ANSI escape rewrites the terminal, a newline starts a new unit line (`ExecStartPre=...`).
Display text is cleaned with `one_line` / `printable_lines`; a value that must be written verbatim (a path in
ExecStart) and holds a control character is refused with `require_printable`, because no quoting represents it
safely everywhere it goes.
"""

from __future__ import annotations

import unicodedata

from tunehost.errors import TunehostError

REPLACEMENT = "?"
# characters a value written verbatim may not hold: C0/C1 controls and DEL (newline, ESC, CR, ...), and the
# Unicode line and paragraph separators that some terminals and editors break lines on
_UNWRITABLE_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})


def _shown(ch: str) -> str:
    if ch.isprintable():
        return ch
    if unicodedata.category(ch) == "Zs":  # no-break and other spaces: a space, not a "?"
        return " "
    return REPLACEMENT


def one_line(value: object, limit: int | None = None) -> str:
    """`value` as one printable line: every control character (newline, tab, ESC, bidi override, ...) becomes "?"."""
    raw = str(value)
    if limit is not None and len(raw) > limit:  # each character maps to one: cut first, so a 1 MB value costs
        return "".join(_shown(ch) for ch in raw[: max(limit - 1, 0)]) + "…"  # what is shown, not its length
    return "".join(_shown(ch) for ch in raw)


def printable_lines(value: object) -> str:
    """`value` with its line breaks kept and every other control character (ESC, CR, backspace, ...) as "?"."""
    lines = str(value).replace("\r\n", "\n").split("\n")  # a CRLF file's line ends are line ends, not "?"
    return "\n".join(one_line(line.replace("\t", "    ")) for line in lines)


def first_unwritable(value: str) -> str | None:
    """A description of the first character that cannot be written verbatim ("a newline (U+000A)"), or None."""
    for ch in value:
        if unicodedata.category(ch) in _UNWRITABLE_CATEGORIES:
            name = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x1b": "an escape (ANSI)"}.get(
                ch, "a control character")
            return f"{name} (U+{ord(ch):04X})"
    return None


def require_printable(value: str, what: str) -> str:
    """`value` unchanged, or TunehostError naming `what` when it holds a control character (see first_unwritable)."""
    bad = first_unwritable(value)
    if bad is not None:
        raise TunehostError(f"{what} contains {bad}: it cannot be written safely into a command line or a "
                            f"systemd unit; rename it ({one_line(value, 120)!r})")
    return value


__all__ = ["REPLACEMENT", "first_unwritable", "one_line", "printable_lines", "require_printable"]
