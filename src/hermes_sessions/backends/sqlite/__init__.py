"""SQLiteBackend: the embedded default. One ``state.db`` in WAL mode, FTS5 search, many processes.

Modules:

* ``_backend`` — :class:`SQLiteBackend`: its options, and each protocol method as one call into
  a statement module inside one transaction;
* ``_connections`` — one connection per thread, transactions, busy retries, WAL checkpoints;
* ``_group`` — group commit: the writes of threads queued during a commit share the next one;
* ``_batches`` — ``write_batch``: whole calls of the async store's writer in one commit;
* ``_sessions``, ``_entries``, ``_messages``, ``_leases``, ``_search`` — the SQL of each table
  (``_clauses``: the conditions they share), and ``_plan``, the rotation across them;
* ``_schema`` — migrations, the FTS5 table, integrity checks and upkeep;
* ``_reindex`` — the resumable batches that rewrite FTS5 rows of an older token stream;
* ``_rows`` — rows to models and back (no SQL).
"""

from __future__ import annotations

from hermes_sessions.backends.sqlite._backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
