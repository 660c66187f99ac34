"""The searchable text of a message: what every backend indexes for it.

Content, the text of multimodal and tool-result parts, tool-call names and argument values, and
the tool name, one per line (see :func:`searchable_text`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from hermes_sessions.models import JSONObject, Message

__all__ = ["searchable_text"]

_MAX_JSON_VALUES: Final = 10_000
"""At most this many values are read from one tool call's arguments."""


def _part_texts(parts: list[JSONObject], out: list[str]) -> None:
    for part in parts:  # the Message validator guarantees dicts
        text = part.get("text")
        if isinstance(text, str):
            out.append(text)
        content = part.get("content")  # a tool result block: a string or a list of parts
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(
                inner["text"]
                for inner in content
                if isinstance(inner, dict) and isinstance(inner.get("text"), str)
            )


def _json_strings(value: Any, out: list[str]) -> None:
    """Append the string and number values found in a JSON value (keys are left out).

    Anything else a host may have put in a call's ``input`` (not JSON) is skipped.
    """
    stack = [value]
    budget = _MAX_JSON_VALUES
    while stack and budget:
        budget -= 1
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            out.append(str(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))


def _arguments(arguments: Any, out: list[str]) -> None:
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except (ValueError, RecursionError):
            out.append(arguments)
            return
        _json_strings(decoded, out)
    else:
        _json_strings(arguments, out)


def searchable_text(message: Message) -> str:
    r"""Return the text search indexes for ``message``; never raises on odd shapes.

    Lines, in order: string content, or the ``"text"`` of each multimodal part (and the text
    of tool-result parts); for each tool call its name and the string and number values of
    its arguments (OpenAI ``{"function": {"name", "arguments": "<json>"}}`` or a plain
    ``{"name", "arguments" | "input"}``; arguments that are not JSON are taken as they are);
    then the message's ``tool_name``.

    >>> from hermes_sessions.models import Message
    >>> call = {"function": {"name": "web_search", "arguments": '{"q": "\\u98de\\u4e66"}'}}
    >>> searchable_text(Message(role="assistant", content="ok", tool_calls=[call]))
    'ok\nweb_search\n飞书'

    .. versionadded:: 0.1.0
    """
    out: list[str] = []
    content = message.content
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        _part_texts(content, out)
    for call in message.tool_calls or ():
        function = call.get("function")
        source = function if isinstance(function, dict) else call
        name = source.get("name")
        if isinstance(name, str):
            out.append(name)
        for key in ("arguments", "input"):
            if key in source:
                _arguments(source[key], out)
    if message.tool_name:
        out.append(message.tool_name)
    return "\n".join(text for text in out if text)
