r"""Bounded memory files shared by every session: ``MEMORY.md`` and ``USER.md``.

A memory file is a list of short entries joined by a line holding only ``§`` (the delimiter is
``"\n§\n"``). ``MEMORY.md`` (target ``"memory"``) holds the agent's own notes, ``USER.md`` (target
``"user"``) what it knows about the user. Each file has a character limit, counted on the entries
joined by the delimiter, so the files stay small enough to inject into every system prompt.

:class:`MemoryStore` reads the files once when it is created and keeps that *snapshot* for the
whole session, so the system prompt (and the provider's prompt cache) stays stable while the model
edits memory with :meth:`~MemoryStore.add`, :meth:`~MemoryStore.replace` and
:meth:`~MemoryStore.remove`. Writes are serialised across threads and processes by a lock on a
sidecar file (``MEMORY.md.lock``), re-read the file under the lock, and replace it atomically
(temporary file, fsync, rename, fsync of the directory): a reader sees the old file or the new
one, never a mixture, and a crash at any moment leaves one of the two.

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
from hermes_sessions.memory._scoped import DEFAULT_LANE_CHAR_LIMIT, ScopedMemory
from hermes_sessions.memory._scopes import (
    MEMORY_SCOPES,
    MemoryContext,
    MemoryEntry,
    MemoryEraseReport,
    MemoryScope,
    WrittenIn,
)
from hermes_sessions.memory._storage import SupportsMemory
from hermes_sessions.memory._store import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MEMORY_CHAR_LIMIT,
    DEFAULT_USER_CHAR_LIMIT,
    MemoryStore,
)

__all__ = [
    "DEFAULT_LANE_CHAR_LIMIT",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MEMORY_CHAR_LIMIT",
    "DEFAULT_USER_CHAR_LIMIT",
    "ENTRY_DELIMITER",
    "MEMORY_SCOPES",
    "MEMORY_TARGETS",
    "BlockedEntry",
    "MemoryContext",
    "MemoryEntry",
    "MemoryEraseReport",
    "MemoryResult",
    "MemoryScope",
    "MemorySnapshot",
    "MemoryStore",
    "ScopedMemory",
    "SupportsMemory",
    "TargetSnapshot",
    "WrittenIn",
    "entries_usage",
    "parse_entries",
    "render_entries",
]
