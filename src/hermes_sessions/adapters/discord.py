"""Discord: discord.py ``Message`` objects and gateway ``MESSAGE_CREATE`` / ``UPDATE`` payloads.

:func:`convert` returns a :class:`NewMessage` for a new message, an :class:`Edit` for one that
has been edited (discord.py's ``edited_at``, the payload's ``edited_timestamp``: pass the
*after* message of ``on_message_edit``), and a :class:`Retract` with ``deleted=True`` (pass the
message of ``on_message_delete``). Messages from bots, the bot itself included, give ``None``.

The conversation: the channel type is discord.py's ``ChannelType`` name (``private``, ``text``,
``public_thread``, ``forum``, ...), kept as ``platform_chat_type`` and mapped onto
``dm``/``group``/``channel``/``thread``. The guild is ``scope_id``. In a thread (forum posts
are threads too) ``chat_id`` is the parent channel and ``thread_id`` the thread, so a thread is
one conversation shared by its members; elsewhere ``chat_id`` is the channel. Gateway payloads
name only ``channel_id``: add the channel as ``"channel": {"id", "type", "parent_id", "name"}``
(from your cache, ``type`` as the API's number or discord.py's name); without it a payload
with a ``guild_id`` is read as a guild text channel and one without as a DM.

Discord ids are global snowflakes, used as they are. ``<@bot_user_id>`` mentions are removed
from the text (``extra["mentions_bot"]``); attachments become parts with ``attachment_id``,
``url``, ``name`` and ``mime_type``; ``extra["reply_to"]`` is the referenced message's id.
A deleted message's payload (``MESSAGE_DELETE``) has no author, so the key of a guild
conversation cannot be rebuilt from it; use discord.py's cached message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from hermes_sessions.adapters._events import Edit, InboundEvent, NewMessage, React, Retract
from hermes_sessions.adapters._payload import Fields, chat_lane, content_of, plain, text_or_none
from hermes_sessions.models import JSONObject, Message, SessionSource

__all__ = ["convert", "convert_reaction", "interaction_source", "payload_of", "source_of"]

CHANNEL_TYPE_NAMES: Final = {
    0: "text",
    1: "private",
    2: "voice",
    3: "group",
    4: "category",
    5: "news",
    10: "news_thread",
    11: "public_thread",
    12: "private_thread",
    13: "stage_voice",
    15: "forum",
    16: "media",
}
"""The API's channel type numbers and discord.py's ``ChannelType`` names for them."""

_THREADS: Final = frozenset({"public_thread", "private_thread", "news_thread"})
_MIME_KINDS: Final = ("image", "audio", "video")


_FIELDS: Final = Fields("discord")


def convert(
    message: object,
    *,
    deleted: bool = False,
    bot_user_id: str | int | None = None,
    platform: str = "discord",
) -> InboundEvent | None:
    """What a Discord message means for the transcript; ``None`` if nothing.

    A payload without a field Discord always sends (``id``, ``author`` and its ``id``, the
    channel) or with one of the wrong type raises :class:`~hermes_sessions.AdapterPayloadError`.

    .. versionadded:: 0.1.0
    """
    data = payload_of(message)
    author: JSONObject = _FIELDS.need(data, "author", "dict")
    bot = None if bot_user_id is None else str(bot_user_id)
    is_bot = _FIELDS.get(author, "bot", "bool", at="author")
    if is_bot or (bot is not None and _FIELDS.get(author, "id", "id", at="author") == bot):
        return None
    source = source_of(data, platform=platform)
    pmid = source.message_id
    if pmid is None:  # source_of needs the id; this only narrows the type
        return None
    if deleted:
        return Retract(source=source, platform_message_id=pmid)
    text = _FIELDS.get(data, "content", "text") or None
    mentioned = False
    if text is not None and bot is not None:
        text, count = re.subn(rf"<@!?{re.escape(bot)}>", "", text)
        mentioned = count > 0
        text = " ".join(text.split()) or None
    content = content_of(text, [_part(a) for a in _FIELDS.items(data, "attachments")])
    if _FIELDS.get(data, "edited_timestamp", "str"):
        return Edit(source=source, platform_message_id=pmid, content=content)
    if content is None:
        return None
    extra: JSONObject = {}
    reference: JSONObject | None = _FIELDS.get(data, "message_reference", "dict")
    reply = None if reference is None else _FIELDS.get(reference, "message_id", "id")
    if reply is not None:
        extra["reply_to"] = reply
    if mentioned:
        extra["mentions_bot"] = True
    return NewMessage(
        source=source,
        message=Message(
            role="user",
            content=content,
            platform_message_id=pmid,
            sender_id=source.participant,
            sender_name=source.user_name,
            extra=extra,
        ),
    )


def source_of(data: JSONObject, *, platform: str = "discord") -> SessionSource:
    """The :class:`SessionSource` of a message payload (as :func:`payload_of` returns it).

    Raises:
        AdapterPayloadError: A field Discord always sends is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    if not isinstance(data, dict):
        _FIELDS.refuse("message", "must be an object")
    channel: JSONObject = _FIELDS.get(data, "channel", "dict") or {}
    channel_id = _FIELDS.get(channel, "id", "id", at="channel") or _FIELDS.get(
        data, "channel_id", "id"
    )
    if channel_id is None:
        _FIELDS.refuse("channel_id", "is missing, and the platform always sends it")
    guild = _FIELDS.get(data, "guild_id", "id")
    raw_type = _channel_type(channel.get("type"), guild)
    parent = _FIELDS.get(channel, "parent_id", "id", at="channel")
    in_thread = raw_type in _THREADS and parent is not None
    author: JSONObject = _FIELDS.need(data, "author", "dict")
    return SessionSource(
        platform=platform,
        chat_id=parent if in_thread else channel_id,
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=_FIELDS.need(author, "id", "id", at="author"),
        thread_id=channel_id if in_thread else None,
        chat_name=text_or_none(channel.get("name")),
        user_name=text_or_none(author.get("global_name")) or text_or_none(author.get("username")),
        scope_id=guild,
        parent_chat_id=parent,
        message_id=_FIELDS.need(data, "id", "id"),
    )


