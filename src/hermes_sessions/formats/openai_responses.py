"""Message ⇄ OpenAI Responses input items (the ``input`` list of a request).

Plain dicts in, plain dicts out; no SDK. Each item becomes one :class:`Message`:

========================  ==================================================================
Responses item            Message
========================  ==================================================================
message (``role`` +       ``role`` and ``content`` (text, or the parts as they are); ``type``
``content``)              and ``status`` in ``extra``; the item ``id`` in bookkeeping
``function_call``         an ``assistant`` message with one tool call in the library's
                          (Chat Completions) shape: ``call_id`` is the call's ``id``
``function_call_output``  a ``tool`` message: ``call_id`` → ``tool_call_id``, ``output`` →
                          ``content``
``reasoning``             an ``assistant`` message whose ``reasoning`` is the summary text;
                          the item itself is kept and sent back as it was
any other item            an ``assistant`` message keeping the item (web search calls, item
                          references, ...), sent back as it was
========================  ==================================================================

Items → Messages → items gives back equal items. Going the other way, one assistant message
with text and tool calls becomes a message item followed by one ``function_call`` per call.

What Responses input cannot express (see :func:`unexpressed`): ``reasoning`` that did not come
from a Responses reasoning item (the API only takes reasoning back as the items it made, with
their ids), ``sender_name``, ``tool_name`` of tool messages, parts without a Responses shape,
and ``extra`` keys outside the item's schema. Text and image parts of other formats are
translated (``input_text``/``output_text``, ``input_image``).
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

__all__ = ["from_openai_responses", "to_openai_responses", "unexpressed"]

FORMAT: Final = "openai_responses"
MESSAGE_ROLES: Final = ("user", "system", "developer", "assistant")
MESSAGE_KEYS: Final = frozenset({"type", "role", "content", "id", "status"})
OUTPUT_KEYS: Final = frozenset({"type", "call_id", "output", "id", "status"})
_CALL_KEYS: Final = ("type", "call_id", "name", "arguments")
NATIVE_PARTS: Final[Mapping[str, frozenset[str] | None]] = {
    "input_text": frozenset({"type", "text"}),
    "input_image": frozenset({"type", "image_url", "file_id", "detail"}),
    "input_file": frozenset({"type", "file_id", "file_data", "file_url", "filename"}),
    "input_audio": frozenset({"type", "input_audio"}),
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
}


def _item_to_message(item: Mapping[str, Any]) -> Message:
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        role = item.get("role")
        if not isinstance(role, str) or not role:
            raise InvalidArgumentError("a Responses message item needs a 'role' such as 'user'")
        extra, bookkeeping = split_vendor_keys(item, ("role", "content"), FORMAT)
        return Message(
            role=role,
            content=copy.deepcopy(item.get("content")),
            extra=with_marks(extra, FORMAT, bookkeeping),
        )
    if kind == "function_call":
        call: JSONObject = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments")},
        }
        rest = {key: copy.deepcopy(v) for key, v in item.items() if key not in _CALL_KEYS}
        if rest:
            call[FORMAT] = rest
        return Message(role="assistant", tool_calls=[call])
    if kind == "function_call_output":
        extra, bookkeeping = split_vendor_keys(item, ("type", "call_id", "output"), FORMAT)
        return Message(
            role="tool",
            tool_call_id=item.get("call_id"),
            content=copy.deepcopy(item.get("output")),
            extra=with_marks(extra, FORMAT, bookkeeping),
        )
    if not isinstance(kind, str):
        raise TypeError("a Responses input item needs a 'type' (or a 'role' for a message)")
    reasoning = None
    if kind == "reasoning":
        texts = [p.get("text", "") for p in item.get("summary") or () if isinstance(p, dict)]
        reasoning = "\n\n".join(texts) or None
    return Message(role="assistant", reasoning=reasoning, extra={FORMAT: {"item": dict(item)}})


def from_openai_responses(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Build one :class:`Message` per Responses input item.

    >>> [
    ...     m.role
    ...     for m in from_openai_responses(
    ...         [
    ...             {"role": "user", "content": "weather?"},
    ...             {
    ...                 "type": "function_call",
    ...                 "call_id": "c1",
    ...                 "name": "weather",
    ...                 "arguments": "{}",
    ...             },
    ...             {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ...         ]
    ...     )
    ... ]
    ['user', 'assistant', 'tool']

    .. versionadded:: 0.1.0
    """
    return [_item_to_message(copy.deepcopy(dict(item))) for item in items]


