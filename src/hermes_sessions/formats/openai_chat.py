"""Message ⇄ OpenAI Chat Completions messages (the ``messages`` array of a request).

Plain dicts in, plain dicts out; no SDK. The mapping:

=====================  ==========================================================
Chat Completions       Message
=====================  ==========================================================
``role``               ``role`` (``system``, ``developer``, ``user``, ``assistant``,
                       ``tool``, and the deprecated ``function``)
``content``            ``content`` (text, or the list of parts, as it is)
``name``               ``sender_name``; for ``function`` messages ``tool_name``
``tool_calls``         ``tool_calls`` (the library's own shape is this one)
``tool_call_id``       ``tool_call_id``
anything else          ``extra`` (``refusal``, ``audio``, ``function_call``, ...)
=====================  ==========================================================

Vendor → Message → vendor gives back an equal dict for every message the schema accepts; keys
outside the schema (a provider's ``reasoning_content``) are kept in ``extra`` but not sent back.
Message → vendor emits only what the schema accepts for the role.

What Chat Completions cannot express (see :func:`unexpressed`): ``reasoning`` (requests have no
place for earlier reasoning), ``sender_name`` of tool messages, ``tool_name`` outside
``function`` messages, content parts without a Chat shape (Anthropic ``thinking``, documents),
and ``extra`` keys outside the role's schema. Parts of other formats are translated where a Chat
shape exists (text, images; base64 images become data URLs).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.formats._common import (
    CONVERSATION_FIELDS,
    leftover_extra,
    marks,
    split_vendor_keys,
    translate_content,
    with_marks,
)
from hermes_sessions.models import JSONObject, Message

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["from_openai_chat", "to_openai_chat", "unexpressed"]

FORMAT: Final = "openai_chat"

ROLE_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "system": frozenset({"content", "name"}),
    "developer": frozenset({"content", "name"}),
    "user": frozenset({"content", "name"}),
    "assistant": frozenset({"content", "name", "refusal", "audio", "tool_calls", "function_call"}),
    "tool": frozenset({"content", "tool_call_id"}),
    "function": frozenset({"content", "name"}),
}
"""The keys each role's message accepts, besides ``role``."""

_SIMPLE_TEXT: Final = frozenset({"type", "text"})
NATIVE_PARTS: Final[Mapping[str, frozenset[str] | None]] = {
    "text": _SIMPLE_TEXT,
    "image_url": frozenset({"type", "image_url"}),
    "input_audio": frozenset({"type", "input_audio"}),
    "file": frozenset({"type", "file"}),
    "refusal": frozenset({"type", "refusal"}),
}
_CALL_KEYS: Final = ("id", "type", "function")
_NULLABLE_CONTENT: Final = frozenset({"assistant", "function"})


def _role(role: str) -> frozenset[str]:
    keys = ROLE_KEYS.get(role)
    if keys is None:
        raise InvalidArgumentError(
            f"role {role!r} has no place in Chat Completions (roles: {', '.join(ROLE_KEYS)}); "
            "map it to one of them before converting"
        )
    return keys


def from_openai_chat(message: Mapping[str, Any]) -> Message:
    """Build a :class:`Message` from one Chat Completions message dict.

    >>> from_openai_chat({"role": "tool", "tool_call_id": "call_1", "content": "22°C"}).content
    '22°C'

    .. versionadded:: 0.1.0
    """
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise InvalidArgumentError("a Chat Completions message needs a 'role' such as 'user'")
    name = message.get("name")
    extra, bookkeeping = split_vendor_keys(
        message, ("role", "content", "name", "tool_calls", "tool_call_id"), FORMAT
    )
    if "content" not in message:
        bookkeeping["absent"] = ["content"]
    tool_calls = message.get("tool_calls")
    return Message(
        role=role,
        content=copy.deepcopy(message.get("content")),
        tool_calls=copy.deepcopy(tool_calls) if tool_calls is not None else None,
        tool_call_id=message.get("tool_call_id"),
        tool_name=name if role == "function" else None,
        sender_name=name if role != "function" else None,
        extra=with_marks(extra, FORMAT, bookkeeping),
    )


def _call(call: Mapping[str, Any]) -> JSONObject:
    out = {key: copy.deepcopy(call[key]) for key in _CALL_KEYS if key in call}
    function = out.get("function")
    if isinstance(function, dict):
        out["function"] = {k: v for k, v in function.items() if k in {"name", "arguments"}}
    return out


def to_openai_chat(message: Message) -> JSONObject:
    """The Chat Completions dict of ``message``, with only the keys its role accepts.

    >>> to_openai_chat(Message(role="user", content="hi", sender_name="alice"))
    {'role': 'user', 'content': 'hi', 'name': 'alice'}

    .. versionadded:: 0.1.0
    """
    accepted = _role(message.role)
    out: JSONObject = {"role": message.role}
    if "content" not in marks(message, FORMAT).get("absent", ()):
        content = message.content
        if content is None and message.role not in _NULLABLE_CONTENT:
            content = ""
        out["content"] = (
            None if content is None else translate_content(content, "chat", NATIVE_PARTS)[0]
        )
    name = message.tool_name if message.role == "function" else message.sender_name
    if name is not None and "name" in accepted:
        out["name"] = name
    if message.role == "assistant" and message.tool_calls is not None:
        out["tool_calls"] = [_call(call) for call in message.tool_calls]
    if message.role == "tool" and message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    for key, value in message.extra.items():
        if key in accepted and key not in out:
            out[key] = copy.deepcopy(value)
    return out


def unexpressed(message: Message) -> list[str]:
    """What :func:`to_openai_chat` leaves out of ``message``.

    Field names, ``extra.<key>`` entries, and ``content[i]`` for parts without a Chat shape.

    >>> unexpressed(Message(role="assistant", content="ok", reasoning="I think"))
    ['reasoning']

    .. versionadded:: 0.1.0
    """
    accepted = _role(message.role)
    emitted = {"content"}
    if "name" in accepted:
        emitted.add("sender_name" if message.role != "function" else "tool_name")
    if message.role == "assistant":
        emitted.add("tool_calls")
    if message.role == "tool":
        emitted.add("tool_call_id")
    missing = [
        name
        for name in CONVERSATION_FIELDS
        if name not in emitted and getattr(message, name) is not None
    ]
    if isinstance(message.content, list):
        missing.extend(_unshaped_parts(message.content))
    return missing + leftover_extra(message, accepted, FORMAT)


def _unshaped_parts(parts: Iterable[JSONObject]) -> list[str]:
    return [
        f"content[{index}]"
        for index, part in enumerate(parts)
        if not translate_content([part], "chat", NATIVE_PARTS)[0]
    ]
