"""Bounded work on long texts: find a match in a window instead of tokenizing the whole text.

A hit's snippet and the re-check of a long message used to tokenize all of its text, so one 10 MB
message made every search returning it take seconds. For a text longer than
:data:`LONG_TEXT` characters, :func:`match_window` looks for the first token of each positive
phrase with a case-insensitive substring search (C speed), then tokenizes only
:data:`WINDOW` characters on each side of a candidate and runs the exact matcher there. A match
the window tokenizer sees away from a cut edge is a match of the whole text (tokens never span
whitespace, and a cut is moved to whitespace when one is near). When no candidate confirms — the
text holds the token only in another normalisation (full-width letters, say), or not at all —
the answer is ``None`` and callers fall back to the whole text, so results stay exact.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from hermes_sessions.text._query import stream_spans
from hermes_sessions.text._tokens import stream

if TYPE_CHECKING:
    from hermes_sessions.text._query import Query

__all__ = ["LONG_TEXT", "WINDOW", "match_window"]

LONG_TEXT: Final = 65_536
"""Texts up to this many characters are always handled whole (every normal message).

.. versionadded:: 0.1.0
"""
WINDOW: Final = 4_096
"""Characters tokenized on each side of a candidate match in a longer text.

.. versionadded:: 0.1.0
"""
_SNAP: Final = 256  # how far a cut edge may move to reach whitespace
_CANDIDATES: Final = 16  # candidates tried before falling back to the whole text


def _cut(text: str, position: int, *, forward: bool) -> tuple[int, bool]:
    """``position`` moved to nearby whitespace; and whether it is a clean cut."""
    if position <= 0 or position >= len(text):
        return max(0, min(position, len(text))), True
    if forward:
        found = text.find(" ", position, position + _SNAP)
    else:
        found = text.rfind(" ", max(0, position - _SNAP), position)
    return (position, False) if found < 0 else (found, True)


def match_window(text: str, query: Query) -> tuple[int, int] | None:
    """A window ``(start, end)`` of ``text`` holding a match of a positive phrase, or ``None``.

    ``None`` also for a short text (use it whole) and when no window confirms a match. A
    window proves that a phrase occurs; whether the whole query holds (other clauses, ``NOT``)
    still needs the whole text, except for a query of one clause without exclusions.

    .. versionadded:: 0.1.0
    """
    if len(text) <= LONG_TEXT or query.is_empty:
        return None
    needles = sorted({phrase.tokens[0] for phrase in query.positive_phrases()})  # never empty
    pattern = re.compile("|".join(re.escape(needle) for needle in needles), re.IGNORECASE)
    tried = 0
    position = 0
    while tried < _CANDIDATES:
        found = pattern.search(text, position)
        if found is None:
            return None
        tried += 1
        start, clean_start = _cut(text, found.start() - WINDOW, forward=False)
        end, clean_end = _cut(text, found.end() + WINDOW, forward=True)
        tokens = stream(text[start:end])
        low = 0 if clean_start else _SNAP
        high = (end - start) - (0 if clean_end else _SNAP)
        if any(low <= a and b <= high for a, b in stream_spans(query, tokens)):
            return start, end
        position = found.end()
    return None
