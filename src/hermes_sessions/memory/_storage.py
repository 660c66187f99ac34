"""Where scoped memory lives: files under a home, or a backend's database (``SupportsMemory``).

:class:`~hermes_sessions.memory.ScopedMemory` works on *raw entries* (stamps included) through one
of two storages with the same interface: :class:`FileStorage` (a bounded, locked, crash-safe
Markdown file per scope, written by :class:`~hermes_sessions.memory.MemoryStore`) and
:class:`BackendStorage` (a backend offering :class:`SupportsMemory`: PostgreSQL keeps a row per
scope, so every host of one database sees one memory; the in-memory backend keeps a dict).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable
from urllib.parse import unquote

import attrs

from hermes_sessions.exceptions import StorageError
from hermes_sessions.memory._scopes import MemoryScope, folder_name
from hermes_sessions.memory._store import MemoryStore
from hermes_sessions.protocols import Clock

if TYPE_CHECKING:
    from hermes_sessions.memory._format import Outcome

__all__ = ["TARGETS", "BackendStorage", "FileStorage", "SupportsMemory"]

TARGETS: Final = {"app": "memory", "user": "user", "lane": "memory"}
"""The file target each scope's file uses (``MEMORY.md`` or ``USER.md``)."""

# Room the stamps take on top of the limit when a file is checked for drift (an entry longer
# than the whole limit is drift; its stamp does not count against the limit).
_STAMP_ROOM: Final = 1024


@runtime_checkable
class SupportsMemory(Protocol):
    """Optional backend ability: keep scoped memory in the store's own database.

    Scope ids are ``str(MemoryScope)`` (``app``, ``user:<platform>:<id>``, ``lane:<key>``);
    entries are opaque strings. ``change_memory`` must hold the scope exclusively while ``plan``
    runs (two hosts changing one scope queue), and write nothing when ``plan`` raises.

    .. versionadded:: 0.1.0
    """

    def memory_entries(self, scope_id: str) -> tuple[str, ...]:
        """The entries of one scope (empty when it has none)."""
        ...

    def change_memory(
        self, scope_id: str, plan: Callable[[tuple[str, ...]], tuple[str, ...] | None]
    ) -> tuple[str, ...]:
        """Apply ``plan`` to the scope's entries atomically (``None``: no change); the result."""
        ...

    def memory_scope_ids(self) -> list[str]:
        """Every scope id holding entries, sorted."""
        ...

    def delete_memory(self, scope_id: str) -> bool:
        """Delete one scope; whether it held entries."""
        ...


@attrs.frozen
class FileStorage:
    """Scopes as files under ``directory``: ``MEMORY.md``, ``users/...``, ``lanes/...``."""

    directory: Path
    limit: Callable[[MemoryScope], int]
    lock_timeout: float
    clock: Clock

    def folder(self, scope: MemoryScope) -> Path:
        """The folder of ``scope``'s file."""
        if scope.kind == "user":
            return (
                self.directory
                / "users"
                / folder_name(scope.platform or "")
                / folder_name(scope.user_id or "")
            )
        if scope.kind == "lane":
            return self.directory / "lanes" / folder_name(scope.session_key or "")
        return self.directory

    def store(self, scope: MemoryScope) -> MemoryStore:
        """The file store of ``scope`` (the drift check allows room for the stamps)."""
        room = self.limit(scope) + _STAMP_ROOM
        return MemoryStore(
            self.folder(scope),
            memory_char_limit=room,
            user_char_limit=room,
            scanner=None,
            lock_timeout=self.lock_timeout,
            clock=self.clock,
        )

    def where(self, scope: MemoryScope) -> str:
        """The file of ``scope``."""
        return str(self.store(scope).path(TARGETS[scope.kind]))

    def read(self, scope: MemoryScope) -> tuple[str, ...]:
        """The raw entries of ``scope``."""
        return self.store(scope).entries(TARGETS[scope.kind])

    def change(
        self, scope: MemoryScope, action: str, plan: Callable[[tuple[str, ...]], Outcome]
    ) -> Outcome:
        """Under the file's lock: read, refuse drift, plan, write."""
        return self.store(scope)._apply(TARGETS[scope.kind], action, plan)  # noqa: SLF001

    def holding(self, scope: MemoryScope) -> list[str]:
        """What deleting ``scope`` whole would delete (its folder's files; app: never)."""
        folder = self.folder(scope)
        if scope.kind == "app" or not folder.exists():
            return []
        return [str(p) for p in sorted(folder.rglob("*")) if p.is_file()]

    def delete(self, scope: MemoryScope) -> None:
        """Delete a user's or a lane's folder."""
        folder = self.folder(scope)
        try:
            shutil.rmtree(folder)
        except FileNotFoundError:
            return
        except OSError as error:
            raise StorageError(f"cannot delete {folder}: {error}") from error

    def extras(self, scope: MemoryScope) -> list[str]:
        """Copies of the scope's entries beside it: drift backups."""
        path = self.store(scope).path(TARGETS[scope.kind])
        return [str(p) for p in sorted(path.parent.glob(f"{path.name}.drift-*.bak"))]

    def drop_extras(self, scope: MemoryScope) -> None:
        """Delete the drift backups of ``scope``."""
        path = self.store(scope).path(TARGETS[scope.kind])
        for backup in path.parent.glob(f"{path.name}.drift-*.bak"):
            backup.unlink(missing_ok=True)

    def lanes(self) -> list[str]:
        """The keys of every lane with a folder."""
        lanes = self.directory / "lanes"
        if not lanes.is_dir():
            return []
        return [unquote(f.name) for f in sorted(lanes.iterdir()) if f.is_dir()]


@attrs.frozen
class BackendStorage:
    """Scopes as rows of a backend offering :class:`SupportsMemory`."""

    backend: SupportsMemory

    def where(self, scope: MemoryScope) -> str:
        """The scope id (there is no file)."""
        return str(scope)

    def read(self, scope: MemoryScope) -> tuple[str, ...]:
        """The raw entries of ``scope``."""
        return tuple(self.backend.memory_entries(str(scope)))

    def change(
        self, scope: MemoryScope, _action: str, plan: Callable[[tuple[str, ...]], Outcome]
    ) -> Outcome:
        """In one transaction holding the scope: read, plan, write."""
        outcomes: list[Outcome] = []

        def raw(entries: tuple[str, ...]) -> tuple[str, ...] | None:
            outcome = plan(tuple(entries))
            outcomes.append(outcome)  # a retried transaction plans again: the last one counts
            return outcome.entries if outcome.changed else None

        self.backend.change_memory(str(scope), raw)
        return outcomes[-1]

    def holding(self, scope: MemoryScope) -> list[str]:
        """The scope id when it holds entries (app: never deleted whole)."""
        return [str(scope)] if scope.kind != "app" and self.read(scope) else []

    def delete(self, scope: MemoryScope) -> None:
        """Delete the scope's row."""
        self.backend.delete_memory(str(scope))

    def extras(self, _scope: MemoryScope) -> list[str]:
        """No copies beside a row."""
        return []

    def drop_extras(self, _scope: MemoryScope) -> None:
        """Nothing to drop."""

    def lanes(self) -> list[str]:
        """The keys of every lane holding notes."""
        prefix = "lane:"
        return [s[len(prefix) :] for s in self.backend.memory_scope_ids() if s.startswith(prefix)]
