"""Only the CLI opens the host (issue 31): every layer below it takes the Host or HostFacts its caller opened, so a
run reads the machine once and an operation can be replayed from a snapshot. tunehost/host defines open_host."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = (ROOT / "tunehost" / "cli", ROOT / "tunehost" / "host")


def _names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, how) of every mention of open_host in code: imported, called or read as a name or an attribute."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [(node.lineno, f"imports {a.name}") for a in node.names if a.name.split(".")[-1] == "open_host"]
        elif isinstance(node, ast.Name) and node.id == "open_host":
            found.append((node.lineno, "names open_host"))
        elif isinstance(node, ast.Attribute) and node.attr == "open_host":
            found.append((node.lineno, "reads .open_host"))
    return found


def test_nothing_below_the_cli_opens_the_host():
    sources = sorted((ROOT / "tunehost").rglob("*.py")) + sorted((ROOT / "checks").rglob("*.py"))
    assert len(sources) > 100  # the whole package is looked at, not an empty glob
    offenders = []
    for path in sources:
        if any(path.is_relative_to(allowed) for allowed in ALLOWED):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [f"{path.relative_to(ROOT)}:{line}: {how}" for line, how in _names(tree)]
    assert offenders == []


def test_the_check_sees_what_it_looks_for():
    code = "from tunehost.host import open_host\nimport tunehost.host as h\nh.open_host()\nopen_host()\n"
    assert [how for _, how in _names(ast.parse(code))] == ["imports open_host", "reads .open_host",
                                                            "names open_host"]
