"""Slack: one channel has one key whatever the event, and a thread's root is edited in place."""

from __future__ import annotations

from hermes_sessions import build_session_key
from hermes_sessions.adapters import Edit, NewMessage, apply
from hermes_sessions.adapters import slack as adapter

ROOT_TS = "1778548000.000100"


def body(event):
    """An Events API envelope around ``event``."""
    return {"type": "event_callback", "team_id": "T0001", "event_id": "Ev9", "event": event}


def root(channel, channel_type, text="deploy plan: staging first"):
    """The message that starts a thread, as it arrives before anyone replied."""
    return body(
        {
            "type": "message",
            "channel": channel,
            "channel_type": channel_type,
            "user": "U1",
            "text": text,
            "ts": ROOT_TS,
        }
    )


def root_edited(channel, channel_type, text):
    """``message_changed`` for the root after it gained replies (``thread_ts == ts``)."""
    inner = {"type": "message", "user": "U1", "ts": ROOT_TS, "thread_ts": ROOT_TS}
    return body(
        {
            "type": "message",
            "subtype": "message_changed",
            "channel": channel,
            "channel_type": channel_type,
            "ts": "1778548100.000900",
            "message": {**inner, "text": text, "reply_count": 2},
            "previous_message": {**inner, "text": "deploy plan: staging first"},
        }
    )


def test_editing_a_threads_root_edits_the_stored_message(store):
    """The root lives in the channel's lane; its edit goes there too, and search follows."""
    stored = apply(store, adapter.convert(root("C0LAN2Q65", "channel")))
    edit = adapter.convert(root_edited("C0LAN2Q65", "channel", "deploy plan: prod first"))
    assert isinstance(edit, Edit)
    assert store.key_for(edit.source) == store.key_for(stored.event.source)
    applied = apply(store, edit)
    assert applied.message is not None
    assert applied.message.content == "deploy plan: prod first"
    assert [hit.message.id for hit in store.search("prod")] == [stored.message.id]
    assert store.search("staging") == []


def test_editing_a_dm_threads_root_keeps_the_dm_lane():
    """In a DM the root is in the DM's lane, not the thread's."""
    edit = adapter.convert(root_edited("D024BE91L", "im", "new text"))
    assert build_session_key(edit.source) == "agent:main:slack:dm:D024BE91L"


def test_a_private_channel_has_one_key_for_mentions_and_messages():
    """``app_mention`` (no ``channel_type``) and ``message`` (``group``) key one channel once."""
    message = adapter.convert(root("C07PRIVATE", "group"))
    mention = adapter.convert(
        body(
            {
                "type": "app_mention",
                "channel": "C07PRIVATE",
                "user": "U1",
                "text": "<@UBOT> status?",
                "ts": "1778548200.000100",
            }
        ),
        bot_user_id="UBOT",
    )
    assert isinstance(message, NewMessage)
    assert isinstance(mention, NewMessage)
    assert build_session_key(message.source) == build_session_key(mention.source)
    assert build_session_key(message.source) == "agent:main:slack:channel:C07PRIVATE:U1"
    assert message.source.platform_chat_type == "group"


def test_public_and_private_channels_and_group_dms_key_as_channels():
    """Only IMs are DMs; every other conversation keys as ``channel``, whatever its type says."""
    for channel, channel_type in (("C1", "channel"), ("G1", "group"), ("G2", "mpim")):
        event = adapter.convert(root(channel, channel_type))
        assert event.source.chat_type == "channel", channel_type
    im = adapter.convert(root("D1", "im"))
    assert build_session_key(im.source) == "agent:main:slack:dm:D1"
