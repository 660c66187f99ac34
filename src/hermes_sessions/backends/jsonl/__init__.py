"""JSONLBackend: human-readable files, one per session, shared safely by several processes.

The backend class lives in ``_backend``; the engine that keeps the directory in memory and
writes it in ``_engine``; record formats in ``_format``, file primitives in ``_io``, the journal in
``_journal``, the in-memory state in ``_state`` and ``repair()`` in ``_repair``.
"""

from __future__ import annotations

from hermes_sessions.backends.jsonl._backend import DroppedLine, JSONLBackend, RepairReport

__all__ = ["DroppedLine", "JSONLBackend", "RepairReport"]
