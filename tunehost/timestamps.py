"""The one parser for stored times: a results store's `created`, a snapshot manifest's, a bench result's.

They are written as ISO 8601 in UTC ("2026-03-02T10:00:00Z", a snapshot's "2026-11-26T21:26:21+0000"), but a
store or snapshot is hostile input: anything else is None, never an exception.
"""

from __future__ import annotations

from datetime import datetime, timezone

MAX_CHARS = 40  # the longest form below is 32 characters ("2026-03-02T10:00:00.123456+00:00")
FORMATS = ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M",
           "%Y-%m-%d %H:%M", "%Y-%m-%d")


def epoch_seconds(text: object) -> float | None:
    """Seconds since 1970 (UTC) of a stored time; a time without a zone is UTC. None when it is not one."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    text = text.strip()
    for fmt in FORMATS:
        try:
            parsed = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return _utc(parsed).timestamp()
    try:
        return _utc(datetime.fromisoformat(text)).timestamp()
    except ValueError:
        return None


def _utc(parsed: datetime) -> datetime:
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
