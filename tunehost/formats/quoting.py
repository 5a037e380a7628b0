"""Quoting for the formats that become a shell line or a systemd unit: every word read from a plan (a model path, a
host's name) passes through here, and a word with a control character is refused (tunehost.printable)."""

from __future__ import annotations

import shlex

from tunehost.printable import one_line, require_printable


def shell_word(arg: str) -> str:
    """One shell word, quoted; a control character is refused."""
    return shlex.quote(require_printable(arg, "a llama-server argument"))


def systemd_quote(arg: str) -> str:
    """One ExecStart/Environment word: C-style escapes doubled, specifiers (%) and $ escaped, quoted if needed.
    A word with a control character is refused: a newline would end the ExecStart= line (systemd.syntax(7))."""
    require_printable(arg, "a llama-server argument")
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    if escaped and not any(c in escaped for c in " \t'\"\\;") and escaped == arg:
        return escaped
    return f'"{escaped}"'


def unit_text(value: str) -> str:
    """Free text (a model's name) for a unit setting such as Description=: one printable line, specifiers (%)
    escaped, no trailing backslash (it would continue the line into the next one)."""
    return one_line(value, 200).replace("%", "%%").rstrip("\\ ")


def commented(text: str, head: str) -> str:
    """`text` as comment lines under a `# ---- head ----` line (a file printed beside a unit)."""
    return "\n".join([f"# ---- {head} ----"] + [f"# {line}" if line else "#" for line in text.splitlines()]) + "\n"
