"""The async store's searches and messages in context (a mixin of ``AsyncSessionStore``)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal, ParamSpec, TypeVar, Unpack, overload

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.models import Message
    from hermes_sessions.queries import (
        SearchHit,
        SearchMode,
        SearchQuery,
        SearchQueryFields,
        SessionMatch,
    )
    from hermes_sessions.store import AnchoredView, SessionStore

__all__ = ["AsyncSearches"]

P = ParamSpec("P")
R = TypeVar("R")


class AsyncSearches:
    """Mixin: async ``search`` (both modes), ``messages_around`` and ``anchored_view``.

    .. versionadded:: 0.1.0
    """

    __slots__ = ()
    store: SessionStore

    async def _run(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        raise NotImplementedError  # AsyncSessionStore runs it in its executor

    @overload
    async def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        mode: Literal["exact"] = "exact",
        **filters: Unpack[SearchQueryFields],
    ) -> list[SearchHit]: ...

    @overload
    async def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        mode: Literal["natural"],
        **filters: Unpack[SearchQueryFields],
    ) -> list[SessionMatch]: ...

    async def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        mode: SearchMode = "exact",
        **filters: Unpack[SearchQueryFields],
    ) -> list[SearchHit] | list[SessionMatch]:
        """Async :meth:`SessionStore.search` (``mode="natural"`` too)."""
        search = functools.partial(self.store.search, group=group, mode=mode, **filters)
        return await self._run(search, query)

    async def messages_around(
        self, session_id: str, message_id: int, window: int = 5
    ) -> list[Message]:
        """Async :meth:`SessionStore.messages_around`."""
        return await self._run(self.store.messages_around, session_id, message_id, window)

    async def anchored_view(
        self, session_id: str, message_id: int, *, window: int = 5, head: int = 2, tail: int = 2
    ) -> AnchoredView:
        """Async :meth:`SessionStore.anchored_view`."""
        return await self._run(
            self.store.anchored_view, session_id, message_id, window=window, head=head, tail=tail
        )
