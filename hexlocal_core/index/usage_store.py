"""Usage events in SQLite: the UsageSink adapters write to, and the reader for reports."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

from hexlocal_core.index.db import Connected, atomic
from hexlocal_core.model import UsageEvent

log = logging.getLogger("hexlocal.usage")


class StoreUsageSink:
    """Records every model call; a failed write is logged, never raised into the caller."""

    def __init__(self, store: Connected) -> None:
        self.store = store

    def record(self, event: UsageEvent) -> None:
        at = event.at or datetime.now(UTC)
        try:
            with atomic(self.store.conn) as conn:
                conn.execute(
                    "INSERT INTO usage_events(at, model, kind, prompt_tokens, completion_tokens,"
                    " total_tokens, success, local) VALUES (?,?,?,?,?,?,?,?)",
                    (
                        at.astimezone(UTC).isoformat(timespec="microseconds"),
                        event.model,
                        event.kind,
                        event.prompt_tokens,
                        event.completion_tokens,
                        event.total_tokens,
                        int(event.success),
                        int(event.local),
                    ),
                )
        except Exception:  # noqa: BLE001 - accounting must not break a search
            log.exception("could not record a usage event")

    def events(self, start: date, end: date) -> list[UsageEvent]:
        """Events from the start of `start` to the end of `end` (UTC days, inclusive)."""
        lo = datetime.combine(start, datetime.min.time(), UTC).isoformat(timespec="microseconds")
        hi = datetime.combine(end + timedelta(days=1), datetime.min.time(), UTC).isoformat(
            timespec="microseconds"
        )
        out = []
        for at, model, kind, prompt, completion, success, local in self.store.conn.execute(
            "SELECT at, model, kind, prompt_tokens, completion_tokens, success, local"
            " FROM usage_events WHERE at >= ? AND at < ? ORDER BY at",
            (lo, hi),
        ):
            out.append(
                UsageEvent(
                    model=model,
                    kind=kind,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    success=bool(success),
                    local=bool(local),
                    at=datetime.fromisoformat(at),
                )
            )
        return out
