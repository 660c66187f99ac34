"""What callers ask backends for: session listings, searches, and who may see what.

These are frozen values. Each carries its own *reference semantics* (``accepts``, ``sort_key``)
so that backends without a query engine (in-memory, JSONL) share one implementation, and SQL
backends have an executable statement of what their ``WHERE`` clauses must mean.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypedDict

import attrs

from hermes_sessions.clock import require_aware
from hermes_sessions.exceptions import InvalidArgumentError, InvalidCursorError
from hermes_sessions.keys import DEFAULT_KEY_POLICY, is_private_lane
from hermes_sessions.models import Message, SessionRecord, check_json
from hermes_sessions.titles import lineage_key, title_key

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hermes_sessions.keys import KeyPolicy
    from hermes_sessions.models import SessionSource

__all__ = [
    "PREVIEW_LENGTH",
    "MatchKind",
    "MatchedMessage",
    "SearchHit",
    "SearchMode",
    "SearchOrder",
    "SearchQuery",
    "SearchQueryFields",
    "SessionMatch",
    "SessionOrder",
    "SessionPage",
    "SessionQuery",
    "SessionQueryFields",
    "SessionSummary",
    "Visibility",
    "decode_cursor",
    "encode_cursor",
    "make_preview",
]

SearchMode: TypeAlias = Literal["exact", "natural"]
"""How ``search`` reads its text: the exact query language, or a natural question.

.. versionadded:: 0.1.0
"""

MatchKind: TypeAlias = Literal["exact", "all words", "partial"]
"""How a :class:`SessionMatch` matched: the question as an exact query, every content term (in
one message or across several), or only part of them.

.. versionadded:: 0.1.0
"""

SessionOrder: TypeAlias = Literal["started", "last_active"]
"""How :class:`SessionQuery` orders sessions: by start time or by last activity.

.. versionadded:: 0.1.0
"""
SearchOrder: TypeAlias = Literal["rank", "newest", "oldest"]
"""How :class:`SearchQuery` orders hits: by relevance (BM25) or by time.

.. versionadded:: 0.1.0
"""
PREVIEW_LENGTH: Final = 60
"""Characters of a session's first message kept as its listing preview.

.. versionadded:: 0.1.0
"""
DEFAULT_EXCLUDED_SOURCES: Final = ("tool", "subagent")


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError("expected a sequence of names, not a single string; wrap it in a tuple")
    return tuple(value)


def _names_required(value: Iterable[str]) -> tuple[str, ...]:
    names = _names(value)
    if names is None:
        raise TypeError("expected a sequence of names, not None")
    return names


def _utf8(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Refuse a lone surrogate in a text filter (``InvalidValueError``).

    Nothing stored holds one, and a database driver would fail on it with its own error.
    """
    for item in value if isinstance(value, tuple) else (value,):
        if isinstance(item, str) and not item.isascii():
            check_json(item, f"{type(instance).__name__}.{attribute.name}")


