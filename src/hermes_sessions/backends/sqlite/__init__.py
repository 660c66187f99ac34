"""SQLiteBackend: the embedded default. One ``state.db`` in WAL mode, FTS5 search, many processes.

The backend class lives in ``_backend``; its connection manager in ``_connections``; the schema and
migrations in ``_schema``; SQL only in the statement modules; row conversions in ``_rows``.
"""

from __future__ import annotations

from hermes_sessions.backends.sqlite._backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
