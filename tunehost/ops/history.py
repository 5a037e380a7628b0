"""`tunehost history`'s read of the results store: the recorded runs, newest first, and (for --json) the rounds
of each as the host watch saw them. Returns data; tunehost/cli/history.py renders it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunehost.store import Store, StoredRound, StoredRun


@dataclass(frozen=True)
class RunListing:
    store: Path  # the store's file, for messages
    runs: list["StoredRun"]
    # run id -> (its valid rounds, one line per stored round row left out); only when asked for
    rounds: dict[int, tuple[list["StoredRound"], list[str]]] = field(default_factory=dict)


def list_runs(store: "Store", *, model_hash: str | None = None, command: str | None = None, limit: int = 30,
              with_rounds: bool = False) -> RunListing:
    """The newest ``limit`` runs (of one model by its hash, of one command), and their rounds ``with_rounds``."""
    runs = store.runs(model_hash=model_hash, command=command, limit=limit)
    rounds = {r.id: store.round_rows(r.id) for r in runs} if with_rounds else {}
    return RunListing(Path(store.path), runs, rounds)
