"""The exceptions raised by hermes-sessions.

Every error the library raises on purpose derives from :class:`HermesSessionsError`, so one
``except HermesSessionsError`` catches them all. Each subclass also inherits the built-in that
matches its meaning, so code that already catches ``LookupError`` or ``ValueError`` keeps working::

    HermesSessionsError
    ├── InvalidKeyError            (ValueError)    a session key or key component is malformed
    ├── NaiveDatetimeError         (ValueError)    a datetime without a time zone
    ├── InvalidIdError             (ValueError)    a session id that could escape the data dir
    ├── InvalidTitleError          (ValueError)    a title is too long after sanitising
    ├── TitleConflictError         (ValueError)    the owner already has a session with that title
    ├── CorruptRecordError         (ValueError)    stored data is damaged (file, line / table, row)
    ├── InvalidCursorError         (ValueError)    a pagination cursor was not made by us
    ├── InvalidValueError          (ValueError)    a value no backend can store (names the field)
    ├── InvalidArgumentError       (ValueError)    an argument or setting out of range or unknown
    ├── MessageTooLargeError       (ValueError)    a message over ``max_message_bytes``
    ├── StateTooLargeError         (ValueError)    a state scope over 64 KiB
    ├── SessionNotFoundError       (LookupError)   no session or routing entry by id/key
    ├── AmbiguousSessionError      (LookupError)   a prefix or title names several sessions
    ├── ConflictError              (RuntimeError)  compare-and-swap lost: the revision moved on
    │   └── LedgerConflictError                    a ledger row changed since it was read
    ├── ClaimLostError             (RuntimeError)  another worker holds (or finished) the message
    ├── LedgerUnavailableError     (RuntimeError)  the ledger mode is off, or the backend has none
    ├── SessionInUseError          (RuntimeError)  a key still points at the session to delete
    ├── LeaseHeldError             (RuntimeError)  another holder leases the resource (compression)
    ├── TurnDeadlockError          (RuntimeError)  two turns would wait for each other's key
    ├── BackendClosedError         (RuntimeError)  the backend was closed
    ├── LockTimeoutError           (TimeoutError)  a file or row lock was not acquired in time
    ├── IncognitoLaneError         (PermissionError) the write would carry an incognito lane to disk
    ├── InvalidSourceError         (ValueError)    an import source is not what it should be
    ├── AdapterPayloadError        (ValueError)    a platform event lacks a field or has a bad one
    ├── StorageError               (OSError)       the storage layer failed (wraps sqlite3, OS)
    │   └── IncompatibleStoreError                 the data was written by a newer version
    ├── MissingDependencyError     (ImportError)   an optional dependency (an extra) is missing
    ├── EncryptionKeyError         (LookupError)   no key for a ciphertext's key id (or none set)
    ├── DecryptionError            (ValueError)    a ciphertext does not open with its key
    ├── EncryptionMismatchError    (ValueError)    a store opened with(out) the wrong cipher
    ├── UnknownMemoryTargetError   (ValueError)    a memory target other than memory / user
    └── MemoryRefusedError                         a memory-file change was refused (to_dict())
        ├── InvalidMemoryContentError  (ValueError)    empty, or holds the entry delimiter
        ├── MemoryContentBlockedError  (ValueError)    the threat scanner flagged the content
        ├── MemoryLimitError           (ValueError)    the change would pass the character limit
        ├── MemoryEntryNotFoundError   (LookupError)   no entry contains ``old_text``
        ├── AmbiguousMemoryMatchError  (LookupError)   several different entries contain it
        ├── IncognitoMemoryError       (PermissionError) the call comes from an incognito lane
        ├── MemoryScopeError           (PermissionError) the scope is not the caller's to write
        └── MemoryDriftError           (RuntimeError)  the file was edited outside the store

Errors carry structured attributes (``path``, ``line``, ``key``, ``session_id``, ...) so callers can
act on them without parsing messages, and their messages say what to do next. All of them pickle,
so they cross process boundaries intact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "AdapterPayloadError",
    "AmbiguousMemoryMatchError",
    "AmbiguousSessionError",
    "BackendClosedError",
    "ClaimLostError",
    "ConflictError",
    "CorruptRecordError",
    "DecryptionError",
    "EncryptionKeyError",
    "EncryptionMismatchError",
    "HermesSessionsError",
    "IncognitoLaneError",
    "IncognitoMemoryError",
    "IncompatibleStoreError",
    "InvalidArgumentError",
    "InvalidCursorError",
    "InvalidIdError",
    "InvalidKeyError",
    "InvalidMemoryContentError",
    "InvalidSourceError",
    "InvalidTitleError",
    "InvalidValueError",
    "LeaseHeldError",
    "LedgerConflictError",
    "LedgerUnavailableError",
    "LockTimeoutError",
    "MemoryContentBlockedError",
    "MemoryDriftError",
    "MemoryEntryNotFoundError",
    "MemoryLimitError",
    "MemoryRefusedError",
    "MemoryScopeError",
    "MessageTooLargeError",
    "MissingDependencyError",
    "NaiveDatetimeError",
    "SessionInUseError",
    "SessionNotFoundError",
    "StateTooLargeError",
    "StorageError",
    "TitleConflictError",
    "TurnDeadlockError",
    "UnknownMemoryTargetError",
]


_SHOWN_ID_LENGTH = 80
_LISTED_CANDIDATES = 10
_SHOWN_EXCERPT_LENGTH = 60


def _rebuild(cls: type[HermesSessionsError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class HermesSessionsError(Exception):
    """The root of every error that hermes-sessions raises on purpose.

    .. versionadded:: 0.1.0
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take keyword-only structured arguments, which the default exception pickling
        # (``cls(*args)``) cannot replay; rebuild from the message and the attribute dict instead.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class InvalidKeyError(HermesSessionsError, ValueError):
    """A session key, or a component used to build one, is malformed.

    Attributes:
        key: The offending key or component.

    .. versionadded:: 0.1.0
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"invalid session key {key!r}: {reason}")


class NaiveDatetimeError(HermesSessionsError, ValueError):
    """A datetime without a time zone was given where an instant is needed.

    Attributes:
        name: The argument or field that got it.

    .. versionadded:: 0.1.0
    """

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"{name} must be timezone-aware (a naive datetime is ambiguous); "
            "use datetime.now(UTC) or attach a tzinfo"
        )


class InvalidIdError(HermesSessionsError, ValueError):
    """A session id is not safe to use as a file name.

    Ids may contain only ``A-Z a-z 0-9 _ . -``, be 1-128 characters long, contain no ``..`` and
    not start with a dot, so that a crafted id can never name a file outside the data directory.

    Attributes:
        session_id: The rejected id (possibly truncated in the message).

    .. versionadded:: 0.1.0
    """

    def __init__(self, session_id: object, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        shown = repr(session_id)
        if len(shown) > _SHOWN_ID_LENGTH:
            shown = shown[: _SHOWN_ID_LENGTH - 3] + "..."
        super().__init__(
            f"invalid session id {shown}: {reason}; ids use only letters, digits, '_', '.', '-' "
            "(1-128 characters, no '..', not starting with '.')"
        )


class InvalidTitleError(HermesSessionsError, ValueError):
    """A session title is unusable even after sanitising (for example, too long).

    Attributes:
        title: The sanitised title.

    .. versionadded:: 0.1.0
    """

    def __init__(self, title: str, reason: str) -> None:
        self.title = title
        self.reason = reason
        super().__init__(f"invalid title: {reason}")


class TitleConflictError(HermesSessionsError, ValueError):
    """The owner already has another session with this title.

    Attributes:
        title: The requested title.
        other_session_id: The session that already holds it.

    .. versionadded:: 0.1.0
    """

    def __init__(self, title: str, other_session_id: str) -> None:
        self.title = title
        self.other_session_id = other_session_id
        super().__init__(
            f"title {title!r} is already used by session {other_session_id}; "
            "choose another title or rename that session first"
        )


class CorruptRecordError(HermesSessionsError, ValueError):
    """A stored record cannot be read back, or stored data disagrees with itself.

    Nothing is skipped silently: the error names the place — the file and line of a JSONL
    record, the database file, table and row of a SQLite or PostgreSQL row — so an operator can
    inspect it, and the message says what to do (JSONL has ``repair``, which keeps a backup).

    Attributes:
        path: The file the record came from (a JSONL file, ``state.db``), if any.
        line: The 1-based line number within ``path``, if known.
        table: The database table holding the record, if it came from a database.
        row: The row's key within ``table`` (a message id, a session id, a key), if known.
        reason: What is wrong with the record.

        hint: The next step, when the default advice (inspect, or run ``repair``) is wrong.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        reason: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        table: str | None = None,
        row: object = None,
        hint: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        self.table = table
        self.row = row
        self.hint = hint
        places = []
        if path is not None:
            places.append(f"{path}" + (f" at line {line}" if line is not None else ""))
        if table is not None:
            places.append(f"table {table}" + (f" row {row!r}" if row is not None else ""))
        where = f" in {', '.join(places)}" if places else ""
        if hint is None:
            hint = (
                "the data was left untouched: inspect it, or run the backend's repair to move "
                "bad records aside (a backup is kept)"
            )
        super().__init__(f"corrupt record{where}: {reason}; {hint}")

    def located(self, path: Path | str) -> CorruptRecordError:
        """This error with ``path`` filled in (a row reader knows its table, not its file)."""
        if self.path is not None:
            return self
        error = CorruptRecordError(
            self.reason, path=path, line=self.line, table=self.table, row=self.row, hint=self.hint
        )
        error.__cause__ = self.__cause__
        return error


