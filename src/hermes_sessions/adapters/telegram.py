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

from hermes_sessions.adapters._events import Edit, InboundEvent, NewMessage
from hermes_sessions.adapters._payload import content_of, plain, qualified, text_or_none
from hermes_sessions.models import JSONObject, Message, SessionSource

__all__ = ["convert", "source_of"]

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


def convert(
    event: object, *, bot_username: str | None = None, platform: str = "telegram"
) -> InboundEvent | None:
    """What a Telegram update or message means for the transcript; ``None`` if nothing.

    Updates that carry no message (callback queries, polls, member changes) and service
    messages with neither text nor media give ``None``.

    .. versionadded:: 0.1.0
    """
    data = plain(event)
    if not isinstance(data, dict):
        return None
    edited = False
    if "update_id" in data:
        message = next((data[name] for name in _NEW if name in data), None)
        if message is None:
            message = next((data[name] for name in _EDITED if name in data), None)
            edited = True
    else:
        message = data
        edited = "edit_date" in data
    if not isinstance(message, dict) or not isinstance(message.get("chat"), dict):
        return None
    source = source_of(message, platform=platform)
    text, mentioned = _text(message, bot_username)
    content = content_of(text, _parts(message))
    if content is None:
        return None
    pmid = source.message_id
    assert pmid is not None  # noqa: S101  # every Bot API message has a message_id
    if edited:
        return Edit(source=source, platform_message_id=pmid, content=content)
    sender = source.participant
    return NewMessage(
        source=source,
        message=Message(
            role="user",
            content=content,
            platform_message_id=pmid,
            sender_id=sender,
            sender_name=source.user_name,
            extra=_extra(message, mentioned=mentioned),
        ),
    )


def source_of(message: JSONObject, *, platform: str = "telegram") -> SessionSource:
    """The :class:`SessionSource` of a Bot API ``Message`` (as JSON).

    .. versionadded:: 0.1.0
    """
    chat: JSONObject = message["chat"]
    sender: JSONObject = message.get("from") or {}
    raw_type = str(chat.get("type") or "private")
    topic = message.get("message_thread_id") if message.get("is_topic_message") else None
    return SessionSource(
        platform=platform,
        chat_id=chat.get("id"),
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=sender.get("id"),
        thread_id=topic,
        chat_name=_name(chat) if raw_type != "private" else None,
        user_name=_name(sender) or text_or_none(message.get("author_signature")),
        message_id=qualified(chat.get("id"), message.get("message_id")),
    )


def _name(who: JSONObject) -> str | None:
    if who.get("title"):
        return str(who["title"])
    full = " ".join(str(who[k]) for k in ("first_name", "last_name") if who.get(k))
    return full or text_or_none(who.get("username"))


def _text(message: JSONObject, bot_username: str | None) -> tuple[str | None, bool]:
    text = text_or_none(message.get("text")) or text_or_none(message.get("caption"))
    if text is None or not bot_username:
        return text, False
    mention = re.compile(rf"@{re.escape(bot_username.lstrip('@'))}\b", re.IGNORECASE)
    stripped, count = mention.subn("", text)
    return (" ".join(stripped.split()) or None) if count else text, count > 0


def _parts(message: JSONObject) -> list[JSONObject]:
    parts: list[JSONObject] = []
    for field, kind in _MEDIA:
        media: Any = message.get(field)
        if isinstance(media, list):  # photo: sizes, smallest first
            media = media[-1] if media else None
        if not isinstance(media, dict):
            continue
        part: JSONObject = {"type": kind}
        part.update({k: media[k] for k in _PART_KEYS if k in media})
        if media.get("file_name"):
            part["name"] = media["file_name"]
        parts.append(part)
    return parts


def _extra(message: JSONObject, *, mentioned: bool) -> JSONObject:
    extra: JSONObject = {}
    chat_id = message["chat"].get("id")
    reply: Any = message.get("reply_to_message")
    if isinstance(reply, dict):
        reply_id = reply.get("message_id")
        # In a forum topic, a message that replies to nothing "replies" to the topic's root.
        if not (message.get("is_topic_message") and reply_id == message.get("message_thread_id")):
            extra["reply_to"] = qualified(chat_id, reply_id)
    quote: Any = message.get("quote")
    if isinstance(quote, dict) and quote.get("text"):
        extra["quote"] = quote["text"]
    if mentioned:
        extra["mentions_bot"] = True
    return extra
