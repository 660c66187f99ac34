"""Message ⇄ Anthropic Messages (the ``system`` and ``messages`` of a request).

Plain dicts in, plain dicts out; no SDK. Anthropic has two roles and puts tool calls, tool
results and thinking in content blocks; the library's messages are Chat-shaped, so:

* ``system`` (the request's top-level prompt) ↔ a leading ``system`` message.
* A user message whose content starts with ``tool_result`` blocks ↔ one ``tool`` message per
  block (``tool_use_id`` → ``tool_call_id``, the block's ``content`` → ``content``,
  ``is_error`` and ``cache_control`` in ``extra``), then a ``user`` message with the blocks
  after them, if any. Going back, a run of tool messages and the user message after it form one
  user message again, as the API wants.
* An assistant message ↔ one ``assistant`` message: ``tool_use`` blocks become ``tool_calls``
  (``input`` as JSON ``arguments``), a leading ``thinking`` block becomes ``reasoning`` (its
  signature kept), the other blocks stay ``content``.

Messages → Anthropic → Messages is not the point; Anthropic → Messages → Anthropic gives back an
equal request (block order, string or block content, and message boundaries are remembered in
bookkeeping).

What Anthropic cannot express (see :func:`unexpressed`): ``reasoning`` without an Anthropic
signature (the API rejects unsigned thinking), ``sender_name``, ``tool_name`` of tool messages,
system messages after the first non-system one (:func:`to_anthropic` raises), parts without an
Anthropic shape, and ``extra`` keys outside the schema. Tool-call arguments that are not a JSON
object are sent as ``{"_raw_arguments": "<text>"}``. Text and image parts of other formats are
translated (data URLs become base64 sources).
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.formats._common import (
    CONVERSATION_FIELDS,
    leftover_extra,
    marks,
    split_vendor_keys,
    translate_content,
    translate_part,
    with_marks,
)
from hermes_sessions.models import JSONObject, Message

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = ["from_anthropic", "to_anthropic", "unexpressed"]

FORMAT: Final = "anthropic"
RAW_ARGUMENTS: Final = "_raw_arguments"
RESULT_KEYS: Final = frozenset({"is_error", "cache_control"})
_NONE: Final[frozenset[str] | None] = None
NATIVE_PARTS: Final[Mapping[str, frozenset[str] | None]] = dict.fromkeys(
    (
        "text",
        "image",
        "document",
        "search_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "tool_use",
        "tool_result",
    ),
    _NONE,
)
SYSTEM_ROLES: Final = ("system", "developer")


# -- Anthropic -> Messages ---------------------------------------------------------------------


def _tool_result_prefix(blocks: Sequence[Any]) -> int:
    """How many leading blocks are tool results, if no tool result follows them; else 0."""
    count = 0
    while count < len(blocks) and _is(blocks[count], "tool_result"):
        count += 1
    if any(_is(block, "tool_result") for block in blocks[count:]):
        return 0
    return count


def _is(block: object, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind


def _user_pieces(content: Any) -> list[Message]:
    if not isinstance(content, list):
        return [Message(role="user", content=copy.deepcopy(content))]
    results = _tool_result_prefix(content)
    pieces = []
    for block in content[:results]:
        extra, bookkeeping = split_vendor_keys(block, ("type", "tool_use_id", "content"), FORMAT)
        pieces.append(
            Message(
                role="tool",
                tool_call_id=block.get("tool_use_id"),
                content=copy.deepcopy(block.get("content")),
                extra=with_marks(extra, FORMAT, bookkeeping),
            )
        )
    if results == 0 or results < len(content):
        pieces.append(Message(role="user", content=copy.deepcopy(content[results:])))
    return pieces


def _call(block: Mapping[str, Any]) -> JSONObject:
    call: JSONObject = {
        "id": block.get("id"),
        "type": "function",
        "function": {
            "name": block.get("name"),
            "arguments": json.dumps(block.get("input"), ensure_ascii=False),
        },
    }
    rest = {
        k: copy.deepcopy(v) for k, v in block.items() if k not in {"type", "id", "name", "input"}
    }
    if rest:
        call[FORMAT] = rest
    return call


def _assistant(content: Any) -> Message:
    if not isinstance(content, list):
        return Message(role="assistant", content=copy.deepcopy(content))
    blocks = copy.deepcopy(content)
    bookkeeping: JSONObject = {}
    reasoning = None
    first = blocks[0] if blocks else None
    if (
        isinstance(first, dict)
        and first.get("type") == "thinking"
        and set(first)
        <= {
            "type",
            "thinking",
            "signature",
        }
    ):
        reasoning = first.get("thinking")
        bookkeeping["signature"] = first.get("signature")
        blocks = blocks[1:]
    positions = [index for index, block in enumerate(blocks) if _is(block, "tool_use")]
    calls = [_call(blocks[index]) for index in positions]
    rest = [block for index, block in enumerate(blocks) if index not in set(positions)]
    if positions != list(range(len(rest), len(blocks))):
        bookkeeping["tool_use_at"] = positions
    if not rest and (calls or reasoning is not None):
        bookkeeping["content"] = "blocks"
    return Message(
        role="assistant",
        content=rest if rest or "content" not in bookkeeping else None,
        tool_calls=calls or None,
        reasoning=reasoning,
        extra=with_marks({}, FORMAT, bookkeeping),
    )


def _separate(piece: Message) -> Message:
    extra = dict(piece.extra)
    extra[FORMAT] = {**marks(piece, FORMAT), "separate": True}
    return Message(
        role=piece.role,
        content=piece.content,
        tool_call_id=piece.tool_call_id,
        extra=extra,
    )


def from_anthropic(
    messages: Iterable[Mapping[str, Any]], *, system: str | list[JSONObject] | None = None
) -> list[Message]:
    """Build :class:`Message` objects from an Anthropic request's ``messages`` (and ``system``).

    >>> [
    ...     m.role
    ...     for m in from_anthropic(
    ...         [
    ...             {"role": "user", "content": "weather?"},
    ...             {
    ...                 "role": "assistant",
    ...                 "content": [
    ...                     {"type": "tool_use", "id": "t1", "name": "weather", "input": {}}
    ...                 ],
    ...             },
    ...             {
    ...                 "role": "user",
    ...                 "content": [
    ...                     {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}
    ...                 ],
    ...             },
    ...         ],
    ...         system="Be brief.",
    ...     )
    ... ]
    ['system', 'user', 'assistant', 'tool']

    .. versionadded:: 0.1.0
    """
    out = [] if system is None else [Message(role="system", content=copy.deepcopy(system))]
    run_open = False
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            out.append(_assistant(message.get("content")))
            run_open = False
            continue
        if role != "user":
            raise InvalidArgumentError(
                f"Anthropic messages have the roles 'user' and 'assistant', not {role!r}"
            )
        pieces = _user_pieces(message.get("content"))
        if run_open:
            pieces[0] = _separate(pieces[0])
        out.extend(pieces)
        run_open = pieces[-1].role == "tool"
    return out


# -- Messages -> Anthropic ---------------------------------------------------------------------


def _input(arguments: object) -> Any:
    if not isinstance(arguments, str):
        return {} if arguments is None else arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return {RAW_ARGUMENTS: arguments}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS: arguments}


def _tool_use(call: Mapping[str, Any]) -> JSONObject:
    function = call.get("function") or {}
    block: JSONObject = {
        "type": "tool_use",
        "id": call.get("id"),
        "name": function.get("name"),
        "input": _input(function.get("arguments")),
    }
    block.update(copy.deepcopy(call.get(FORMAT) or {}))
    return block


def _blocks(content: str | list[JSONObject] | None) -> list[JSONObject]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts = (translate_part(part, "anthropic", NATIVE_PARTS) for part in content)
    return [part for part in parts if part is not None]


def _assistant_message(message: Message) -> JSONObject:
    bookkeeping = marks(message, FORMAT)
    calls = [_tool_use(call) for call in message.tool_calls or ()]
    signature = bookkeeping.get("signature")
    thinking = message.reasoning is not None and signature is not None
    if not calls and not thinking and not isinstance(message.content, list):
        return {"role": "assistant", "content": message.content or ""}
    blocks = _blocks(message.content)
    positions = bookkeeping.get("tool_use_at")
    if positions is None:
        blocks.extend(calls)
    else:
        for index, block in zip(positions, calls, strict=False):
            blocks.insert(index, block)
    if message.reasoning is not None and signature is not None:
        blocks.insert(
            0, {"type": "thinking", "thinking": message.reasoning, "signature": signature}
        )
    return {"role": "assistant", "content": blocks}


def _tool_result(message: Message) -> JSONObject:
    block: JSONObject = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if message.content is not None:
        content = message.content
        block["content"] = content if isinstance(content, str) else _blocks(content)
    for key in RESULT_KEYS & set(message.extra):
        block[key] = copy.deepcopy(message.extra[key])
    return block


def to_anthropic(messages: Iterable[Message]) -> JSONObject:
    """The ``system`` (if any) and ``messages`` of an Anthropic request for ``messages``.

    >>> to_anthropic(
    ...     [Message(role="system", content="Be brief."), Message(role="user", content="hi")]
    ... )
    {'system': 'Be brief.', 'messages': [{'role': 'user', 'content': 'hi'}]}

    .. versionadded:: 0.1.0
    """
    system: list[Message] = []
    out: list[JSONObject] = []
    run_open = False
    for message in messages:
        if message.role in SYSTEM_ROLES:
            if out:
                raise InvalidArgumentError(
                    "Anthropic takes system text only before the conversation; move this "
                    f"{message.role} message to the start, or send it as user text"
                )
            system.append(message)
            continue
        separate = bool(marks(message, FORMAT).get("separate"))
        if message.role == "tool":
            if run_open and not separate:
                out[-1]["content"].append(_tool_result(message))
            else:
                out.append({"role": "user", "content": [_tool_result(message)]})
            run_open = True
        elif message.role == "user":
            if run_open and not separate:
                out[-1]["content"].extend(_blocks(message.content))
            else:
                out.append({"role": "user", "content": _user_content(message.content)})
            run_open = False
        elif message.role == "assistant":
            out.append(_assistant_message(message))
            run_open = False
        else:
            raise InvalidArgumentError(
                f"role {message.role!r} has no place in Anthropic Messages (user, assistant, "
                "tool, system); map it to one of them before converting"
            )
    request: JSONObject = {"messages": out}
    if system:
        request = {"system": _system(system), **request}
    return request


def _user_content(content: str | list[JSONObject] | None) -> str | list[JSONObject]:
    if content is None or isinstance(content, str):
        return content or ""
    return _blocks(content)


def _system(messages: Sequence[Message]) -> str | list[JSONObject]:
    if len(messages) == 1 and messages[0].content is not None:
        content = messages[0].content
        return content if isinstance(content, str) else _blocks(content)
    return [block for message in messages for block in _blocks(message.content)]


def unexpressed(message: Message) -> list[str]:
    """What :func:`to_anthropic` leaves out of ``message``.

    Field names, ``extra.<key>`` entries, and ``content[i]`` for parts without an Anthropic
    shape.

    >>> unexpressed(Message(role="assistant", content="ok", reasoning="unsigned"))
    ['reasoning']

    .. versionadded:: 0.1.0
    """
    emitted = {"content", "tool_calls", "tool_call_id"}
    if marks(message, FORMAT).get("signature") is not None:
        emitted.add("reasoning")
    missing = [
        name
        for name in CONVERSATION_FIELDS
        if name not in emitted and getattr(message, name) is not None
    ]
    if isinstance(message.content, list):
        missing.extend(
            f"content[{index}]"
            for index, part in enumerate(message.content)
            if not translate_content([part], "anthropic", NATIVE_PARTS)[0]
        )
    accepted = RESULT_KEYS if message.role == "tool" else frozenset()
    return missing + leftover_extra(message, accepted, FORMAT)
