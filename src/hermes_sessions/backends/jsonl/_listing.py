"""The JSONL backend's session listing, served from the session summaries (no file is read)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.queries import SessionPage, SessionSummary

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hermes_sessions.backends.jsonl._cache import SessionFile
    from hermes_sessions.queries import SessionQuery

__all__ = ["summary_page"]


def summary_page(query: SessionQuery, sessions: Iterable[SessionFile]) -> SessionPage:
    """One page of ``list_sessions`` over the cached summaries (record and preview of each)."""
    by_id = {cached.record.id: cached for cached in sessions}
    records, cursor = query.page(cached.record for cached in by_id.values())
    return SessionPage(
        items=[SessionSummary(record=r, preview=by_id[r.id].preview) for r in records],
        next_cursor=cursor,
    )
