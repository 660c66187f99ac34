"""``import_hermes``: a Hermes profile into any backend, read-only on the source, idempotent."""

from __future__ import annotations

import functools
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hermes_sessions.cipher import require_plain_store
from hermes_sessions.exceptions import (
    ConflictError,
    InvalidArgumentError,
    InvalidSourceError,
    MemoryRefusedError,
    MessageTooLargeError,
)
from hermes_sessions.interop._hermes_profile import HermesSession, read_profile
from hermes_sessions.interop._report import HermesImportReport, ImportProblem
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.memory import MemoryResult, MemoryStore, ScopedMemory
    from hermes_sessions.models import SessionEntry
    from hermes_sessions.protocols import Backend

__all__ = [
    "DEFAULT_MAX_MESSAGE_CHARS",
    "OWNER_PROFILE_PREFIX",
    "import_hermes",
    "memory_destinations",
    "resolve_zone",
]

DEFAULT_MAX_MESSAGE_CHARS = 200_000
"""Messages longer than this are imported whole and listed as ``oversize`` in the report.

.. versionadded:: 0.1.0
"""


def resolve_zone(timezone: str | tzinfo | None) -> tzinfo:
    """The profile's zone: a tzinfo, an IANA name, or ``None`` for the host's zone."""
    if timezone is None:
        from hermes_sessions.policy import host_timezone  # noqa: PLC0415  # reads /etc once

        return host_timezone()
    if isinstance(timezone, tzinfo):
        return timezone
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise InvalidSourceError(
            f"unknown time zone {timezone!r}; give an IANA name such as 'Asia/Shanghai'"
        ) from error


_HERMES_FILES: Final = {"memory": "MEMORY.md", "user": "USER.md"}
OWNER_PROFILE_PREFIX: Final = "Owner's profile: "
"""How ``USER.md`` entries read in app memory when no ``user`` was named."""


def memory_destinations(
    memory: MemoryStore | ScopedMemory | None, user: str | None
) -> dict[str, tuple[Callable[[str], MemoryResult], str]]:
    """Where each Hermes memory file goes: ``{target: (add one entry, "scope it went to")}``.

    Raises:
        InvalidArgumentError: ``user`` is not ``platform:id``, or is given without a
            ``ScopedMemory`` (a ``MemoryStore`` has one profile only).
    """
    from hermes_sessions.memory import MemoryScope, ScopedMemory  # noqa: PLC0415  # on demand

    if memory is None:
        return {}
    if not isinstance(memory, ScopedMemory):
        if user is not None:
            raise InvalidArgumentError(
                "a user to import USER.md for needs a ScopedMemory (a MemoryStore keeps one "
                "profile); pass memory=ScopedMemory(...)"
            )
        return {
            "memory": (functools.partial(memory.add, "memory"), "memory"),
            "user": (functools.partial(memory.add, "user"), "user"),
        }
    app = MemoryScope.app()
    destinations: dict[str, tuple[Callable[[str], MemoryResult], str]] = {
        "memory": (functools.partial(memory.add, app), "app")
    }
    if user is None:
        destinations["user"] = (
            lambda entry: memory.add(app, OWNER_PROFILE_PREFIX + entry),
            "app (marked as the owner's profile)",
        )
        return destinations
    platform, _, user_id = user.partition(":")
    if not platform or not user_id:
        raise InvalidArgumentError(
            f"the user is 'platform:id', such as 'telegram:123456', got {user!r}"
        )
    scope = MemoryScope.user(platform, user_id)
    destinations["user"] = (functools.partial(memory.add, scope), str(scope))
    return destinations


