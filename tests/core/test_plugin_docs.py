"""docs/plugins.md and docs/architecture.md describe the plugin interface the code has, and the example package
registers its check the way the doc says."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tunehost.check import Check
from tunehost.doctor.registry import ENTRY_POINT_GROUP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tunehost-check-example"


def test_the_check_attributes_the_docs_name_exist():
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    named = re.search(r"subclasses `tunehost\.check\.Check`, sets (.+?) \(", architecture, re.S)
    assert named, "architecture.md no longer says which attributes a check sets"
    attributes = re.findall(r"`(\w+)`", named.group(1))
    assert attributes == ["id", "title", "judges"]
    plugins = (ROOT / "docs" / "plugins.md").read_text()
    for attribute in attributes:
        assert hasattr(Check, attribute) and f"| `{attribute}` |" in plugins, attribute
    for helper in ("ok", "info", "warn", "fail", "skip"):
        assert callable(getattr(Check, helper)) and f"`self.{helper}(" in plugins, helper


def test_the_example_registers_its_check_as_the_doc_shows():
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    [(name, target)] = project["project"]["entry-points"][ENTRY_POINT_GROUP].items()
    assert f'{name} = "{target}"' in (ROOT / "docs" / "plugins.md").read_text()
    module, _, cls = target.partition(":")
    source = (EXAMPLE / (module.replace(".", "/") + ".py")).read_text()
    assert f"class {cls}(Check):" in source and f'id = "{name}"' in source
