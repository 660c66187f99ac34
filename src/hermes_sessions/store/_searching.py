"""The store's reading of search results: both search modes and messages in context.

:class:`Searches` is mixed into :class:`~hermes_sessions.store.SessionStore`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Unpack, overload

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.queries import SearchQuery
from hermes_sessions.store import _natural, _views

if TYPE_CHECKING:
    from hermes_sessions.models import Message
    from hermes_sessions.protocols import Backend
    from hermes_sessions.queries import SearchHit, SearchMode, SearchQueryFields, SessionMatch
    from hermes_sessions.store._views import AnchoredView

__all__ = ["Searches"]


class Searches:
    """Mixin: ``search`` (exact and natural), ``messages_around`` and ``anchored_view``.

    .. versionadded:: 0.1.0
    """

    __slots__ = ()
    backend: Backend

    @overload
    def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        mode: Literal["exact"] = "exact",
        **filters: Unpack[SearchQueryFields],
    ) -> list[SearchHit]: ...

    @overload
    def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        mode: Literal["natural"],
        **filters: Unpack[SearchQueryFields],
    ) -> list[SessionMatch]: ...

    def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        mode: SearchMode = "exact",
        **filters: Unpack[SearchQueryFields],
    ) -> list[SearchHit] | list[SessionMatch]:
        """Full-text search across sessions (``docs/search.md``).

        Pass the query text with :class:`SearchQuery` fields as keywords, or a ``SearchQuery``.
        ``mode="exact"`` (the default) reads the text in the exact query language and returns
        message hits; ``group="lineage"`` keeps only the best hit per lineage root, so a
        compressed conversation counts once. ``mode="natural"`` reads it as a question and
        returns :class:`~hermes_sessions.queries.SessionMatch` values: sessions ranked by how
        much of the question they cover, only those covering enough (``limit`` and ``offset``
        then count sessions). A backend that does not implement
        :class:`~hermes_sessions.protocols.SupportsSearch` raises ``TypeError``.

        .. versionchanged:: 0.1.0 ``mode``.
        """
        if isinstance(query, str):
            query = SearchQuery(text=query, **filters)
        if mode == "natural":
            _views.require_search(self.backend)
            return _natural.natural_search(self.backend, query, group=group)
        if mode != "exact":
            raise InvalidArgumentError(f"unknown search mode {mode!r}; use 'exact' or 'natural'")
        return _views.search(self.backend, query, group=group)

    def messages_around(self, session_id: str, message_id: int, window: int = 5) -> list[Message]:
        """Up to ``window`` active messages on each side of a message, and the message itself."""
        return _views.messages_around(self.backend, session_id, message_id, window)

    def anchored_view(
        self,
        session_id: str,
        message_id: int,
        *,
        window: int = 5,
        head: int = 2,
        tail: int = 2,
    ) -> AnchoredView:
        """A search hit in context, for a model or a person to read.

        ``window`` user/assistant messages on each side of the anchor, plus the first ``head``
        messages before that window and the last ``tail`` messages after it.
        """
        return _views.anchored_view(
            self.backend, session_id, message_id, window=window, head=head, tail=tail
        )
