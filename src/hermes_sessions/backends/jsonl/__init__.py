"""JSONLBackend: human-readable files, one per session, shared safely by several processes.

The backend class users construct lives in ``_backend``; the engine that locks the directory,
catches up with it and writes it (``DirectoryEngine``) in ``_engine``; the session-file records
and the line encoding in ``_session_records``; the journal and routing-snapshot records in
``_journal``; reading and appending whole lines in ``_lines`` (files are created and replaced
through :mod:`hermes_sessions.files`); the in-memory cache and how records change it in
``_cache``; and ``repair()`` in ``_repair``.
"""

from __future__ import annotations

from hermes_sessions.backends.jsonl._backend import DroppedLine, JSONLBackend, RepairReport

__all__ = ["DroppedLine", "JSONLBackend", "RepairReport"]
