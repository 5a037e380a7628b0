"""The CLI's progress text: one line, never read as markup. (Folding report text to the terminal's width is the
formats room's: tunehost.formats.fold.)"""

from __future__ import annotations

from typing import Any


def progress_text(text: str, limit: int = 200) -> str:
    """A progress bar's description: one line, and never read as rich markup (llama-bench's stderr lines, other
    processes' names: "[/]" is a valid one)."""
    from rich.markup import escape

    from tunehost.printable import one_line

    return escape(one_line(text, limit))


def print_progress_line(console: Any, text: str, limit: int = 200) -> None:
    """One plain progress line (stdout or stderr is not a terminal: `| tee`, a CI log): one line, no markup."""
    from tunehost.printable import one_line

    console.print(one_line(text, limit), markup=False, highlight=False, soft_wrap=True)


__all__ = ["print_progress_line", "progress_text"]
