"""``apply``: adapter events performed on a store, on every backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_sessions import Message, SessionSource
from hermes_sessions.adapters import (
    Applied,
    Edit,
    NewMessage,
    Retract,
    apply,
    feishu,
    slack,
    telegram,
)

PAYLOADS = Path(__file__).parent / "payloads"


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def test_a_new_message_creates_the_session_and_appends(store):
    """The first message of a lane creates its session and stores the message there."""
    event = telegram.convert(load("telegram_private"))
    applied = apply(store, event)
    assert isinstance(applied, Applied)
    assert applied.lookup is not None
    assert applied.lookup.created
    assert applied.message is not None
    assert applied.message.platform_message_id == "42:7"
    assert store.entry("agent:main:telegram:dm:42").session_id == applied.session_id
    assert [m.content for m in store.tail(applied.session_id, 5)] == [event.message.content]


def test_a_redelivered_message_is_stored_once(store):
    """The same webhook twice goes to one session and one stored message."""
    first = apply(store, telegram.convert(load("telegram_private")))
    again = apply(store, telegram.convert(load("telegram_private")))
    assert again.lookup is not None
    assert not again.lookup.created
    assert again.session_id == first.session_id
    assert len(store.transcript(first.session_id)) == 1
    assert again.message == first.message


def test_group_thread_members_share_one_transcript(store):
    """Two members of a Feishu group thread write to the same session, each as sender."""
    first = apply(store, feishu.convert(load("feishu_group_thread"), bot_open_id="ou_bot"))
    second = apply(store, feishu.convert(load("feishu_group_thread_other_member")))
    assert first.session_id == second.session_id
    senders = [m.sender_id for m in store.transcript(first.session_id)]
    assert senders == ["on_union1", "on_union2"]


def test_an_edited_message_is_reindexed(store):
    """After a Telegram edit, search finds the new words and no longer the old ones."""
    stored = apply(store, telegram.convert(load("telegram_private")))
    assert [h.message.id for h in store.search("deploy")] == [stored.message.id]
    edited = apply(store, telegram.convert(load("telegram_edited")))
    assert edited.message is not None
    assert edited.message.content == "where did we leave the rollback?"
    assert store.search("deploy") == []
    assert [h.message.id for h in store.search("rollback")] == [stored.message.id]


def test_a_recalled_message_disappears_from_search(store):
    """A Slack deletion soft-deletes the message: search stops finding it, the record keeps it."""
    stored = apply(store, slack.convert(load("slack_dm_thread")))
    apply(store, slack.convert(load("slack_message_changed")))
    assert [h.message.id for h in store.search("third step")] == [stored.message.id]
    retracted = apply(store, slack.convert(load("slack_message_deleted")))
    assert retracted.message is not None
    assert retracted.message.active is False
    assert store.search("third step") == []
    kept = store.transcript(stored.session_id, include_inactive=True)
    assert [m.active for m in kept] == [False]


def test_edits_and_recalls_never_create_sessions(store):
    """An edit or recall for a lane the store has never seen changes nothing."""
    edit = apply(store, telegram.convert(load("telegram_edited")))
    retract = apply(store, slack.convert(load("slack_message_deleted")))
    assert (edit.session_id, edit.message) == (None, None)
    assert (retract.session_id, retract.message) == (None, None)
    assert store.list_sessions().items == ()


def test_an_edit_of_an_unknown_message_changes_nothing(store):
    """An edit naming a message the session does not have reports no message."""
    source = SessionSource(platform="telegram", chat_type="private", chat_id=42)
    applied = apply(store, NewMessage(source=source, message=Message(role="user", content="a")))
    edit = apply(store, Edit(source=source, platform_message_id="42:999", content="b"))
    retract = apply(store, Retract(source=source, platform_message_id="42:999"))
    assert (edit.session_id, edit.message) == (applied.session_id, None)
    assert (retract.session_id, retract.message) == (applied.session_id, None)
    assert [m.content for m in store.transcript(applied.session_id)] == ["a"]


def test_events_validate_their_ids():
    """An edit or recall needs the platform id as a non-empty string."""
    source = SessionSource(platform="slack", chat_type="im", chat_id="D1")
    with pytest.raises(ValueError, match="platform's message id"):
        Retract(source=source, platform_message_id="")
    with pytest.raises(TypeError):
        NewMessage(source=source, message="hi")
