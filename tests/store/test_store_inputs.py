"""Inputs are checked at the store's edge, the same on every backend, even on an empty store."""

from __future__ import annotations

from datetime import datetime

import pytest

from hermes_sessions import NaiveDatetimeError, SessionQuery, SessionSource

NAIVE = datetime(2026, 5, 1, 12, 0)  # noqa: DTZ001  # the point of these tests


@pytest.mark.parametrize(
    "call",
    [
        lambda store: store.prune(NAIVE),
        lambda store: store.prune(NAIVE, dry_run=False),
        lambda store: store.search("hello", since=NAIVE),
        lambda store: store.search("hello", until=NAIVE),
        lambda store: store.list_sessions(started_after=NAIVE),
        lambda store: store.list_sessions(started_before=NAIVE),
        lambda store: store.list_sessions(active_after=NAIVE),
        lambda store: store.list_sessions(active_before=NAIVE),
        lambda store: store.list_sessions(SessionQuery(active_after=NAIVE)),
    ],
    ids=[
        "prune",
        "prune-for-real",
        "search-since",
        "search-until",
        "started-after",
        "started-before",
        "active-after",
        "active-before",
        "query-object",
    ],
)
def test_naive_datetimes_are_refused_with_the_librarys_error(store, call):
    """A naive datetime raises NaiveDatetimeError (a ValueError) naming the argument."""
    with pytest.raises(NaiveDatetimeError, match="timezone-aware") as info:
        call(store)
    assert isinstance(info.value, ValueError)
    assert info.value.name in {
        "prune(older_than)",
        "since",
        "until",
        "started_after",
        "started_before",
        "active_after",
        "active_before",
    }


@pytest.mark.slow
def test_int_ids_type_check_under_mypy_strict(tmp_path):
    """The annotations say what the docs say: ``chat_id=12345`` passes ``mypy --strict``."""
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from hermes_sessions import Message, SessionSource\n"
        "SessionSource(platform='telegram', chat_id=12345, user_id=678, thread_id=9)\n"
        "Message(role='user', platform_message_id=1, sender_id=2)\n",
        encoding="utf-8",
    )
    out, err, status = api.run(["--strict", "--no-incremental", str(snippet)])
    assert status == 0, out + err


def test_int_ids_are_accepted_as_documented(store):
    """``chat_id=12345`` is stored as text and builds the documented key."""
    source = SessionSource(platform="telegram", chat_id=12345, user_id=678)
    assert source.chat_id == "12345"
    assert store.get_or_create(source).entry.session_key == "agent:main:telegram:dm:12345"


def test_a_title_with_a_lone_surrogate_is_the_librarys_error(store):
    """``set_title`` with a lone surrogate raises InvalidValueError on every backend."""
    from hermes_sessions import InvalidValueError  # noqa: PLC0415

    lookup = store.get_or_create(SessionSource(platform="cli", chat_id="me"))
    with pytest.raises(InvalidValueError, match="lone surrogate"):
        store.set_title(lookup.session_id, "plan \ud800 b")
    assert store.session(lookup.session_id).title is None


@pytest.mark.parametrize("target", ["x\udc80", "20260512\udc80", "plans \ud800 #2"])
def test_a_resume_target_with_a_lone_surrogate_finds_nothing(store, target):
    """A /resume target holding a lone surrogate is SessionNotFoundError on every backend."""
    from hermes_sessions import Message, SessionNotFoundError  # noqa: PLC0415

    lookup = store.get_or_create(SessionSource(platform="cli", chat_id="me"))
    store.append(lookup.session_id, Message(role="user", content="hi"))
    with pytest.raises(SessionNotFoundError):
        store.resume(lookup.entry.session_key, target)


@pytest.mark.parametrize(
    "field", ["session_key", "user_id", "parent_session_id", "id_prefix", "title", "title_lineage"]
)
def test_a_query_with_a_lone_surrogate_is_the_librarys_error(store, field):
    """A SessionQuery text holding a lone surrogate is InvalidValueError, not a driver's error."""
    from hermes_sessions import InvalidValueError  # noqa: PLC0415

    with pytest.raises(InvalidValueError, match=f"SessionQuery.{field}"):
        store.list_sessions(SessionQuery(**{field: "x\udc80"}))