class InvalidCursorError(HermesSessionsError, ValueError):
    """A pagination cursor is malformed (it must come from a previous page's ``next_cursor``).

    Attributes:
        cursor: The rejected cursor.

    .. versionadded:: 0.1.0
    """

    def __init__(self, cursor: str) -> None:
        self.cursor = cursor
        super().__init__(
            "invalid pagination cursor; pass the next_cursor of a previous page unchanged, "
            "or no cursor to start from the first page"
        )


class InvalidArgumentError(HermesSessionsError, ValueError):
    """An argument or a setting is out of range, or not one of its choices; nothing was done.

    Raised at construction for configuration values (reset and retention policies, options,
    query and window limits) and on the call for arguments (``undo(n=0)``), so a mistake shows
    where it was made, never later. The message names the argument and what it accepts.

    .. versionadded:: 0.1.0
    """


class InvalidValueError(HermesSessionsError, ValueError):
    """A model holds a value that not every backend could store and give back the same.

    One rule for every backend: text must be encodable as UTF-8 (no lone surrogates; U+0000
    is fine), and JSON-shaped fields (message content parts, tool calls, ``extra``,
    ``metadata``, ``model_config``) hold only strict JSON — objects with string keys, lists,
    strings, finite numbers, booleans and ``None``; no NaN or infinity, no sets, tuples, bytes or
    other objects.

    Attributes:
        field: Where the value is, as ``Model.field`` followed by the path inside it
            (``Message.extra['scores'][2]``).
        reason: What is wrong with it.

    .. versionadded:: 0.1.0
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field} {reason}")


class MessageTooLargeError(HermesSessionsError, ValueError):
    """A message is larger than the backend's ``max_message_bytes``; nothing was written.

    The size is that of the message as the backends store it: its JSON form (without the id,
    session id and active flag the backend keeps), in UTF-8 bytes.

    Attributes:
        size: The message's size in bytes.
        limit: The backend's ``max_message_bytes``.
        index: The position of the message in the batch that was refused, if known.

    .. versionadded:: 0.1.0
    """

    def __init__(self, *, size: int, limit: int, index: int | None = None) -> None:
        self.size = size
        self.limit = limit
        self.index = index
        super().__init__(
            f"a message of {size:,} bytes is over the limit of {limit:,} bytes "
            "(max_message_bytes); keep large content (files, images) outside the transcript and "
            "store a reference to it, or open the backend with a higher max_message_bytes "
            "(None: no limit)"
        )


class StateTooLargeError(HermesSessionsError, ValueError):
    """A state change would make one scope's value larger than allowed; nothing was written.

    Attributes:
        scope: The scope's id (``lane|agent:main:...``).
        size: The size the value would have had (compact JSON, UTF-8 bytes).
        limit: :data:`~hermes_sessions.state.MAX_STATE_BYTES`.

    .. versionadded:: 0.1.0
    """

    def __init__(self, scope: str, size: int, limit: int) -> None:
        self.scope = scope
        self.size = size
        self.limit = limit
        super().__init__(
            f"state scope {scope!r} would hold {size:,} bytes, over the limit of {limit:,}; "
            "keep large data (documents, histories) in the transcript or outside the store and "
            "put a reference in the state, or remove keys with DELETE"
        )


class SessionNotFoundError(HermesSessionsError, LookupError):
    """No session (or routing entry) exists under that id or key.

    Attributes:
        session_id: The id that was looked up, if the lookup was by id.
        key: The session key that was looked up, if the lookup was by key.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *,
        session_id: str | None = None,
        key: str | None = None,
        hint: str = "",
    ) -> None:
        self.session_id = session_id
        self.key = key
        what = f"session {session_id!r}" if session_id is not None else f"session key {key!r}"
        super().__init__(f"no {what}" + (f"; {hint}" if hint else ""))


