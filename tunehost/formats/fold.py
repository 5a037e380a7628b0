"""Folding report text to the terminal's width: whole words, hanging indentation, never a number cut in two.

Reports (doctor's findings, their evidence and fixes) hold values read from the host that run to hundreds of
characters (a CPU list of 384 CPUs, a cache layout). They are folded at the console's width (80 when unknown, as
rich decides) rather than cut, so every line fits an 80-column terminal and a value is never shortened mid-number.
"""

from __future__ import annotations

from typing import Any

# where a word longer than a whole line may be split, after the character (a path's "/", a list's ",")
_SPLIT_AFTER = "/,;=:-_"


def _split_long(word: str, room: int) -> tuple[str, str]:
    """Split a word that does not fit `room` characters: after the last separator that fits, else before a run of
    digits, else at `room` (a word with no separator and no digits is cut where it must)."""
    head = word[:room]
    cut = max(head.rfind(ch) for ch in _SPLIT_AFTER) + 1
    if cut <= 0:
        cut = room
        while cut > 1 and word[cut - 1].isdigit() and word[cut].isdigit():  # never inside a number
            cut -= 1
        if cut <= 1:
            cut = room
    return word[:cut], word[cut:]


def fold(text: str, width: int, first: str = "", rest: str | None = None, max_lines: int | None = None) -> list[str]:
    """`text` (one line) as lines of at most `width` characters: the first starts with `first`, every other with
    `rest` (hanging indentation, `first` when not given), broken between words. With `max_lines`, the last line
    kept ends in " ..." when more followed (the cut is between words too)."""
    rest = first if rest is None else rest
    words = text.split()
    lines: list[str] = []
    line = first
    empty = True  # nothing after the indentation yet
    while words:
        word = words.pop(0)
        sep = "" if empty else " "
        if len(line) + len(sep) + len(word) <= width:
            line += sep + word
            empty = False
            continue
        if not empty:
            lines.append(line)
            line, empty = rest, True
            words.insert(0, word)
            continue
        room = max(width - len(line), 8)  # a word longer than a whole line: split it where it can be read
        head, tail = _split_long(word, room)
        lines.append(line + head)
        line = rest
        if tail:
            words.insert(0, tail)
    if not empty or not lines:
        lines.append(line)
    if max_lines is not None and len(lines) > max_lines:
        kept = lines[:max_lines]
        last = kept[-1]
        while len(last) + 4 > width and " " in last.strip():
            last = last.rstrip().rsplit(" ", 1)[0]
        kept[-1] = last + " ..."
        return kept
    return lines


def _shell_words(command: str) -> list[str]:
    """A shell line cut at the spaces where a line continuation may go: outside quotes and $(...), and a trailing
    `# comment` kept as one piece (a continuation inside a comment would run its next line)."""
    words: list[str] = []
    word = ""
    quote = ""
    depth = 0
    i = 0
    while i < len(command):
        ch = command[i]
        if quote:
            word += ch
            if ch == "\\" and quote == '"' and i + 1 < len(command):
                word += command[i + 1]
                i += 1
            elif ch == quote:
                quote = ""
        elif ch == "\\" and i + 1 < len(command):
            word += command[i:i + 2]
            i += 1
        elif ch in "'\"":
            quote = ch
            word += ch
        elif ch == "(" and word.endswith("$"):
            depth += 1
            word += ch
        elif ch == ")" and depth:
            depth -= 1
            word += ch
        elif ch == "#" and not word and not depth:
            words.append(command[i:].strip())
            return words
        elif ch == " " and not depth:
            if word:
                words.append(word)
            word = ""
        else:
            word += ch
        i += 1
    if word:
        words.append(word)
    return words


def fold_command(command: str, width: int, first: str, rest: str) -> list[str]:
    """A shell command as lines that still run when pasted: broken only between words outside quotes, each line but
    the last ending in " \\" (a line continuation). A word longer than a line stays whole."""
    words = _shell_words(command)
    if len(first) + len(command) <= width or len(words) < 2:
        return [first + command]
    lines: list[str] = []
    line = first + words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) + 2 <= width or len(rest) + len(word) + 2 > width:  # a word too long for
            # any line stays where it is; otherwise leave room for the " \" of a continuation
            line += " " + word
        else:
            lines.append(line + " \\")
            line = rest + word
    lines.append(line)
    return lines


def print_folded(console: Any, text: str, first: str = "", rest: str | None = None, style: str = "",
                 first_style: str = "") -> None:
    """Print `text` through a rich console folded to its width (40 at least), each line escaped (never markup);
    `first_style` styles the `first` prefix of the first line (a flag, "WARN"), `style` the text."""
    from rich.markup import escape

    def styled(part: str, how: str) -> str:
        return f"[{how}]{escape(part)}[/]" if how and part else escape(part)

    for i, line in enumerate(fold(text, max(console.width, 40), first, rest)):
        lead = first if i == 0 and line.startswith(first) else ""
        console.print(styled(lead, first_style) + styled(line[len(lead):], style), highlight=False)
