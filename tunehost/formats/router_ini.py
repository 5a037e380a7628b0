"""The router's `--models-preset` INI file (llama-server router mode; written by tunehost.advise.router.render_preset):
printed inside the shell form and beside the unit, or written by `advise --write DIR`. Not a --format of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.formats import Subject


def render(subject: "Subject") -> str:
    """The preset file of a router launch configuration."""
    from tunehost.advise.router import render_preset

    return render_preset(subject.launch)
