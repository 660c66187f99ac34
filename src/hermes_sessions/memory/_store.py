"""The memory store: locking, reading and atomically replacing the files, backups.

Everything that decides what a change does (the format, the refusals, drift) is pure code in
``_format``; this module only performs it. See :mod:`hermes_sessions.memory` for the guarantees.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import options
from hermes_sessions.clock import SystemClock
from hermes_sessions.exceptions import (
    InvalidArgumentError,
    LockTimeoutError,
    MemoryDriftError,
    StorageError,
    UnknownMemoryTargetError,
)
from hermes_sessions.files import create_file, replace_file
from hermes_sessions.memory._format import (
    FILE_NAMES,
    MEMORY_TARGETS,
    MemoryResult,
    MemorySnapshot,
    Outcome,
    check_content,
    check_old_text,
    drift_reason,
    entries_usage,
    parse_entries,
    plan_add,
    plan_remove,
    plan_replace,
    render_entries,
    snapshot_target,
)
from hermes_sessions.paths import memories_dir
from hermes_sessions.protocols import Clock
from hermes_sessions.threats import DEFAULT_SCANNER, ThreatScanner

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MEMORY_CHAR_LIMIT",
    "DEFAULT_USER_CHAR_LIMIT",
    "MemoryStore",
]

DEFAULT_MEMORY_CHAR_LIMIT: Final = 2200
"""Default character limit of ``MEMORY.md``.

.. versionadded:: 0.1.0
"""

DEFAULT_USER_CHAR_LIMIT: Final = 1375
"""Default character limit of ``USER.md``.

.. versionadded:: 0.1.0
"""

DEFAULT_LOCK_TIMEOUT: Final = 10.0
"""Seconds a write waits for the file lock before raising ``LockTimeoutError``.

