"""The exceptions raised by hermes-sessions.

Every error the library raises on purpose derives from :class:`HermesSessionsError`, so one
``except HermesSessionsError`` catches them all. Each subclass also inherits the built-in that
matches its meaning, so code that already catches ``LookupError`` or ``ValueError`` keeps working::

    HermesSessionsError
    ├── InvalidKeyError            (ValueError)    a session key or key component is malformed
    ├── InvalidIdError             (ValueError)    a session id that could escape the data dir
    ├── InvalidTitleError          (ValueError)    a title is too long after sanitising
    ├── TitleConflictError         (ValueError)    the owner already has a session with that title
    ├── CorruptRecordError         (ValueError)    a stored record cannot be read (path, line)
    ├── InvalidCursorError         (ValueError)    a pagination cursor was not made by us
    ├── SessionNotFoundError       (LookupError)   no session or routing entry by id/key
    ├── AmbiguousSessionError      (LookupError)   a prefix or title names several sessions
    ├── ConflictError              (RuntimeError)  compare-and-swap lost: the revision moved on
    ├── BackendClosedError         (RuntimeError)  the backend was closed
    ├── LockTimeoutError           (TimeoutError)  a file or row lock was not acquired in time
    └── StorageError               (OSError)       the storage layer failed (wraps sqlite3, OS)
        └── IncompatibleStoreError                 the data was written by a newer version

Errors carry structured attributes (``path``, ``line``, ``key``, ``session_id``, ...) so callers can
act on them without parsing messages, and their messages say what to do next. All of them pickle,
so they cross process boundaries intact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "AmbiguousSessionError",
    "BackendClosedError",
    "ConflictError",
    "CorruptRecordError",
    "HermesSessionsError",
    "IncompatibleStoreError",
    "InvalidCursorError",
    "InvalidIdError",
    "InvalidKeyError",
    "InvalidTitleError",
    "LockTimeoutError",
    "SessionNotFoundError",
    "StorageError",
    "TitleConflictError",
]


_SHOWN_ID_LENGTH = 80
_LISTED_CANDIDATES = 10


def _rebuild(cls: type[HermesSessionsError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class HermesSessionsError(Exception):
    """The root of every error that hermes-sessions raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take keyword-only structured arguments, which the default exception pickling
        # (``cls(*args)``) cannot replay; rebuild from the message and the attribute dict instead.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class InvalidKeyError(HermesSessionsError, ValueError):
    """A session key, or a component used to build one, is malformed.

    Attributes:
        key: The offending key or component.
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"invalid session key {key!r}: {reason}")


class InvalidIdError(HermesSessionsError, ValueError):
    """A session id is not safe to use as a file name.

    Ids may contain only ``A-Z a-z 0-9 _ . -``, be 1-128 characters long, contain no ``..`` and
    not start with a dot, so that a crafted id can never name a file outside the data directory.

    Attributes:
        session_id: The rejected id (possibly truncated in the message).
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
    """

    def __init__(self, title: str, other_session_id: str) -> None:
        self.title = title
        self.other_session_id = other_session_id
        super().__init__(
            f"title {title!r} is already used by session {other_session_id}; "
            "choose another title or rename that session first"
        )


class CorruptRecordError(HermesSessionsError, ValueError):
    """A stored record cannot be read back.

    Nothing is skipped silently: the error names the file and line (when the record came from a
    file) so an operator can inspect it, and backends offer a ``repair`` path that keeps a backup.

    Attributes:
        path: The file the record came from, if any.
        line: The 1-based line number within ``path``, if known.
        reason: What is wrong with the record.
    """

    def __init__(
        self, reason: str, *, path: Path | str | None = None, line: int | None = None
    ) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f" in {path}" + (f" at line {line}" if line is not None else "")
        super().__init__(
            f"corrupt record{where}: {reason}; the data was left untouched: inspect it, or run "
            "the backend's repair to move bad records aside (a backup is kept)"
        )


class InvalidCursorError(HermesSessionsError, ValueError):
    """A pagination cursor is malformed (it must come from a previous page's ``next_cursor``).

    Attributes:
        cursor: The rejected cursor.
    """

    def __init__(self, cursor: str) -> None:
        self.cursor = cursor
        super().__init__(
            "invalid pagination cursor; pass the next_cursor of a previous page unchanged, "
            "or no cursor to start from the first page"
        )


class SessionNotFoundError(HermesSessionsError, LookupError):
    """No session (or routing entry) exists under that id or key.

    Attributes:
        session_id: The id that was looked up, if the lookup was by id.
        key: The session key that was looked up, if the lookup was by key.
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


class ConflictError(HermesSessionsError, RuntimeError):
    """A concurrent writer got there first: a compare-and-swap or precondition failed.

    Raised when a routing entry's revision moved on since it was read, or when a session that a
    write required to be open was ended meanwhile (two compressions of one session). Nothing was
    written. Re-read and decide again; never retry the same write blindly.

    Attributes:
        key: The session key whose entry moved on, if the conflict is on an entry.
        expected_revision: The revision the write was based on (``None``: expected no entry).
        actual_revision: The revision found (``None``: no entry).
        session_id: The session whose state moved on, if the conflict is on a session.
    """

    def __init__(
        self,
        key: str | None = None,
        *,
        expected_revision: int | None = None,
        actual_revision: int | None = None,
        session_id: str | None = None,
    ) -> None:
        self.key = key
        self.expected_revision = expected_revision
        self.actual_revision = actual_revision
        self.session_id = session_id
        if key is not None:
            what = (
                f"routing entry {key!r} changed concurrently (expected revision "
                f"{expected_revision}, found {actual_revision})"
            )
        else:
            what = f"session {session_id!r} was ended concurrently"
        super().__init__(f"{what}; re-read it and try again")


class BackendClosedError(HermesSessionsError, RuntimeError):
    """The backend (or store) has been closed and can no longer be used."""

    def __init__(self, what: str = "backend") -> None:
        self.what = what
        super().__init__(f"the {what} is closed; open a new one")


class LockTimeoutError(HermesSessionsError, TimeoutError):
    """A lock (file lock, database lock or lease) was not acquired in time.

    Attributes:
        resource: What was being locked (a path, a key, a session id).
        timeout: How long we waited, in seconds.
    """

    def __init__(self, resource: str, timeout: float) -> None:
        self.resource = resource
        self.timeout = timeout
        super().__init__(
            f"could not lock {resource} within {timeout:g} s; another process holds it. "
            "Retry later, or raise the timeout if the holder is legitimately slow"
        )


class StorageError(HermesSessionsError, OSError):
    """The storage layer failed: a database or file-system error, wrapped at the boundary.

    The original error is chained as ``__cause__``.
    """

    def __init__(self, message: str) -> None:
        # OSError treats several positional arguments as (errno, strerror); keep a single message.
        super().__init__(message)


class IncompatibleStoreError(StorageError):
    """The data was written by a newer version of hermes-sessions; it is never downgraded.

    Attributes:
        found_version: The schema or format version found on disk.
        supported_version: The newest version this library understands.
    """

    def __init__(self, where: str, *, found_version: int, supported_version: int) -> None:
        self.where = where
        self.found_version = found_version
        self.supported_version = supported_version
        super().__init__(
            f"{where} uses format version {found_version}, but this hermes-sessions understands "
            f"only up to {supported_version}; upgrade hermes-sessions to open it"
        )