def import_hermes(
    home: Path | str,
    store: SessionStore | Backend,
    *,
    timezone: str | tzinfo | None = None,
    memory: MemoryStore | ScopedMemory | None = None,
    user: str | None = None,
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS,
    progress: Callable[[int, int], None] | None = None,
) -> HermesImportReport:
    """Import the Hermes profile at ``home`` into ``store`` (a ``SessionStore`` or a backend).

    Sessions keep their ids, titles, lineage, end reasons, token counters, archive flag and
    soft-deleted messages; Hermes-only columns go to ``record.metadata["hermes"]`` and each
    message's Hermes row id to ``message.extra["hermes_id"]``. Routing keys come from
    ``sessions/sessions.json``; memory entries from ``memories/`` go into ``memory`` when given.
    Naive local times are read in ``timezone`` (an IANA name or tzinfo; default: the host's).

    Into a :class:`~hermes_sessions.memory.ScopedMemory`, ``MEMORY.md`` goes to app memory and
    ``USER.md`` to the profile of ``user`` (``"platform:id"``, the person the profile is about);
    without ``user``, to app memory, each entry marked ``Owner's profile:``. The report's
    ``memory_mapping`` says where each file went. Into a ``MemoryStore`` the files map one to one.

    The source is never written. Problems (a torn JSONL line, lone surrogates, oversize
    messages, something already in the target under the same id) are listed in the report;
    they never stop the import. Importing the same profile again changes nothing.

    ``progress(done, total)`` is called after each session.

    Raises:
        InvalidSourceError: ``home`` is not a Hermes home, or the time zone is unknown, or its
            database is not one the importer reads safely: linked from outside the profile, or
            ``sessions`` / ``messages`` a view, a virtual table, with generated columns or
            without a column the importer needs (``docs/migrating-from-hermes.md``).
        EncryptionMismatchError: ``store`` is an encrypted store opened without its cipher
            (an encrypted one opened with it gets every value sealed).

    .. versionadded:: 0.1.0
    """
    backend = store.backend if isinstance(store, SessionStore) else store
    require_plain_store(backend)
    destinations = memory_destinations(memory, user)
    profile = read_profile(
        Path(home), zone=resolve_zone(timezone), max_message_chars=max_message_chars
    )
    problems = list(profile.problems)
    created: list[str] = []
    skipped: list[str] = []
    written = 0
    for done, session in enumerate(profile.sessions, start=1):
        count = _import_session(backend, session, problems)
        if count is None:
            skipped.append(session.record.id)
        else:
            created.append(session.record.id)
            written += count
        if progress is not None:
            progress(done, len(profile.sessions))
    entries: list[str] = []
    skipped_entries: list[str] = []
    for entry in profile.entries:
        outcome = _import_entry(backend, entry, problems)
        (entries if outcome else skipped_entries).append(entry.session_key)
    added = 0
    if memory is not None:
        for target, items in sorted(profile.memory.items()):
            add, _label = destinations[target]
            for item in items:
                try:
                    result = add(item)
                except MemoryRefusedError as error:
                    problems.append(
                        ImportProblem(kind="memory_refused", where=target, detail=str(error))
                    )
                else:
                    added += int(result.changed)
    return HermesImportReport(
        sessions=created,
        skipped_sessions=skipped,
        messages=written,
        entries=entries,
        skipped_entries=skipped_entries,
        memory_entries=added,
        memory_mapping={
            _HERMES_FILES[target]: label for target, (_add, label) in destinations.items()
        },
        jsonl_preferred=profile.jsonl_preferred,
        problems=problems,
    )


def _import_session(
    backend: Backend, session: HermesSession, problems: list[ImportProblem]
) -> int | None:
    """Write one session; ``None`` if the target already had it (left alone)."""
    record = session.record
    existing = backend.get_session(record.id)
    if existing is not None:
        held = backend.get_messages(record.id, include_inactive=True)
        if held or not session.messages:
            if existing.started_at != record.started_at or len(held) > len(session.messages):
                problems.append(
                    ImportProblem(
                        kind="conflict",
                        where=record.id,
                        detail="the target already holds another session under this id; "
                        "it was left alone",
                    )
                )
            return None
        # An earlier import stopped between creating the session and writing its messages.
    else:
        backend.create_session(record)
    messages = list(session.messages)
    while messages:
        try:
            backend.append_messages(record.id, messages)
        except MessageTooLargeError as error:
            if error.index is None:
                raise
            del messages[error.index]
            problems.append(
                ImportProblem(
                    kind="too_large",
                    where=record.id,
                    detail=f"a message of {error.size:,} bytes, over the target's limit of "
                    f"{error.limit:,} (max_message_bytes), was left out",
                )
            )
        else:
            break
    return len(messages)


def _import_entry(backend: Backend, entry: SessionEntry, problems: list[ImportProblem]) -> bool:
    """Write one routing entry; ``False`` if the key already points at the same session."""
    current = backend.get_entry(entry.session_key)
    if current is not None:
        if current.session_id != entry.session_id:
            problems.append(
                ImportProblem(
                    kind="conflict",
                    where=entry.session_key,
                    detail=f"the key already points at {current.session_id}; it was left alone "
                    f"(Hermes had {entry.session_id})",
                )
            )
        return False
    try:
        backend.put_entry(entry, expected_revision=None)
    except ConflictError:
        return False
    return True
