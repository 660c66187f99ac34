"""DingTalk: dingtalk-stream ``ChatbotMessage`` / ``CallbackMessage`` and their JSON payloads.

:func:`convert` takes what a ``dingtalk_stream.ChatbotHandler`` receives — the
``CallbackMessage``, its ``data`` dict, or ``ChatbotMessage.from_dict(data)`` — and returns a
:class:`NewMessage` (the Stream API delivers no edits or recalls to chatbots).

The conversation: ``conversationType`` ``"1"`` (one-to-one) and ``"2"`` (group) are kept as
``platform_chat_type`` and mapped onto ``dm``/``group``; ``chat_id`` is the
``conversationId``, ``scope_id`` the corp. The sender is their ``senderStaffId`` (the org's user
id) when they have one, else the ``senderId`` the bot sees; DingTalk's ``msgId`` is unique, so
it is the ``platform_message_id`` as it is.

In a group the bot only hears messages that @-mention it and DingTalk removes that mention from
``text.content`` itself; ``extra["mentions_bot"]`` mirrors ``isInAtList``. Pictures, files,
audio and video become parts with their ``downloadCode`` (``pictureDownloadCode`` too); rich
text gives its text and pictures; an audio's speech recognition (``recognition``) is its text.
"""

from __future__ import annotations

from typing import Any, Final

from hermes_sessions.adapters._events import InboundEvent, NewMessage
from hermes_sessions.adapters._payload import Fields, content_of, json_object, plain, text_or_none
from hermes_sessions.models import JSONObject, Message, SessionSource

__all__ = ["convert", "source_of"]

_KINDS: Final = {"picture": "image", "file": "file", "audio": "audio", "video": "video"}
_PART_KEYS: Final = ("downloadCode", "pictureDownloadCode", "fileName", "duration")


_FIELDS: Final = Fields("dingtalk")
_TYPES: Final = frozenset({"1", "2"})


def convert(message: object, *, platform: str = "dingtalk") -> InboundEvent | None:
    """What a DingTalk chatbot message means for the transcript; ``None`` if nothing.

    A message without a field DingTalk always sends (``msgId``, ``conversationId``,
    ``conversationType``, ``senderId``, ``msgtype``) or with one of the wrong type raises
    :class:`~hermes_sessions.AdapterPayloadError`.

    .. versionadded:: 0.1.0
    """
    data = plain(message)
    if isinstance(data, dict) and "msgId" not in data and "data" in data:
        data = json_object(data["data"])  # a CallbackMessage
    if not isinstance(data, dict):
        return None
    source = source_of(data, platform=platform)
    text, parts = _content(data)
    content = content_of(text, parts)
    if content is None or source.message_id is None:
        return None
    at_bot = _FIELDS.get(data, "isInAtList", "bool")
    extra: JSONObject = {"mentions_bot": True} if at_bot else {}
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


def source_of(data: JSONObject, *, platform: str = "dingtalk") -> SessionSource:
    """The :class:`SessionSource` of a chatbot message payload.

    Raises:
        AdapterPayloadError: A field DingTalk always sends is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    if not isinstance(data, dict):
        _FIELDS.refuse("data", "must be an object")
    raw_type = _FIELDS.need(data, "conversationType", "id")
    if raw_type not in _TYPES:
        _FIELDS.refuse("conversationType", f"must be '1' or '2', got {raw_type!r}")
    _FIELDS.need(data, "msgtype", "str")
    sender = _FIELDS.need(data, "senderId", "str")
    return SessionSource(
        platform=platform,
        chat_id=_FIELDS.need(data, "conversationId", "str"),
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=_FIELDS.get(data, "senderStaffId", "str") or sender,
        chat_name=text_or_none(data.get("conversationTitle")) if raw_type == "2" else None,
        user_name=text_or_none(data.get("senderNick")),
        scope_id=_FIELDS.get(data, "senderCorpId", "str")
        or _FIELDS.get(data, "chatbotCorpId", "str"),
        message_id=_FIELDS.need(data, "msgId", "str"),
    )


def _content(data: JSONObject) -> tuple[str | None, list[JSONObject]]:
    kind = data.get("msgtype")
    body: Any = data.get("content")
    body = body if isinstance(body, dict) else json_object(body)
    if kind == "text":
        text: JSONObject = _FIELDS.get(data, "text", "dict") or {}
        content = _FIELDS.get(text, "content", "text", at="text") or ""
        return " ".join(content.split()) or None, []
    if kind == "richText":
        lines: list[str] = []
        parts: list[JSONObject] = []
        for item in _FIELDS.items(body, "richText", at="content"):
            if isinstance(item.get("text"), str):
                lines.append(item["text"])
            elif item.get("downloadCode") or item.get("pictureDownloadCode"):
                parts.append(_part("image", item))
        return " ".join(" ".join(lines).split()) or None, parts
    if kind in _KINDS:
        return text_or_none(body.get("recognition")), [_part(_KINDS[kind], body)]
    return None, []


def _part(kind: str, body: JSONObject) -> JSONObject:
    part: JSONObject = {"type": kind}
    part.update({k: body[k] for k in _PART_KEYS if body.get(k) is not None})
    if "fileName" in part:
        part["name"] = part.pop("fileName")
    return part