class AmbiguousSessionError(HermesSessionsError, LookupError):
    """A prefix or title matches several sessions.

    Attributes:
        target: What was asked for.
        candidates: The matching session ids the requester may see.

    .. versionadded:: 0.1.0
    """

    def __init__(self, target: str, candidates: Sequence[str]) -> None:
        self.target = target
        self.candidates = tuple(candidates)
        listed = self.candidates[:_LISTED_CANDIDATES]
        more = len(self.candidates) > _LISTED_CANDIDATES
        shown = ", ".join(listed) + (", ..." if more else "")
        super().__init__(
            f"{target!r} matches {len(self.candidates)} sessions ({shown}); "
            "give a longer id prefix or the exact id"
        )


class SessionInUseError(HermesSessionsError, RuntimeError):
    """A session cannot be deleted: routing keys still point at it.

    Attributes:
        session_id: The session.
        keys: The keys whose current session it is.

    .. versionadded:: 0.1.0
    """

    def __init__(self, session_id: str, keys: Sequence[str]) -> None:
        self.session_id = session_id
        self.keys = tuple(keys)
        super().__init__(
            f"session {session_id} is the current session of {', '.join(self.keys)}; pass "
            "force=True to move those keys to new sessions first, or archive it instead"
        )


class ConflictError(HermesSessionsError, RuntimeError):
    """A concurrent writer got there first: a compare-and-swap or precondition failed.

    Raised when a routing entry's revision moved on since it was read, when a session that a
    write required to be open was ended meanwhile (two compressions of one session), or when an
    ``if_revision=`` write finds the session's revision moved on. Nothing was
    written. Re-read and decide again; never retry the same write blindly.

    Attributes:
        key: The session key whose entry moved on, if the conflict is on an entry.
        expected_revision: The revision the write was based on (``None``: expected no entry).
        actual_revision: The revision found (``None``: no entry).
        session_id: The session whose state moved on, if the conflict is on a session.
        attempts: How many times in a row a store command lost the race before giving up
            (``None``: a single write).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        key: str | None = None,
        *,
        expected_revision: int | None = None,
        actual_revision: int | None = None,
        session_id: str | None = None,
        attempts: int | None = None,
    ) -> None:
        self.key = key
        self.expected_revision = expected_revision
        self.actual_revision = actual_revision
        self.session_id = session_id
        self.attempts = attempts
        if key is not None:
            what = (
                f"routing entry {key!r} changed concurrently (expected "
                f"{_entry_revision(expected_revision)}, found {_entry_revision(actual_revision)})"
            )
        elif expected_revision is not None:
            what = (
                f"session {session_id!r} changed since revision {expected_revision} (it is at "
                f"revision {actual_revision})"
            )
        else:
            what = f"session {session_id!r} was ended concurrently"
        if attempts is not None:
            what += f"; the command lost the race {attempts} times in a row and gave up"
        super().__init__(f"{what}; re-read it and try again")


def _entry_revision(revision: int | None) -> str:
    return "no entry" if revision is None else f"revision {revision}"


class LedgerConflictError(ConflictError):
    """A ledger row changed since it was read (another worker accepted, claimed or marked it).

    Nothing was written. The store re-reads the row and decides again.

    Attributes:
        kind: ``"inbound"`` or ``"outbound"``.
        row_id: The row's id.
        expected_version: The version the write was based on (0: expected no row).
        actual_version: The version found (0: no row).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, kind: str, row_id: str, *, expected_version: int, actual_version: int
    ) -> None:
        self.kind = kind
        self.row_id = row_id
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.key = None
        self.expected_revision = None
        self.actual_revision = None
        self.session_id = None
        self.attempts = None
        RuntimeError.__init__(
            self,
            f"{kind} ledger row {row_id!r} changed concurrently (expected version "
            f"{expected_version}, found {actual_version}); re-read it and decide again",
        )


