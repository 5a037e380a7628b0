"""`apply --bench MODEL`: measure before, apply, measure after, and compare — through the bench engine.

`check_ready` runs before anything changes: a model that is not a GGUF, or no llama-bench, is one clear error and
the host stays as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.bench.results import Comparison, SavedResult
    from tunehost.facts import HostFacts


def check_ready(model: str) -> None:
    """Fail before any change when the measurement could not run: the model, llama-bench."""
    from tunehost.bench.runner import model_identity, resolve_binary

    model_identity(model)
    resolve_binary(None)


def measure(model: str, label: str, facts: "HostFacts") -> "SavedResult":
    """llama-bench's defaults on ``model`` on the live host ``facts`` describe (the caller's, read afresh for
    each side: the change in between is what is measured)."""
    from tunehost.bench.runner import measure_model

    return measure_model(model, facts, label=label)


def comparison(before: "SavedResult", after: "SavedResult") -> "Comparison":
    """before/after as the same table as `tunehost bench --compare`."""
    from tunehost.bench.results import compare_saved

    return compare_saved(before, after)
