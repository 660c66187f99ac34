r"""Bounded memory files shared by every session: ``MEMORY.md`` and ``USER.md``.

:class:`MemoryStore` (locking and file I/O) lives in ``_store``; the entry format and the pure
planning of each change (add, replace, remove, drift detection, snapshots) in ``_format``.
See ``docs/memory.md`` for the format, the rules and the guarantees.
"""

from __future__ import annotations

from hermes_sessions.memory._format import (
    ENTRY_DELIMITER,
    MEMORY_TARGETS,
    BlockedEntry,
    MemoryResult,
    MemorySnapshot,
    TargetSnapshot,
    entries_usage,
    parse_entries,
    render_entries,
)
from hermes_sessions.memory._store import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MEMORY_CHAR_LIMIT,
    DEFAULT_USER_CHAR_LIMIT,
    MemoryStore,
)

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MEMORY_CHAR_LIMIT",
    "DEFAULT_USER_CHAR_LIMIT",
    "ENTRY_DELIMITER",
    "MEMORY_TARGETS",
    "BlockedEntry",
    "MemoryResult",
    "MemorySnapshot",
    "MemoryStore",
    "TargetSnapshot",
    "entries_usage",
    "parse_entries",
    "render_entries",
]
