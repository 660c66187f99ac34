"""The chat-type vocabulary: platforms' own names normalised onto the conventional four."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import KeyPolicy, SessionSource, build_session_key
from hermes_sessions.models import CONVENTIONAL_CHAT_TYPES, PLATFORM_CHAT_TYPES, SLUG_PATTERN
from hermes_sessions.policy import ResetPolicies, ResetPolicy
from hermes_sessions.serde import structure, unstructure

TABLE = [
    ("telegram", "private", "dm"),
    ("telegram", "group", "group"),
    ("telegram", "supergroup", "group"),
    ("telegram", "channel", "channel"),
    ("feishu", "p2p", "dm"),
    ("feishu", "group", "group"),
    ("lark", "p2p", "dm"),
    ("slack", "im", "dm"),
    ("slack", "mpim", "group"),
    ("slack", "channel", "channel"),
    ("slack", "group", "group"),
    ("discord", "private", "dm"),
    ("discord", "group", "group"),
    ("discord", "text", "group"),
    ("discord", "news", "channel"),
    ("discord", "forum", "channel"),
    ("discord", "public_thread", "thread"),
    ("discord", "private_thread", "thread"),
    ("discord", "news_thread", "thread"),
    ("dingtalk", "1", "dm"),
    ("dingtalk", "2", "group"),
]


@pytest.mark.parametrize(("platform", "raw", "conventional"), TABLE)
def test_platform_names_map_onto_the_conventional_types(platform, raw, conventional):
    """Each platform's own chat-type name becomes the conventional type of the documented table."""
    source = SessionSource(platform=platform, chat_type=raw, chat_id="c1")
    assert source.chat_type == conventional


@pytest.mark.parametrize(("platform", "raw", "conventional"), TABLE)
def test_the_raw_name_is_kept_when_it_differs(platform, raw, conventional):
    """``platform_chat_type`` keeps the platform's word whenever normalising changed it."""
    source = SessionSource(platform=platform, chat_type=raw, chat_id="c1")
    assert source.platform_chat_type == (None if raw == conventional else raw)


def test_the_table_never_renames_a_conventional_type():
    """No platform entry maps a conventional name, so keys built with one cannot change."""
    for names in PLATFORM_CHAT_TYPES.values():
        assert not CONVENTIONAL_CHAT_TYPES.intersection(names)
        assert set(names.values()) <= CONVENTIONAL_CHAT_TYPES
        assert all(SLUG_PATTERN.fullmatch(name) for name in names)


@pytest.mark.parametrize("chat_type", sorted(CONVENTIONAL_CHAT_TYPES))
@pytest.mark.parametrize("platform", sorted(PLATFORM_CHAT_TYPES))
def test_conventional_types_are_left_alone(platform, chat_type):
    """A conventional chat type stays itself on every platform, with no raw name recorded."""
    source = SessionSource(platform=platform, chat_type=chat_type)
    assert (source.chat_type, source.platform_chat_type) == (chat_type, None)


def test_an_unknown_type_is_kept_as_given():
    """A chat type the table does not know (an open set) is kept, as before."""
    source = SessionSource(platform="telegram", chat_type="sender", chat_id="1")
    assert (source.chat_type, source.platform_chat_type) == ("sender", None)
    assert build_session_key(source) == "agent:main:telegram:sender:1"


def test_names_are_per_platform():
    """``private`` is a DM on Telegram and Discord but means nothing special on Matrix."""
    assert SessionSource(platform="discord", chat_type="private").chat_type == "dm"
    assert SessionSource(platform="matrix", chat_type="private").chat_type == "private"


def test_an_explicit_raw_name_is_not_overwritten():
    """A raw name given alongside the platform's word is kept as the caller gave it."""
    source = SessionSource(platform="telegram", chat_type="supergroup", platform_chat_type="forum")
    assert (source.chat_type, source.platform_chat_type) == ("group", "forum")


def test_telegram_private_chat_gets_the_hermes_dm_key():
    """Telegram's ``private`` gives the DM key, not ``telegram:private:1:1`` (issue 19)."""
    source = SessionSource(platform="telegram", chat_type="private", chat_id=1, user_id=1)
    assert build_session_key(source) == "agent:main:telegram:dm:1"


def test_a_supergroup_topic_gets_the_hermes_group_key():
    """A supergroup forum topic gets the key of the DESIGN §3.2 vector, shared by its members."""
    source = SessionSource(
        platform="telegram",
        chat_type="supergroup",
        chat_id="-1002285219667",
        thread_id="17585",
        user_id="alice",
    )
    assert build_session_key(source) == "agent:main:telegram:group:-1002285219667:thread:17585"
    per_user = KeyPolicy(thread_sessions_per_user=True)
    assert build_session_key(source, per_user).endswith(":17585:alice")


def test_reset_policies_by_type_see_the_conventional_type():
    """A ``by_type`` policy for ``dm`` governs a Feishu ``p2p`` chat."""
    quick = ResetPolicy(mode="idle", idle_minutes=5)
    policies = ResetPolicies(default=ResetPolicy(mode="none"), by_type={"dm": quick})
    source = SessionSource(platform="feishu", chat_type="p2p", chat_id="oc_1")
    assert policies.for_source(source.platform, source.chat_type) == quick


def test_serde_round_trips_the_raw_name():
    """The raw name survives dict, JSON text and back."""
    source = SessionSource(platform="slack", chat_type="mpim", chat_id="G1", thread_id="1.2")
    data = json.loads(json.dumps(unstructure(source)))
    assert data["chat_type"] == "group"
    assert data["platform_chat_type"] == "mpim"
    assert structure(data, SessionSource) == source


def test_old_records_without_the_field_still_load():
    """A stored source from before the field existed loads, with no raw name."""
    old = {"platform": "telegram", "chat_id": "-100", "chat_type": "group", "user_id": "42"}
    source = structure(old, SessionSource)
    assert (source.chat_type, source.platform_chat_type) == ("group", None)


@given(
    platform=st.sampled_from(sorted(PLATFORM_CHAT_TYPES)),
    raw=st.sampled_from(sorted({n for names in PLATFORM_CHAT_TYPES.values() for n in names})),
)
def test_normalising_is_idempotent(platform, raw):
    """Building a source from a stored one changes nothing (loading never re-maps a type)."""
    source = SessionSource(platform=platform, chat_type=raw)
    again = structure(unstructure(source), SessionSource)
    assert again == source
