"""Helpers shared by the SQLite backend tests."""

from __future__ import annotations

import sqlite3

from hermes_sessions.queries import SearchQuery


def found(backend, text, **filters):
    """The contents of every hit of ``text`` over all roles and sources."""
    filters.setdefault("roles", None)
    filters.setdefault("exclude_sources", ())
    hits = backend.search(SearchQuery(text=text, limit=None, **filters))
    return sorted(str(hit.message.content) for hit in hits)


def raw(path):
    """A plain sqlite3 connection to the same file (closed by the caller)."""
    return sqlite3.connect(path, isolation_level=None)


def make_tokens_version_one(path):
    """Turn the database at ``path`` into one the library wrote before width folding.

    Its FTS5 rows get the version-1 stream (the same tokenizer without the fold), and ``meta``
    records that version, as a database of that version would.
    """
    from hermes_sessions.backends.sqlite._rows import message_from_row  # noqa: PLC0415
    from hermes_sessions.text import searchable_text  # noqa: PLC0415
    from hermes_sessions.text._tokens import folded_index_tokens  # noqa: PLC0415

    connection = raw(path)
    try:
        connection.execute("BEGIN IMMEDIATE")
        for row in connection.execute("SELECT id, active, body FROM messages").fetchall():
            tokens = folded_index_tokens(searchable_text(message_from_row(row, "unused")))
            connection.execute("DELETE FROM messages_fts WHERE rowid = ?", (row[0],))
            connection.execute(
                "INSERT INTO messages_fts (rowid, tokens) VALUES (?, ?)", (row[0], " ".join(tokens))
            )
        connection.execute("DELETE FROM meta WHERE name = 'reindexed_through'")
        connection.execute(
            "INSERT INTO meta (name, value) VALUES ('tokens_version', '1') "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
        )
        connection.execute("COMMIT")
    finally:
        connection.close()


def fts_rowids(path, match):
    """The rowids the FTS5 table itself returns for ``match`` (no fallback, no re-check)."""
    connection = raw(path)
    try:
        rows = connection.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid", (match,)
        ).fetchall()
    finally:
        connection.close()
    return [row[0] for row in rows]


def reindexed_through(path):
    """The ``reindexed_through`` mark of a re-index under way, or None."""
    connection = raw(path)
    try:
        row = connection.execute(
            "SELECT value FROM meta WHERE name = 'reindexed_through'"
        ).fetchone()
    finally:
        connection.close()
    return None if row is None else int(row[0])
