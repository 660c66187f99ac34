"""What ``check()`` adds on an encrypted store: every value sealed, current, and in its place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.encrypted._rotate import scope_ids, stale_values
from hermes_sessions.checks import CheckProblem
from hermes_sessions.exceptions import DecryptionError, EncryptionKeyError
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.backends.encrypted._backend import EncryptedBackend

__all__ = ["encryption_problems"]


def _opens(
    problems: list[CheckProblem], where: str, work: Callable[..., object], *args: object
) -> None:
    try:
        work(*args)
    except (DecryptionError, EncryptionKeyError) as error:
        problems.append(CheckProblem("encryption", where, f"does not open: {error}"))


def encryption_problems(backend: EncryptedBackend) -> list[CheckProblem]:
    """Values in the clear, under an older key, or that do not open where they are stored."""
    current = backend.cipher.current_key_id
    old = set(stale_values(backend, plain=False))
    problems = [
        CheckProblem("encryption", place, "stored in the clear in an encrypted store")
        for place in stale_values(backend, plain=True)
        if place not in old
    ]
    problems.extend(
        CheckProblem(
            "encryption",
            place,
            f"sealed under a key other than the current {current!r}: run rotate_key() to finish",
        )
        for place in sorted(old)
    )
    inner, codec = backend.inner, backend.codec
    for entry in inner.entries():
        _opens(problems, f"entry {entry.session_key}", codec.open_entry, entry)
    for scope_id in scope_ids(inner):
        _opens(problems, f"state {scope_id}", backend.get_state, [scope_id])
    for item in inner.list_sessions(SessionQuery(limit=None)).items:
        record = item.record
        _opens(problems, f"session {record.id}", codec.open_record, record)
        for message in inner.get_messages(record.id, include_inactive=True):
            where = f"message {record.id}/{message.id}"
            _opens(problems, where, codec.open_message, message, record.id)
    return problems
