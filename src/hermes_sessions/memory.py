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

See ``docs/memory.md`` for the format, the rules and the guarantees.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.exceptions import (
    AmbiguousMemoryMatchError,
    InvalidMemoryContentError,
    LockTimeoutError,
    MemoryContentBlockedError,
    MemoryDriftError,
    MemoryEntryNotFoundError,
    MemoryLimitError,
    StorageError,
    UnknownMemoryTargetError,
)
from hermes_sessions.paths import memories_dir
from hermes_sessions.threats import DEFAULT_SCANNER, SCOPE_MEMORY, ThreatScanner

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

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

ENTRY_DELIMITER: Final = "\n§\n"
"""What separates two entries in a memory file: a line holding only ``§``."""

DEFAULT_MEMORY_CHAR_LIMIT: Final = 2200
"""Default character limit of ``MEMORY.md``."""

DEFAULT_USER_CHAR_LIMIT: Final = 1375
"""Default character limit of ``USER.md``."""

DEFAULT_LOCK_TIMEOUT: Final = 10.0
"""Seconds a write waits for the file lock before raising ``LockTimeoutError``."""

MEMORY_TARGETS: Final = ("memory", "user")
"""The two targets: ``"memory"`` (``MEMORY.md``) and ``"user"`` (``USER.md``)."""

_FILE_NAMES: Final = {"memory": "MEMORY.md", "user": "USER.md"}
_TITLES: Final = {
    "memory": "MEMORY (your personal notes)",
    "user": "USER PROFILE (who the user is)",
}
_RULE: Final = "═" * 46
_PREVIEW_LENGTH: Final = 80
_BACKUP_ATTEMPTS: Final = 16


# -- the file format (pure functions) --------------------------------------------------------------


def _normalise_text(text: str) -> str:
    """Drop what editors add without meaning: a byte-order mark and CR line endings."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def parse_entries(text: str) -> tuple[str, ...]:
    r"""Split a memory file into entries: stripped, empty ones dropped, duplicates dropped.

    >>> parse_entries("first\n§\nsecond § with a section sign\n§\n\n§\nfirst")
    ('first', 'second § with a section sign')
    """
    seen: set[str] = set()
    entries: list[str] = []
    for piece in _normalise_text(text).split(ENTRY_DELIMITER):
        entry = piece.strip()
        if entry and entry not in seen:
            seen.add(entry)
            entries.append(entry)
    return tuple(entries)


def render_entries(entries: Iterable[str]) -> str:
    """Join entries into the text of a memory file (no trailing newline, like Hermes)."""
    return ENTRY_DELIMITER.join(entries)


def entries_usage(entries: Iterable[str]) -> int:
    """Characters the entries use against the limit: their length joined by the delimiter."""
    return len(render_entries(entries))


def _drift_reason(raw: bytes, limit: int) -> str | None:
    """Why ``raw`` is not a file this store would write (``None``: it is one)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"it is not valid UTF-8 (at byte {error.start})"
    entries = parse_entries(text)
    if render_entries(entries) != _normalise_text(text).strip():
        return (
            "it does not read back as it is: entries are separated by a line holding only '§', "
            "with no empty, duplicate or space-padded entries"
        )
    for number, entry in enumerate(entries, 1):
        if len(entry) > limit:
            return (
                f"entry {number} is {len(entry):,} characters long, more than the whole "
                f"{limit:,}-character limit"
            )
    return None


def _percent(usage: int, limit: int) -> int:
    return usage * 100 // limit


def _preview(entry: str) -> str:
    flat = " ".join(entry.split())
    return flat if len(flat) <= _PREVIEW_LENGTH else flat[: _PREVIEW_LENGTH - 3] + "..."


