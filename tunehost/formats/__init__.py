"""The formats room: every way a command's result is written out, one module per format, one registry.

A format is `render(subject) -> str`: the text for stdout (the human report prints through the console the CLI
hands in, and returns ""). advise offers every registered format (`tunehost advise --format NAME`); tune offers
those in TUNE and renders its result (tunehost.ops.tune.TuneResult; its human report and JSON document are
tune_report's) through the same entries. A format that can also be written as files (--write DIR) has
`files(subject, directory) -> [Artifact]` in FILES. Adding a format: one module here, one line in FORMATS (and
FILES if it writes, TUNE if tune offers it).
The router's preset INI (router_ini) is a part of the shell and systemd forms, not a --format of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunehost.formats import human, jsondoc, ollama, shell, systemd

if TYPE_CHECKING:
    from rich.console import Console

    from tunehost.advise.artifacts import Artifact
    from tunehost.advise.unit_access import UnitCheck
    from tunehost.launch import LaunchConfig


@dataclass(frozen=True)
class Subject:
    """What a command hands a format: the launch configuration it ends in and its report (advise's
    tunehost.ops.advise.Advice, or a JSON document such as tune's)."""

    launch: "LaunchConfig"
    report: Any = None
    unit_check: "UnitCheck | None" = None  # systemd: what check_unit found (a unit is rendered only after it)
    preset_file: str | None = None  # router mode: the preset file's absolute path
    console: "Console | None" = None  # human: the console it prints through


FORMATS: dict[str, Callable[[Subject], str]] = {
    "human": human.render,
    "shell": shell.render,
    "systemd": systemd.render,
    "json": jsondoc.render,
    "ollama": ollama.render,
}
TUNE = ("human", "shell", "systemd", "json")  # the formats `tune --format` offers its winner in (in this order)
FILES: dict[str, Callable[[Subject, Path], "list[Artifact]"]] = {
    "systemd": systemd.files,
    "ollama": ollama.files,
}


def refuse_unwritable(name: str, launch: "LaunchConfig") -> None:
    """What the format `name` cannot write for `launch` (a control character in a path, a model name no INI
    section carries, a path a Modelfile would read back as another file) as one TunehostError, through the same
    quoting functions its rendering uses (tunehost.formats.quoting). advise and tune call it on the plan before
    they check a unit's access or measure anything: a refusal never comes after a spent budget."""
    from tunehost.formats.router_ini import render_preset

    if launch.is_router:
        render_preset(launch)
    if name == "shell":
        shell.render_shell(launch)
    elif name == "systemd":
        systemd.render_systemd(launch)
    elif name == "ollama":
        ollama.ollama_files(launch)


def render(name: str, subject: Subject) -> str:
    """`subject` in the format `name` (one of FORMATS)."""
    return FORMATS[name](subject)


def choices_text(names: Iterable[str] = (), default: str = "human") -> str:
    """The formats for a help text: "human (default), shell, systemd, json or ollama" (every registered one when
    `names` is empty)."""
    shown = [f"{n} (default)" if n == default else n for n in (names or FORMATS)]
    return ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else "".join(shown)
