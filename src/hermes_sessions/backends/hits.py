"""Search hits that cut their snippet only when it is read (issue 21, item 3).

A search returning every hit (``limit=None``) spent most of its time cutting snippets — the
tokenizing and matching of each message's text — that many callers never read (a host listing
sessions, an evaluation comparing message ids, ``group="lineage"`` dropping all but one hit per
conversation). :class:`DeferredHit` is a :class:`~hermes_sessions.queries.SearchHit` whose
``snippet`` and ``spans`` are computed from the message and the parsed query on first access,
once, and then kept. The values are exactly those an eager hit holds: equality, ``repr``,
``attrs.evolve``, ``copy`` and ``pickle`` see the computed values, and a deferred hit equals the
eager hit with the same fields.

The message and session record are loaded eagerly, inside the backend's read (a damaged row
raises in ``search``, with its location, as before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_sessions import text
from hermes_sessions.queries import SearchHit

if TYPE_CHECKING:
    from hermes_sessions.models import Message, SessionRecord

__all__ = ["DeferredHit", "deferred_hit"]


def _eager(
    message: Message,
    session: SessionRecord,
    score: float,
    snippet: str,
    spans: tuple[tuple[int, int], ...],
) -> SearchHit:
    """A plain :class:`SearchHit` (what a deferred hit pickles and copies as)."""
    return SearchHit(message=message, session=session, score=score, snippet=snippet, spans=spans)


class DeferredHit(SearchHit):
    """A :class:`SearchHit` whose ``snippet`` and ``spans`` are cut on first access.

    Build one with :func:`deferred_hit`; everything else behaves as :class:`SearchHit`.
    """

    __slots__ = ("_query", "_snippet", "_spans")
    _query: text.Query
    _snippet: str
    _spans: tuple[tuple[int, int], ...]

    def _cut(self) -> None:
        cut = text.make_snippet(text.searchable_text(self.message), self._query)
        object.__setattr__(self, "_snippet", cut.text)
        object.__setattr__(self, "_spans", cut.spans)

    @property
    def snippet(self) -> str:
        """About 40 tokens of the message around the best match, matches marked."""
        try:
            return self._snippet
        except AttributeError:
            self._cut()
            return self._snippet

    @snippet.setter
    def snippet(self, value: str) -> None:  # what SearchHit.__init__ (evolve, copy) calls
        object.__setattr__(self, "_snippet", value)

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """Character offsets ``(start, end)`` of the matches in the message's searchable text."""
        try:
            return self._spans
        except AttributeError:
            self._cut()
            return self._spans

    @spans.setter
    def spans(self, value: tuple[tuple[int, int], ...]) -> None:
        object.__setattr__(self, "_spans", value)

    def _values(self) -> tuple[Any, ...]:
        return (self.message, self.session, self.score, self.snippet, self.spans)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchHit):
            return NotImplemented
        return self._values() == (
            other.message,
            other.session,
            other.score,
            other.snippet,
            other.spans,
        )

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = SearchHit.__hash__

    def __repr__(self) -> str:
        return repr(_eager(*self._values()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_eager, self._values())


def deferred_hit(
    message: Message, session: SessionRecord, score: float, query: text.Query
) -> SearchHit:
    """A hit of ``message`` whose snippet and spans for ``query`` are cut when first read."""
    hit = object.__new__(DeferredHit)
    object.__setattr__(hit, "message", message)
    object.__setattr__(hit, "session", session)
    object.__setattr__(hit, "score", score)
    object.__setattr__(hit, "_query", query)
    return hit
