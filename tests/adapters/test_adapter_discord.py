"""Discord: discord.py ``Message`` objects and gateway payloads to store events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions import AdapterPayloadError, build_session_key
from hermes_sessions.adapters import Edit, NewMessage, Retract
from hermes_sessions.adapters import discord as adapter

PAYLOADS = Path(__file__).parent / "payloads"
BOT = 1180000000000000555


def load(name):
    """A payload file from ``payloads/``."""
    return json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))


def thread_payload(channel):
    """A thread channel's gateway payload, completed with the fields discord.py needs."""
    return {
        **channel,
        "owner_id": "80351110224678912",
        "guild_id": "1180000000000000999",
        "message_count": 1,
        "member_count": 1,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": "2026-05-12T01:00:00+00:00",
        },
    }


def as_payload(name_or_data):
    """A payload file's content, or the given payload itself."""
    return load(name_or_data) if isinstance(name_or_data, str) else name_or_data


def discord_message(name_or_data):
    """The payload as discord.py's own ``Message``, in a guild, thread or DM it builds itself."""
    discord = pytest.importorskip("discord", reason=FRAMEWORKS_REASON)
    data = dict(as_payload(name_or_data))
    channel = data.pop("channel", None)
    state = discord.Client(intents=discord.Intents.none())._connection
    if "guild_id" not in data:
        recipient = {**data["author"]}
        dm = {"id": data["channel_id"], "type": 1, "recipients": [recipient]}
        target = discord.DMChannel(me=None, state=state, data=dm)
        return discord.Message(state=state, channel=target, data=data)
    guild_data = {
        "id": data["guild_id"],
        "name": "Hermes",
        "channels": [],
        "threads": [],
        "roles": [],
        "members": [],
        "emojis": [],
        "features": [],
        "member_count": 1,
    }
    if channel["type"] == 11:
        parent = {"id": channel["parent_id"], "type": 15, "name": "help", "position": 0}
        guild_data["channels"].append({**parent, "permission_overwrites": []})
        guild_data["threads"].append(thread_payload(channel))
    else:
        guild_data["channels"].append({**channel, "position": 0, "permission_overwrites": []})
    guild = discord.Guild(data=guild_data, state=state)
    target = guild.get_channel_or_thread(int(channel["id"]))
    return discord.Message(state=state, channel=target, data=data)


FRAMEWORKS = {"payload": as_payload, "discord.py": discord_message}


@pytest.fixture(params=sorted(FRAMEWORKS))
def message(request):
    """Build a message from a payload (file name or dict) as a dict or discord.py's ``Message``."""
    return FRAMEWORKS[request.param]


def test_a_guild_channel_is_a_group_scoped_by_the_guild(message):
    """A guild text channel is a ``group`` lane per member, the guild its scope."""
    event = adapter.convert(message("discord_guild_text"), bot_user_id=BOT)
    assert isinstance(event, NewMessage)
    key = build_session_key(event.source)
    assert key == "agent:main:discord:group:1180000000000000100:80351110224678912"
    assert event.source.platform_chat_type == "text"
    assert event.source.scope_id == "1180000000000000999"
    assert event.source.chat_name == "general"


def test_the_bot_mention_is_stripped(message):
    """``<@bot>`` leaves the text; ``extra['mentions_bot']`` records it."""
    event = adapter.convert(message("discord_guild_text"), bot_user_id=BOT)
    assert isinstance(event, NewMessage)
    assert event.message.content == "status?"
    assert event.message.extra == {"mentions_bot": True}
    assert (event.message.sender_id, event.message.sender_name) == ("80351110224678912", "Nelly")


def test_a_forum_post_is_a_shared_thread_under_its_channel(message):
    """A forum post (a thread) keys on the parent channel and the thread, shared by members."""
    event = adapter.convert(message("discord_forum_post"))
    assert isinstance(event, NewMessage)
    key = build_session_key(event.source)
    assert key == "agent:main:discord:thread:1180000000000000200:thread:1180000000000000300"
    assert event.source.platform_chat_type == "public_thread"
    assert event.source.parent_chat_id == "1180000000000000200"


def test_attachments_and_replies(message):
    """An attachment is a part with its id and URL; the reference is ``extra['reply_to']``."""
    event = adapter.convert(message("discord_forum_post"))
    assert isinstance(event, NewMessage)
    text, trace = event.message.content
    assert text["text"] == "crash on start, trace attached"
    assert trace["type"] == "file"
    assert trace["attachment_id"] == "1180000000000000777"
    assert trace["name"] == "trace.txt"
    assert trace["url"].endswith("/trace.txt")
    assert event.message.extra == {"reply_to": "1180000000000000300"}


def test_a_dm_without_channel_info_is_read_as_a_dm(message):
    """Without a ``guild_id`` or channel, a payload is a DM keyed by its channel."""
    event = adapter.convert(message("discord_dm_no_channel"))
    assert isinstance(event, NewMessage)
    assert build_session_key(event.source) == "agent:main:discord:dm:1180000000000000400"
    assert event.message.platform_message_id == "1180000000000000003"


def test_an_edited_message_is_an_edit(message):
    """A message with an edit time (``on_message_edit``'s *after*) becomes an ``Edit``."""
    data = load("discord_dm_no_channel")
    data["edited_timestamp"] = "2026-05-12T01:05:00+00:00"
    data["content"] = "hi again"
    event = adapter.convert(message(data))
    assert isinstance(event, Edit)
    assert (event.platform_message_id, event.content) == ("1180000000000000003", "hi again")


def test_a_deleted_message_is_a_retract(message):
    """``deleted=True`` (``on_message_delete``) retracts the message in its own lane."""
    event = adapter.convert(message("discord_guild_text"), deleted=True)
    assert isinstance(event, Retract)
    assert event.platform_message_id == "1180000000000000001"
    assert event.source.user_id == "80351110224678912"


def test_a_guild_payload_without_channel_info_is_a_text_channel():
    """A payload naming only ``channel_id`` and ``guild_id`` is read as a guild text channel."""
    data = load("discord_guild_text")
    del data["channel"]
    event = adapter.convert(data)
    assert isinstance(event, NewMessage)
    assert event.source.platform_chat_type == "text"
    assert event.source.chat_id == "1180000000000000100"


def test_bots_and_empty_messages_give_nothing():
    """Messages from bots, the bot itself, or without content give ``None``; no id is refused."""
    data = load("discord_guild_text")
    assert adapter.convert({**data, "author": {**data["author"], "bot": True}}) is None
    own = {**data, "author": {**data["author"], "id": str(BOT)}}
    assert adapter.convert(own, bot_user_id=BOT) is None
    assert adapter.convert({**data, "content": ""}) is None
    with pytest.raises(AdapterPayloadError, match="discord event: id is missing"):
        adapter.convert({**data, "id": None})
