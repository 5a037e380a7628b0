"""`apply --bench MODEL`: measure before, apply, measure after, and compare — through the bench engine.

`check_ready` runs before anything changes: a model that is not a GGUF, or no llama-bench, is one clear error and
the host stays as it was.
"""

from __future__ import annotations

from typing import Any, Callable

from tunehost.errors import TunehostError


def _find() -> Callable[..., Any] | None:
    try:
        from tunehost.bench.runner import measure_model
    except ImportError:
        return None
    return measure_model


def bench_function() -> Callable[..., Any]:
    """The bench engine's measuring function; TunehostError when this build has none."""
    fn = _find()
    if fn is None:
        raise TunehostError("--bench needs the bench engine (tunehost.bench.runner.measure_model), which this build "
                            "does not have; nothing was changed (run `tunehost apply` without --bench)")
    return fn


def check_ready(model: str) -> None:
    """Fail before any change when the measurement could not run: the engine, the model, llama-bench."""
    bench_function()
    from tunehost.bench.runner import model_identity, resolve_binary

    model_identity(model)
    resolve_binary(None)


def measure(model: str, label: str) -> Any:
    return bench_function()(model, label=label)


def describe(result: Any) -> str:
    """One line for a measured result: its own summary when it has one."""
    for name in ("summary_line", "summary"):
        attr = getattr(result, name, None)
        if callable(attr):
            try:
                return str(attr())
            except Exception:  # a display helper must not fail an apply that succeeded
                break
        if isinstance(attr, str):
            return attr
    return str(result)


def comparison(before: Any, after: Any) -> Any | None:
    """before/after as the bench engine's Comparison (same table as `tunehost bench --compare`); None if not results."""
    try:
        from tunehost.bench.results import SavedResult, compare_saved
    except ImportError:
        return None
    if isinstance(before, SavedResult) and isinstance(after, SavedResult):
        return compare_saved(before, after)
    return None
