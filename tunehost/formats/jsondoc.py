"""`--format json`: the command's report as one JSON document (its own `to_json()`, or a document it built)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.formats import Subject


def render(subject: "Subject") -> str:
    report = subject.report
    document = report if isinstance(report, Mapping) else report.to_json()
    return json.dumps(document, indent=2) + "\n"
