"""Search on PostgreSQL: ``tsvector`` rows from the library's token stream, ``tsquery`` translation.

Index. A message's searchable text (:func:`text.searchable_text`) becomes its index tokens
(:func:`text.index_tokens`, the CJK-aware stream every backend uses), written as an explicit
``tsvector`` literal — each token a quoted lexeme with its positions — and cast on the server,
so PostgreSQL's parser and dictionaries never see the text (its default parser mangles CJK).
A ``tsvector`` has limits: positions stop at 16,383, a lexeme keeps at most 256 positions, a
lexeme is under 2 KB and the whole value under 1 MB. :func:`documents` therefore cuts a long
token stream into *chunks* within those limits (one row each) and truncates tokens longer than
:data:`LEXEME_CHARS` characters. Such a message is stored with ``exact = false``.

Translation. :func:`text.parse_query` gives an AND of clauses (each an OR of phrases) plus
excluded phrases. A phrase ``t1 t2 t3*`` is ``('t1' <-> 't2' <-> 't3':*)``; every clause and the
exclusion are parenthesised, since ``tsquery`` has its own precedence::

    docker staging OR binary -helm  →  ('docker') & ('staging' | 'binary') & !('helm')

On rows with ``exact = true`` this is exact (positions are the stream's positions). Rows with
``exact = false`` are matched by a looser query — any first token of the first clause's phrases
— and every such candidate is re-checked with the shared matcher (:meth:`text.Query.matches`)
on the message's full text, so long messages are found exactly like short ones, however long.

Ranking (``order="rank"``): ``ts_rank_cd(tsv, q, 1)`` — cover density of the positive part of
the query, divided by ``1 + log(length)`` — so a message dense in the terms outranks one that
mentions them once among many words; ties go to the newer message. For a long message the
score is the best of its chunks. Scores are comparable only within one result list.

Filters are SQL conditions on the joined message and session rows; snippets and match offsets
are built by :func:`text.make_snippet` from the original text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from hermes_sessions import text
from hermes_sessions.backends import sqlscan
from hermes_sessions.backends.postgres._rows import (
    POSTGRES,
    SESSION_COLUMNS,
    message_from_row,
    record_from_row,
)
from hermes_sessions.backends.rules import make_hit

if TYPE_CHECKING:
    import psycopg

    from hermes_sessions.backends.postgres._pool import Connections
    from hermes_sessions.models import Message, SessionRecord
    from hermes_sessions.queries import SearchHit, SearchQuery

__all__ = [
    "LEXEME_CHARS",
    "MAX_POSITION",
    "documents",
    "exact_tsquery",
    "loose_tsquery",
    "search",
]

LEXEME_CHARS: Final = 500
"""Tokens longer than this (in characters, so at most 2,000 bytes) are stored truncated."""
MAX_POSITION: Final = 16_383
"""The last position a ``tsvector`` can hold."""
MAX_LEXEME_POSITIONS: Final = 256
"""How many positions a ``tsvector`` keeps per lexeme."""
CHUNK_BYTES: Final = 512 * 1024
"""Estimated size at which a chunk is closed (a ``tsvector`` must stay under 1 MB)."""


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _literal(lexemes: dict[str, list[int]]) -> str:
    return " ".join(
        f"{_quote(lexeme)}:{','.join(map(str, positions))}" for lexeme, positions in lexemes.items()
    )


def documents(searchable: str) -> list[tuple[bool, str]]:
    """The ``(exact, tsvector literal)`` chunks of a message's searchable text.

    >>> documents("飞书 bot")
    [(True, "'飞书':1 '书':2 'bot':3")]
    >>> documents("")
    []
    """
    chunks: list[dict[str, list[int]]] = []
    current: dict[str, list[int]] = {}
    position = size = 0
    exact = True
    for token in text.index_tokens(searchable):
        lexeme = token
        if len(token) > LEXEME_CHARS:
            lexeme = token[:LEXEME_CHARS]
            exact = False
        positions = current.get(lexeme)
        cost = 2 if positions is not None else len(lexeme.encode()) + 10
        if (
            position == MAX_POSITION
            or (positions is not None and len(positions) == MAX_LEXEME_POSITIONS)
            or size + cost > CHUNK_BYTES
        ):
            chunks.append(current)
            current, positions, position, size = {}, None, 0, 0
            cost = len(lexeme.encode()) + 10
        position += 1
        size += cost
        if positions is None:
            current[lexeme] = [position]
        else:
            positions.append(position)
    if current:
        chunks.append(current)
    exact = exact and len(chunks) == 1
    return [(exact, _literal(chunk)) for chunk in chunks]


# -- query translation -----------------------------------------------------------------------------


def _pattern(pattern: text.TokenPattern) -> str:
    return _quote(pattern.text) + (":*" if pattern.prefix else "")


def _storable(phrase: text.Phrase) -> bool:
    return all(len(pattern.text) <= LEXEME_CHARS for pattern in phrase.patterns)


def _phrase(phrase: text.Phrase) -> str:
    return "(" + " <-> ".join(_pattern(pattern) for pattern in phrase.patterns) + ")"


def exact_tsquery(query: text.Query, *, excluded: bool = True) -> str | None:
    """The ``tsquery`` of a parsed, non-empty query on exact rows (``None``: none can match).

    A phrase with a token longer than :data:`LEXEME_CHARS` cannot occur in an exact row (those
    hold no such token), so it drops out; a clause left without phrases matches nothing.

    >>> exact_tsquery(text.parse_query("docker staging OR binary -helm"))
    "(('docker')) & (('staging') | ('binary')) & !(('helm'))"
    >>> exact_tsquery(text.parse_query("飞书 dock*"))
    "(('飞书')) & (('dock':*))"
    """
    parts = []
    for clause in query.clauses:
        phrases = [_phrase(phrase) for phrase in clause.phrases if _storable(phrase)]
        if not phrases:
            return None
        parts.append("(" + " | ".join(phrases) + ")")
    kept = [_phrase(phrase) for phrase in query.excluded if _storable(phrase)]
    if excluded and kept:
        parts.append("!(" + " | ".join(kept) + ")")
    return " & ".join(parts)


def loose_tsquery(query: text.Query) -> str:
    """A ``tsquery`` every inexact row of a matching message satisfies in some chunk.

    Any first token of the first clause's phrases (truncated like stored tokens): every matching
    message contains one of those phrases, so one of its chunks holds that first token.

    >>> loose_tsquery(text.parse_query("docker-compose OR helm redis"))
    "'docker' | 'helm'"
    """
    options = []
    for phrase in query.clauses[0].phrases:
        first = phrase.patterns[0]
        prefix = first.prefix or len(first.text) > LEXEME_CHARS
        options.append(_quote(first.text[:LEXEME_CHARS]) + (":*" if prefix else ""))
    return " | ".join(dict.fromkeys(options))


# -- running a search ------------------------------------------------------------------------------


_ORDER: Final = {
    "rank": "score DESC, m.timestamp DESC NULLS LAST, m.session_seq DESC, m.id DESC",
    "newest": "m.timestamp DESC NULLS LAST, m.session_seq DESC, m.id DESC",
    "oldest": "m.timestamp ASC NULLS FIRST, m.session_seq, m.id",
}

_PAIRS: Final = "(m.session_seq, m.id) IN (SELECT * FROM unnest(%s::bigint[], %s::bigint[]))"


def _candidates_sql(
    pool: Connections, query: SearchQuery, parsed: text.Query
) -> tuple[str, list[Any]]:
    exact = exact_tsquery(parsed)
    loose = loose_tsquery(parsed)
    if exact is None:
        params: list[Any] = [loose, loose, loose]
        match = "(NOT t.exact AND t.tsv @@ %s::tsquery)"
    else:
        params = [exact_tsquery(parsed, excluded=False), loose, exact, loose]
        match = "((t.exact AND t.tsv @@ %s::tsquery) OR (NOT t.exact AND t.tsv @@ %s::tsquery))"
    where = [match, *sqlscan.search_filters(POSTGRES, query, params)]
    sql = (
        "SELECT m.session_seq, m.id, bool_and(t.exact), "
        "max(ts_rank_cd(t.tsv, CASE WHEN t.exact THEN %s::tsquery ELSE %s::tsquery END, 1)) "
        "AS score FROM {s}.message_text AS t "
        "JOIN {s}.messages AS m ON m.session_seq = t.session_seq AND m.id = t.message_id "
        "JOIN {s}.sessions AS s ON s.seq = m.session_seq WHERE "
        + " AND ".join(where)
        + " GROUP BY m.session_seq, m.id ORDER BY "
        + _ORDER[query.order]
        + " LIMIT %s"
    )
    return pool.q(sql), params


def _recheck(
    pool: Connections,
    connection: psycopg.Connection[Any],
    pairs: list[tuple[int, int]],
    parsed: text.Query,
) -> dict[tuple[int, int], bool]:
    """Whether each inexact candidate really matches (the shared matcher on its whole text)."""
    rows = connection.execute(
        pool.q(
            f"SELECT m.session_seq, m.id, m.active, m.body FROM {{s}}.messages AS m WHERE {_PAIRS}"
        ),
        ([seq for seq, _ in pairs], [mid for _, mid in pairs]),
    ).fetchall()
    verdicts = {}
    single = len(parsed.clauses) == 1 and not parsed.excluded
    for seq, message_id, active, body in rows:
        message = message_from_row((message_id, active, body), "unused")
        searchable = text.searchable_text(message)
        if single and text.match_window(searchable, parsed) is not None:
            verdicts[seq, message_id] = True  # a window proves a one-clause query: bounded
            continue
        verdicts[seq, message_id] = parsed.matches(text.Document.from_text(searchable))
    return verdicts


def search(
    pool: Connections,
    connection: psycopg.Connection[Any],
    query: SearchQuery,
    *,
    current: bool = True,
) -> list[SearchHit]:
    """Run ``query`` (one consistent read on ``connection``).

    Unless the ``message_text`` rows hold the ``current`` token stream, every message passing
    the filters is checked with the shared matcher instead (exact, slower: until a re-index).
    """
    parsed = text.parse_query(query.text)
    if parsed.is_empty:
        return []
    if not current:
        return _scan(pool, connection, query, parsed)
    sql, params = _candidates_sql(pool, query, parsed)
    need = None if query.limit is None else query.offset + query.limit
    fetch = need
    verdicts: dict[tuple[int, int], bool] = {}
    while True:
        rows = connection.execute(sql, [*params, fetch]).fetchall()
        unchecked = [(r[0], r[1]) for r in rows if not r[2] and (r[0], r[1]) not in verdicts]
        if unchecked:
            verdicts.update(_recheck(pool, connection, unchecked, parsed))
        accepted = [(r[0], r[1], float(r[3])) for r in rows if r[2] or verdicts.get((r[0], r[1]))]
        if need is None or fetch is None or len(accepted) >= need or len(rows) < fetch:
            break
        fetch = 2 * fetch + (len(rows) - len(accepted))
    page = accepted[query.offset : need]
    return _hits(pool, connection, page, parsed)


def _hits(
    pool: Connections,
    connection: psycopg.Connection[Any],
    page: list[tuple[int, int, float]],
    parsed: text.Query,
) -> list[SearchHit]:
    """Load the messages and sessions of the page and build the hits (snippets from ``text``)."""
    if not page:
        return []
    rows = connection.execute(
        pool.q(
            f"SELECT m.session_seq, m.id, m.active, m.body, {SESSION_COLUMNS} "
            f"FROM {{s}}.messages AS m JOIN {{s}}.sessions AS s ON s.seq = m.session_seq "
            f"WHERE {_PAIRS}"
        ),
        ([seq for seq, _, _ in page], [mid for _, mid, _ in page]),
    ).fetchall()
    loaded: dict[tuple[int, int], tuple[Message, SessionRecord]] = {}
    records: dict[int, SessionRecord] = {}
    for row in rows:
        record = records.get(row[0])
        if record is None:
            record = records[row[0]] = record_from_row(row[4:])
        loaded[row[0], row[1]] = (message_from_row(row[1:4], record.id), record)
    hits = []
    for seq, message_id, score in page:
        message, record = loaded[seq, message_id]
        hits.append(make_hit(message, record, score, parsed))
    return hits


def _scan(
    pool: Connections, connection: psycopg.Connection[Any], query: SearchQuery, parsed: text.Query
) -> list[SearchHit]:
    """Search without the index: the shared matcher and BM25 over every filtered message."""
    sql, params = sqlscan.scan(POSTGRES, query)
    return sqlscan.scan_hits(POSTGRES, connection.execute(pool.q(sql), params), query, parsed)
