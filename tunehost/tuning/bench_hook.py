"""`apply --bench MODEL`: the one call into the bench engine, behind a lazy import.

The bench engine's entry point is `tunehost.bench.runner.measure_model(model, *, label=...) -> SavedResult`
(`tunehost.bench.measure_model` is accepted too). Missing: one clear error before anything changes.
"""

from __future__ import annotations

from typing import Any, Callable

from tunehost.errors import TunehostError


def _find() -> Callable[..., Any] | None:
    try:
        from tunehost.bench.runner import measure_model

        return measure_model
    except ImportError:
        pass
    try:
        import tunehost.bench as bench
    except ImportError:
        return None
    return getattr(bench, "measure_model", None)


def bench_function() -> Callable[..., Any]:
    """The bench engine's measuring function; TunehostError when this build has none."""
    fn = _find()
    if fn is None:
        raise TunehostError("--bench needs the bench engine (tunehost.bench.runner.measure_model), which this build "
                            "does not have; nothing was changed (run `tunehost apply` without --bench)")
    return fn


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
