"""``apply`` across a reset (issue 34, items 7-8): redeliveries, edits and recalls stay with it.

Each adapter's recorded payloads, on every backend, under a 60-minute idle policy: a message
redelivered two hours later is still a redelivery, and an edit or recall that arrives after the
lane was reset reaches the message in the session the lane left.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from hermes_sessions import ResetPolicies, ResetPolicy
from hermes_sessions.adapters import apply, dingtalk, discord, feishu, slack, telegram

PAYLOADS = Path(__file__).parent / "payloads"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def discord_edited(name, content):
    """A Discord payload as ``on_message_edit`` gives it: the new content and an edit time."""
    return {**load(name), "content": content, "edited_timestamp": "2026-05-12T03:05:00+00:00"}


NEW_MESSAGES = {
    "telegram": lambda: telegram.convert(load("telegram_private")),
    "slack": lambda: slack.convert(load("slack_dm")),
    "discord": lambda: discord.convert(load("discord_guild_text"), bot_user_id=1180000000000000555),
    "feishu": lambda: feishu.convert(load("feishu_p2p_post")),
    "dingtalk": lambda: dingtalk.convert(load("dingtalk_group_text")),
}
"""Per adapter: one new inbound message, converted afresh on every call (as a redelivery is)."""

EDITS = {
    "telegram": (
        lambda: telegram.convert(load("telegram_private")),
        lambda: telegram.convert(load("telegram_edited")),
        "deploy",
        "rollback",
    ),
    "slack": (
        lambda: slack.convert(load("slack_dm_thread")),
        lambda: slack.convert(load("slack_message_changed")),
        "second",
        "third",
    ),
    "discord": (
        lambda: discord.convert(load("discord_dm_no_channel")),
        lambda: discord.convert(discord_edited("discord_dm_no_channel", "hello canary")),
        "hi",
        "canary",
    ),
}
"""Per adapter that reports edits: the message, its edit, a word only before and one only after."""

RECALLS = {
    "slack": (
        lambda: slack.convert(load("slack_dm_thread")),
        lambda: slack.convert(load("slack_message_deleted")),
        "second",
    ),
    "discord": (
        lambda: discord.convert(load("discord_guild_text")),
        lambda: discord.convert(load("discord_guild_text"), deleted=True),
        "status",
    ),
}
"""Per adapter that reports recalls: the message, its recall, and a word of it."""


@pytest.fixture
def idle(store):
    """The store with a 60-minute idle policy for every conversation."""
    return attrs.evolve(store, resets=ResetPolicies(ResetPolicy(mode="idle", idle_minutes=60)))


@pytest.mark.parametrize("platform", sorted(NEW_MESSAGES))
def test_a_redelivery_after_the_idle_window_is_still_a_redelivery(platform, idle, clock):
    """Redelivered two hours later: no new session, stored once, no reset to announce."""
    first = apply(idle, NEW_MESSAGES[platform]())
    clock.advance(hours=2)
    rotations = []
    idle.on_rotate(rotations.append)
    again = apply(idle, NEW_MESSAGES[platform]())
    assert again.lookup is not None
    assert (again.lookup.created, again.lookup.reset) == (False, None)
    assert again.lookup.redelivered == first.message
    assert (again.session_id, again.message) == (first.session_id, first.message)
    assert rotations == []
    assert idle.entry(idle.key_for(first.event.source)).session_id == first.session_id
    sessions = [summary.record for summary in idle.list_sessions().items]
    assert [(record.id, record.message_count) for record in sessions] == [(first.session_id, 1)]


@pytest.mark.parametrize("platform", sorted(EDITS))
def test_an_edit_after_a_reset_updates_the_message_where_it_is(platform, idle, clock):
    """The lane moved on to a new session; the edit still reaches the message; search follows."""
    new, edit, before, after = EDITS[platform]
    first = apply(idle, new())
    clock.advance(hours=2)
    assert idle.get_or_create(first.event.source).reset is not None  # the lane's next message
    edited = apply(idle, edit())
    assert edited.message is not None
    assert (edited.session_id, edited.message.id) == (first.session_id, first.message.id)
    assert idle.search(before) == []
    assert [hit.message.id for hit in idle.search(after)] == [first.message.id]


@pytest.mark.parametrize("platform", sorted(RECALLS))
def test_a_recall_after_a_reset_reaches_the_message_where_it_is(platform, idle, clock):
    """The lane moved on to a new session; the recall still hides the message from search."""
    new, recall, word = RECALLS[platform]
    first = apply(idle, new())
    assert [hit.message.id for hit in idle.search(word)] == [first.message.id]
    clock.advance(hours=2)
    assert idle.get_or_create(first.event.source).reset is not None
    recalled = apply(idle, recall())
    assert recalled.message is not None
    assert (recalled.session_id, recalled.message.active) == (first.session_id, False)
    assert idle.search(word) == []
