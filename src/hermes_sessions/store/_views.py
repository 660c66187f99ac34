"""Reading views of the store: listings, grouped search and messages in context.

Everything here only reads. A compressed conversation shows as its newest session in listings,
and counts once in a search grouped by lineage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs

from hermes_sessions.exceptions import SessionNotFoundError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import Message, SessionEntry, SessionRecord
from hermes_sessions.protocols import SupportsSearch
from hermes_sessions.store._lineage import COMPRESSION, root_id

if TYPE_CHECKING:
    from hermes_sessions.protocols import Backend
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery

__all__ = [
    "AnchoredView",
    "anchored_view",
    "list_sessions",
    "messages_around",
    "require_search",
    "search",
    "seen",
    "stored_copy",
]

DIALOGUE: frozenset[str] = frozenset({"user", "assistant"})
"""The roles an anchored view shows around its anchor."""


@attrs.frozen(kw_only=True)
class AnchoredView:
    """A hit in context: user/assistant messages around an anchor plus the session's edges.

    .. versionadded:: 0.1.0
    """

    session: SessionRecord
    anchor: Message
    before: tuple[Message, ...]
    after: tuple[Message, ...]
    head: tuple[Message, ...]
    """The first messages of the session, if they come before the window."""
    tail: tuple[Message, ...]
    """The last messages of the session, if they come after the window."""


def list_sessions(
    backend: Backend, query: SessionQuery, *, include_compressed: bool
) -> SessionPage:
    """One page of ``query``, leaving out compressed sessions unless ``include_compressed``."""
    if not include_compressed and COMPRESSION not in query.exclude_end_reasons:
        query = attrs.evolve(query, exclude_end_reasons=(*query.exclude_end_reasons, COMPRESSION))
    return backend.list_sessions(query)


def require_search(backend: Backend) -> None:
    """Raise ``TypeError`` unless ``backend`` searches."""
    if not isinstance(backend, SupportsSearch):
        raise TypeError(f"{backend!r} cannot search; use a backend with search")


def search(
    backend: Backend, query: SearchQuery, *, group: Literal["lineage"] | None
) -> list[SearchHit]:
    """Search ``backend``; with ``group="lineage"`` keep the best hit of each lineage root."""
    if not isinstance(backend, SupportsSearch):
        raise TypeError(f"{backend!r} cannot search; use a backend with search")
    if group is None:
        return backend.search(query)
    wanted = None if query.limit is None else query.offset + query.limit
    batch = None if wanted is None else max(4 * wanted, 50)
    roots: dict[str, str] = {}
    best: dict[str, SearchHit] = {}
    position = 0
    while True:
        hits = backend.search(attrs.evolve(query, limit=batch, offset=position))
        for hit in hits:
            best.setdefault(root_id(backend, hit.session, roots), hit)
        if batch is None or len(hits) < batch or (wanted is not None and len(best) >= wanted):
            break
        position += batch
    return list(best.values())[query.offset : wanted]


def messages_around(
    backend: Backend, session_id: str, message_id: int, window: int
) -> list[Message]:
    """Up to ``window`` active messages on each side of a message, and the message itself."""
    validate_session_id(session_id)
    anchor = backend.get_message(session_id, message_id)
    if anchor is None:
        raise SessionNotFoundError(session_id=session_id, hint=f"it has no message {message_id}")
    before = backend.get_messages(session_id, before_id=message_id, limit=window, from_end=True)
    after = backend.get_messages(session_id, after_id=message_id, limit=window)
    return [*before, anchor, *after]


def anchored_view(
    backend: Backend, session_id: str, message_id: int, *, window: int, head: int, tail: int
) -> AnchoredView:
    """``window`` dialogue messages each side of an anchor, plus ``head`` first, ``tail`` last."""
    validate_session_id(session_id)
    record = backend.get_session(session_id)
    anchor = backend.get_message(session_id, message_id)
    if record is None or anchor is None:
        raise SessionNotFoundError(session_id=session_id, hint=f"no message {message_id}")
    before = _dialogue(backend, session_id, window, before_id=message_id)
    after = _dialogue(backend, session_id, window, after_id=message_id)
    start = (before[0] if before else anchor).id
    end = (after[-1] if after else anchor).id
    first = backend.get_messages(session_id, before_id=start, limit=head) if head else []
    last = []
    if tail:
        last = backend.get_messages(session_id, after_id=end, limit=tail, from_end=True)
    return AnchoredView(
        session=record,
        anchor=anchor,
        before=tuple(before),
        after=tuple(after),
        head=tuple(first),
        tail=tuple(m for m in last if m not in first),
    )


def _dialogue(
    backend: Backend,
    session_id: str,
    count: int,
    *,
    before_id: int | None = None,
    after_id: int | None = None,
) -> list[Message]:
    """Up to ``count`` user/assistant messages on one side of an anchor, in order."""
    found: list[Message] = []
    while len(found) < count:
        page = backend.get_messages(
            session_id,
            before_id=before_id,
            after_id=after_id,
            limit=4 * count,
            from_end=before_id is not None,
        )
        if not page:
            break
        if before_id is not None:
            found = [m for m in page if m.role in DIALOGUE] + found
            before_id = page[0].id
        else:
            found += [m for m in page if m.role in DIALOGUE]
            after_id = page[-1].id
    return found[-count:] if before_id is not None else found[:count]


def stored_copy(
    backend: Backend, entry: SessionEntry | None, platform_message_id: str
) -> Message | None:
    """The stored copy of a delivery within the redelivery window of ``entry``'s key.

    The window is the key's current session, then the session it last moved away from
    (``previous_session_id``): a redelivery, an edit or a recall arriving just after a reset,
    ``/new``, resume or branch still finds its message. Inactive (rewound, recalled) copies count.
    """
    if entry is None:
        return None
    for session_id in (entry.session_id, entry.previous_session_id):
        if session_id is not None:
            found = backend.find_message(session_id, platform_message_id)
            if found is not None:
                return found
    return None


def seen(backend: Backend, key_or_session_id: str, platform_message_id: str) -> Message | None:
    """The stored copy of a delivery: in the key's window (:func:`stored_copy`), or one session."""
    if ":" in key_or_session_id:  # keys always contain ':', session ids never do
        return stored_copy(backend, backend.get_entry(key_or_session_id), platform_message_id)
    return backend.find_message(validate_session_id(key_or_session_id), platform_message_id)
