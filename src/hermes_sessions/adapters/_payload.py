"""Helpers the platform adapters share: plain payloads, checked field access, parts and ids.

Every adapter reads one shape, the platform's documented JSON payload as plain dicts and lists.
:func:`plain` turns a framework's event object into that shape without importing the framework:
python-telegram-bot and dingtalk-stream objects have ``to_dict()``, aiogram's are pydantic models
(``model_dump`` with the payload's own aliases, such as ``from``), and lark-oapi's are plain
objects whose attributes carry the payload's names.

:class:`Fields` reads the fields that decide whose conversation an event belongs to: a field
the platform always sends that is missing, or any field read with the wrong JSON type, raises
:class:`~hermes_sessions.exceptions.AdapterPayloadError` naming the platform and the field,
never a raw ``KeyError`` or ``TypeError`` and never a fallback.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import attrs

from hermes_sessions.exceptions import AdapterPayloadError

if TYPE_CHECKING:
    from hermes_sessions.models import JSONObject, MessageContent, SessionSource

__all__ = [
    "Fields",
    "chat_lane",
    "content_of",
    "dig",
    "json_object",
    "plain",
    "qualified",
    "text_or_none",
]

Kind = Literal["id", "str", "text", "int", "bool", "dict", "list"]
_KIND_WORDS = {
    "id": "an id (a non-empty string or an integer)",
    "str": "a non-empty string",
    "text": "a string",
    "int": "an integer",
    "bool": "true or false",
    "dict": "an object",
    "list": "an array",
}


def _convert(kind: Kind, value: object) -> object:
    """``value`` as ``kind`` asks (ids as strings), or ``None`` when it is of another type."""
    if kind == "id":
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value if isinstance(value, str) and value else None
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    types: dict[str, type | tuple[type, ...]] = {
        "str": str,
        "text": str,
        "bool": bool,
        "dict": dict,
        "list": list,
    }
    if not isinstance(value, types[kind]) or (kind == "str" and not value):
        return None
    return value


@attrs.frozen
class Fields:
    """Checked reads of one platform's payload; failures name the platform and the field."""

    platform: str

    def refuse(self, field: str, reason: str) -> NoReturn:
        """Raise the adapters' one error for ``field``."""
        raise AdapterPayloadError(self.platform, field, reason)

    def need(self, data: JSONObject, name: str, kind: Kind, *, at: str = "") -> Any:
        """``data[name]`` as ``kind``; missing or of another type is refused."""
        value = self.get(data, name, kind, at=at)
        if value is None:
            self.refuse(_dotted(at, name), "is missing, and the platform always sends it")
        return value

    def get(self, data: JSONObject, name: str, kind: Kind, *, at: str = "") -> Any:
        """``data[name]`` as ``kind`` (ids as strings), ``None`` if absent; bad types refused."""
        value = data.get(name)
        if value is None or (value == "" and kind in {"id", "str"}):
            return None
        converted = _convert(kind, value)
        if converted is None:
            self.refuse(
                _dotted(at, name), f"must be {_KIND_WORDS[kind]}, got {type(value).__name__}"
            )
        return converted

    def items(self, data: JSONObject, name: str, *, at: str = "") -> list[JSONObject]:
        """The objects of the array ``data[name]`` (absent: none); a bad element is refused."""
        values = self.get(data, name, "list", at=at) or []
        for index, value in enumerate(values):
            if not isinstance(value, dict):
                self.refuse(f"{_dotted(at, name)}[{index}]", "must be an object")
        return list(values)


def _dotted(at: str, name: str) -> str:
    return f"{at}.{name}" if at else name


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


def chat_lane(source: SessionSource) -> tuple[SessionSource, ...]:
    """The chat's lane without a member, where a shared chat's messages are (none for a DM)."""
    if source.chat_type == "dm" or source.participant is None:
        return ()
    return (attrs.evolve(source, user_id=None, user_id_alt=None, user_name=None),)
