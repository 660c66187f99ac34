"""Telegram: python-telegram-bot ``Update`` / ``Message`` and aiogram ``Update`` / ``Message``.

:func:`convert` takes a framework object or the Bot API's JSON (an ``Update`` or a ``Message``)
and returns what it means for the transcript:

* ``message`` and ``channel_post`` are a :class:`NewMessage`; ``edited_message`` and
  ``edited_channel_post`` (or a ``Message`` with ``edit_date``) an :class:`Edit`. The Bot API
  does not tell bots about deleted messages, so there is no :class:`Retract`.
* The chat type is Telegram's own (``private``, ``group``, ``supergroup``, ``channel``), which
  :class:`SessionSource` maps onto ``dm``/``group``/``channel``.
* A forum topic is its own conversation: ``thread_id`` is the ``message_thread_id`` of topic
  messages (``is_topic_message``). Replies in ordinary groups also carry a
  ``message_thread_id``; it is ignored there, so a reply stays in the group's conversation.
* Message ids are unique only per chat: ``platform_message_id`` is ``<chat_id>:<message_id>``.
* ``@<bot_username>`` mentions (and ``/command@<bot_username>`` suffixes) are removed from the
  text when ``bot_username`` is given, and ``extra["mentions_bot"]`` records that there was one.
* Photos, documents, audio, voice notes, videos and stickers become multimodal parts carrying
  ``file_id`` and ``file_unique_id``; ``extra["reply_to"]`` is the qualified id of the message
  replied to and ``extra["quote"]`` the quoted text.

No framework is imported: objects are read through ``to_dict()`` (python-telegram-bot) or
``model_dump(by_alias=True)`` (aiogram).
"""

from __future__ import annotations

import re
from typing import Any, Final

from hermes_sessions.adapters._events import Edit, InboundEvent, NewMessage, React
from hermes_sessions.adapters._payload import (
    Fields,
    chat_lane,
    content_of,
    plain,
    qualified,
    text_or_none,
)
from hermes_sessions.models import JSONObject, Message, SessionSource

__all__ = ["convert", "interaction_source", "source_of"]

_NEW: Final = ("message", "channel_post", "business_message")
_EDITED: Final = ("edited_message", "edited_channel_post", "edited_business_message")
_MEDIA: Final = (
    ("photo", "image"),
    ("sticker", "image"),
    ("document", "file"),
    ("audio", "audio"),
    ("voice", "audio"),
    ("video", "video"),
    ("video_note", "video"),
    ("animation", "video"),
)
_PART_KEYS: Final = ("file_id", "file_unique_id", "mime_type", "file_size", "duration")


_FIELDS: Final = Fields("telegram")
_PLACEHOLDERS: Final = frozenset({"1087968824", "136817688", "777000"})
"""``GroupAnonymousBot``, ``Channel_Bot`` and ``Telegram``: the ``from`` of a chat's messages."""


def convert(
    event: object, *, bot_username: str | None = None, platform: str = "telegram"
) -> InboundEvent | None:
    """What a Telegram update or message means for the transcript; ``None`` if nothing.

    A ``message_reaction`` update is a :class:`~hermes_sessions.adapters.React` (the
    reactions a user, or a chat, added and removed). Updates that carry no message (callback
    queries, polls, member changes, anonymous ``message_reaction_count``) and service messages
    with neither text nor media give ``None``. A message without a field the Bot API
    always sends (``chat``, its ``id`` and ``type``, ``message_id``, ``from`` outside channels)
    or with one of the wrong type raises :class:`~hermes_sessions.AdapterPayloadError`.

    .. versionadded:: 0.1.0
    """
    data = plain(event)
    if not isinstance(data, dict):
        return None
    if "update_id" in data and "message_reaction" in data:
        _FIELDS.need(data, "update_id", "int")
        return _reaction(data, platform)
    found = _message_of(data)
    if found is None:
        return None
    message, where, edited = found
    source = _source(message, platform=platform, at=where)
    text, mentioned = _text(message, bot_username, where)
    content = content_of(text, _parts(message, where))
    if content is None:
        return None
    pmid = source.message_id
    if pmid is None:  # _source needs message_id; this only narrows the type
        _FIELDS.refuse(f"{where}.message_id", "is missing, and the platform always sends it")
    if edited:
        return Edit(source=source, platform_message_id=pmid, content=content)
    return NewMessage(
        source=source,
        message=Message(
            role="user",
            content=content,
            platform_message_id=pmid,
            sender_id=source.participant,
            sender_name=source.user_name,
            extra=_extra(message, where, mentioned=mentioned),
        ),
    )