# -- results and snapshots -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemoryResult:
    """The outcome of a change that was accepted (refusals raise ``MemoryRefusedError``).

    Attributes:
        target: ``"memory"`` or ``"user"``.
        action: ``"add"``, ``"replace"``, ``"remove"`` or ``"repair"``.
        message: What happened, in one sentence for the model.
        changed: Whether the file was written (``False`` for an exact duplicate, for example).
        entries: The entries of the file after the change.
        usage: Characters used after the change.
        limit: The file's character limit.
        backup_path: The copy kept by :meth:`MemoryStore.repair`, otherwise ``None``.
    """

    target: str
    action: str
    message: str
    changed: bool
    entries: tuple[str, ...]
    usage: int
    limit: int
    backup_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-serialisable tool result: ``{"success": True, ...}``."""
        result: dict[str, Any] = {
            "success": True,
            "target": self.target,
            "action": self.action,
            "message": self.message,
            "changed": self.changed,
            "entries": list(self.entries),
            "entry_count": len(self.entries),
            "usage": self.usage,
            "limit": self.limit,
            "usage_percent": _percent(self.usage, self.limit),
        }
        if self.backup_path is not None:
            result["backup_path"] = str(self.backup_path)
        return result


@attrs.frozen(kw_only=True)
class BlockedEntry:
    """An entry of the file that the snapshot shows as ``[BLOCKED: <pattern ids>]``.

    Attributes:
        index: Its 0-based position among the file's entries.
        pattern_ids: The threat patterns it matched.
    """

    index: int
    pattern_ids: tuple[str, ...]

    @property
    def placeholder(self) -> str:
        """The text shown in the prompt instead of the entry."""
        return f"[BLOCKED: {', '.join(self.pattern_ids)}]"


@attrs.frozen(kw_only=True)
class TargetSnapshot:
    """One file as loaded into a snapshot.

    Attributes:
        target: ``"memory"`` or ``"user"``.
        entries: The entries as the prompt shows them (blocked ones replaced by placeholders,
            entries past the limit left out).
        blocked: The entries replaced by placeholders.
        omitted: How many entries were left out because the file is over its limit.
        usage: Characters the file used when loaded (its real entries, placeholders aside).
        limit: The file's character limit.
        text: The rendered section of the prompt block (``""`` for an empty file).
    """

    target: str
    entries: tuple[str, ...]
    blocked: tuple[BlockedEntry, ...]
    omitted: int
    usage: int
    limit: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            "target": self.target,
            "entries": list(self.entries),
            "blocked": [
                {"index": blocked.index, "pattern_ids": list(blocked.pattern_ids)}
                for blocked in self.blocked
            ],
            "omitted": self.omitted,
            "usage": self.usage,
            "limit": self.limit,
        }


@attrs.frozen(kw_only=True)
class MemorySnapshot:
    """Both files as they were when the store loaded them, and the system-prompt block.

    ``prompt_block`` (also ``str(snapshot)``) is ready to append to a system prompt; it is ``""``
    when both files are empty. It never changes: writes made later show up in the next snapshot.
    """

    memory: TargetSnapshot
    user: TargetSnapshot
    prompt_block: str

    def __str__(self) -> str:
        return self.prompt_block

    def target(self, target: str) -> TargetSnapshot:
        """The snapshot of one target (``"memory"`` or ``"user"``)."""
        if target == "memory":
            return self.memory
        if target == "user":
            return self.user
        raise UnknownMemoryTargetError(target, MEMORY_TARGETS)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            "memory": self.memory.to_dict(),
            "user": self.user.to_dict(),
            "prompt_block": self.prompt_block,
        }


def _snapshot_target(
    target: str, entries: Sequence[str], limit: int, scanner: ThreatScanner | None
) -> TargetSnapshot:
    shown: list[str] = []
    blocked: list[BlockedEntry] = []
    for index, entry in enumerate(entries):
        findings = () if scanner is None else scanner.scan(entry, scope=SCOPE_MEMORY)
        if findings:
            flagged = BlockedEntry(
                index=index, pattern_ids=tuple(sorted({f.pattern_id for f in findings}))
            )
            blocked.append(flagged)
            shown.append(flagged.placeholder)
        else:
            shown.append(entry)
    # The limit also bounds the prompt: a file edited past it shows what fits, then a note.
    kept = 0
    while kept < len(shown) and entries_usage(shown[: kept + 1]) <= limit:
        kept += 1
    omitted = len(shown) - kept
    lines = shown[:kept]
    if omitted:
        lines.append(
            f"[OMITTED: {omitted} more {'entry' if omitted == 1 else 'entries'} past the "
            f"{limit:,}-character limit; they remain in {_FILE_NAMES[target]}]"
        )
    usage = entries_usage(entries)
    text = ""
    if entries:
        header = f"{_TITLES[target]} [{_percent(usage, limit)}% — {usage:,}/{limit:,} chars]"
        text = f"{_RULE}\n{header}\n{_RULE}\n{render_entries(lines)}"
    return TargetSnapshot(
        target=target,
        entries=tuple(shown[:kept]),
        blocked=tuple(blocked),
        omitted=omitted,
        usage=usage,
        limit=limit,
        text=text,
    )


# -- planning a change (pure) ----------------------------------------------------------------------


@attrs.frozen
class _Outcome:
    entries: tuple[str, ...]
    changed: bool
    message: str


def _dedupe(entries: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(entries))


def _find(entries: Sequence[str], old_text: str, *, target: str, action: str) -> int:
    matches = [index for index, entry in enumerate(entries) if old_text in entry]
    if not matches:
        raise MemoryEntryNotFoundError(old_text, target=target, action=action)
    distinct = _dedupe(entries[index] for index in matches)
    if len(distinct) > 1:
        raise AmbiguousMemoryMatchError(
            old_text, [_preview(entry) for entry in distinct], target=target, action=action
        )
    return matches[0]


def _plan_add(entries: tuple[str, ...], content: str, *, target: str, limit: int) -> _Outcome:
    if content in entries:
        return _Outcome(entries, changed=False, message="Entry already exists; nothing changed.")
    new = (*entries, content)
    if (needed := entries_usage(new)) > limit:
        raise MemoryLimitError(
            target=target,
            action="add",
            entries=entries,
            usage=entries_usage(entries),
            limit=limit,
            requested_usage=needed,
        )
    return _Outcome(new, changed=True, message="Entry added.")


def _plan_replace(
    entries: tuple[str, ...], old_text: str, content: str, *, target: str, limit: int
) -> _Outcome:
    index = _find(entries, old_text, target=target, action="replace")
    if entries[index] == content:
        return _Outcome(entries, changed=False, message="Entry already reads so; nothing changed.")
    new = _dedupe((*entries[:index], content, *entries[index + 1 :]))
    usage = entries_usage(entries)
    # Over the limit is refused unless the change shrinks the file: a file that is already over
    # (the limit was lowered, or it was edited by hand) must stay fixable by shortening entries.
    if (needed := entries_usage(new)) > limit and needed > usage:
        raise MemoryLimitError(
            target=target,
            action="replace",
            entries=entries,
            usage=usage,
            limit=limit,
            requested_usage=needed,
        )
    message = "Entry replaced."
    if len(new) < len(entries):
        message = "Entry replaced; it now equals another entry, so the two were merged."
    return _Outcome(new, changed=True, message=message)


def _plan_remove(entries: tuple[str, ...], old_text: str, *, target: str) -> _Outcome:
    index = _find(entries, old_text, target=target, action="remove")
    return _Outcome(
        (*entries[:index], *entries[index + 1 :]), changed=True, message="Entry removed."
    )


# -- the store -------------------------------------------------------------------------------------


def _directory(value: Path | str | None) -> Path:
    if value is None:
        return memories_dir()
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"directory must be a path, got {type(value).__name__}")
    return Path(value)


def _positive_int(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, got {value}")


def _timeout(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a number of seconds, got {value!r}")
    if not value >= 0:
        raise ValueError(f"{attribute.name} must be 0 or more seconds, got {value}")


def _scanner(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ThreatScanner):
        raise TypeError(f"{attribute.name} must be a ThreatScanner or None, got {value!r}")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist) as a private file holding ``data``, synced to disk."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@attrs.define(repr=False, on_setattr=attrs.setters.frozen)
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
        clock: Returns the current aware time; used to name backups.
    """

    directory: Path = attrs.field(default=None, converter=_directory)
    memory_char_limit: int = attrs.field(
        default=DEFAULT_MEMORY_CHAR_LIMIT, kw_only=True, validator=_positive_int
    )
    user_char_limit: int = attrs.field(
        default=DEFAULT_USER_CHAR_LIMIT, kw_only=True, validator=_positive_int
    )
    scanner: ThreatScanner | None = attrs.field(
        default=DEFAULT_SCANNER, kw_only=True, validator=_scanner
    )
    lock_timeout: float = attrs.field(
        default=DEFAULT_LOCK_TIMEOUT, kw_only=True, validator=_timeout
    )
    clock: Callable[[], datetime] = attrs.field(default=_utc_now, kw_only=True)
    _snapshot: MemorySnapshot = attrs.field(init=False, on_setattr=attrs.setters.NO_OP)

    def __attrs_post_init__(self) -> None:
        self._snapshot = self._load_snapshot()

    def __repr__(self) -> str:
        return f"MemoryStore(directory={str(self.directory)!r})"

    # -- reading -----------------------------------------------------------------------------------

    def path(self, target: str) -> Path:
        """The file of ``target``: ``<directory>/MEMORY.md`` or ``<directory>/USER.md``."""
        return self.directory / _FILE_NAMES[self._check_target(target)]

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
        content = self._clean_content(content, target=target, action="add")
        limit = self.limit(target)
        return self._change(
            target, "add", lambda entries: _plan_add(entries, content, target=target, limit=limit)
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
        old_text = self._clean_old_text(old_text, target=target, action="replace")
        content = self._clean_content(new_content, target=target, action="replace")
        limit = self.limit(target)
        return self._change(
            target,
            "replace",
            lambda entries: _plan_replace(entries, old_text, content, target=target, limit=limit),
        )

    def remove(self, target: str, old_text: str) -> MemoryResult:
        """Remove the entry containing ``old_text`` (same matching as :meth:`replace`).

        Raises:
            InvalidMemoryContentError, MemoryEntryNotFoundError, AmbiguousMemoryMatchError,
            MemoryDriftError, LockTimeoutError, StorageError.
        """
        target = self._check_target(target)
        old_text = self._clean_old_text(old_text, target=target, action="remove")
        return self._change(
            target, "remove", lambda entries: _plan_remove(entries, old_text, target=target)
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
            reason = _drift_reason(raw, limit)
            entries = parse_entries(raw.decode("utf-8", errors="replace"))
            if reason is None:
                return self._result(
                    target,
                    "repair",
                    entries,
                    changed=False,
                    message=("The file is already in the entry format; nothing changed."),
                )
            backup = self._backup(path, raw)
            too_long = _drift_reason(render_entries(entries).encode("utf-8"), limit)
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
            message=f"Repaired: {len(entries)} entries kept; the old file is saved at {backup}.",
            backup_path=backup,
        )

    # -- internals ---------------------------------------------------------------------------------

    @staticmethod
    def _check_target(target: object) -> str:
        if not isinstance(target, str) or target not in _FILE_NAMES:
            raise UnknownMemoryTargetError(target, MEMORY_TARGETS)
        return target

    def _clean_content(self, content: object, *, target: str, action: str) -> str:
        if not isinstance(content, str):
            raise TypeError(f"content must be a str, got {type(content).__name__}")
        cleaned = _normalise_text(content).strip()
        if not cleaned:
            raise InvalidMemoryContentError(
                "the content is empty" + ("; to delete an entry use remove" * (action != "add")),
                target=target,
                action=action,
            )
        if "§" in cleaned.split("\n"):
            raise InvalidMemoryContentError(
                "a line holding only '§' separates entries, so an entry cannot contain one; "
                "store the parts as separate entries",
                target=target,
                action=action,
            )
        if self.scanner is not None and (
            findings := self.scanner.scan(cleaned, scope=SCOPE_MEMORY)
        ):
            raise MemoryContentBlockedError(
                target=target,
                action=action,
                pattern_ids=[finding.pattern_id for finding in findings],
                excerpts=[finding.excerpt for finding in findings],
            )
        return cleaned

    @staticmethod
    def _clean_old_text(old_text: object, *, target: str, action: str) -> str:
        if not isinstance(old_text, str):
            raise TypeError(f"old_text must be a str, got {type(old_text).__name__}")
        cleaned = _normalise_text(old_text).strip()
        if not cleaned:
            raise InvalidMemoryContentError(
                "old_text is empty; give a short, distinctive part of the entry to change",
                target=target,
                action=action,
            )
        return cleaned

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
        self, target: str, action: str, plan: Callable[[tuple[str, ...]], _Outcome]
    ) -> MemoryResult:
        path = self.path(target)
        limit = self.limit(target)
        with self._locked(target):
            raw = self._read(path)
            reason = _drift_reason(raw, limit)
            if reason is not None:
                backup = self._backup(path, raw)
                raise MemoryDriftError(
                    target=target, action=action, path=path, backup_path=backup, reason=reason
                )
            outcome = plan(parse_entries(raw.decode("utf-8")))
            if outcome.changed:
                self._write(path, render_entries(outcome.entries))
        return self._result(
            target, action, outcome.entries, changed=outcome.changed, message=outcome.message
        )

    @contextlib.contextmanager
    def _locked(self, target: str) -> Iterator[None]:
        """Hold the sidecar lock of ``target``; clear temporary files a crashed writer left."""
        import filelock  # noqa: PLC0415  # deferred: importing the package stays light

        name = _FILE_NAMES[target]
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
        """Replace ``path`` atomically: temporary file, fsync, rename, fsync of the directory."""
        temporary = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            _write_new_file(temporary, text.encode("utf-8"))
            temporary.replace(path)
            _fsync_directory(path.parent)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise StorageError(f"cannot write {path}: {error}") from error

    def _backup(self, path: Path, raw: bytes) -> Path:
        """Save ``raw`` next to ``path`` under a name no other backup has (O_EXCL)."""
        now = self.clock()
        if now.tzinfo is None:
            raise ValueError("the clock returned a naive datetime; return an aware one")
        stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        for _ in range(_BACKUP_ATTEMPTS):
            candidate = path.with_name(f"{path.name}.drift-{stamp}-{os.urandom(4).hex()}.bak")
            try:
                _write_new_file(candidate, raw)
            except FileExistsError:
                continue
            except OSError as error:
                raise StorageError(f"cannot save a backup of {path}: {error}") from error
            try:
                _fsync_directory(path.parent)
            except OSError as error:
                raise StorageError(f"cannot save a backup of {path}: {error}") from error
            return candidate
        raise StorageError(f"cannot find a free backup name for {path}; clear old backups")

    def _load_snapshot(self) -> MemorySnapshot:
        parts = [
            _snapshot_target(target, self.entries(target), self.limit(target), self.scanner)
            for target in MEMORY_TARGETS
        ]
        memory, user = parts
        return MemorySnapshot(
            memory=memory,
            user=user,
            prompt_block="\n\n".join(part.text for part in parts if part.text),
        )
