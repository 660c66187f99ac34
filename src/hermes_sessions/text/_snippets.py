"""Snippets of the original text around a match, and the searchable text of a message."""

from __future__ import annotations

import bisect
import json
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.text._query import stream_spans
from hermes_sessions.text._tokens import stream

if TYPE_CHECKING:
    from hermes_sessions.models import JSONObject, Message
    from hermes_sessions.text._query import Query

__all__ = ["Snippet", "make_snippet", "searchable_text"]

_MAX_JSON_VALUES: Final = 10_000
"""At most this many values are read from one tool call's arguments."""


@attrs.frozen
class Snippet:
    """An excerpt of a text around its best match, with the matches marked.

    .. versionadded:: 0.1.0
    """

    text: str
    """The excerpt with matches wrapped in the marks and ellipses where text was cut."""
    start: int
    """Where the excerpt starts in the original text."""
    end: int
    """Where the excerpt ends in the original text (exclusive)."""
    spans: tuple[tuple[int, int], ...]
    """Every match in the original text as ``(start, end)``, sorted and merged; those inside
    ``start``..``end`` are the ones marked in ``text``."""


def _window(
    units: list[tuple[int, int]], spans: list[tuple[int, int]], size: int
) -> tuple[int, int]:
    """Pick ``size`` consecutive units covering as many spans as possible, centred on them."""
    count = len(units)
    if count <= size:
        return 0, count
    if not spans:
        return 0, size
    ends = [end for _start, end in units]
    starts = [start for start, _end in units]
    firsts = [bisect.bisect_right(ends, start) for start, _end in spans]
    lasts = [bisect.bisect_left(starts, end) - 1 for _start, end in spans]
    best = (0, 0, 0)  # (covered spans, first span, last span)
    last = 0
    for first in range(len(spans)):
        last = max(last, first)
        while last + 1 < len(spans) and lasts[last + 1] < firsts[first] + size:
            last += 1
        if last - first + 1 > best[0]:
            best = (last - first + 1, first, last)
    _covered, first, last = best
    low, high = firsts[first], max(lasts[last], firsts[first])
    start = max(0, low - max(0, size - (high - low + 1)) // 2)
    end = min(count, start + size)
    return max(0, end - size), end


def make_snippet(
    text: str,
    query: Query,
    *,
    start_mark: str = ">>>",
    end_mark: str = "<<<",
    ellipsis: str = "...",
    max_tokens: int = 40,
) -> Snippet:
    """Cut an excerpt of about ``max_tokens`` tokens around the best match in ``text``.

    Built from the original text, never from index tokens: a word counts as one token and so
    does each CJK character or symbol. The window covers as many matches as fit, centred on
    them; matches are wrapped in ``start_mark``/``end_mark`` (merged where they overlap or
    touch) and ``ellipsis`` stands where text was cut. A text without a match gives its
    beginning.

    >>> from hermes_sessions.text import parse_query
    >>> make_snippet("we deploy with docker compose on friday", parse_query("docker"), max_tokens=4)
    Snippet(text='...with >>>docker<<< compose on...', start=10, end=32, spans=((15, 21),))

    Raises:
        ValueError: if ``max_tokens`` is less than 1.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    tokens = stream(text)
    spans = [] if query.is_empty else stream_spans(query, tokens)
    units = tokens.unit_spans()
    if units:
        first, last = _window(units, spans, max_tokens)
        start = units[first][0] if first else 0
        end = units[last - 1][1] if last < len(units) else len(text)
    else:  # nothing searchable at all: cut by characters
        start, end = 0, min(len(text), max_tokens)
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    parts = [ellipsis] if text[:start].strip() else []
    position = start
    for span_start, span_end in spans:
        low, high = max(span_start, start), min(span_end, end)
        if low >= high:
            continue
        parts += [text[position:low], start_mark, text[low:high], end_mark]
        position = high
    parts.append(text[position:end])
    if text[end:].strip():
        parts.append(ellipsis)
    return Snippet("".join(parts), start, end, tuple(spans))


# -- the searchable text of a message --------------------------------------------------------------


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
