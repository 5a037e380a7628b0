"""The formats room (tunehost.formats): one registry that advise's --format reads and tune renders through."""

from __future__ import annotations

from pathlib import Path

from .conftest import dense_tensors, write_gguf

SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "desktop-12700f-rtx3060"


def test_the_registry_holds_advise_formats_in_their_order() -> None:
    from tunehost.formats import FILES, FORMATS, choices_text

    assert list(FORMATS) == ["human", "shell", "systemd", "json", "ollama"]
    assert list(FILES) == ["systemd", "ollama"]
    assert choices_text() == "human (default), shell, systemd, json or ollama"
    assert choices_text(["human", "json"]) == "human (default) or json"


def test_a_registered_format_is_an_advise_format(cli, tmp_path, monkeypatch) -> None:
    """Adding a format is one module and one registry line: advise accepts it and prints what it renders."""
    from tunehost import formats

    def flag_names(subject: formats.Subject) -> str:
        return " ".join(f.name for f in subject.launch.flags) + "\n"

    monkeypatch.setitem(formats.FORMATS, "names", flag_names)
    model = write_gguf(tmp_path / "tiny.gguf", "llama", dense_tensors(2), n_layer=2)
    r = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--format", "names")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("-m -c -np ") and r.stdout.endswith("--host\n")
    bad = cli("advise", "--model", str(model), "--snapshot", str(SNAPSHOT), "--format", "nope")
    assert bad.exit_code == 1
    assert bad.stderr == ("tunehost: error: --format must be one of human, shell, systemd, json, ollama, names, "
                          "not 'nope'\n")


def test_the_shell_format_is_the_command_line_of_the_launch_configuration() -> None:
    """`--format shell` (advise's, and tune's winner) prints render_shell's line for the LaunchConfig, newline-ended."""
    from tunehost.formats import FORMATS, Subject
    from tunehost.formats.shell import render_shell
    from tunehost.launch import Flag, LaunchConfig

    launch = LaunchConfig("/m/x.gguf", (Flag("-m", "/m/x.gguf"), Flag("-t", "4")), pin_cpus=(0, 1))
    assert FORMATS["shell"](Subject(launch)) == render_shell(launch) + "\n"
    assert render_shell(launch) == "taskset -c 0-1 llama-server \\\n  -m /m/x.gguf \\\n  -t 4"
