"""The session context prompt says where the model talks; shared-ness agrees with the keys."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.host import (
    CONTEXT_PROMPT_ZH,
    is_shared_session,
    prefix_sender,
    session_context_prompt,
)
from hermes_sessions.keys import KeyPolicy, build_session_key, parse_session_key
from hermes_sessions.models import SessionEntry, SessionSource


@settings(deadline=None, max_examples=500)
@given(
    chat_type=st.sampled_from(["dm", "group", "channel", "thread", "forum"]),
    chat_id=st.none() | st.just("chat-1"),
    thread_id=st.none() | st.just("thread-9"),
    user_id=st.none() | st.just("user-a"),
    user_id_alt=st.none() | st.just("alt-a"),
    group_flag=st.booleans(),
    thread_flag=st.booleans(),
    platform=st.sampled_from(["telegram", "feishu", "whatsapp"]),
)
def test_is_shared_session_agrees_with_the_key_builder(
    chat_type, chat_id, thread_id, user_id, user_id_alt, group_flag, thread_flag, platform
):
    """Every combination: shared exactly when the key has no sender, and members share it."""
    policy = KeyPolicy(group_sessions_per_user=group_flag, thread_sessions_per_user=thread_flag)
    source = SessionSource(
        platform=platform,
        chat_type=chat_type,
        chat_id=chat_id,
        thread_id=thread_id,
        user_id=user_id,
        user_id_alt=user_id_alt,
    )
    shared = is_shared_session(source, policy)
    segments = parse_session_key(build_session_key(source, policy)).segments
    if chat_type == "dm":
        assert shared is False
        return
    assert shared == (source.participant not in segments)
    if source.participant is not None:
        other = attrs.evolve(source, user_id="user-b", user_id_alt=None)
        same_key = build_session_key(source, policy) == build_session_key(other, policy)
        assert shared == same_key


def test_threads_with_group_isolation_off_and_thread_isolation_on_are_shared():
    """The case Hermes got wrong: the key has no user, so the session is shared."""
    policy = KeyPolicy(group_sessions_per_user=False, thread_sessions_per_user=True)
    source = SessionSource(
        platform="telegram", chat_type="group", chat_id="-100", thread_id="7", user_id="alice"
    )
    assert build_session_key(source, policy) == "agent:main:telegram:group:-100:thread:7"
    assert is_shared_session(source, policy) is True


def test_a_dm_prompt_names_the_person():
    """In a DM the block names the platform and whom the model talks with."""
    source = SessionSource(platform="telegram", chat_id="42", user_id="42", user_name="Alice")
    assert session_context_prompt(source) == (
        "## Where you are talking\nPlatform: Telegram.\nThis is a private chat with Alice."
    )
    anonymous = SessionSource(platform="telegram", chat_id="42")
    assert session_context_prompt(anonymous).endswith("This is a private chat.")


def test_an_isolated_group_member_is_addressed_alone():
    """A per-user group session names the chat and the one person in it; no prefix line."""
    source = SessionSource(
        platform="discord",
        chat_type="group",
        chat_id="g",
        chat_name="Builders",
        chat_topic="release week",
        user_id="u1",
        user_name="Bo",
    )
    prompt = session_context_prompt(source)
    assert 'This is the group "Builders".' in prompt
    assert "Topic: release week" in prompt
    assert "You are talking with Bo." in prompt
    assert "sender's name" not in prompt


def test_a_shared_thread_explains_the_sender_prefix():
    """In a shared session the model learns that messages start with the sender's name."""
    source = SessionSource(
        platform="slack", chat_type="channel", chat_id="C1", thread_id="t1", user_id="U1"
    )
    prompt = session_context_prompt(source)
    assert "This is a channel chat." in prompt
    assert 'You are replying in the thread "t1".' in prompt
    assert '"[U1] hello"' in prompt
    assert prefix_sender("ship it", source) == "[U1] ship it"


def test_the_entry_names_a_chat_the_source_does_not_and_platforms_can_be_renamed():
    """``display_name`` of the entry stands in for a missing chat name."""
    moment = datetime(2026, 5, 1, tzinfo=UTC)
    entry = SessionEntry(
        session_key="k", session_id="s1", created_at=moment, updated_at=moment, display_name="Ops"
    )
    source = SessionSource(platform="mychat", chat_type="group", chat_id="g")
    prompt = session_context_prompt(source, entry, platform_names={"mychat": "MyChat"})
    assert "Platform: MyChat." in prompt
    assert 'This is the group "Ops".' in prompt


def test_the_chinese_templates_render_the_same_facts():
    """The Simplified Chinese set fills the same places."""
    source = SessionSource(
        platform="feishu", chat_type="group", chat_id="oc", chat_name="运维", thread_id="t"
    )
    prompt = session_context_prompt(source, templates=CONTEXT_PROMPT_ZH)
    assert prompt.splitlines()[0] == "## 对话环境"
    assert "这是group「运维」。" in prompt
    assert "「[某人] hello」" in prompt
