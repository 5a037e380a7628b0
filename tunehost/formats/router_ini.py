"""The router's `--models-preset` INI file (llama-server router mode, common/preset.cpp load_from_ini): printed
inside the shell form (a heredoc) and beside the unit, or written by `advise --write DIR`. Not a --format of its
own. Every section name and value passes through tunehost.formats.quoting (ini_section, ini_value)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tunehost.formats.quoting import ini_section, ini_value

if TYPE_CHECKING:
    from tunehost.formats import Subject
    from tunehost.launch import Flag, LaunchConfig


def render_preset(launch: "LaunchConfig") -> str:
    """The `--models-preset` INI file: `[*]` with the shared flags, then one section per model. Keys are option
    names without leading dashes; a switch is `key = true`. A name or value INI cannot carry is one clear error."""
    from tunehost.advise.router import PATH_KEYS, model_name

    lines = ["; written by tunehost advise (router mode): llama-server --models-preset THIS_FILE",
             "; keys are llama-server options without the leading dashes (tools/server/README.md, Model presets)",
             "version = 1", ""]

    def kv(f: "Flag") -> str:
        key = PATH_KEYS.get(f.name, f.name.lstrip("-"))
        return f"{key} = {ini_value(f.name, 'true' if f.value is None else f.value)}"

    if launch.preset:
        lines.append("[*]")
        lines += [kv(f) for f in launch.preset]
        lines.append("")
    for m in launch.models:
        lines.append(ini_section(m.name or model_name(m.model)))
        lines += [kv(f) for f in m.flags]
        lines.append("")
    return "\n".join(lines)


def render(subject: "Subject") -> str:
    """The preset file of a router launch configuration."""
    return render_preset(subject.launch)
