"""Session titles in the store: who owns a title, clashes, and the next title of a lineage.

A title is unique per owner: the platform and user of the session, else the key that created
it, else the platform. Branches and compressions continue their parent's title (``X`` →
``X #2``), shortened at the base if the number would not fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from hermes_sessions.exceptions import TitleConflictError
from hermes_sessions.models import check_json
from hermes_sessions.queries import SessionQuery
from hermes_sessions.store._incognito import lane_side
from hermes_sessions.titles import (
    MAX_TITLE_LENGTH,
    next_title_in_lineage,
    sanitize_title,
    title_owner,
)

if TYPE_CHECKING:
    from hermes_sessions.keys import KeyPolicy
    from hermes_sessions.models import SessionRecord, SessionSource
    from hermes_sessions.protocols import Backend

__all__ = ["Owner", "check_title_free", "next_title", "owner", "owner_of_new", "set_title"]

Owner: TypeAlias = tuple[str, ...]
"""``("user", platform, user_id)``, ``("key", session_key)`` or ``("source", platform)``."""


def owner(record: SessionRecord) -> Owner:
    """Who owns a session's title: platform + user, else the creating key, else the platform."""
    return title_owner(record)


def owner_of_new(keys: KeyPolicy, key: str, source: SessionSource) -> Owner:
    """The owner a session created under ``key`` for ``source`` will have."""
    user = keys.canonical(source.platform, source.participant)
    return ("user", source.platform, user) if user else ("key", key)


def _owned(backend: Backend, who: Owner, query: SessionQuery) -> list[SessionRecord]:
    page = backend.list_sessions(query)
    return [item.record for item in page.items if owner(item.record) == who]


def check_title_free(backend: Backend, title: str, who: Owner, *, exclude: str | None) -> None:
    """Raise ``TitleConflictError`` if a session of ``who`` other than ``exclude`` has ``title``."""
    for record in _owned(backend, who, SessionQuery(limit=None, title=title)):
        if record.id != exclude and record.title is not None:
            raise TitleConflictError(title, record.id)


def next_title(backend: Backend, title: str, who: Owner) -> str:
    """The next title of ``title``'s lineage among ``who``'s sessions, within the length limit."""
    query = SessionQuery(limit=None, title_lineage=title)
    existing = {r.title for r in _owned(backend, who, query) if r.title is not None}
    proposed = next_title_in_lineage(title, existing)
    if len(proposed) <= MAX_TITLE_LENGTH:
        return proposed
    base, _, number = proposed.rpartition(" #")
    return f"{base[: MAX_TITLE_LENGTH - len(number) - 2].rstrip()} #{number}"


def set_title(backend: Backend, record: SessionRecord, title: str | None) -> SessionRecord:
    """Set or clear ``record``'s title after checking no other session of its owner has it."""
    clean = sanitize_title(title)
    if clean is not None:
        check_json(clean, "SessionRecord.title")  # a lone surrogate: before any lookup by it
        lane = lane_side(backend, record.session_key)  # an incognito lane's titles are its own
        check_title_free(lane, clean, owner(record), exclude=record.id)
    return backend.update_session(record.id, values={"title": clean})
