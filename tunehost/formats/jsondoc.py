"""`--format json`: the command's report as one JSON document (its own `to_json()`, a document it built, or
tune's: tunehost.formats.tune_report.document)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tunehost.bounds import json_text

if TYPE_CHECKING:
    from tunehost.formats import Subject


def render(subject: "Subject") -> str:
    from tunehost.ops.tune import TuneResult

    report = subject.report
    if isinstance(report, TuneResult):
        from tunehost.formats.tune_report import document as tune_document

        document = tune_document(report)
    else:
        document = report if isinstance(report, Mapping) else report.to_json()
    return json_text(document, indent=2) + "\n"
