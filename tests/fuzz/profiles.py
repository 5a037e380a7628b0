"""Hypothesis profiles and the per-example time limit of the fuzz suite (tests/fuzz).

    pytest tests/fuzz                              # "ci": a few dozen examples per test, derandomized (< 60 s on 2 cores)
    pytest tests/fuzz --hypothesis-profile=long    # thousands per test, random seed: a local or nightly run
    TUNEHOST_FUZZ_PROFILE=long pytest tests/fuzz   # the same, for runners that cannot pass options
    TUNEHOST_FUZZ_EXAMPLES=300 pytest tests/fuzz --hypothesis-profile=long   # a shorter long run

The profiles are registered from tests/conftest.py so that `--hypothesis-profile` (read when pytest configures)
finds them.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator

from hypothesis import HealthCheck, settings

PROFILE_ENV = "TUNEHOST_FUZZ_PROFILE"
EXAMPLES_ENV = "TUNEHOST_FUZZ_EXAMPLES"  # examples per target in the long profile (default 1500)
# a generous deadline: CI runners are 2 shared vCPUs; a real hang is caught by the hard limit below
EXAMPLE_DEADLINE = timedelta(seconds=10)
HARD_LIMIT_S = 30.0  # one example running this long is a hang, whatever the machine
SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
              HealthCheck.function_scoped_fixture, HealthCheck.large_base_example]

# how many generated inputs each fuzz target ran (printed at the end of the session)
TRIED: Counter[str] = Counter()


def register_profiles() -> None:
    settings.register_profile("ci", max_examples=30, deadline=EXAMPLE_DEADLINE, derandomize=True, database=None,
                              suppress_health_check=SUPPRESSED, print_blob=True)
    settings.register_profile("long", max_examples=int(os.environ.get(EXAMPLES_ENV, "1500")),
                              deadline=EXAMPLE_DEADLINE, database=None, suppress_health_check=SUPPRESSED,
                              print_blob=True)
    settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))


class Hang(BaseException):
    """An example ran past HARD_LIMIT_S. A BaseException, so no `except Exception` in the code under test hides it."""


@contextmanager
def time_limit(target: str, seconds: float = HARD_LIMIT_S) -> Iterator[None]:
    """Count one input for `target` and fail it with Hang if it runs longer than `seconds` (SIGALRM, main thread)."""
    TRIED[target] += 1

    def expire(signum, frame):  # noqa: ARG001
        raise Hang(f"{target}: one input ran longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def budget(*, ci: int, long: int) -> settings:
    """Settings for an expensive target (a whole doctor run per example): fewer examples than the profile's."""
    if settings.get_current_profile_name() != "long":
        return settings(max_examples=ci)
    return settings(max_examples=max(1, long * settings().max_examples // 1500))


def summary_lines(tried: dict[str, int], verbose: bool = False, width: int = 100) -> list[str]:
    """The fuzz line of pytest's summary: the total on one short line; every target (a line each) only with -v, so
    the pass count is never preceded by one line of several KB."""
    if not tried:
        return []
    head = f"fuzz: {sum(tried.values())} generated inputs tried over {len(tried)} targets"
    if not verbose:
        return [head + " (-v lists them)"]
    return [head + ":"] + [f"  {name} {count}"[:width] for name, count in sorted(tried.items())]
