"""PostgresBackend: several gateway hosts sharing one PostgreSQL database (extra ``postgres``).

The backend class lives in ``_backend``; its pool, transactions and retries in ``_pool``; the
schema and migrations in ``_schema``; SQL only in the statement modules; row conversions in
``_rows``; the ``tsvector`` index and query translation in ``_search``; rewriting rows of an
older token stream in ``_reindex``.
"""

from __future__ import annotations

from hermes_sessions.backends.postgres._backend import DSN_VARIABLE, PostgresBackend

__all__ = ["DSN_VARIABLE", "PostgresBackend"]