.. versionadded:: 0.1.0
"""

_BACKUP_ATTEMPTS: Final = 16


# -- the store -------------------------------------------------------------------------------------


def _directory(value: Path | str | None) -> Path:
    if value is None:
        return memories_dir()
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"directory must be a path, got {type(value).__name__}")
    return Path(value)


def _scanner(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ThreatScanner):
        raise TypeError(f"{attribute.name} must be a ThreatScanner or None, got {value!r}")


def _random_suffix(length: int) -> str:
    """``length`` random bytes as hex: names temporary files and backups."""
    return os.urandom(length).hex()


@attrs.define(repr=False, eq=False, on_setattr=attrs.setters.frozen)
class MemoryStore:
    """The two memory files of one home directory, with a frozen snapshot for the prompt.

    Creating a store reads both files (it creates nothing); the first write creates the directory
    (mode 0700) and the files (mode 0600).

    Args:
        directory: Where ``MEMORY.md`` and ``USER.md`` live; default ``<home>/memories``
            (:func:`hermes_sessions.paths.memories_dir`), resolved when the store is created.
        memory_char_limit: Character limit of ``MEMORY.md``.
        user_char_limit: Character limit of ``USER.md``.
        scanner: The threat scanner for new content and for the snapshot; ``None`` turns scanning
            off (only for content that is trusted by construction).
        lock_timeout: Seconds a write waits for the file lock (``0``: try once).
        clock: Where the time comes from (names backups); a ``Clock`` such as
            ``testing.FrozenClock``.

    .. versionadded:: 0.1.0
    """

    directory: Path = attrs.field(default=None, converter=_directory)
    memory_char_limit: int = attrs.field(
        default=DEFAULT_MEMORY_CHAR_LIMIT, kw_only=True, validator=options.positive_int
    )
    user_char_limit: int = attrs.field(
        default=DEFAULT_USER_CHAR_LIMIT, kw_only=True, validator=options.positive_int
    )
    scanner: ThreatScanner | None = attrs.field(
        default=DEFAULT_SCANNER, kw_only=True, validator=_scanner
    )
    lock_timeout: float = attrs.field(
        default=DEFAULT_LOCK_TIMEOUT, kw_only=True, validator=options.seconds
    )
    clock: Clock = attrs.field(factory=SystemClock, kw_only=True)
    _snapshot: MemorySnapshot = attrs.field(init=False, on_setattr=attrs.setters.NO_OP)

    def __attrs_post_init__(self) -> None:
        self._snapshot = self._load_snapshot()

    def __repr__(self) -> str:
        return f"MemoryStore(directory={str(self.directory)!r})"

    # -- reading -----------------------------------------------------------------------------------

    def path(self, target: str) -> Path:
        """The file of ``target``: ``<directory>/MEMORY.md`` or ``<directory>/USER.md``."""
        return self.directory / FILE_NAMES[self._check_target(target)]

    def limit(self, target: str) -> int:
        """The character limit of ``target``."""
        if self._check_target(target) == "memory":
            return self.memory_char_limit
        return self.user_char_limit

    def entries(self, target: str) -> tuple[str, ...]:
        """The entries of ``target`` as they are on disk now (not the snapshot)."""
        return parse_entries(self._read(self.path(target)).decode("utf-8", errors="replace"))

    def snapshot(self) -> MemorySnapshot:
        """The snapshot taken when the store was created (or last reloaded)."""
        return self._snapshot

    def reload(self) -> MemorySnapshot:
        """Read both files again, keep that as the new snapshot, and return it."""
        self._snapshot = self._load_snapshot()
        return self._snapshot

    # -- writing -----------------------------------------------------------------------------------

    def add(self, target: str, content: str) -> MemoryResult:
        """Append an entry; an exact duplicate succeeds without writing.

        Raises:
            InvalidMemoryContentError: ``content`` is empty or holds a line of only ``§``.
            MemoryContentBlockedError: the threat scanner flagged ``content``.
            MemoryLimitError: the file would pass its limit (the error carries the entries).
            MemoryDriftError: the file was edited outside the store (a backup is kept).
            LockTimeoutError: another writer held the lock for ``lock_timeout`` seconds.
            StorageError: the file system failed.
        """
        target = self._check_target(target)
        content = check_content(
            content, target=target, action="add", limit=self.limit(target), scanner=self.scanner
        )
        limit = self.limit(target)
        return self._change(
            target, "add", lambda entries: plan_add(entries, content, target=target, limit=limit)
        )

    def replace(self, target: str, old_text: str, new_content: str) -> MemoryResult:
        """Replace the entry containing ``old_text`` (a case-sensitive substring) by new content.

        Several *different* matching entries are refused as ambiguous. The limit is checked with
        the replacement in place; a replacement that shrinks an over-limit file is allowed.

        Raises:
            InvalidMemoryContentError, MemoryContentBlockedError, MemoryLimitError,
            MemoryEntryNotFoundError, AmbiguousMemoryMatchError, MemoryDriftError,
            LockTimeoutError, StorageError: as for :meth:`add`, plus the matching errors.
        """
        target = self._check_target(target)
        old_text = check_old_text(old_text, target=target, action="replace")
        content = check_content(
            new_content,
            target=target,
            action="replace",
            limit=self.limit(target),
            scanner=self.scanner,
        )
        limit = self.limit(target)
        return self._change(
            target,
            "replace",
            lambda entries: plan_replace(entries, old_text, content, target=target, limit=limit),
        )

    def remove(self, target: str, old_text: str) -> MemoryResult:
        """Remove the entry containing ``old_text`` (same matching as :meth:`replace`).

        Raises:
            InvalidMemoryContentError, MemoryEntryNotFoundError, AmbiguousMemoryMatchError,
            MemoryDriftError, LockTimeoutError, StorageError.
        """
        target = self._check_target(target)
        old_text = check_old_text(old_text, target=target, action="remove")
        return self._change(
            target, "remove", lambda entries: plan_remove(entries, old_text, target=target)
        )

    def repair(self, target: str) -> MemoryResult:
        """Rewrite a drifted file in the entry format, after saving a backup of it.

        Empty, duplicate and space-padded entries are dropped and invalid UTF-8 is replaced by
        U+FFFD; content is otherwise kept. A file that is already well-formed is left alone.

        Raises:
            MemoryDriftError: an entry is longer than the whole limit; shorten it by hand (the
                error names the backup).
            LockTimeoutError, StorageError.
        """
        target = self._check_target(target)
        path = self.path(target)
        limit = self.limit(target)
        with self._locked(target):
            raw = self._read(path)
            reason = drift_reason(raw, limit)
            entries = parse_entries(raw.decode("utf-8", errors="replace"))
            if reason is None:
                return self._result(
                    target,
                    "repair",
                    entries,
                    changed=False,
                    message="The file is already in the entry format; nothing changed.",
                )
            backup = self._backup(path, raw)
            too_long = drift_reason(render_entries(entries).encode("utf-8"), limit)
            if too_long is not None:
                raise MemoryDriftError(
                    target=target, action="repair", path=path, backup_path=backup, reason=too_long
                )
            self._write(path, render_entries(entries))
        return self._result(
            target,
            "repair",
            entries,
            changed=True,
            message=f"File repaired; the old version is saved at {backup}.",
            backup_path=backup,
        )

    # -- internals ---------------------------------------------------------------------------------

    @staticmethod
    def _check_target(target: object) -> str:
        if not isinstance(target, str) or target not in FILE_NAMES:
            raise UnknownMemoryTargetError(target, MEMORY_TARGETS)
        return target

    def _result(
        self,
        target: str,
        action: str,
        entries: tuple[str, ...],
        *,
        changed: bool,
        message: str,
        backup_path: Path | None = None,
    ) -> MemoryResult:
        return MemoryResult(
            target=target,
            action=action,
            message=message,
            changed=changed,
            entries=entries,
            usage=entries_usage(entries),
            limit=self.limit(target),
            backup_path=backup_path,
        )

    def _change(
        self, target: str, action: str, plan: Callable[[tuple[str, ...]], Outcome]
    ) -> MemoryResult:
        outcome = self._apply(target, action, plan)
        return self._result(
            target, action, outcome.entries, changed=outcome.changed, message=outcome.message
        )

    def _apply(
        self, target: str, action: str, plan: Callable[[tuple[str, ...]], Outcome]
    ) -> Outcome:
        """Under the lock: read the file, refuse drift, plan the change and write it if any."""
        path = self.path(target)
        limit = self.limit(target)
        with self._locked(target):
            raw = self._read(path)
            reason = drift_reason(raw, limit)
            if reason is not None:
                backup = self._backup(path, raw)
                raise MemoryDriftError(
                    target=target, action=action, path=path, backup_path=backup, reason=reason
                )
            outcome = plan(parse_entries(raw.decode("utf-8")))
            if outcome.changed:
                self._write(path, render_entries(outcome.entries))
        return outcome

    @contextlib.contextmanager
    def _locked(self, target: str) -> Iterator[None]:
        """Hold the sidecar lock of ``target``; clear temporary files a crashed writer left."""
        import filelock  # noqa: PLC0415  # deferred: importing the package stays light

        name = FILE_NAMES[target]
        lock_path = self.directory / f"{name}.lock"
        self._make_directory()
        lock = filelock.FileLock(lock_path, timeout=self.lock_timeout, mode=0o600)
        try:
            lock.acquire(poll_interval=0.005)
        except filelock.Timeout as error:
            raise LockTimeoutError(str(lock_path), self.lock_timeout) from error
        except OSError as error:
            raise StorageError(f"cannot lock {lock_path}: {error}") from error
        try:
            for stale in self.directory.glob(f".{name}.*.tmp"):
                stale.unlink(missing_ok=True)
            yield
        finally:
            lock.release()

    def _make_directory(self) -> None:
        """Create the directory, and any missing parent, with mode 0700."""
        if self.directory.is_dir():
            return
        missing = [self.directory, *self.directory.parents]
        try:
            for path in reversed(missing):
                if not path.is_dir():
                    path.mkdir(mode=0o700, exist_ok=True)
        except OSError as error:
            raise StorageError(
                f"cannot create the memory directory {self.directory}: {error}"
            ) from error

    @staticmethod
    def _read(path: Path) -> bytes:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as error:
            raise StorageError(f"cannot read {path}: {error}") from error

    def _write(self, path: Path, text: str) -> None:
        """Replace ``path`` atomically through a temporary file the lock holder clears if left."""
        temporary = path.with_name(f".{path.name}.{_random_suffix(6)}.tmp")
        try:
            replace_file(path, text.encode("utf-8"), temporary=temporary)
        except OSError as error:
            raise StorageError(f"cannot write {path}: {error}") from error

    def _backup(self, path: Path, raw: bytes) -> Path:
        """Save ``raw`` next to ``path`` under a name no other backup has (O_EXCL)."""
        now = self.clock.now()
        if now.tzinfo is None:
            raise InvalidArgumentError("the clock returned a naive datetime; return an aware one")
        stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        for _ in range(_BACKUP_ATTEMPTS):
            candidate = path.with_name(f"{path.name}.drift-{stamp}-{_random_suffix(4)}.bak")
            try:
                create_file(candidate, raw, exclusive=True)
            except FileExistsError:
                continue
            except OSError as error:
                raise StorageError(f"cannot save a backup of {path}: {error}") from error
            return candidate
        raise StorageError(f"cannot find a free backup name for {path}; clear old backups")

    def _load_snapshot(self) -> MemorySnapshot:
        parts = [
            snapshot_target(target, self.entries(target), self.limit(target), self.scanner)
            for target in MEMORY_TARGETS
        ]
        memory, user = parts
        return MemorySnapshot(
            memory=memory,
            user=user,
            prompt_block="\n\n".join(part.text for part in parts if part.text),
        )