def interaction_source(interaction: object, *, platform: str = "discord") -> SessionSource | None:
    """The conversation of the user who acted: a discord.py ``Interaction`` or its payload.

    Works for component interactions (buttons, selects) and commands alike. The channel (a
    thread's parent plus the thread, as for messages) is the interaction's; the sender is the
    user who acted (``member.user`` in a guild, ``user`` in a DM), so in a guild channel it is
    their own lane. ``None`` for an interaction outside a channel.

    Raises:
        AdapterPayloadError: the user or their ``id`` is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    data = _interaction_payload(interaction)
    member: JSONObject | None = _FIELDS.get(data, "member", "dict")
    where = "member.user" if member is not None else "user"
    user: JSONObject = (
        _FIELDS.need(member, "user", "dict", at="member")
        if member is not None
        else _FIELDS.need(data, "user", "dict")
    )
    _FIELDS.need(user, "id", "id", at=where)
    channel: JSONObject | None = _FIELDS.get(data, "channel", "dict")
    if channel is None and _FIELDS.get(data, "channel_id", "id") is None:
        return None
    as_message = {
        "id": _FIELDS.need(data, "id", "id"),
        "channel": channel,
        "channel_id": data.get("channel_id"),
        "guild_id": data.get("guild_id"),
        "author": user,
    }
    return attrs.evolve(source_of(as_message, platform=platform), message_id=None)


def _interaction_payload(interaction: object) -> JSONObject:
    """A discord.py ``Interaction`` as the gateway's interaction payload (a mapping as it is)."""
    if isinstance(interaction, Mapping):
        data: JSONObject = plain(interaction)
        return data
    if not hasattr(interaction, "user") or not hasattr(interaction, "channel_id"):
        _FIELDS.refuse("interaction", "is neither a discord.py Interaction nor a payload")
    i: Any = interaction
    channel = i.channel
    kind = getattr(channel, "type", None)
    user = i.user
    return {
        "id": i.id,
        "guild_id": i.guild_id,
        "channel_id": i.channel_id,
        "channel": None
        if channel is None
        else {
            "id": channel.id,
            "type": getattr(kind, "name", kind),
            "parent_id": getattr(channel, "parent_id", None),
            "name": getattr(channel, "name", None),
        },
        "user": {
            "id": user.id,
            "username": user.name,
            "global_name": getattr(user, "global_name", None),
        },
    }


