"""Search without an index in the SQL backends: a search's filters and the scan, written once.

A SQL backend searches with its own full-text index (SQLite's FTS5, PostgreSQL's ``tsvector``
rows) when it can; when it cannot (no FTS5, an index of an older token stream, a query the index
cannot narrow) it reads every message passing the filters and checks each with the shared
matcher (:mod:`hermes_sessions.text`), which is what every backend matches. Both statements are
written here in a :class:`~hermes_sessions.backends.sqlrows.SQLDialect`.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_sessions import text
from hermes_sessions.backends.rules import rank_hits
from hermes_sessions.backends.sqlrows import message_from_row, session_columns

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from hermes_sessions.backends.sqlrows import SQLDialect
    from hermes_sessions.models import Message, SessionRecord
    from hermes_sessions.queries import SearchHit, SearchQuery

__all__ = ["scan", "scan_hits", "search_filters"]


def search_filters(dialect: SQLDialect, query: SearchQuery, params: list[Any]) -> list[str]:
    """SQL conditions on ``messages AS m`` and ``sessions AS s`` for every search filter."""
    where = dialect.session_filters(query, params)
    if not query.include_inactive:
        where.append(dialect.active)
    if query.roles is not None:
        where.append(dialect.in_list("m.role", query.roles, params))
    if query.since is not None or query.until is not None:
        where.append("m.timestamp IS NOT NULL")
    for bound, value in ((">=", query.since), ("<", query.until)):
        if value is not None:
            where.append(f"m.timestamp {bound} {dialect.mark}")
            params.append(dialect.to_time(value))
    if query.session_ids is not None:
        where.append(dialect.in_list("s.id", query.session_ids, params))
    if query.exclude_session_ids:
        where.append(dialect.in_list("s.id", query.exclude_session_ids, params, negate=True))
    return where


def scan(dialect: SQLDialect, query: SearchQuery) -> tuple[str, list[Any]]:
    """The SQL of a search without an index: every message passing the filters.

    Each row is the message's :data:`~.sqlrows.MESSAGE_FIELDS`, then its session's
    :data:`~.sqlrows.SESSION_FIELDS`; :func:`scan_hits` scores them.
    """
    params: list[Any] = []
    where = search_filters(dialect, query, params)
    sql = (
        f"SELECT m.id, m.active, m.body, {session_columns()} FROM {dialect.tables}messages AS m "  # noqa: S608
        f"{dialect.join} {dialect.tables}sessions AS s ON s.seq = m.session_seq"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql, params


def scan_hits(
    dialect: SQLDialect, rows: Iterable[Sequence[Any]], query: SearchQuery, parsed: text.Query
) -> list[SearchHit]:
    """The hits of a scan's rows: the shared matcher and BM25 over every message."""
    index = text.SearchIndex()
    messages: list[Message] = []
    records: dict[str, SessionRecord] = {}
    for row in rows:
        record = records.get(row[3])
        if record is None:
            record = records[row[3]] = dialect.record_from_row(row[3:])
        messages.append(message_from_row(row, record.id))
        index.add(len(messages) - 1, text.searchable_text(messages[-1]))
    scored = [(messages[doc], score) for doc, score in index.search(parsed)]
    return rank_hits(scored, query, parsed, records.__getitem__)
