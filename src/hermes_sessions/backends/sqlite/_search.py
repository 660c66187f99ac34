"""Search on SQLite: the FTS5 translation of the query language, and the three search plans.

Translation. :func:`hermes_sessions.text.parse_query` gives a normal form: an AND of clauses, each
an OR of phrases, plus excluded phrases. Each phrase is exactly the FTS5 phrase of its tokens
(``"t1 t2"``, with ``*`` after it when the last token is a prefix). FTS5 binds ``OR`` looser than
``AND`` (the reverse of our language), so every clause and the exclusion are parenthesised::

    docker staging OR binary -helm  →  (("docker") AND ("staging" OR "binary")) NOT ("helm")

With the token stream stored in the FTS5 table (``text.index_tokens``, space-joined, ``ascii``
tokenizer) this translation is exact — a test compares it with :meth:`text.Query.matches` on
random documents and queries — so FTS5 results need no re-check. Without FTS5 every candidate
is checked with the shared matcher instead.

Plans (all filters are SQL conditions on the joined message and session rows):

* ``rank``: FTS5 computes ``bm25()`` for every match and returns them best first
  (``ORDER BY rank``); the join with the filters stops at ``offset + limit`` accepted rows.
  The cost grows with the number of matches (about 2.5 µs each).
* ``newest``/``oldest`` with a limit: walk the matches in id order (``ORDER BY rowid``, a
  stream that FTS5 reads straight from its index) and stop as soon as no unseen message can
  beat the page: ``message_blocks`` keeps the time range of every block of 4,096 ids, so the
  newest time among all lower ids is known. Messages appended in time order make this stop
  after the first page of hits, however many messages match.
* without a limit: every hit, ordered by SQL.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from hermes_sessions import text
from hermes_sessions.backends import sqlscan
from hermes_sessions.backends.rules import make_hit
from hermes_sessions.backends.sqlite._clauses import CHUNK, in_list
from hermes_sessions.backends.sqlite._messages import MESSAGE_COLUMNS
from hermes_sessions.backends.sqlite._rows import SQLITE, message_from_row, record_from_row
from hermes_sessions.backends.sqlite._schema import BLOCK_SHIFT, FTS_TABLE, NO_TIME
from hermes_sessions.backends.sqlite._sessions import SESSION_COLUMNS

if TYPE_CHECKING:
    import sqlite3

    from hermes_sessions.models import SessionRecord
    from hermes_sessions.queries import SearchHit, SearchQuery

__all__ = ["fts_query", "search"]


def _phrase(phrase: text.Phrase) -> str:
    tokens = " ".join(token.replace('"', '""') for token in phrase.tokens)
    return f'"{tokens}"' + ("*" if phrase.prefix else "")


def _any(phrases: tuple[text.Phrase, ...]) -> str:
    return "(" + " OR ".join(_phrase(phrase) for phrase in phrases) + ")"


def fts_query(query: text.Query) -> str:
    """The FTS5 ``MATCH`` string of a parsed, non-empty query.

    >>> fts_query(text.parse_query("docker staging OR binary -helm"))
    '(("docker") AND ("staging" OR "binary")) NOT ("helm")'
    >>> fts_query(text.parse_query("飞书 dock*"))
    '(("飞书") AND ("dock"*))'
    """
    positive = "(" + " AND ".join(_any(clause.phrases) for clause in query.clauses) + ")"
    if not query.excluded:
        return positive
    return f"{positive} NOT {_any(query.excluded)}"


def search(connection: sqlite3.Connection, query: SearchQuery, *, fts: bool) -> list[SearchHit]:
    """Run ``query`` inside the caller's read transaction."""
    parsed = text.parse_query(query.text)
    if parsed.is_empty:
        return []
    if not fts:
        return _scan(connection, query, parsed)
    params: list[Any] = [fts_query(parsed)]
    where = ["f.messages_fts MATCH ?", *sqlscan.search_filters(SQLITE, query, params)]
    source = (
        f"FROM {FTS_TABLE} AS f CROSS JOIN messages AS m ON m.id = f.rowid "
        "CROSS JOIN sessions AS s ON s.seq = m.session_seq WHERE " + " AND ".join(where)
    )
    loaded = f"{MESSAGE_COLUMNS}, m.session_seq"
    if query.order == "rank":
        # FTS5 returns matches best first (no sort), so the message columns cost only the rows
        # the join reads before the limit; the hits need no second statement.
        sql = f"SELECT {loaded}, -f.rank {source} ORDER BY f.rank LIMIT ? OFFSET ?"
        limit = -1 if query.limit is None else query.limit
        rows = connection.execute(sql, [*params, limit, query.offset]).fetchall()
    elif query.limit is None:
        direction = "DESC" if query.order == "newest" else "ASC"
        sql = (
            f"SELECT {loaded}, 0.0 {source} ORDER BY coalesce(m.timestamp, {NO_TIME}) "
            f"{direction}, m.id {direction} LIMIT -1 OFFSET ?"
        )
        rows = connection.execute(sql, [*params, query.offset]).fetchall()
    else:
        rows = _load(connection, _walk(connection, source, params, query))
    return _hits(connection, rows, parsed)


