"""`tunehost history`'s read of the results store: the recorded runs, newest first, and (for --json, streamed by
:func:`each_run`) the rounds of each as the host watch saw them. Returns data; tunehost/cli/history.py renders it.

The store is read as hostile (tunehost.store.rows): a row that is not a valid run is left out with its reason,
which the listing carries for the CLI to show once. Memory is bounded: the text listing keeps only the summary
keys it shows (SHOWN_KEYS); the JSON listing is a stream of one run (and its rounds) at a time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.store import Store, StoredRound, StoredRun

# what the text listing shows of a run's summary (tunehost.cli.history._result, StoredRun.tg)
SHOWN_KEYS = ("best", "confirmation", "improved", "winner", "reused_steps", "stopped", "disturbed",
              "discarded_rounds", "verdict", "verdicts", "rounds")


@dataclass(frozen=True)
class RunListing:
    store: Path  # the store's file, for messages
    runs: list["StoredRun"]
    skipped: list[str] = field(default_factory=list)  # one line per stored row left out (a run or a result)


@dataclass(frozen=True)
class ListedRun:
    """One item of :func:`each_run`: a valid run and its rounds, or the reason a stored row was left out."""

    run: "StoredRun | None"
    rounds: tuple[list["StoredRound"], list[str]] = ([], [])
    skipped: str | None = None


def list_runs(store: "Store", *, model_hash: str | None = None, command: str | None = None,
              limit: int = 30) -> RunListing:
    """The newest ``limit`` runs (of one model by its hash, of one command), their summaries cut to what the
    text listing shows."""
    runs, skipped = store.run_rows(model_hash=model_hash, command=command, limit=limit, keep=SHOWN_KEYS)
    return RunListing(Path(store.path), runs, skipped)


def each_run(store: "Store", *, model_hash: str | None = None, command: str | None = None,
             limit: int = 30) -> Iterator[ListedRun]:
    """The newest ``limit`` runs whole, each with its rounds, one at a time (`history --json` streams them)."""
    for run, why in store.iter_runs(model_hash=model_hash, command=command, limit=limit):
        if run is None:
            yield ListedRun(None, skipped=why)
        else:
            yield ListedRun(run, store.round_rows(run.id))