class ClaimLostError(HermesSessionsError, RuntimeError):
    """The message is not held by this holder: another worker took it over, or it is finished.

    Raised by the ledger's ``answer`` and ``fail`` (nothing was written). Drop the reply: the
    message is answered by whoever holds it (``status`` ``"accepted"``) or already was.

    Attributes:
        session_key: The message's lane.
        platform_message_id: The message.
        holder: Who tried to finish it.
        current_holder: Who holds it now (``None`` when nobody does).
        status: Where it stands (``"accepted"``, ``"answered"``, ``"failed"``; ``None``: unknown).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        session_key: str,
        platform_message_id: str,
        *,
        holder: str,
        current_holder: str | None,
        status: str | None,
    ) -> None:
        self.session_key = session_key
        self.platform_message_id = platform_message_id
        self.holder = holder
        self.current_holder = current_holder
        self.status = status
        if status is None:
            what = "was never accepted"
        elif status == "accepted":
            what = f"is held by {current_holder!r}"
        else:
            what = f"is already {status}"
        super().__init__(
            f"message {platform_message_id!r} of {session_key!r} {what}, so {holder!r} may not "
            "finish it; drop this reply (accept or claim the message first to answer it)"
        )


class LedgerUnavailableError(HermesSessionsError, RuntimeError):
    """The turn ledger was used where it is off: the store's mode, or the backend's ability.

    Attributes:
        reason: What is missing.

    .. versionadded:: 0.1.0
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the turn ledger is unavailable: {reason}")


class BackendClosedError(HermesSessionsError, RuntimeError):
    """The backend (or store) has been closed and can no longer be used.

    .. versionadded:: 0.1.0
    """

    def __init__(self, what: str = "backend") -> None:
        self.what = what
        super().__init__(f"the {what} is closed; open a new one")


class LeaseHeldError(HermesSessionsError, RuntimeError):
    """Another holder has a live lease on the resource (for example, is compressing a session).

    Attributes:
        resource: What is leased (``compress:<session_id>``).
        holder: Who asked for it and was refused.

    .. versionadded:: 0.1.0
    """

    def __init__(self, resource: str, holder: str) -> None:
        self.resource = resource
        self.holder = holder
        super().__init__(
            f"{resource} is leased by another holder, so {holder!r} may not work on it now; "
            "wait for that work to finish (or for its lease to expire) and re-read the session"
        )


