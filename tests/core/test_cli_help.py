"""`tunehost --help` lists every command with a whole first sentence, never one cut off with "..."."""

from typer.testing import CliRunner

from tunehost.cli import app


def test_every_command_summary_is_one_whole_sentence_on_an_80_column_terminal():
    result = CliRunner().invoke(app, ["--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:", 1)[1].strip().splitlines()
    names = [c.name for c in app.registered_commands]
    assert len(commands) == len(names)  # one line each: nothing wrapped
    for line in commands:
        name, summary = line.split(None, 1)
        assert name in names and summary.endswith(".") and "..." not in summary, line


def _command_paths():
    import typer

    def walk(command, path):
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, path + [name])

    return list(walk(typer.main.get_command(app), []))


def test_every_commands_help_fits_80_columns():
    paths = _command_paths()
    assert len(paths) > len(app.registered_commands)  # the root and every command
    for path in paths:
        result = CliRunner().invoke(app, path + ["--help"], terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        long = [line for line in result.stdout.splitlines() if len(line) > 80]
        assert not long, (path, long)
