"""Feishu / Lark: lark-oapi ``P2ImMessageReceiveV1`` events and their JSON payloads.

:func:`convert` takes the event object lark-oapi hands to a ``register_p2_im_message_receive_v1``
handler, or the event's JSON (the whole ``schema 2.0`` body or just its ``event``), and returns a
:class:`NewMessage`:

* ``chat_type`` is Feishu's own (``p2p``, ``group``), mapped onto ``dm``/``group``.
* The sender's ``open_id`` is ``user_id`` and its ``union_id`` is ``user_id_alt`` (stable across
  the apps of one developer, so it is the participant in keys and the message's ``sender_id``).
* A message in a thread (topic) has its ``thread_id``: a group thread is one shared
  conversation. ``root_id`` goes to ``extra["thread_root"]``, ``parent_id`` (the message replied
  to) to ``extra["reply_to"]``; Feishu message ids are unique per tenant, so they are used as
  they are.
* ``text``, ``post`` (rich text, any locale) and ``interactive`` (cards) content is parsed to
  text; images, files, audio, video and stickers become parts carrying ``image_key`` /
  ``file_key``. Images inside a post become parts too.
* Mention placeholders (``@_user_1``) become ``@Name``; the bot's own mention (``bot_open_id``)
  is removed and ``extra["mentions_bot"]`` records it.

Recall events (``im.message.recalled_v1``) carry neither the sender nor the thread, so they do
not name a session key; look the message up yourself and call ``store.retract``.
"""

from __future__ import annotations

from typing import Any, Final

from hermes_sessions.adapters._events import InboundEvent, NewMessage, React
from hermes_sessions.adapters._payload import (
    Fields,
    chat_lane,
    content_of,
    dig,
    json_object,
    plain,
    text_or_none,
)
from hermes_sessions.models import JSONObject, Message, SessionSource

__all__ = ["convert", "convert_reaction", "interaction_source", "source_of"]

_FILE_KINDS: Final = {
    "image": "image",
    "file": "file",
    "audio": "audio",
    "media": "video",
    "sticker": "image",
}
_FILE_KEYS: Final = ("image_key", "file_key", "file_name", "duration")
_POST_FILES: Final = {"img": "image", "media": "video"}


_FIELDS: Final = Fields("feishu")


def _opened(event: object) -> tuple[JSONObject, Any, str] | None:
    """``(payload, body, where the body sits)``: a v2.0 envelope's ``event``, else the payload."""
    data = plain(event)
    if not isinstance(data, dict):
        return None
    if "schema" in data or "header" in data or "event" in data:
        return data, _FIELDS.need(data, "event", "dict"), "event"
    return data, data, ""


def convert(
    event: object, *, bot_open_id: str | None = None, platform: str = "feishu"
) -> InboundEvent | None:
    """What an ``im.message.receive_v1`` event means for the transcript; ``None`` if nothing.

    An event without a field Feishu always sends (``message`` with its ``message_id``,
    ``chat_id``, ``chat_type`` and ``message_type``; ``sender.sender_id.open_id``) or with one of
    the wrong type raises :class:`~hermes_sessions.AdapterPayloadError`.

    .. versionadded:: 0.1.0
    """
    opened = _opened(event)
    if opened is None:
        return None
    data, body, at = opened
    if "message" not in body and "sender" not in body:
        return None  # another event type
    header: JSONObject = _FIELDS.get(data, "header", "dict") or {}
    source = _source(body, at, platform=platform, tenant_key=header.get("tenant_key"))
    message: JSONObject = body["message"]
    where = f"{at}.message".lstrip(".")
    mentions: dict[str, JSONObject] = {}
    for mention in _FIELDS.items(message, "mentions", at=where):
        key = _FIELDS.get(mention, "key", "text", at=f"{where}.mentions")
        if key:
            mentions[key] = mention
    text, parts, mentioned = _content(message, mentions, bot_open_id)
    content = content_of(text, parts)
    if content is None or source.message_id is None:
        return None
    extra: JSONObject = {}
    parent = _FIELDS.get(message, "parent_id", "str", at=where)
    root = _FIELDS.get(message, "root_id", "str", at=where)
    if parent:
        extra["reply_to"] = parent
    if root:
        extra["thread_root"] = root
    if mentioned:
        extra["mentions_bot"] = True
    return NewMessage(
        source=source,
        message=Message(
            role="user",
            content=content,
            platform_message_id=source.message_id,
            sender_id=source.participant,
            sender_name=source.user_name,
            extra=extra,
        ),
    )