class TurnDeadlockError(HermesSessionsError, RuntimeError):
    """A turn (or ``lock``) would wait for a key whose holder waits, in turn, for one it holds.

    Raised at once, when the second of the waits begins, instead of hanging: the block that
    raises it gives its keys up, so the other one goes on. Operations on another key from inside
    a turn (``get_or_create``, ``append``, ``reset``, ...) never wait for that key's turn, so
    they cannot take part in such a cycle; only a ``turn`` or ``lock`` block opened inside
    another can (see ``docs/async.md``).

    Attributes:
        key: The key whose block was about to be waited for.
        held: The keys the waiting block already holds.

    .. versionadded:: 0.1.0
    """

    def __init__(self, key: str, held: Sequence[str]) -> None:
        self.key = key
        self.held = tuple(held)
        holding = ", ".join(repr(k) for k in self.held)
        super().__init__(
            f"a turn holding {holding} waits for {key!r}, whose holder waits for a key this turn "
            "holds: neither would ever go on. Inside a turn, call operations on another key "
            "directly (they do not need its turn); take nested turns in one fixed key order"
        )


class LockTimeoutError(HermesSessionsError, TimeoutError):
    """A lock (file lock, database lock or lease) was not acquired in time.

    Attributes:
        resource: What was being locked (a path, a key, a session id).
        timeout: How long we waited, in seconds.

    .. versionadded:: 0.1.0
    """

    def __init__(self, resource: str, timeout: float) -> None:
        self.resource = resource
        self.timeout = timeout
        super().__init__(
            f"could not lock {resource} within {timeout:g} s; another process holds it. "
            "Retry later, or raise the timeout if the holder is legitimately slow"
        )


class IncognitoLaneError(HermesSessionsError, PermissionError):
    """The operation would carry an incognito lane's content into persisted storage, or across.

    Incognito sessions live in memory only; a rotation between an incognito and a persisted lane
    (resuming a persisted session from an incognito key, or the reverse) and a state change of an
    incognito session that reaches app or user state are refused. Nothing was written.

    Attributes:
        action: What was refused (``"rotate"``, ``"change state"``, ...).

    .. versionadded:: 0.1.0
    """

    def __init__(self, action: str, reason: str) -> None:
        self.action = action
        self.reason = reason
        super().__init__(f"{action} refused for an incognito lane: {reason}")