def _message_of(data: JSONObject) -> tuple[JSONObject, str, bool] | None:
    """The message an Update (or a bare Message) carries, its field name, and if it is an edit."""
    if "update_id" not in data:
        if "chat" not in data:
            _FIELDS.refuse("update_id", "is missing: the event is neither an Update nor a Message")
        return data, "message", "edit_date" in data
    _FIELDS.need(data, "update_id", "int")
    edited = False
    where = next((name for name in _NEW if name in data), "")
    if not where:
        where = next((name for name in _EDITED if name in data), "")
        edited = True
    if not where and len(data) == 1:
        _FIELDS.refuse("message", "is missing: the Update carries no event at all")
    if not where:
        return None  # an update of another kind
    return _FIELDS.need(data, where, "dict"), where, edited


def source_of(message: JSONObject, *, platform: str = "telegram") -> SessionSource:
    """The :class:`SessionSource` of a Bot API ``Message`` (as JSON).

    The sender is ``from``, except for messages sent on behalf of a chat, whose ``from`` is a
    placeholder (``GroupAnonymousBot``, ``Channel_Bot``, ``Telegram``): there it is
    ``sender_chat``, named by ``author_signature`` when there is one, else by the chat's title.
    Anonymous admins therefore share one sender, the group itself: Telegram does not tell the
    bot which admin wrote. In a channel the channel speaks, so the key names no sender.

    Raises:
        AdapterPayloadError: A field the Bot API always sends is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    return _source(plain(message), platform=platform, at="message")


def interaction_source(event: object, *, platform: str = "telegram") -> SessionSource | None:
    """The conversation of the user who pressed an inline button: a ``callback_query``.

    Takes the ``Update`` or its ``CallbackQuery`` (a framework object or the JSON). The chat and
    the forum topic are those of the message the button is on; the sender is the user who
    pressed it (``from``), never the bot that sent that message, so in a group it is the
    presser's own lane. ``None`` for an Update of another kind and for a button on an inline-mode
    message (``inline_message_id``), which names no chat.

    Raises:
        AdapterPayloadError: ``from``, the message's ``chat`` or its id or type is missing or
            of the wrong type.

    .. versionadded:: 0.1.0
    """
    data = plain(event)
    if not isinstance(data, dict):
        return None
    at = "callback_query"
    query: JSONObject = data
    if "update_id" in data:
        if "callback_query" not in data and len(data) == 1:
            _FIELDS.refuse(at, "is missing: the Update carries no event at all")
        if "callback_query" not in data:
            return None
        query = _FIELDS.need(data, "callback_query", "dict")
    sender: JSONObject = _FIELDS.need(query, "from", "dict", at=at)
    user_id = _FIELDS.need(sender, "id", "id", at=f"{at}.from")
    message: JSONObject | None = _FIELDS.get(query, "message", "dict", at=at)
    if message is None:
        if _FIELDS.get(query, "inline_message_id", "str", at=at):
            return None
        _FIELDS.refuse(f"{at}.message", "is missing, and the query has no inline_message_id")
    where = f"{at}.message"
    chat: JSONObject = _FIELDS.need(message, "chat", "dict", at=where)
    raw_type = _FIELDS.need(chat, "type", "str", at=f"{where}.chat")
    topic = None
    if _FIELDS.get(message, "is_topic_message", "bool", at=where):
        topic = _FIELDS.need(message, "message_thread_id", "id", at=where)
    return SessionSource(
        platform=platform,
        chat_id=_FIELDS.need(chat, "id", "id", at=f"{where}.chat"),
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=user_id,
        thread_id=topic,
        chat_name=_name(chat) if raw_type != "private" else None,
        user_name=_name(sender),
    )


def _reaction(update: JSONObject, platform: str) -> React | None:
    """A ``message_reaction`` update: one user's (or chat's) reactions to a message changed."""
    at = "message_reaction"
    reaction: JSONObject = _FIELDS.need(update, at, "dict")
    chat: JSONObject = _FIELDS.need(reaction, "chat", "dict", at=at)
    chat_id = _FIELDS.need(chat, "id", "id", at=f"{at}.chat")
    raw_type = _FIELDS.need(chat, "type", "str", at=f"{at}.chat")
    message_id = _FIELDS.need(reaction, "message_id", "id", at=at)
    user: JSONObject | None = _FIELDS.get(reaction, "user", "dict", at=at)
    actor: JSONObject | None = _FIELDS.get(reaction, "actor_chat", "dict", at=at)
    who = user if user is not None else actor
    if who is None:
        _FIELDS.refuse(f"{at}.user", "is missing, and so is actor_chat")
    reactor = _FIELDS.need(who, "id", "id", at=f"{at}.{'user' if user else 'actor_chat'}")
    old = _emojis(reaction, "old_reaction")
    new = _emojis(reaction, "new_reaction")
    added = tuple(emoji for emoji in new if emoji not in old)
    removed = tuple(emoji for emoji in old if emoji not in new)
    if not added and not removed:
        return None
    source = SessionSource(
        platform=platform,
        chat_id=chat_id,
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=reactor,
        chat_name=_name(chat) if raw_type != "private" else None,
        user_name=_name(who),
    )
    return React(
        source=source,
        platform_message_id=f"{chat_id}:{message_id}",
        added=added,
        removed=removed,
        also=chat_lane(source),
    )


def _emojis(reaction: JSONObject, name: str) -> list[str]:
    """A ``ReactionType`` list as strings: the emoji, ``custom_emoji:<id>``, or ``paid``."""
    out: list[str] = []
    for index, kind in enumerate(_FIELDS.items(reaction, name, at="message_reaction")):
        at = f"message_reaction.{name}[{index}]"
        kind_name = _FIELDS.need(kind, "type", "str", at=at)
        if kind_name == "emoji":
            out.append(_FIELDS.need(kind, "emoji", "str", at=at))
        elif kind_name == "custom_emoji":
            out.append(f"custom_emoji:{_FIELDS.need(kind, 'custom_emoji_id', 'str', at=at)}")
        else:
            out.append(kind_name)
    return out


def _source(message: JSONObject, *, platform: str, at: str) -> SessionSource:
    if not isinstance(message, dict):
        _FIELDS.refuse(at, "must be an object")
    chat: JSONObject = _FIELDS.need(message, "chat", "dict", at=at)
    chat_id = _FIELDS.need(chat, "id", "id", at=f"{at}.chat")
    raw_type = _FIELDS.need(chat, "type", "str", at=f"{at}.chat")
    message_id = _FIELDS.need(message, "message_id", "id", at=at)
    user_id, user_name = _sender(message, raw_type, at)
    topic = None
    if _FIELDS.get(message, "is_topic_message", "bool", at=at):
        topic = _FIELDS.need(message, "message_thread_id", "id", at=at)
    else:
        _FIELDS.get(message, "message_thread_id", "id", at=at)
    return SessionSource(
        platform=platform,
        chat_id=chat_id,
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=user_id,
        thread_id=topic,
        chat_name=_name(chat) if raw_type != "private" else None,
        user_name=user_name,
        message_id=qualified(chat_id, message_id),
    )


def _sender(message: JSONObject, raw_type: str, at: str) -> tuple[str | None, str | None]:
    """Who wrote ``message``: their id (``None`` in a channel) and their name."""
    signature = _FIELDS.get(message, "author_signature", "text", at=at) or None
    on_behalf: JSONObject | None = _FIELDS.get(message, "sender_chat", "dict", at=at)
    if raw_type == "channel":
        return None, signature or (None if on_behalf is None else _name(on_behalf))
    sender: JSONObject = _FIELDS.need(message, "from", "dict", at=at)
    sender_id = _FIELDS.need(sender, "id", "id", at=f"{at}.from")
    if on_behalf is None:
        if sender_id in _PLACEHOLDERS:
            _FIELDS.refuse(
                f"{at}.sender_chat",
                f"is missing, and 'from' ({sender_id}) is a placeholder for a chat",
            )
        return sender_id, _name(sender) or signature
    chat_id = _FIELDS.need(on_behalf, "id", "id", at=f"{at}.sender_chat")
    return chat_id, signature or _name(on_behalf)


def _name(who: JSONObject) -> str | None:
    title = text_or_none(who.get("title"))
    if title:
        return title
    names = (text_or_none(who.get(k)) for k in ("first_name", "last_name"))
    full = " ".join(name for name in names if name)
    return full or text_or_none(who.get("username"))


def _text(message: JSONObject, bot_username: str | None, at: str) -> tuple[str | None, bool]:
    text = _FIELDS.get(message, "text", "text", at=at) or None
    text = text or _FIELDS.get(message, "caption", "text", at=at) or None
    if text is None or not bot_username:
        return text, False
    mention = re.compile(rf"@{re.escape(bot_username.lstrip('@'))}\b", re.IGNORECASE)
    stripped, count = mention.subn("", text)
    return (" ".join(stripped.split()) or None) if count else text, count > 0


def _parts(message: JSONObject, at: str) -> list[JSONObject]:
    parts: list[JSONObject] = []
    for field, kind in _MEDIA:
        media: Any = message.get(field)
        if isinstance(media, list):  # photo: sizes, smallest first
            media = media[-1] if media else None
        if media is None:
            continue
        if not isinstance(media, dict):
            _FIELDS.refuse(f"{at}.{field}", "must be an object (an array of them for a photo)")
        _FIELDS.need(media, "file_id", "str", at=f"{at}.{field}")
        part: JSONObject = {"type": kind}
        part.update({k: media[k] for k in _PART_KEYS if k in media})
        if text_or_none(media.get("file_name")):
            part["name"] = media["file_name"]
        parts.append(part)
    return parts


def _extra(message: JSONObject, at: str, *, mentioned: bool) -> JSONObject:
    extra: JSONObject = {}
    chat_id = _FIELDS.need(message["chat"], "id", "id", at=f"{at}.chat")
    reply: JSONObject | None = _FIELDS.get(message, "reply_to_message", "dict", at=at)
    if reply is not None:
        reply_id = _FIELDS.get(reply, "message_id", "id", at=f"{at}.reply_to_message")
        thread = _FIELDS.get(message, "message_thread_id", "id", at=at)
        # In a forum topic, a message that replies to nothing "replies" to the topic's root.
        root = _FIELDS.get(message, "is_topic_message", "bool", at=at) and reply_id == thread
        if reply_id is not None and not root:
            extra["reply_to"] = qualified(chat_id, reply_id)
    quote: JSONObject | None = _FIELDS.get(message, "quote", "dict", at=at)
    if quote is not None and text_or_none(quote.get("text")):
        extra["quote"] = quote["text"]
    if mentioned:
        extra["mentions_bot"] = True
    return extra
