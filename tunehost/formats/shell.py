"""`--format shell`: a ready command line (taskset -c CPUS env VARS llama-server FLAGS, one flag per line); in
router mode the preset file first, as a heredoc that writes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tunehost.formats.quoting import shell_word

if TYPE_CHECKING:
    from tunehost.formats import Subject
    from tunehost.launch import LaunchConfig


def render_shell(p: "LaunchConfig") -> str:
    """A ready command line: taskset -c CPUS env VARS llama-server FLAGS (one flag per line).

    Every word is shell-quoted; a word holding a control character is refused (TunehostError): in a command to
    paste it is invisible, or rewrites the terminal, and the same plan also becomes a unit where it cannot be quoted."""
    from tunehost.cpulist import format_cpu_list

    lines = []
    prefix = []
    if p.pin_cpus:
        prefix += ["taskset", "-c", format_cpu_list(p.pin_cpus)]
    if p.env:
        prefix += ["env"] + [f"{e.name}={e.value}" for e in p.env]
    head = " ".join(shell_word(a) for a in prefix + [p.server])
    lines.append(head)
    for f in p.flags:
        lines.append("  " + " ".join(shell_word(a) for a in f.argv()))
    return " \\\n".join(lines)


def render_router_files(p: "LaunchConfig", preset_file: str) -> str:
    """The router's command line, then the preset file it reads (as a heredoc that writes it)."""
    from tunehost.formats.router_ini import render_preset

    preset = render_preset(p)
    return (f"cat > {shell_word(preset_file)} <<'TUNEHOST_PRESET'\n{preset}TUNEHOST_PRESET\n\n" + render_shell(p))


def render(subject: "Subject") -> str:
    launch = subject.launch
    if launch.is_router:
        return render_router_files(launch, subject.preset_file or "models.ini") + "\n"
    return render_shell(launch) + "\n"
