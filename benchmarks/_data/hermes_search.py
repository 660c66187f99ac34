"""An emulation of Hermes's own message search, as the baseline of ``benchmarks/search.py``.

Hermes keeps messages in a SQLite ``state.db`` with two FTS5 tables over the text (plus tool
name and tool calls) of every message: one with the default ``unicode61`` tokenizer and one
with the ``trigram`` tokenizer, both filled by triggers (the schema of the fixture in
``/work/shared/fixtures/hermes-profile-a``). Its search, as this module does it:

- the query is made safe for FTS5: quoted phrases kept, FTS5 punctuation dropped, a leading
  ``*`` or a dangling ``AND``/``OR``/``NOT`` removed, terms with ``-`` or ``.`` quoted;
- a query with Chinese, Japanese or Korean text goes to the trigram table when every term has
  at least three characters (the trigram tokenizer cannot match shorter ones), and otherwise to
  a ``LIKE '%term%'`` scan of the messages, newest first;
- the FTS5 query joins the messages and sessions, filters by role and source, orders by
  ``rank`` and computes FTS5's ``snippet()`` in SQL (40 tokens, ``>>>``/``<<<``);
- every hit then gets its context: the message before and after it in its session (one query
  per hit, contents cut to 200 characters).

This is written from a description of that behaviour, not from Hermes's code; it exists to put
a same-run baseline of the same work beside the store's search.
"""

from __future__ import annotations

import re
import sqlite3
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["build_hermes", "hermes_search"]

_SCHEMA = """
PRAGMA journal_mode = WAL;
PRAGMA synchronous = OFF;
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT,
    started_at REAL NOT NULL, ended_at REAL, title TEXT
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL,
    active INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE VIRTUAL TABLE messages_fts USING fts5(content);
CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, tokenize='trigram');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' '
        || COALESCE(new.tool_calls, ''));
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' '
        || COALESCE(new.tool_calls, ''));
END;
"""

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_PHRASE = re.compile(r'"[^"]*"')
_SPECIAL = re.compile(r'[+{}()"^]')
_OPERATORS = {"AND", "OR", "NOT"}
_SELECT = (
    "SELECT m.id, m.session_id, m.role, {snippet} AS snippet, m.content, m.timestamp, "
    "m.tool_name, s.source, s.model, s.started_at"
)


def build_hermes(
    path: Path, sessions: Iterator[tuple[int, str, list[tuple[str, str, Any]]]]
) -> float:
    """Write ``sessions`` (``Corpus.sessions`` rows) into a Hermes-shaped database; seconds.

    Built without fsync (``synchronous = OFF``): it is a fixture, and only its reads are timed.
    """
    started = time.perf_counter()
    connection = sqlite3.connect(path)
    try:
        connection.executescript(_SCHEMA)
        for number, source, rows in sessions:
            session_id = f"s{number:07d}"
            connection.execute(
                "INSERT INTO sessions (id, source, user_id, started_at) VALUES (?, ?, ?, ?)",
                (session_id, source, f"u{number % 97}", rows[0][2].timestamp()),
            )
            connection.executemany(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                [(session_id, role, body, at.timestamp()) for role, body, at in rows],
            )
            if number % 2000 == 0:
                connection.commit()
        connection.commit()
    finally:
        connection.close()
    return time.perf_counter() - started


def _sanitize(query: str) -> str:
    """The query made safe for FTS5 (phrases kept, punctuation and dangling operators dropped)."""
    phrases = _PHRASE.findall(query)
    rest = _SPECIAL.sub(" ", _PHRASE.sub(" ", query))
    rest = re.sub(r"\*+", "*", rest)
    terms = [term.lstrip("*") for term in rest.split()]
    terms = [f'"{term}"' if ("-" in term or "." in term) else term for term in terms if term]
    while terms and terms[0] in _OPERATORS:
        terms.pop(0)
    while terms and terms[-1] in _OPERATORS:
        terms.pop()
    return " ".join([*phrases, *terms]).strip()


def _filters(roles: tuple[str, ...], excluded: tuple[str, ...]) -> tuple[str, list[str]]:
    where = " AND m.role IN ({})".format(",".join("?" * len(roles)))
    where += " AND s.source NOT IN ({})".format(",".join("?" * len(excluded)))
    return where, [*roles, *excluded]


def _like_snippet(content: str, term: str) -> str:
    at = content.find(term)
    low, high = max(0, at - 40), min(len(content), at + len(term) + 40)
    marked = content[low:at] + ">>>" + term + "<<<" + content[at + len(term) : high]
    return ("..." if low else "") + marked + ("..." if high < len(content) else "")


def hermes_search(
    connection: sqlite3.Connection,
    query: str,
    *,
    limit: int,
    roles: tuple[str, ...] = ("user", "assistant"),
    exclude_sources: tuple[str, ...] = ("tool", "subagent"),
) -> list[dict[str, Any]]:
    """Search like Hermes: FTS5 (or trigram, or ``LIKE`` for short CJK terms), then context."""
    cleaned = _sanitize(query)
    if not cleaned:
        return []
    where, params = _filters(roles, exclude_sources)
    if _CJK.search(cleaned):
        terms = [term.strip('"') for term in cleaned.split()]
        if all(len(term) >= 3 for term in terms):
            sql = (
                _SELECT.format(snippet="snippet(messages_fts_trigram, 0, '>>>', '<<<', '...', 40)")
                + " FROM messages_fts_trigram JOIN messages m ON m.id = messages_fts_trigram.rowid"
                " JOIN sessions s ON s.id = m.session_id WHERE messages_fts_trigram MATCH ?"
                + where
                + " ORDER BY rank LIMIT ?"
            )
            match = " ".join(f'"{term}"' for term in terms)
            rows = connection.execute(sql, [match, *params, limit]).fetchall()
        else:
            likes = " AND ".join("m.content LIKE ?" for _ in terms)
            sql = (
                _SELECT.format(snippet="NULL")
                + " FROM messages m JOIN sessions s ON s.id = m.session_id WHERE "
                + likes
                + where
                + " ORDER BY m.timestamp DESC LIMIT ?"
            )
            found = connection.execute(
                sql, [*(f"%{term}%" for term in terms), *params, limit]
            ).fetchall()
            rows = [(*row[:3], _like_snippet(row[4] or "", terms[0]), *row[4:]) for row in found]
    else:
        sql = (
            _SELECT.format(snippet="snippet(messages_fts, 0, '>>>', '<<<', '...', 40)")
            + " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " JOIN sessions s ON s.id = m.session_id WHERE messages_fts MATCH ?"
            + where
            + " ORDER BY rank LIMIT ?"
        )
        try:
            rows = connection.execute(sql, [cleaned, *params, limit]).fetchall()
        except sqlite3.OperationalError:
            return []  # Hermes answers an FTS5 syntax error with no results
    names = ("id", "session_id", "role", "snippet", "content", "timestamp", "tool_name")
    names += ("source", "model", "session_started")
    hits = []
    for row in rows:
        hit = dict(zip(names, row, strict=True))
        context = connection.execute(
            "SELECT role, content FROM messages WHERE session_id = ? AND id >= ? - 1 "
            "AND id <= ? + 1 ORDER BY id",
            (hit["session_id"], hit["id"], hit["id"]),
        ).fetchall()
        hit["context"] = [{"role": role, "content": (text or "")[:200]} for role, text in context]
        hit.pop("content")
        hits.append(hit)
    return hits
