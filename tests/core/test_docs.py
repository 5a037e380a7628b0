"""The documentation names every stable check id and every command."""

import re
from pathlib import Path

from tunehost.doctor.registry import BUILTIN_ORDER

ROOT = Path(__file__).resolve().parents[2]


def test_docs_checks_has_a_section_per_check_id():
    text = (ROOT / "docs" / "checks.md").read_text()
    for check_id in BUILTIN_ORDER:
        assert f"\n## {check_id}\n" in text, check_id


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in readme and "./scripts/test" in ci


def _user_texts() -> dict[str, str]:
    """README, docs and every command's --help: what a user of a clone reads."""
    import typer
    from typer.testing import CliRunner

    from tunehost.cli import app

    texts = {p.name: p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}

    def walk(command, path):
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, path + [name])

    for path in walk(typer.main.get_command(app), []):
        texts[" ".join(["tunehost", *path, "--help"])] = CliRunner().invoke(app, path + ["--help"]).stdout
    return texts


def test_no_user_text_points_outside_the_repository():
    """A clone has no ../shared: the contract (snapshot format, doctor --json, exit statuses, check ids) is in
    docs/snapshot.md and the corpus in tests/data/corpus."""
    for name, text in _user_texts().items():
        assert "shared/" not in text and "SNAPSHOT.md" not in text, name


def test_docs_snapshot_holds_the_whole_contract():
    text = (ROOT / "docs" / "snapshot.md").read_text()
    for heading in ("## Layout (format 1)", "## The doctor report (`tunehost doctor --json`)", "## Exit statuses",
                    "## Check ids (stable: scripts and tests key on them)", "## Measurements (`samples/measure.json`"):
        assert heading in text, heading
    for check_id in BUILTIN_ORDER:
        assert f"| `{check_id}` |" in text, check_id
    for key in ("memory_read_gbps", "memory_read_threads", "cpu_mhz_single", "cpu_mhz_all", "cpu_mhz_source"):
        assert f'"{key}"' in text, key
    for status in ("**64**", "**69**", "**70**", "**75**"):
        assert status in text, status
    from tunehost.ops.gate import EXIT_NOT_QUIET, EXIT_NOT_READY, EXIT_SOFTWARE, EXIT_USAGE

    assert (EXIT_USAGE, EXIT_NOT_READY, EXIT_SOFTWARE, EXIT_NOT_QUIET) == (64, 69, 70, 75)


def test_readme_commands_work_from_a_clone():
    """The install line activates the virtualenv before the first `tunehost`; sudo (which resets PATH) is always
    given the program's path; scripts that import the venv's packages run with its python; gate's DIR/host/."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    install = blocks[0].strip()
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install . && . .venv/bin/activate && ")
    assert install.endswith("tunehost doctor")
    assert blocks[1].strip() == "./scripts/test"
    for block in blocks:
        for line in block.splitlines():
            assert not re.search(r"(^|[;&|]\s*)sudo tunehost\b", line), line
            assert not re.search(r"(^|\s)python3? scripts/make_test_model\.py", line), line
    assert "DIR/<host>/" not in readme and "DIR/host/" in readme
    assert ".venv/bin/python scripts/make_test_model.py --size tiny" in readme


def test_make_test_model_without_gguf_says_which_python_in_one_line():
    import subprocess
    import sys

    code = ("import runpy, sys; sys.modules['gguf'] = None; sys.argv = ['make_test_model.py', '--size', 'tiny'];"
            "runpy.run_path('scripts/make_test_model.py', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no module named 'gguf'" in lines[0], done.stderr
    assert ".venv/bin/python scripts/make_test_model.py" in lines[0]
