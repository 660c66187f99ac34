"""Snippets: an excerpt of the original text around the best match, with the matches marked."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import attrs

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.text._query import stream_spans
from hermes_sessions.text._tokens import stream
from hermes_sessions.text._windows import match_window

if TYPE_CHECKING:
    from hermes_sessions.text._query import Query

__all__ = ["Snippet", "make_snippet"]


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
    """Every match in the original text as ``(start, end)``, sorted and merged (for a text
    longer than ``LONG_TEXT``, those of the window searched); those inside ``start``..``end``
    are the ones marked in ``text``."""


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
    beginning. A text longer than :data:`~hermes_sessions.text.LONG_TEXT` characters is
    tokenized only in a window of :data:`~hermes_sessions.text.WINDOW` characters on each side
    of its first confirmed match (``spans`` then lists the matches of that window); when no
    window confirms one, the whole text is used, as for a short one.

    >>> from hermes_sessions.text import parse_query
    >>> make_snippet("we deploy with docker compose on friday", parse_query("docker"), max_tokens=4)
    Snippet(text='...with >>>docker<<< compose on...', start=10, end=32, spans=((15, 21),))

    Raises:
        ValueError: if ``max_tokens`` is less than 1.

    .. versionadded:: 0.1.0
    """
    if max_tokens < 1:
        raise InvalidArgumentError(f"max_tokens must be at least 1, got {max_tokens}")
    window = match_window(text, query)  # a long text: only a window around a match
    low, high = window if window is not None else (0, len(text))
    tokens = stream(text[low:high] if window is not None else text)
    spans = [] if query.is_empty else stream_spans(query, tokens)
    units = tokens.unit_spans()
    if low:
        spans = [(a + low, b + low) for a, b in spans]
        units = [(a + low, b + low) for a, b in units]
    if units:
        first, last = _window(units, spans, max_tokens)
        start = units[first][0] if first else low
        end = units[last - 1][1] if last < len(units) else high
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