class InvalidSourceError(HermesSessionsError, ValueError):
    """An import source is not what it should be: not a Hermes home, not a bundle, a bad line.

    Attributes:
        path: The file or directory concerned, if any.
        line: The 1-based line of ``path`` at fault (a damaged bundle line), if known.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, message: str, *, path: Path | str | None = None, line: int | None = None
    ) -> None:
        self.path = path
        self.line = line
        super().__init__(message)


class AdapterPayloadError(HermesSessionsError, ValueError):
    """A platform event lacks a field its platform always sends, or has one of the wrong type.

    Nothing was guessed and nothing was stored.
    The adapters in :mod:`hermes_sessions.adapters` decide whose conversation a message belongs
    to from the chat, its type, the sender and the message id. When one of those is missing or
    malformed, any fallback could put the message in someone else's conversation (a group's
    message in a DM lane), so the event is refused instead.

    Attributes:
        platform: The adapter's platform (``telegram``, ``slack``, ...).
        field: The field, as a dotted path in the payload (``message.chat.type``).
        reason: What is wrong with it.

    .. versionadded:: 0.1.0
    """

    def __init__(self, platform: str, field: str, reason: str) -> None:
        self.platform = platform
        self.field = field
        self.reason = reason
        super().__init__(
            f"{platform} event: {field} {reason}; pass the event as the platform sent it "
            "(nothing was stored: the conversation it belongs to cannot be told)"
        )


class StorageError(HermesSessionsError, OSError):
    """The storage layer failed: a database or file-system error, wrapped at the boundary.

    The original error is chained as ``__cause__``.

    .. versionadded:: 0.1.0
    """

    def __init__(self, message: str) -> None:
        # OSError treats several positional arguments as (errno, strerror); keep a single message.
        super().__init__(message)


class IncompatibleStoreError(StorageError):
    """The data was written by a newer version of hermes-sessions; it is never downgraded.

    Attributes:
        found_version: The schema or format version found on disk.
        supported_version: The newest version this library understands.

    .. versionadded:: 0.1.0
    """

    def __init__(self, where: str, *, found_version: int, supported_version: int) -> None:
        self.where = where
        self.found_version = found_version
        self.supported_version = supported_version
        super().__init__(
            f"{where} uses format version {found_version}, but this hermes-sessions understands "
            f"only up to {supported_version}; upgrade hermes-sessions to open it"
        )


class MissingDependencyError(HermesSessionsError, ImportError):
    """A part of the library needs an optional dependency that is not installed.

    Attributes:
        name: The missing module (as on every :class:`ImportError`).
        extra: The extra of ``hermes-sessions`` that installs it (``testing``).
        feature: What needs it (``hermes_sessions.testing``).

    .. versionadded:: 0.1.0
    """

    def __init__(self, name: str, *, extra: str, feature: str) -> None:
        self.extra = extra
        self.feature = feature
        super().__init__(
            f"{feature} needs {name}, which is not installed; "
            f"install it with: pip install 'hermes-sessions[{extra}]'",
            name=name,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # ImportError keeps ``name`` outside ``__dict__``: pass it on as state, which
        # BaseException.__setstate__ sets back as an attribute.
        return (*super().__reduce__(), {"name": self.name})


# -- encryption at rest ----------------------------------------------------------------------------


class EncryptionKeyError(HermesSessionsError, LookupError):
    """The key a ciphertext names (or the current key) is not available from the key provider.

    Attributes:
        key_id: The key id the ciphertext names, or ``None`` when no current key is set.
        reason: Why the key is not there (a variable that is unset, an unknown id, ...).

    .. versionadded:: 0.1.0
    """

    def __init__(self, key_id: str | None, reason: str) -> None:
        self.key_id = key_id
        self.reason = reason
        which = "the current key" if key_id is None else f"key {key_id!r}"
        super().__init__(
            f"{which} is not available: {reason}; give the cipher a key provider that holds it "
            "(keep retired keys in the provider until rotate_key() has re-encrypted everything)"
        )


class DecryptionError(HermesSessionsError, ValueError):
    """A stored ciphertext does not decrypt: a wrong key under the right id, or damaged data.

    Authenticated encryption never yields garbage: a wrong key or a changed byte fails the tag.

    Attributes:
        key_id: The key id the ciphertext names (``None`` when the envelope itself is malformed).
        reason: What failed.

    .. versionadded:: 0.1.0
    """

    def __init__(self, key_id: str | None, reason: str) -> None:
        self.key_id = key_id
        self.reason = reason
        super().__init__(
            f"a stored ciphertext does not decrypt ({reason}); check that the key given for "
            f"key id {key_id!r} is the one the data was written with, or restore the data from a "
            "backup if it was damaged"
        )


_MISMATCH_ADVICE = {
    "no-cipher": "open it with its cipher: cipher=Cipher(...) in the library, or set "
    "HERMES_SESSIONS_KEYS and HERMES_SESSIONS_TOKEN_KEY (or pass --key-file FILE) for the "
    "hermes-sessions command (docs/privacy.md)",
    "wrong-key": "the key given for this key id is not the one the store was written with "
    "(regenerated or mistyped?); give the right key: nothing was written",
    "plain-store": "it holds data written without encryption; open it without a cipher, or "
    "encrypt it first with hermes_sessions.backends.encrypted.encrypt_store() (docs/privacy.md)",
    "unfinished": "encrypt_store() was interrupted; run it again to finish encrypting the store",
    "no-user-keys": "it seals users' content under per-user keys: open it with user_keys= "
    "(--user-keys DIR for the hermes-sessions command; docs/privacy.md)",
    "wrong-token-key": "the token key given is not the one the store was written with; give the "
    "right token key: nothing was written",
}


class EncryptionMismatchError(HermesSessionsError, ValueError):
    """A store opened in a way its encryption forbids; raised at open, before anything is written.

    An encrypted store records that it is encrypted and a canary sealed under each key id
    (``docs/privacy.md``), so each operator mistake fails at once with this error.

    Attributes:
        reason: ``"no-cipher"`` (an encrypted store opened without a cipher), ``"wrong-key"``
            (a key that does not open its id's canary), ``"wrong-token-key"`` (a token key
            other than the store's), ``"plain-store"`` (a store with plain data opened with a
            cipher), ``"unfinished"`` (an interrupted ``encrypt_store()``) or ``"no-user-keys"``
            (a store with per-user keys opened without them).
        key_id: The key id concerned (``"wrong-key"``), else ``None``.
        where: The store (a path, a schema), when known.

    .. versionadded:: 0.1.0
    """

    def __init__(self, reason: str, *, key_id: str | None = None, where: str = "") -> None:
        self.reason = reason
        self.key_id = key_id
        self.where = where
        store = f"the store {where}" if where else "the store"
        what = {
            "no-cipher": f"{store} is encrypted",
            "wrong-key": f"key {key_id!r} does not open {store}",
            "wrong-token-key": f"the token key does not match {store}",
            "plain-store": f"{store} is not encrypted",
            "unfinished": f"{store} is only partly encrypted",
            "no-user-keys": f"{store} uses per-user keys",
        }.get(reason, f"{store} cannot be opened this way")
        super().__init__(f"{what}: {_MISMATCH_ADVICE.get(reason, reason)}")


# -- memory files ----------------------------------------------------------------------------------


class UnknownMemoryTargetError(HermesSessionsError, ValueError):
    """A memory target other than ``"memory"`` (``MEMORY.md``) or ``"user"`` (``USER.md``).

    Attributes:
        target: The rejected target.
        known: The targets that exist.

    .. versionadded:: 0.1.0
    """

    def __init__(self, target: object, known: Sequence[str] = ("memory", "user")) -> None:
        self.target = target
        self.known = tuple(known)
        shown = repr(target)
        if len(shown) > _SHOWN_ID_LENGTH:
            shown = shown[: _SHOWN_ID_LENGTH - 3] + "..."
        super().__init__(
            f"unknown memory target {shown}; use 'memory' for the agent's own notes (MEMORY.md) "
            "or 'user' for what it knows about the user (USER.md)"
        )


def _file_of(target: str) -> str:
    return {"memory": "MEMORY.md", "user": "USER.md"}.get(target, target)


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= _SHOWN_EXCERPT_LENGTH:
        return flat
    return flat[: _SHOWN_EXCERPT_LENGTH - 3] + "..."


class MemoryRefusedError(HermesSessionsError):
    """A change to a memory file was refused; nothing was written.

    The subclasses say why and carry what a caller (or a model, through the ``memory`` tool) needs
    to do better. :meth:`to_dict` turns any of them into the tool's JSON error result.

    Attributes:
        target: ``"memory"`` or ``"user"``.
        action: ``"add"``, ``"replace"``, ``"remove"`` or ``"repair"``.
        code: A stable, machine-readable reason (``"over_limit"``, ``"blocked"``, ...).

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "refused"

    def __init__(self, message: str, *, target: str, action: str) -> None:
        self.target = target
        self.action = action
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        """The structured facts of this refusal, as JSON-serialisable values."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-serialisable error result: ``{"success": False, "error": ..., ...}``."""
        return {
            "success": False,
            "error": str(self),
            "code": self.code,
            "target": self.target,
            "action": self.action,
            **self.details(),
        }