def _content(message: Message, target: str) -> str | list[JSONObject]:
    if message.content is None:
        return ""
    return translate_content(message.content, target, NATIVE_PARTS)[0]


def _accepted_extra(message: Message, accepted: frozenset[str], out: JSONObject) -> JSONObject:
    for key, value in message.extra.items():
        if key in accepted and key not in out:
            out[key] = copy.deepcopy(value)
    clashing = marks(message, FORMAT).get("fields", {})
    for key, value in clashing.items():
        if key in accepted and key not in out:
            out[key] = copy.deepcopy(value)
    return out


def _function_call(call: Mapping[str, Any]) -> JSONObject:
    function = call.get("function") or {}
    out: JSONObject = {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments"),
    }
    out.update(copy.deepcopy(call.get(FORMAT) or {}))
    return out


def _message_items(message: Message) -> list[JSONObject]:
    bookkeeping = marks(message, FORMAT)
    if "item" in bookkeeping:
        return [copy.deepcopy(bookkeeping["item"])]
    if message.role == "tool":
        item: JSONObject = {
            "type": "function_call_output",
            "call_id": message.tool_call_id,
            "output": _content(message, "responses_in"),
        }
        return [_accepted_extra(message, OUTPUT_KEYS, item)]
    if message.role not in MESSAGE_ROLES:
        raise InvalidArgumentError(
            f"role {message.role!r} has no place in the Responses API (roles: "
            f"{', '.join(MESSAGE_ROLES)}, tool); map it to one of them before converting"
        )
    items: list[JSONObject] = []
    if message.content is not None or not message.tool_calls:
        target = "responses_out" if message.role == "assistant" else "responses_in"
        item = {"role": message.role, "content": _content(message, target)}
        items.append(_accepted_extra(message, MESSAGE_KEYS, item))
    items.extend(_function_call(call) for call in message.tool_calls or ())
    return items


def to_openai_responses(messages: Iterable[Message]) -> list[JSONObject]:
    """The Responses input items of ``messages``, in order, with only schema keys.

    >>> to_openai_responses([Message(role="tool", tool_call_id="c1", content="sunny")])
    [{'type': 'function_call_output', 'call_id': 'c1', 'output': 'sunny'}]

    .. versionadded:: 0.1.0
    """
    return [item for message in messages for item in _message_items(message)]


def unexpressed(message: Message) -> list[str]:
    """What :func:`to_openai_responses` leaves out of ``message``.

    Field names, ``extra.<key>`` entries, and ``content[i]`` for parts without a Responses
    shape.

    >>> unexpressed(Message(role="user", content="hi", sender_name="alice"))
    ['sender_name']

    .. versionadded:: 0.1.0
    """
    if "item" in marks(message, FORMAT):
        return []
    emitted = {"content", "tool_calls"} if message.role != "tool" else {"content", "tool_call_id"}
    missing = [
        name
        for name in CONVERSATION_FIELDS
        if name not in emitted and getattr(message, name) is not None
    ]
    if isinstance(message.content, list):
        target = "responses_out" if message.role == "assistant" else "responses_in"
        missing.extend(
            f"content[{index}]"
            for index, part in enumerate(message.content)
            if not translate_content([part], target, NATIVE_PARTS)[0]
        )
    accepted = OUTPUT_KEYS if message.role == "tool" else MESSAGE_KEYS
    return missing + leftover_extra(message, accepted, FORMAT)
