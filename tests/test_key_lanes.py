"""A thread and a member lane never share a key, and parsing tells the two apart."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions import KeyPolicy, SessionSource, build_session_key, parse_session_key

numeric = st.integers(min_value=-(10**13), max_value=10**13).map(str)
ids = numeric | st.text(min_size=1, max_size=10) | st.sampled_from(["thread", "%74hread", "t"])
shared_types = st.sampled_from(["group", "channel", "thread", "supergroup", "forum", "x-room"])
platforms = st.sampled_from(["telegram", "discord", "feishu", "slack", "whatsapp", "matrix"])
policies = st.builds(
    KeyPolicy,
    group_sessions_per_user=st.booleans(),
    thread_sessions_per_user=st.booleans(),
)


@settings(deadline=None, max_examples=400)
@given(
    platform=platforms,
    chat_type=shared_types,
    thread_chat=st.none() | ids,
    thread_id=ids,
    thread_user=st.none() | ids,
    member_chat=st.none() | ids,
    member=ids,
    policy=policies,
    other=policies,
)
def test_no_thread_key_equals_a_member_key(
    platform, chat_type, thread_chat, thread_id, thread_user, member_chat, member, policy, other
):
    """Whatever the ids and flags, a key built for a thread never equals one built for a member."""
    topic = SessionSource(
        platform=platform,
        chat_type=chat_type,
        chat_id=thread_chat,
        thread_id=thread_id,
        user_id=thread_user,
    )
    lane = SessionSource(
        platform=platform, chat_type=chat_type, chat_id=member_chat, user_id=member
    )
    thread_key = build_session_key(topic, policy)
    for member_policy in (policy, other):
        assert thread_key != build_session_key(lane, member_policy)
    assert parse_session_key(thread_key).thread_id == thread_id
    assert parse_session_key(build_session_key(lane, other)).thread_id is None


@settings(deadline=None)
@given(chat=numeric, number=numeric, policy=policies)
def test_a_topic_whose_id_is_a_members_user_id_gets_its_own_key(chat, number, policy):
    """A Telegram topic numbered like a member's user id never lands in that member's lane."""
    topic = SessionSource(
        platform="telegram", chat_type="supergroup", chat_id=chat, thread_id=number, user_id="7"
    )
    member = SessionSource(
        platform="telegram", chat_type="supergroup", chat_id=chat, user_id=number
    )
    assert build_session_key(topic, policy) != build_session_key(member, policy)
    assert parse_session_key(build_session_key(topic, policy)).is_thread
    assert not parse_session_key(build_session_key(member, policy)).is_thread


def test_dm_and_member_keys_are_byte_identical_to_hermes():
    """The thread marker leaves DM keys and member-lane keys as Hermes builds them."""
    dm = SessionSource(platform="telegram", chat_id="99", thread_id="topic-1", user_id="42")
    assert build_session_key(dm) == "agent:main:telegram:dm:99:topic-1"
    member = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="42")
    assert build_session_key(member) == "agent:main:telegram:group:-100:42"


def test_a_thread_key_carries_the_thread_marker():
    """A thread in a shared chat is written ``<chat>:thread:<thread>`` (then the member, if any)."""
    topic = SessionSource(
        platform="telegram", chat_type="group", chat_id="-100", thread_id="42", user_id="42"
    )
    assert build_session_key(topic) == "agent:main:telegram:group:-100:thread:42"
    both = KeyPolicy(thread_sessions_per_user=True)
    assert build_session_key(topic, both) == "agent:main:telegram:group:-100:thread:42:42"


def test_an_id_spelled_like_the_marker_is_escaped():
    """A chat or member id that is literally ``thread`` is written ``%74hread`` in shared keys."""
    member = SessionSource(platform="x", chat_type="group", chat_id="thread", user_id="9")
    key = build_session_key(member)
    assert key == "agent:main:x:group:%74hread:9"
    parsed = parse_session_key(key)
    assert (parsed.segments, parsed.thread_id) == (("thread", "9"), None)
    assert str(parsed) == key
    chatless = SessionSource(platform="x", chat_type="group", thread_id="9")
    assert build_session_key(chatless) == "agent:main:x:group:thread:9"