class InvalidMemoryContentError(MemoryRefusedError, ValueError):
    """The content is unusable as a memory entry (empty, or it holds the entry delimiter).

    Attributes:
        reason: What is wrong with it, and what to do instead.

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "invalid_content"

    def __init__(self, reason: str, *, target: str, action: str) -> None:
        self.reason = reason
        super().__init__(f"{action} refused: {reason}", target=target, action=action)


class MemoryContentBlockedError(MemoryRefusedError, ValueError):
    """The threat scanner flagged the content; memory is injected into future system prompts.

    Attributes:
        pattern_ids: The ids of the patterns that matched (``injection.role_hijack``, ...).
        excerpts: The matching text of each, shortened and made printable.

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "blocked"

    def __init__(
        self, *, target: str, action: str, pattern_ids: Sequence[str], excerpts: Sequence[str]
    ) -> None:
        self.pattern_ids = tuple(pattern_ids)
        self.excerpts = tuple(excerpts)
        matched = "; ".join(
            f"{pattern_id} ({excerpt!r})"
            for pattern_id, excerpt in zip(self.pattern_ids, self.excerpts, strict=True)
        )
        super().__init__(
            f"{action} refused: the content matches {matched}. Memory is injected into every "
            "future system prompt, so it must not hold instructions to the model, hidden text, "
            "commands that leak data, or secrets; rewrite it as a plain fact, or leave it out",
            target=target,
            action=action,
        )

    def details(self) -> dict[str, Any]:
        """The matched pattern ids and excerpts."""
        return {
            "findings": [
                {"pattern_id": pattern_id, "excerpt": excerpt}
                for pattern_id, excerpt in zip(self.pattern_ids, self.excerpts, strict=True)
            ]
        }


