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
