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