def _bounds(connection: sqlite3.Connection, *, newest: bool) -> dict[int, int]:
    """Block → the newest (or oldest) message time in it and every block below (above) it."""
    rows = connection.execute(
        "SELECT block, max_ts, min_ts FROM message_blocks ORDER BY block"
    ).fetchall()
    bounds: dict[int, int] = {}
    if newest:
        best = NO_TIME
        for block, high, _low in rows:
            best = max(best, high)
            bounds[block] = best
    else:
        best = -NO_TIME
        for block, _high, low in reversed(rows):
            best = min(best, low)
            bounds[block] = best
    return bounds


def _walk(
    connection: sqlite3.Connection, source: str, params: list[Any], query: SearchQuery
) -> list[tuple[int, float]]:
    """The ``offset + limit`` newest (oldest) hits, walking matches in id order from the end."""
    assert query.limit is not None  # noqa: S101  # callers handle limit=None
    newest = query.order == "newest"
    need = query.offset + query.limit
    bounds = _bounds(connection, newest=newest)
    sign = 1 if newest else -1
    direction = "DESC" if newest else "ASC"
    sql = f"SELECT m.id, coalesce(m.timestamp, {NO_TIME}) {source} ORDER BY f.rowid {direction}"
    # A heap of the best ``need`` hits seen so far, worst on top; keys are (time, id) signed so
    # that larger is better for both orders. Unseen rows have ids beyond the current one, so
    # they lose every tie; they can only win with a better time, which the bound excludes.
    kept: list[tuple[int, int]] = []
    block = None
    bound = 0
    for message_id, moment in connection.execute(sql, params):
        if message_id >> BLOCK_SHIFT != block:
            block = message_id >> BLOCK_SHIFT
            bound = sign * bounds.get(block, -sign * NO_TIME)
        if len(kept) == need and kept[0][0] >= bound:
            break
        key = (sign * moment, sign * message_id)
        if len(kept) < need:
            heapq.heappush(kept, key)
        elif key > kept[0]:
            heapq.heapreplace(kept, key)
    ordered = sorted(kept, reverse=True)[query.offset :]
    return [(sign * signed_id, 0.0) for _time, signed_id in ordered]


def _load(connection: sqlite3.Connection, scored: list[tuple[int, float]]) -> list[Any]:
    """The message rows (``MESSAGE_COLUMNS``, session seq, score) of ``(id, score)`` pairs."""
    rows: dict[int, Any] = {}
    ids = [message_id for message_id, _score in scored]
    for start in range(0, len(ids), CHUNK):
        params: list[Any] = []
        sql = f"SELECT {MESSAGE_COLUMNS}, m.session_seq FROM messages AS m WHERE " + in_list(
            "m.id", ids[start : start + CHUNK], params
        )
        for row in connection.execute(sql, params):
            rows[row[0]] = row
    return [(*rows[message_id], score) for message_id, score in scored]


def _hits(connection: sqlite3.Connection, rows: list[Any], parsed: text.Query) -> list[SearchHit]:
    """Build the hits of message rows (``MESSAGE_COLUMNS``, session seq, score), in order.

    The sessions are read in their own statement (in chunks), so a session's row is read and
    decoded once however many of its messages are hits; snippets are cut when read.
    """
    seqs = list(dict.fromkeys(row[3] for row in rows))
    records: dict[int, SessionRecord] = {}
    for start in range(0, len(seqs), CHUNK):
        params: list[Any] = []
        sql = f"SELECT s.seq, {SESSION_COLUMNS} FROM sessions AS s WHERE " + in_list(
            "s.seq", seqs[start : start + CHUNK], params
        )
        for row in connection.execute(sql, params):
            records[row[0]] = record_from_row(row[1:])
    hits = []
    for row in rows:
        record = records[row[3]]
        hits.append(make_hit(message_from_row(row, record.id), record, row[4], parsed))
    return hits


def _scan(
    connection: sqlite3.Connection, query: SearchQuery, parsed: text.Query
) -> list[SearchHit]:
    """Search without FTS5: every message passing the filters is checked by the shared matcher."""
    sql, params = sqlscan.scan(SQLITE, query)
    return sqlscan.scan_hits(SQLITE, connection.execute(sql, params), query, parsed)