def convert_reaction(
    event: object,
    *,
    removed: bool = False,
    bot_user_id: str | int | None = None,
    platform: str = "discord",
) -> React | None:
    """A reaction added (or, with ``removed=True``, removed) to a message, as a :class:`React`.

    Takes discord.py's ``RawReactionActionEvent`` (``on_raw_reaction_add`` /
    ``on_raw_reaction_remove``) or the gateway's ``MESSAGE_REACTION_ADD`` / ``_REMOVE``
    payload; as for messages, add ``"channel": {"id", "type", "parent_id"}`` from your cache
    for a thread. The message is looked for in the reactor's lane, its author's
    (``message_author_id``, when given) and the channel's. A custom emoji is ``<:name:id>``.
    The bot's own reactions give ``None``.

    Raises:
        AdapterPayloadError: ``user_id``, ``message_id``, the channel or the emoji is missing
            or of the wrong type.

    .. versionadded:: 0.1.0
    """
    data = _reaction_payload(event)
    reactor = _FIELDS.need(data, "user_id", "id")
    if bot_user_id is not None and reactor == str(bot_user_id):
        return None
    emoji: JSONObject = _FIELDS.need(data, "emoji", "dict")
    name = _FIELDS.get(emoji, "name", "str", at="emoji")
    custom = _FIELDS.get(emoji, "id", "id", at="emoji")
    if name is None:
        _FIELDS.refuse("emoji.name", "is missing, and the platform always sends it")
    label = f"<:{name}:{custom}>" if custom else name
    member: JSONObject = _FIELDS.get(data, "member", "dict") or {}
    user: JSONObject = _FIELDS.get(member, "user", "dict", at="member") or {}
    as_message = {
        "id": _FIELDS.need(data, "message_id", "id"),
        "channel": data.get("channel"),
        "channel_id": _FIELDS.need(data, "channel_id", "id"),
        "guild_id": data.get("guild_id"),
        "author": {**user, "id": reactor},
    }
    source = attrs.evolve(source_of(as_message, platform=platform), message_id=None)
    author = _FIELDS.get(data, "message_author_id", "id")
    lanes = () if author is None else (attrs.evolve(source, user_id=author, user_name=None),)
    return React(
        source=source,
        platform_message_id=as_message["id"],
        added=() if removed else (label,),
        removed=(label,) if removed else (),
        also=(*lanes, *chat_lane(source)),
    )


def _reaction_payload(event: object) -> JSONObject:
    """A discord.py ``RawReactionActionEvent`` as the gateway payload (a mapping as it is)."""
    if isinstance(event, Mapping):
        data: JSONObject = plain(event)
        return data
    if not hasattr(event, "message_id") or not hasattr(event, "emoji"):
        _FIELDS.refuse("reaction", "is neither a discord.py RawReactionActionEvent nor a payload")
    e: Any = event
    return {
        "user_id": e.user_id,
        "message_id": e.message_id,
        "channel_id": e.channel_id,
        "guild_id": e.guild_id,
        "emoji": {"id": e.emoji.id, "name": e.emoji.name},
        "message_author_id": getattr(e, "message_author_id", None),
    }


def _channel_type(raw: object, guild: str | None) -> str:
    """discord.py's name for the channel type (the API's number, or a name, as given)."""
    if raw is None:
        return "text" if guild else "private"
    if isinstance(raw, str) and raw.isdigit():
        raw = int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return CHANNEL_TYPE_NAMES.get(raw, str(raw))
    if not isinstance(raw, str) or not raw:
        _FIELDS.refuse("channel.type", "must be the API's channel type number or its name")
    return raw


def payload_of(message: object) -> JSONObject:
    """A discord.py ``Message`` as the gateway's message payload (plus its ``channel``).

    A mapping is returned as it is (as plain values).

    .. versionadded:: 0.1.0
    """
    if isinstance(message, Mapping):
        data: JSONObject = plain(message)
        return data
    if not hasattr(message, "channel") or not hasattr(message, "author"):
        _FIELDS.refuse("message", "is neither a discord.py Message nor a payload (a mapping)")
    m: Any = message
    channel = m.channel
    kind = getattr(channel, "type", None)
    reference = getattr(m, "reference", None)
    guild = getattr(m, "guild", None)
    return {
        "id": m.id,
        "content": m.content,
        "guild_id": None if guild is None else guild.id,
        "channel": {
            "id": channel.id,
            "type": getattr(kind, "name", kind),
            "parent_id": getattr(channel, "parent_id", None),
            "name": getattr(channel, "name", None),
        },
        "author": {
            "id": m.author.id,
            "username": m.author.name,
            "global_name": getattr(m.author, "global_name", None),
            "bot": m.author.bot,
        },
        "attachments": [
            {
                "id": a.id,
                "filename": a.filename,
                "content_type": a.content_type,
                "url": a.url,
                "size": a.size,
            }
            for a in m.attachments
        ],
        "message_reference": None
        if reference is None
        else {"message_id": reference.message_id, "channel_id": reference.channel_id},
        "edited_timestamp": None if m.edited_at is None else m.edited_at.isoformat(),
    }


def _id(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def _part(attachment: JSONObject) -> JSONObject:
    mime = str(attachment.get("content_type") or "")
    kind = next((k for k in _MIME_KINDS if mime.startswith(f"{k}/")), "file")
    attachment_id = _FIELDS.get(attachment, "id", "id", at="attachments")
    part: JSONObject = {"type": kind, "attachment_id": attachment_id}
    for ours, theirs in (("url", "url"), ("name", "filename"), ("mime_type", "content_type")):
        if attachment.get(theirs):
            part[ours] = attachment[theirs]
    return part
