"""A check's own tests are found next to each other: every check id registered in pyproject.toml's
`tunehost.checks` entry points has tests/checks/test_<id with underscores>.py holding tests of that check."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def registered_checks() -> dict[str, str]:
    """check id -> "module:Class", as pyproject.toml registers them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return dict(project["entry-points"]["tunehost.checks"])


def test_every_registered_check_has_its_test_file_in_tests_checks():
    checks = registered_checks()
    assert len(checks) >= 20  # the built-in checks (docs/checks.md), so an unread table fails here
    missing, without_tests = [], []
    for check_id, target in checks.items():
        path = ROOT / "tests" / "checks" / f"test_{check_id.replace('-', '_')}.py"
        if not path.is_file():
            missing.append(str(path.relative_to(ROOT)))
            continue
        source = path.read_text(encoding="utf-8")
        tests = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
        class_name = target.split(":")[1]
        if not tests or (class_name not in source and f'"{check_id}"' not in source):
            without_tests.append(f"{path.relative_to(ROOT)} ({check_id}: no test naming {class_name})")
    assert not missing, f"checks without tests/checks/test_<id>.py: {missing}"
    assert not without_tests, without_tests