def source_of(
    event: JSONObject, *, platform: str = "feishu", tenant_key: str | None = None
) -> SessionSource:
    """The :class:`SessionSource` of an ``im.message.receive_v1`` event body (as JSON).

    Raises:
        AdapterPayloadError: A field Feishu always sends is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    return _source(plain(event), "event", platform=platform, tenant_key=tenant_key)


def interaction_source(
    event: object, *, chat_type: str, thread_id: str | None = None, platform: str = "feishu"
) -> SessionSource | None:
    """The conversation of the user who acted on a card: a ``card.action.trigger`` callback.

    Takes lark-oapi's ``P2CardActionTrigger`` or its JSON (the whole body or its ``event``).
    The chat is the card's (``context.open_chat_id``); the sender is the ``operator`` who
    clicked (``union_id`` preferred, like a message's sender), so in a group it is their own
    lane. Feishu's callback names neither the chat's type nor a thread, so pass them: the
    ``chat_type`` of the chat (``p2p`` or ``group``; the stored source of the card's
    conversation has it) and the ``thread_id`` if the card was posted in a thread. ``None`` for
    a card outside a chat (no ``open_chat_id``).

    Raises:
        AdapterPayloadError: ``operator`` or its ``open_id``, or ``context``, is missing or of
            the wrong type.

    .. versionadded:: 0.1.0
    """
    opened = _opened(event)
    if opened is None:
        return None
    _, body, at = opened
    operator: JSONObject = _FIELDS.need(body, "operator", "dict", at=at)
    who = f"{at}.operator".lstrip(".")
    context: JSONObject = _FIELDS.need(body, "context", "dict", at=at)
    chat = _FIELDS.get(context, "open_chat_id", "str", at=f"{at}.context".lstrip("."))
    if chat is None:
        return None
    return SessionSource(
        platform=platform,
        chat_id=chat,
        chat_type=chat_type,
        platform_chat_type=chat_type,
        user_id=_FIELDS.need(operator, "open_id", "str", at=who),
        user_id_alt=_FIELDS.get(operator, "union_id", "str", at=who),
        thread_id=thread_id,
        scope_id=_FIELDS.get(operator, "tenant_key", "str", at=who),
    )


def convert_reaction(
    event: object,
    *,
    chat_id: str,
    chat_type: str,
    thread_id: str | None = None,
    removed: bool | None = None,
    platform: str = "feishu",
) -> React | None:
    """An ``im.message.reaction.created_v1`` / ``deleted_v1`` event as a :class:`React`.

    Takes lark-oapi's ``P2ImMessageReactionCreatedV1`` / ``DeletedV1`` or the JSON. The event
    names the message but not its chat, so pass the chat (``chat_id``, ``chat_type`` and the
    ``thread_id`` if any) of the message: from the message you stored (its source) or from
    Feishu's message API. Whether the reaction was added or removed comes from the header's
    ``event_type``; pass ``removed`` when you give only the ``event``. The reactor is
    ``user_id`` (``union_id`` preferred); an app's own reaction gives ``None``. The emoji is
    Feishu's ``emoji_type`` (``THUMBSUP``).

    Raises:
        AdapterPayloadError: ``message_id``, ``reaction_type.emoji_type`` or the reactor's
            ``open_id`` is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    opened = _opened(event)
    if opened is None:
        return None
    data, body, at = opened
    if removed is None:
        header: JSONObject = _FIELDS.need(data, "header", "dict")
        kind = _FIELDS.need(header, "event_type", "str", at="header")
        removed = kind.endswith("reaction.deleted_v1")
    if _FIELDS.get(body, "operator_type", "str", at=at) == "app":
        return None
    ids: JSONObject = _FIELDS.need(body, "user_id", "dict", at=at)
    who = f"{at}.user_id".lstrip(".")
    reaction: JSONObject = _FIELDS.need(body, "reaction_type", "dict", at=at)
    emoji = _FIELDS.need(reaction, "emoji_type", "str", at=f"{at}.reaction_type".lstrip("."))
    source = SessionSource(
        platform=platform,
        chat_id=chat_id,
        chat_type=chat_type,
        platform_chat_type=chat_type,
        user_id=_FIELDS.need(ids, "open_id", "str", at=who),
        user_id_alt=_FIELDS.get(ids, "union_id", "str", at=who),
        thread_id=thread_id,
    )
    return React(
        source=source,
        platform_message_id=_FIELDS.need(body, "message_id", "str", at=at),
        added=() if removed else (emoji,),
        removed=(emoji,) if removed else (),
        also=chat_lane(source),
    )


def _source(event: JSONObject, at: str, *, platform: str, tenant_key: object) -> SessionSource:
    if not isinstance(event, dict):
        _FIELDS.refuse(at or "event", "must be an object")
    where = f"{at}.message".lstrip(".")
    message: JSONObject = _FIELDS.need(event, "message", "dict", at=at)
    sender: JSONObject = _FIELDS.need(event, "sender", "dict", at=at)
    ids: JSONObject = _FIELDS.need(sender, "sender_id", "dict", at=f"{at}.sender".lstrip("."))
    who = f"{at}.sender.sender_id".lstrip(".")
    raw_type = _FIELDS.need(message, "chat_type", "str", at=where)
    _FIELDS.need(message, "message_type", "str", at=where)
    tenant = _FIELDS.get(sender, "tenant_key", "str", at=f"{at}.sender".lstrip("."))
    return SessionSource(
        platform=platform,
        chat_id=_FIELDS.need(message, "chat_id", "str", at=where),
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=_FIELDS.need(ids, "open_id", "str", at=who),
        user_id_alt=_FIELDS.get(ids, "union_id", "str", at=who),
        thread_id=_FIELDS.get(message, "thread_id", "str", at=where),
        user_name=text_or_none(sender.get("sender_name")),
        scope_id=tenant or text_or_none(tenant_key),
        message_id=_FIELDS.need(message, "message_id", "str", at=where),
    )


def _content(
    message: JSONObject, mentions: dict[str, JSONObject], bot_open_id: str | None
) -> tuple[str | None, list[JSONObject], bool]:
    kind = message.get("message_type")
    body = json_object(message.get("content"))
    bot_keys = {key for key, mention in mentions.items() if _is_bot(mention, bot_open_id)}
    if kind == "text":
        return _text(body, mentions, bot_keys), [], bool(bot_keys)
    if kind == "post":
        post_text, parts = _post(body, mentions, bot_keys)
        return post_text, parts, bool(bot_keys)
    if kind == "interactive":
        return "\n".join(_strings(body)) or None, [], False
    part_kind = _FILE_KINDS.get(str(kind))
    return None, [_file_part(part_kind, body)] if part_kind else [], False


def _text(body: JSONObject, mentions: dict[str, JSONObject], bot_keys: set[str]) -> str | None:
    text = str(body.get("text") or "")
    for key, mention in sorted(mentions.items(), key=lambda item: -len(item[0])):
        text = text.replace(key, "" if key in bot_keys else f"@{mention.get('name', '')}")
    return " ".join(text.split()) or None


def _is_bot(mention: JSONObject, bot_open_id: str | None) -> bool:
    return bot_open_id is not None and dig(mention, "id", "open_id") == bot_open_id


def _file_part(kind: str, body: JSONObject) -> JSONObject:
    part: JSONObject = {"type": kind}
    part.update({k: body[k] for k in _FILE_KEYS if k in body})
    if "file_name" in part:
        part["name"] = part.pop("file_name")
    return part


def _post(
    body: JSONObject, mentions: dict[str, JSONObject], bot_keys: set[str]
) -> tuple[str | None, list[JSONObject]]:
    if "content" not in body:  # {"zh_cn": {...}}: take the first locale
        body = next((v for v in body.values() if isinstance(v, dict)), {})
    title = text_or_none(body.get("title"))
    lines = [title] if title else []
    parts: list[JSONObject] = []
    paragraphs = body.get("content")
    for paragraph in paragraphs if isinstance(paragraphs, list) else []:
        pieces: list[str] = []
        elements = paragraph if isinstance(paragraph, list) else []
        for element in (e for e in elements if isinstance(e, dict)):
            tag = text_or_none(element.get("tag"))
            if tag == "at":
                key = str(element.get("user_id", ""))
                if key not in bot_keys:
                    name = element.get("user_name") or dig(mentions, key, "name") or key
                    pieces.append(f"@{name}")
            elif tag in _POST_FILES:
                parts.append(_file_part(_POST_FILES[tag], element))
            elif isinstance(element.get("text"), str):
                pieces.append(element["text"])
        line = " ".join(" ".join(pieces).split())
        if line:
            lines.append(line)
    return "\n".join(lines) or None, parts


def _strings(card: object) -> list[str]:
    """The visible text of a card: every ``title``, ``text`` and ``content`` string, in order."""
    found: list[str] = []
    if isinstance(card, dict):
        for key, value in card.items():
            if key in {"title", "text", "content"} and isinstance(value, str) and value.strip():
                found.append(value.strip())
            else:
                found.extend(_strings(value))
    elif isinstance(card, list):
        for item in card:
            found.extend(_strings(item))
    return found