class MemoryLimitError(MemoryRefusedError, ValueError):
    """The change would take the file past its character limit.

    It carries the current entries so the caller can consolidate (merge or drop entries with
    ``replace`` and ``remove``) and try again.

    Attributes:
        entries: The current entries of the file.
        usage: Characters used now (entries joined by the delimiter).
        limit: The file's character limit.
        requested_usage: Characters the file would use after the change.

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "over_limit"

    def __init__(
        self,
        *,
        target: str,
        action: str,
        entries: Sequence[str],
        usage: int,
        limit: int,
        requested_usage: int,
    ) -> None:
        self.entries = tuple(entries)
        self.usage = usage
        self.limit = limit
        self.requested_usage = requested_usage
        super().__init__(
            f"{action} refused: {_file_of(target)} would use {requested_usage:,} of its {limit:,} "
            f"characters (now {usage:,}). Consolidate first: merge related entries with "
            "'replace' or drop stale ones with 'remove', then try again with shorter content",
            target=target,
            action=action,
        )

    def details(self) -> dict[str, Any]:
        """The current entries, usage, limit and the usage the change would need."""
        return {
            "entries": list(self.entries),
            "usage": self.usage,
            "limit": self.limit,
            "requested_usage": self.requested_usage,
        }


class MemoryEntryNotFoundError(MemoryRefusedError, LookupError):
    """No entry contains ``old_text`` (a case-sensitive substring).

    Attributes:
        old_text: The text that was looked for.

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "no_match"

    def __init__(self, old_text: str, *, target: str, action: str) -> None:
        self.old_text = old_text
        super().__init__(
            f"{action} refused: no entry of {_file_of(target)} contains {_shorten(old_text)!r}; "
            "the match is a case-sensitive substring of one entry: copy a distinctive part of it "
            "exactly",
            target=target,
            action=action,
        )

    def details(self) -> dict[str, Any]:
        """The text that was looked for."""
        return {"old_text": self.old_text}


class AmbiguousMemoryMatchError(MemoryRefusedError, LookupError):
    """Several different entries contain ``old_text``.

    Attributes:
        old_text: The text that was looked for.
        previews: The start of each matching entry.

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "ambiguous_match"

    def __init__(self, old_text: str, previews: Sequence[str], *, target: str, action: str) -> None:
        self.old_text = old_text
        self.previews = tuple(previews)
        listed = "; ".join(repr(preview) for preview in self.previews[:_LISTED_CANDIDATES])
        more = ", ..." if len(self.previews) > _LISTED_CANDIDATES else ""
        super().__init__(
            f"{action} refused: {len(self.previews)} different entries of {_file_of(target)} "
            f"contain {_shorten(old_text)!r} ({listed}{more}); give a longer old_text that only "
            "one of them contains",
            target=target,
            action=action,
        )

    def details(self) -> dict[str, Any]:
        """The text that was looked for and a preview of each matching entry."""
        return {"old_text": self.old_text, "matches": list(self.previews)}


class IncognitoMemoryError(MemoryRefusedError, PermissionError):
    """The ``memory`` tool was called from an incognito lane: memory outlives the chat.

    Memory files are injected into every future conversation, so a "don't remember this" chat
    must not write them. The model is told to keep the fact for this conversation only.

    Attributes:
        key: The incognito session key the call came from.

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "incognito"

    def __init__(self, key: str, *, target: str, action: str) -> None:
        self.key = key
        super().__init__(
            f"{action} refused: this conversation is incognito ({key}), so nothing from it may "
            "be saved to long-term memory; keep the fact for this conversation only",
            target=target,
            action=action,
        )


class MemoryScopeError(MemoryRefusedError, PermissionError):
    """A write to a memory scope the caller may not write (``ScopedMemory``'s lane rule).

    A conversation writes its own lane's notes and the speaking user's profile; app memory (shown
    in every conversation) only when the host allows it, and from a private lane only when the
    host also allows private facts to widen.

    Attributes:
        scope: The scope refused (``app``, ``user:<platform>:<id>``, ``lane:<key>``).

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "scope_refused"

    def __init__(self, reason: str, *, scope: str, target: str, action: str) -> None:
        self.scope = scope
        self.reason = reason
        super().__init__(f"{action} refused: {reason}", target=target, action=action)

    def details(self) -> dict[str, Any]:
        """The scope refused."""
        return {"scope": self.scope}


class MemoryDriftError(MemoryRefusedError, RuntimeError):
    """The file was changed outside the store and is no longer in the entry format.

    It is left untouched, a copy is kept at ``backup_path``, and no change is made until the file
    is fixed by hand or with :meth:`~hermes_sessions.memory.MemoryStore.repair`.

    Attributes:
        path: The memory file.
        backup_path: Where the copy was saved (``None`` when there was nothing to copy).
        reason: What is wrong with the file.

    .. versionadded:: 0.1.0
    """

    code: ClassVar[str] = "drift"

    def __init__(
        self,
        *,
        target: str,
        action: str,
        path: Path | str,
        backup_path: Path | str | None,
        reason: str,
    ) -> None:
        self.path = path
        self.backup_path = backup_path
        self.reason = reason
        saved = f"a copy is saved at {backup_path}" if backup_path is not None else "it is kept"
        how = "by hand" if action == "repair" else "by hand or to run the store's repair"
        super().__init__(
            f"{action} refused: {path} was edited outside the memory store ({reason}); {saved}. "
            f"Ask the user to fix the file {how} (entries separated by a line holding only '§', "
            "none longer than the limit), then try again",
            target=target,
            action=action,
        )

    def details(self) -> dict[str, Any]:
        """The file, the backup and the reason."""
        return {
            "path": str(self.path),
            "backup_path": None if self.backup_path is None else str(self.backup_path),
            "reason": self.reason,
        }
