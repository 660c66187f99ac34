"""read_session_key: keys read back into sources (this library's, Hermes's and OpenClaw's forms)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import KeyPolicy, SessionSource, read_session_key
from hermes_sessions.legacy_keys import build_hermes_key

IDS = st.text(alphabet="abcXYZ019_-+@.:%", min_size=1, max_size=8)


@pytest.mark.parametrize(
    ("key", "fields"),
    [
        ("agent:main:telegram:dm:42", {"chat_id": "42", "chat_type": "dm"}),
        ("agent:main:feishu:dm:ou_1:t1", {"chat_id": "ou_1", "thread_id": "t1"}),
        ("agent:main:feishu:group:oc_1", {"chat_id": "oc_1", "chat_type": "group"}),
        ("agent:main:telegram:group:-100:topic:42", {"chat_id": "-100", "thread_id": "42"}),
        ("agent:ops:discord:channel:123:thread:987", {"chat_type": "channel", "thread_id": "987"}),
        ("agent:main:whatsapp:acct:dm:+1555", {"user_id": "+1555", "scope_id": "acct"}),
    ],
)
def test_unambiguous_keys_read_back(key, fields):
    """Each known form with one possible reading yields a source with those fields."""
    read = read_session_key(key)
    assert read.source is not None
    assert read.problem is None
    for name, value in fields.items():
        assert getattr(read.source, name) == value


@pytest.mark.parametrize(
    ("key", "form"),
    [
        ("agent:main:main", "openclaw"),
        ("agent:main:dm:42", "openclaw"),
        ("agent:main:feishu:group:oc_1:ou_1", "hermes-sessions"),
        ("agent:main:feishu:group:oc_1:t1:ou_1", "hermes-sessions"),
        ("agent:main:Feishu:dm:1", "unknown"),
        ("session-1", "unknown"),
        ("agent::x", "unknown"),
    ],
)
def test_ambiguous_or_foreign_keys_say_why(key, form):
    """A key with no single reading has no source, a problem, and the form it was read as."""
    read = read_session_key(key)
    assert (read.source, read.form) == (None, form)
    assert read.problem


def test_the_isolation_flags_decide_how_many_segments_mean_what():
    """Two segments are chat + thread without member isolation; three need both flags."""
    shared = read_session_key(
        "agent:main:feishu:group:oc_1:t1", KeyPolicy(group_sessions_per_user=False)
    )
    assert shared.source is not None
    assert (shared.source.chat_id, shared.source.thread_id) == ("oc_1", "t1")
    both = KeyPolicy(thread_sessions_per_user=True)
    full = read_session_key("agent:main:feishu:group:oc_1:t1:ou_1", both)
    assert full.source is not None
    assert (full.source.thread_id, full.source.user_id) == ("t1", "ou_1")


@given(
    group=st.booleans(),
    thread=st.booleans(),
    chat_type=st.sampled_from(["dm", "group", "channel", "thread"]),
    chat_id=IDS,
    thread_id=st.none() | IDS,
    user_id=st.none() | IDS,
)
def test_a_source_read_back_builds_the_same_key(
    group, thread, chat_type, chat_id, thread_id, user_id
):
    """Whenever a key of ours reads back, the source builds exactly that key again."""
    policy = KeyPolicy(
        group_sessions_per_user=group,
        thread_sessions_per_user=thread,
        canonicalizers={"whatsapp": None},
    )
    source = SessionSource(
        platform="slack", chat_type=chat_type, chat_id=chat_id, thread_id=thread_id, user_id=user_id
    )
    key = policy.build(source)
    read = read_session_key(key, policy)
    if read.source is None:
        assert read.problem
    elif read.form == "hermes-sessions":
        assert policy.build(read.source) == key


@pytest.mark.parametrize(
    ("key", "fields"),
    [
        ("agent:main:telegram:group:-100:thread:42", {"chat_id": "-100", "thread_id": "42"}),
        (
            "agent:main:telegram:group:-100:thread:42:7",
            {"chat_id": "-100", "thread_id": "42", "user_id": "7"},
        ),
        ("agent:main:x:group:thread:9", {"chat_id": None, "thread_id": "9"}),
        ("agent:main:x:group:%74hread:thread:9", {"chat_id": "thread", "thread_id": "9"}),
    ],
)
def test_marked_thread_keys_read_back_under_any_flags(key, fields):
    """A key with the thread marker reads back the same whatever the policy's flags."""
    for policy in (KeyPolicy(), KeyPolicy(group_sessions_per_user=False)):
        read = read_session_key(key, policy)
        assert (read.form, read.problem) == ("hermes-sessions", None)
        for name, value in fields.items():
            assert getattr(read.source, name) == value


def test_a_hermes_thread_key_reads_as_the_hermes_form():
    """``<chat>:<thread>`` (no marker) reads as form ``hermes``, which Hermes built for threads."""
    shared = KeyPolicy(group_sessions_per_user=False)
    read = read_session_key("agent:main:feishu:group:oc_1:t1", shared)
    assert read.form == "hermes"
    assert read.source is not None
    assert build_hermes_key(read.source, shared) == read.key
    assert shared.build(read.source) == "agent:main:feishu:group:oc_1:thread:t1"


def test_a_marked_key_with_too_many_segments_is_not_guessed():
    """Two segments before the marker fit no source this library builds."""
    read = read_session_key("agent:main:x:group:a:b:thread:9")
    assert read.source is None
    assert read.problem


@given(
    group=st.booleans(),
    thread=st.booleans(),
    chat_type=st.sampled_from(["group", "channel", "thread"]),
    chat_id=st.none() | IDS,
    thread_id=IDS,
    user_id=st.none() | IDS,
)
def test_the_hermes_key_differs_from_ours_only_by_the_marker(
    group, thread, chat_type, chat_id, thread_id, user_id
):
    """``build_hermes_key`` is this library's key with the ``thread`` segment removed."""
    policy = KeyPolicy(group_sessions_per_user=group, thread_sessions_per_user=thread)
    source = SessionSource(
        platform="x", chat_type=chat_type, chat_id=chat_id, thread_id=thread_id, user_id=user_id
    )
    head, ours = policy.build(source).split(":")[:4], policy.build(source).split(":")[4:]
    ours.remove("thread")
    assert build_hermes_key(source, policy).split(":") == head + [
        "thread" if part == "%74hread" else part for part in ours
    ]
