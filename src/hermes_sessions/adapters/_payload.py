"""Helpers the platform adapters share: plain payloads, field access, parts and ids.

Every adapter reads one shape, the platform's documented JSON payload as plain dicts and lists.
:func:`plain` turns a framework's event object into that shape without importing the framework:
python-telegram-bot and dingtalk-stream objects have ``to_dict()``, aiogram's are pydantic models
(``model_dump`` with the payload's own aliases, such as ``from``), and lark-oapi's are plain
objects whose attributes carry the payload's names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hermes_sessions.models import JSONObject, MessageContent

__all__ = ["content_of", "dig", "json_object", "plain", "qualified", "text_or_none"]


def plain(event: object) -> Any:
    """``event`` as plain JSON-shaped values (dicts, lists, strings, numbers)."""
    if isinstance(event, Mapping):
        return {str(k): plain(v) for k, v in event.items() if v is not None}
    if isinstance(event, list | tuple):
        return [plain(item) for item in event]
    if event is None or isinstance(event, str | int | float | bool):
        return event
    return plain(_payload_of(event))


def _payload_of(event: object) -> object:
    model_dump = getattr(event, "model_dump", None)
    if callable(model_dump):  # aiogram (pydantic)
        return model_dump(mode="json", by_alias=True, exclude_none=True)
    to_dict = getattr(event, "to_dict", None)
    if callable(to_dict):  # python-telegram-bot, dingtalk-stream
        return to_dict()
    if hasattr(event, "__dict__"):  # lark-oapi
        return {k: v for k, v in vars(event).items() if not k.startswith("_")}
    return str(event)


def dig(data: object, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, or ``None`` as soon as a step is missing."""
    for name in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(name)
    return data


def json_object(value: object) -> JSONObject:
    """``value`` as a dict: a dict as it is, JSON text decoded, anything else empty."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return dict(value) if isinstance(value, Mapping) else {}


def text_or_none(value: object) -> str | None:
    """A non-empty string, or ``None``."""
    return value if isinstance(value, str) and value else None


def qualified(chat_id: object, message_id: object) -> str | None:
    """``<chat_id>:<message_id>``, for platforms whose message ids are unique only per chat."""
    if message_id is None or message_id == "":
        return None
    return f"{chat_id}:{message_id}"


def content_of(text: str | None, parts: Iterable[JSONObject]) -> MessageContent:
    """Text alone as a string; with attachments, a list of parts led by the text part."""
    attachments = list(parts)
    if not attachments:
        return text
    lead: list[JSONObject] = [{"type": "text", "text": text}] if text else []
    return lead + attachments
