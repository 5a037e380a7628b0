"""The documentation names every stable check id and every command."""

from pathlib import Path

from tunehost.registry import BUILTIN_ORDER

ROOT = Path(__file__).resolve().parents[2]


def test_docs_checks_has_a_section_per_check_id():
    text = (ROOT / "docs" / "checks.md").read_text()
    for check_id in BUILTIN_ORDER:
        assert f"\n## {check_id}\n" in text, check_id


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in readme and "./scripts/test" in ci