def _positive_or_none(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(
            f"{attribute.name} must be a positive int or None, got {value!r}"
        )


def _non_negative(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{attribute.name} must be an int >= 0, got {value!r}")


def _in(*choices: str) -> Any:
    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value not in choices:
            raise InvalidArgumentError(f"{attribute.name} must be one of {choices}, got {value!r}")

    return check


def _optional_bool(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be True, False or None")


def _optional_aware(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        require_aware(value, attribute.name)


# -- who may see a session -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Visibility:
    """The default access rule: which sessions a requester may see from a key.

    A session is visible when it was created under ``session_key`` (members of a shared thread
    share its history), or — from a private lane (a DM) only — when it has the same platform and
    the same user. From a shared lane (any group, channel or thread key) only that lane's own
    sessions are visible, whoever asks: a DM must never become context that a whole group reads.
    A missing user id never matches, so anonymous sources see only their key's own sessions.

    .. versionadded:: 0.1.0
    """

    session_key: str | None = None
    platform: str | None = None
    user_id: str | None = None

    @classmethod
    def for_requester(
        cls,
        session_key: str | None,
        requester: SessionSource | None,
        *,
        keys: KeyPolicy = DEFAULT_KEY_POLICY,
    ) -> Visibility:
        """The rule for ``requester`` asking from ``session_key``.

        The requester's id is canonicalised with ``keys`` (as session records store it); without
        a requester, or from a shared lane (:func:`~hermes_sessions.keys.is_private_lane`), only
        the key's own sessions are visible.
        """
        if requester is None or (session_key is not None and not is_private_lane(session_key)):
            return cls(session_key=session_key)
        return cls(
            session_key=session_key,
            platform=requester.platform,
            user_id=keys.canonical(requester.platform, requester.participant),
        )

    def allows(self, record: SessionRecord) -> bool:
        """Whether ``record`` is visible under this rule."""
        if self.session_key is not None and record.session_key == self.session_key:
            return True
        return (
            self.user_id is not None
            and record.user_id == self.user_id
            and record.source == self.platform
        )


# -- cursors ---------------------------------------------------------------------------------------


def encode_cursor(position: datetime, session_id: str) -> str:
    """An opaque cursor naming the position after which the next page starts.

    .. versionadded:: 0.1.0
    """
    from hermes_sessions.serde import compact_json  # noqa: PLC0415  # queries loads without cattrs

    raw = compact_json([position.isoformat(), session_id])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Read a cursor made by :func:`encode_cursor`; raise :class:`InvalidCursorError`.

    .. versionadded:: 0.1.0
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        position, session_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        moment = datetime.fromisoformat(position)
    except (ValueError, TypeError, binascii.Error, UnicodeError) as error:
        raise InvalidCursorError(cursor) from error
    if moment.tzinfo is None or not isinstance(session_id, str):
        raise InvalidCursorError(cursor)
    return moment, session_id


# -- listing sessions ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionQuery:
    """Filters, order and page of a session listing.

    Every filter is optional; ``None`` means "any". Results are ordered by ``order``
    (``last_active`` or ``started``), newest first unless ``descending=False``, ties broken by
    id; ``cursor`` continues after the last item of a previous page.

    .. versionadded:: 0.1.0
    """

    sources: tuple[str, ...] | None = attrs.field(default=None, converter=_names, validator=_utf8)
    exclude_sources: tuple[str, ...] = attrs.field(
        default=(), converter=_names_required, validator=_utf8
    )
    session_key: str | None = attrs.field(default=None, validator=_utf8)
    user_id: str | None = attrs.field(default=None, validator=_utf8)
    archived: bool | None = attrs.field(default=None, validator=_optional_bool)
    ended: bool | None = attrs.field(default=None, validator=_optional_bool)
    exclude_end_reasons: tuple[str, ...] = attrs.field(
        default=(), converter=_names_required, validator=_utf8
    )
    """Leave out sessions ended for these reasons (``("compression",)`` hides compressed-away
    sessions, whose conversation continues in a child)."""
    min_messages: int = attrs.field(default=0, validator=_non_negative)
    started_after: datetime | None = attrs.field(default=None, validator=_optional_aware)
    started_before: datetime | None = attrs.field(default=None, validator=_optional_aware)
    active_after: datetime | None = attrs.field(default=None, validator=_optional_aware)
    active_before: datetime | None = attrs.field(default=None, validator=_optional_aware)
    parent_session_id: str | None = attrs.field(default=None, validator=_utf8)
    """Only children of this session."""
    id_prefix: str | None = attrs.field(default=None, validator=_utf8)
    """Only ids starting with this text."""
    title: str | None = attrs.field(default=None, validator=_utf8)
    """Only this title, compared with :func:`~hermes_sessions.titles.title_key`."""
    title_lineage: str | None = attrs.field(default=None, validator=_utf8)
    """Only this title and its numbered variants (``X``, ``X #2``, ...)."""
    visible_to: Visibility | None = None
    order: SessionOrder = attrs.field(
        default="last_active", validator=_in("started", "last_active")
    )
    descending: bool = True
    limit: int | None = attrs.field(default=50, validator=_positive_or_none)
    cursor: str | None = None

    def accepts(self, record: SessionRecord) -> bool:  # noqa: PLR0911  # a check per filter
        """Whether ``record`` passes every filter (ignoring order, limit and cursor)."""
        if not _shared_session_filters(self, record):
            return False
        if self.ended is not None and record.is_ended != self.ended:
            return False
        if record.end_reason is not None and record.end_reason in self.exclude_end_reasons:
            return False
        if record.message_count < self.min_messages:
            return False
        if not _within(record.started_at, self.started_after, self.started_before):
            return False
        if not _within(record.last_active, self.active_after, self.active_before):
            return False
        if self.parent_session_id is not None and record.parent_session_id != (
            self.parent_session_id
        ):
            return False
        if self.id_prefix is not None and not record.id.startswith(self.id_prefix):
            return False
        if self.title is not None and (
            record.title is None or title_key(record.title) != title_key(self.title)
        ):
            return False
        return self.title_lineage is None or (
            record.title is not None
            and lineage_key(record.title) == lineage_key(self.title_lineage)
        )

    def sort_value(self, record: SessionRecord) -> datetime:
        """The time a record is ordered by."""
        return record.started_at if self.order == "started" else record.last_active

    def page(self, records: Iterable[SessionRecord]) -> tuple[list[SessionRecord], str | None]:
        """Filter, order and cut ``records`` into one page; return it and the next cursor.

        This is the reference behaviour; backends with an index do the same in their engine.
        """
        matching = [record for record in records if self.accepts(record)]
        matching.sort(key=lambda r: (self.sort_value(r), r.id), reverse=self.descending)
        if self.cursor is not None:
            position = decode_cursor(self.cursor)
            if self.descending:
                matching = [r for r in matching if (self.sort_value(r), r.id) < position]
            else:
                matching = [r for r in matching if (self.sort_value(r), r.id) > position]
        if self.limit is None or len(matching) <= self.limit:
            return matching, None
        page = matching[: self.limit]
        last = page[-1]
        return page, encode_cursor(self.sort_value(last), last.id)


def _shared_session_filters(query: SessionQuery | SearchQuery, record: SessionRecord) -> bool:
    """The session filters that listings and searches share."""
    if query.sources is not None and record.source not in query.sources:
        return False
    if record.source in query.exclude_sources:
        return False
    if query.session_key is not None and record.session_key != query.session_key:
        return False
    if query.user_id is not None and record.user_id != query.user_id:
        return False
    if query.archived is not None and record.archived != query.archived:
        return False
    return query.visible_to is None or query.visible_to.allows(record)


def _within(moment: datetime, after: datetime | None, before: datetime | None) -> bool:
    return (after is None or moment >= after) and (before is None or moment < before)


def make_preview(content: object, length: int = PREVIEW_LENGTH) -> str | None:
    """A one-line preview of message content: whitespace collapsed, cut to ``length``.

    Multimodal content contributes the text of its parts. Longer text ends with ``…``.

    .. versionadded:: 0.1.0
    """
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    else:
        return None
    flat = " ".join(text.split())
    if not flat:
        return None
    return flat if len(flat) <= length else flat[: length - 1] + "…"


@attrs.frozen(kw_only=True)
class SessionSummary:
    """One row of a session listing.

    .. versionadded:: 0.1.0
    """

    record: SessionRecord
    preview: str | None
    """The first user message, on one line, at most 60 characters."""
    expired: bool = False
    """Open, but its key's reset policy has expired it: the chat's next message starts a new
    session, and retention counts it as ended (set by :meth:`SessionStore.list_sessions`)."""

    @property
    def last_active(self) -> datetime:
        """When the session was last active."""
        return self.record.last_active

    @property
    def state(self) -> str:
        """``archived``, the end reason, ``expired`` or ``open``: what listings show."""
        if self.record.archived:
            return "archived"
        if self.record.end_reason is not None:
            return self.record.end_reason
        return "expired" if self.expired else "open"


def _summaries(items: Iterable[SessionSummary]) -> tuple[SessionSummary, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class SessionPage:
    """A page of a listing and the cursor of the next page (``None`` on the last page).

    .. versionadded:: 0.1.0
    """

    items: tuple[SessionSummary, ...] = attrs.field(converter=_summaries)
    next_cursor: str | None = None


# -- search ----------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SearchQuery:
    """A full-text search and its filters (the query language is in ``docs/search.md``).

    By default it searches user and assistant messages, skips ``tool`` and ``subagent``
    sessions and soft-deleted messages, and returns the 20 best hits. ``sources=None,
    exclude_sources=()`` searches everything; ``roles=None`` means every role; ``limit=None``
    means every hit.

    .. versionadded:: 0.1.0
    """

    text: str = attrs.field(validator=attrs.validators.instance_of(str))
    sources: tuple[str, ...] | None = attrs.field(default=None, converter=_names, validator=_utf8)
    exclude_sources: tuple[str, ...] = attrs.field(
        default=DEFAULT_EXCLUDED_SOURCES, converter=_names_required, validator=_utf8
    )
    roles: tuple[str, ...] | None = attrs.field(
        default=("user", "assistant"), converter=_names, validator=_utf8
    )
    session_key: str | None = attrs.field(default=None, validator=_utf8)
    session_ids: tuple[str, ...] | None = attrs.field(
        default=None, converter=_names, validator=_utf8
    )
    exclude_session_ids: tuple[str, ...] = attrs.field(
        default=(), converter=_names_required, validator=_utf8
    )
    user_id: str | None = attrs.field(default=None, validator=_utf8)
    since: datetime | None = attrs.field(default=None, validator=_optional_aware)
    """Only messages at or after this time."""
    until: datetime | None = attrs.field(default=None, validator=_optional_aware)
    """Only messages before this time."""
    include_inactive: bool = False
    archived: bool | None = attrs.field(default=None, validator=_optional_bool)
    visible_to: Visibility | None = None
    order: SearchOrder = attrs.field(default="rank", validator=_in("rank", "newest", "oldest"))
    limit: int | None = attrs.field(default=20, validator=_positive_or_none)
    offset: int = attrs.field(default=0, validator=_non_negative)

    def accepts_session(self, record: SessionRecord) -> bool:
        """Whether hits from ``record`` may be returned."""
        if self.session_ids is not None and record.id not in self.session_ids:
            return False
        return record.id not in self.exclude_session_ids and _shared_session_filters(self, record)

    def accepts_message(self, message: Message) -> bool:
        """Whether ``message`` itself passes the message-level filters."""
        if not self.include_inactive and not message.active:
            return False
        if self.roles is not None and message.role not in self.roles:
            return False
        if self.since is None and self.until is None:
            return True
        if message.timestamp is None:
            return False
        return _within(message.timestamp, self.since, self.until)


@attrs.frozen(kw_only=True)
class SearchHit:
    """One search result.

    .. versionadded:: 0.1.0
    """

    message: Message
    session: SessionRecord
    score: float
    """Relevance; higher is better. Comparable only within one result list."""
    snippet: str
    """About 40 tokens of the message around the best match, matches marked."""
    spans: tuple[tuple[int, int], ...]
    """Character offsets ``(start, end)`` of the matches in the message's searchable text."""


@attrs.frozen(kw_only=True)
class MatchedMessage:
    """One message of a :class:`SessionMatch` that holds terms of the question.

    .. versionadded:: 0.1.0
    """

    message: Message
    snippet: str
    """About 40 tokens of the message around the terms it holds, marked ``>>>`` and ``<<<``."""
    terms: tuple[str, ...]
    """The question's content terms this message holds."""


@attrs.frozen(kw_only=True)
class SessionMatch:
    """One session answering a natural question (``search(..., mode="natural")``).

    .. versionadded:: 0.1.0
    """

    session: SessionRecord
    score: float
    """Relevance; higher is better. Comparable only within one result list."""
    coverage: float
    """The rarity-weighted share of the question's content terms the session holds (0 to 1)."""
    matched: MatchKind
    terms: tuple[str, ...]
    """The content terms the session holds."""
    missing: tuple[str, ...]
    """The content terms it does not hold."""
    confident: bool
    """Whether it holds enough of the question to be a match; otherwise a weak candidate."""
    messages: tuple[MatchedMessage, ...]
    """Its best messages (the most terms first), with their ids in ``message.id``."""


# -- the query fields as keyword arguments ---------------------------------------------------------


class SessionQueryFields(TypedDict, total=False):
    """The fields of :class:`SessionQuery` as keywords (``store.list_sessions(ended=True)``).

    .. versionadded:: 0.1.0
    """

    sources: Iterable[str] | None
    exclude_sources: Iterable[str]
    session_key: str | None
    user_id: str | None
    archived: bool | None
    ended: bool | None
    exclude_end_reasons: Iterable[str]
    min_messages: int
    started_after: datetime | None
    started_before: datetime | None
    active_after: datetime | None
    active_before: datetime | None
    parent_session_id: str | None
    id_prefix: str | None
    title: str | None
    title_lineage: str | None
    visible_to: Visibility | None
    order: SessionOrder
    descending: bool
    limit: int | None
    cursor: str | None


class SearchQueryFields(TypedDict, total=False):
    """The fields of :class:`SearchQuery` but ``text``, as keywords (``search("x", limit=5)``).

    .. versionadded:: 0.1.0
    """

    sources: Iterable[str] | None
    exclude_sources: Iterable[str]
    roles: Iterable[str] | None
    session_key: str | None
    session_ids: Iterable[str] | None
    exclude_session_ids: Iterable[str]
    user_id: str | None
    since: datetime | None
    until: datetime | None
    include_inactive: bool
    archived: bool | None
    visible_to: Visibility | None
    order: SearchOrder
    limit: int | None
    offset: int
