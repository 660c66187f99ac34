"""What the converters share: bookkeeping in ``Message.extra`` and content-part translation.

Each format keeps what a :class:`~hermes_sessions.models.Message` has no field for in ``extra``.
A vendor key that is not a Message field goes there as it is; bookkeeping that only the format
needs to rebuild its own shape exactly (an item id, a key that was absent, a vendor key that
happens to share a Message field's name) lives under one ``extra`` key named after the format
(``"openai_chat"``, ``"openai_responses"``, ``"anthropic"``), which no vendor schema has.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.models import MESSAGE_FIELDS, JSONObject, Message

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "CONVERSATION_FIELDS",
    "leftover_extra",
    "marks",
    "part_text",
    "split_vendor_keys",
    "translate_content",
    "translate_part",
    "with_marks",
]

CONVERSATION_FIELDS: Final = (
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "sender_name",
)
"""Message fields that carry conversation (the rest is the store's bookkeeping)."""

_DATA_URL: Final = re.compile(r"data:(?P<media>[^;,]+);base64,(?P<data>.*)", re.DOTALL)
TEXT_TYPES: Final = frozenset({"text", "input_text", "output_text"})


def split_vendor_keys(
    fields: Mapping[str, Any], mapped: Iterable[str], fmt: str
) -> tuple[JSONObject, JSONObject]:
    """Split a vendor dict's unmapped keys into ``extra`` and the format's bookkeeping.

    Returns ``(extra, bookkeeping)``: a key that clashes with a Message field (``id``,
    ``reasoning``, ...) goes to ``bookkeeping["fields"]``; every other key to ``extra``.
    """
    skipped = set(mapped)
    extra: JSONObject = {}
    clashing: JSONObject = {}
    for key, value in fields.items():
        if key in skipped:
            continue
        target = clashing if key in MESSAGE_FIELDS or key == fmt else extra
        target[key] = copy.deepcopy(value)
    return extra, ({"fields": clashing} if clashing else {})


def marks(message: Message, fmt: str) -> JSONObject:
    """The bookkeeping ``fmt`` left in ``message.extra`` (empty if none)."""
    value = message.extra.get(fmt)
    return value if isinstance(value, dict) else {}


def with_marks(extra: JSONObject, fmt: str, bookkeeping: JSONObject) -> JSONObject:
    """``extra`` with ``bookkeeping`` stored under the format's key (when there is any)."""
    if bookkeeping:
        extra[fmt] = bookkeeping
    return extra


def leftover_extra(message: Message, accepted: Iterable[str], fmt: str) -> list[str]:
    """Names of ``extra`` keys a converter does not emit (bookkeeping keys are never listed)."""
    allowed = set(accepted) | {"openai_chat", "openai_responses", "anthropic"}
    return [f"extra.{key}" for key in message.extra if key not in allowed and key != fmt]


def part_text(part: Mapping[str, Any]) -> str | None:
    """The text of a text part of any format, else ``None``."""
    text = part.get("text")
    if part.get("type") in TEXT_TYPES and isinstance(text, str):
        return text
    return None


def _image(part: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """``(url, detail)`` of an image part of any format (base64 becomes a data URL)."""
    kind = part.get("type")
    if kind == "image_url" and isinstance(part.get("image_url"), dict):
        url = part["image_url"].get("url")
        detail = part["image_url"].get("detail")
    elif kind == "input_image":
        url, detail = part.get("image_url"), part.get("detail")
    elif kind == "image" and isinstance(part.get("source"), dict):
        source = part["source"]
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        else:
            url = source.get("url")
        detail = None
    else:
        return None
    return (url, detail) if isinstance(url, str) else None


def _native(part: Mapping[str, Any], natives: Mapping[str, frozenset[str] | None]) -> bool:
    kind = part.get("type")
    if not isinstance(kind, str) or kind not in natives:
        return False
    keys = natives[kind]
    return keys is None or set(part) <= keys


def translate_part(
    part: Mapping[str, Any], target: str, natives: Mapping[str, frozenset[str] | None]
) -> JSONObject | None:
    """``part`` in the ``target`` format's shape, or ``None`` if it has no such shape.

    A part already in the target's shape (its type and keys are the target's) is copied as it
    is, so vendor round trips are exact. ``target`` is ``chat``, ``responses_in``,
    ``responses_out`` or ``anthropic``.
    """
    if _native(part, natives):
        return copy.deepcopy(dict(part))
    text = part_text(part)
    if text is not None:
        kind = {"chat": "text", "anthropic": "text", "responses_in": "input_text"}.get(target)
        if kind is None:
            return {"type": "output_text", "text": text, "annotations": []}
        return {"type": kind, "text": text}
    image = _image(part)
    if image is None or target == "responses_out":
        return None
    return _image_part(*image, target)


def _image_part(url: str, detail: str | None, target: str) -> JSONObject:
    if target == "chat":
        inner: JSONObject = {"url": url} if detail is None else {"url": url, "detail": detail}
        return {"type": "image_url", "image_url": inner}
    if target == "responses_in":
        return {"type": "input_image", "image_url": url, "detail": detail or "auto"}
    data = _DATA_URL.fullmatch(url)
    if data is None:
        return {"type": "image", "source": {"type": "url", "url": url}}
    source = {"type": "base64", "media_type": data["media"], "data": data["data"]}
    return {"type": "image", "source": source}


def translate_content(
    content: str | list[JSONObject], target: str, natives: Mapping[str, frozenset[str] | None]
) -> tuple[str | list[JSONObject], int]:
    """Content in the target's shape and how many parts had no shape there (left out)."""
    if isinstance(content, str):
        return content, 0
    parts = [translate_part(part, target, natives) for part in content]
    kept = [part for part in parts if part is not None]
    return kept, len(parts) - len(kept)
