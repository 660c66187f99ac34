"""Query values: validation, cursors, previews, visibility and the reference semantics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import (
    InvalidCursorError,
    KeyPolicy,
    Message,
    SearchQuery,
    SessionQuery,
    SessionRecord,
    SessionSource,
    Visibility,
)
from hermes_sessions.queries import decode_cursor, encode_cursor, make_preview

T0 = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"sources": "telegram"}, TypeError),
        ({"exclude_sources": None}, TypeError),
        ({"limit": 0}, ValueError),
        ({"limit": True}, ValueError),
        ({"min_messages": -1}, ValueError),
        ({"order": "title"}, ValueError),
        ({"archived": "yes"}, TypeError),
    ],
)
def test_session_query_validation(kwargs, error):
    """Bad listing parameters fail when the query is built."""
    with pytest.raises(error):
        SessionQuery(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"text": 5}, TypeError),
        ({"text": "x", "roles": "user"}, TypeError),
        ({"text": "x", "offset": -1}, ValueError),
        ({"text": "x", "order": "best"}, ValueError),
    ],
)
def test_search_query_validation(kwargs, error):
    """Bad search parameters fail when the query is built."""
    with pytest.raises(error):
        SearchQuery(**kwargs)


@given(
    st.datetimes(
        min_value=datetime(2000, 1, 1),  # noqa: DTZ001
        max_value=datetime(2100, 1, 1),  # noqa: DTZ001
        timezones=st.just(UTC),
    ),
    st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True),
)
def test_cursor_round_trip(moment, session_id):
    """A cursor decodes to the position it was made from."""
    assert decode_cursor(encode_cursor(moment, session_id)) == (moment, session_id)


@pytest.mark.parametrize(
    "cursor",
    ["", "!!!", "bm90IGpzb24", encode_cursor(T0, "x")[:-3], "WzEsMl0", "WyIyMDI2LTAxLTAxIiwieCJd"],
)
def test_invalid_cursors(cursor):
    """Cursors that are not ours raise InvalidCursorError, a ValueError."""
    with pytest.raises(InvalidCursorError) as info:
        decode_cursor(cursor)
    assert isinstance(info.value, ValueError)


def record(session_id: str, minute: int, **fields: object) -> SessionRecord:
    """A record started ``minute`` minutes after T0."""
    return SessionRecord(  # type: ignore[misc]
        id=session_id, source="cli", started_at=T0 + timedelta(minutes=minute), **fields
    )


def test_ascending_pages_with_cursor():
    """Ascending order pages forward from the cursor, with ties broken by id."""
    records = [record("b", 1), record("a", 1), record("c", 2)]
    first, cursor = SessionQuery(order="started", descending=False, limit=2).page(records)
    assert [r.id for r in first] == ["a", "b"]
    rest, end = SessionQuery(order="started", descending=False, cursor=cursor).page(records)
    assert ([r.id for r in rest], end) == (["c"], None)


@pytest.mark.parametrize(
    ("content", "preview"),
    [
        ("  hello\n\tworld ", "hello world"),
        ([{"type": "text", "text": "look"}, {"type": "image_url"}, "junk"], "look"),
        ([{"type": "image_url"}], None),
        (None, None),
        ("", None),
        ("x" * 61, "x" * 59 + "…"),
        ("x" * 60, "x" * 60),
    ],
)
def test_make_preview(content, preview):
    """Previews are one line of text, at most 60 characters."""
    assert make_preview(content) == preview


def test_visibility_for_requester_canonicalises():
    """A requester's id is canonicalised like the ids stored on records."""
    requester = SessionSource(
        platform="whatsapp", chat_id="x", user_id="+15551234567@s.whatsapp.net"
    )
    dm = "agent:main:whatsapp:dm:15551234567"
    rule = Visibility.for_requester(dm, requester, keys=KeyPolicy())
    assert rule.user_id == "15551234567"
    assert Visibility.for_requester(dm, None) == Visibility(session_key=dm)


def test_search_time_filter_needs_a_timestamp():
    """A message without a time never passes a time filter."""
    query = SearchQuery(text="x", since=T0)
    assert not query.accepts_message(Message(role="user", content="x"))
    assert query.accepts_message(Message(role="user", content="x", timestamp=T0))


@pytest.mark.parametrize(
    "fields",
    [
        {"session_key": "k\udc80"},
        {"user_id": "\ud800"},
        {"sources": ("cli\udc80",)},
        {"session_ids": ("s\udc80",)},
        {"roles": ("user\udc80",)},
    ],
)
def test_a_search_filter_with_a_lone_surrogate_is_refused(fields):
    """A SearchQuery filter holding a lone surrogate is InvalidValueError, naming the field."""
    from hermes_sessions import InvalidValueError  # noqa: PLC0415

    (name,) = fields
    with pytest.raises(InvalidValueError, match=f"SearchQuery.{name}"):
        SearchQuery(text="hi", **fields)
