"""The search query language: parser, normal form, and the matcher every backend agrees with.

The language and the normal form are specified in :mod:`hermes_sessions.text`; this module
implements them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.text._tokens import (
    SEPARATOR,
    Stream,
    Word,
    classify,
    index_tokens,
    run_tokens,
    scan,
    stream,
)
from hermes_sessions.text._width import fold_width

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "MAX_QUERY_LENGTH",
    "MAX_QUERY_PHRASES",
    "Clause",
    "Document",
    "Phrase",
    "Query",
    "TokenPattern",
    "match_spans",
    "parse_query",
]

MAX_QUERY_LENGTH: Final = 1_000
"""Queries are cut to this many characters before parsing.

.. versionadded:: 0.1.0
"""
MAX_QUERY_PHRASES: Final = 64
"""At most this many phrases (positive and excluded) are kept; later ones are dropped.

.. versionadded:: 0.1.0
"""

_CONNECTORS: Final = frozenset("-._/+#@")
# Chunks are separated by whitespace; a phrase is a quoted stretch; an unbalanced quote is
# matched by neither branch and so separates like a space.
_LEX: Final = re.compile(r'(?P<neg>-*)"(?P<phrase>[^"]*)"(?P<star>\*?)|(?P<chunk>[^ "]+)')
_ASCII_SPACES: Final = re.compile(r"[\x00-\x20\x7f]")
_OPERATORS: Final = frozenset({"AND", "OR", "NOT"})
_SPACE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs"})
# What a token never holds, so a pattern can always be quoted for FTS5 without escaping.
_TOKEN_UNSAFE: Final = re.compile("[\x00-\x2f\x3a-\x60\x7b-\x7f\ud800-\udfff]")


# -- the normal form -------------------------------------------------------------------------------


def _token_text(_instance: object, _attribute: Any, value: str) -> None:
    if not value or _TOKEN_UNSAFE.search(value) is not None:
        raise InvalidArgumentError(
            "a token pattern needs the non-empty text of a token, without ASCII punctuation, "
            f"spaces or upper-case letters (as index_tokens() gives), got {value!r}"
        )


@attrs.frozen
class TokenPattern:
    """One position of a phrase: a token equal to ``text``, or starting with it if ``prefix``.

    .. versionadded:: 0.1.0
    """

    text: str = attrs.field(validator=_token_text)
    """A token in the form :func:`~hermes_sessions.text.index_tokens` produces."""
    prefix: bool = False
    """Match every token that starts with ``text`` (FTS5 ``"text"*``)."""

    def accepts(self, token: str) -> bool:
        """Whether ``token`` fits this pattern."""
        return token.startswith(self.text) if self.prefix else token == self.text


def _patterns(_instance: object, _attribute: Any, value: tuple[TokenPattern, ...]) -> None:
    if not value:
        raise InvalidArgumentError("a phrase needs at least one token pattern")
    if any(pattern.prefix for pattern in value[:-1]):
        raise InvalidArgumentError("only the last token pattern of a phrase may be a prefix")


@attrs.frozen
class Phrase:
    """Token patterns that must match consecutive tokens of the stream.

    Only the last pattern may be a prefix, so a phrase is exactly the FTS5 phrase
    ``"t1 t2 ... tn"`` (followed by ``*`` when the last pattern is a prefix).

    .. versionadded:: 0.1.0
    """

    patterns: tuple[TokenPattern, ...] = attrs.field(validator=_patterns)

    @property
    def tokens(self) -> tuple[str, ...]:
        """The pattern texts, in order."""
        return tuple(pattern.text for pattern in self.patterns)

    @property
    def prefix(self) -> bool:
        """Whether the last pattern is a prefix."""
        return self.patterns[-1].prefix


def _some_phrases(_instance: object, _attribute: Any, value: tuple[Phrase, ...]) -> None:
    if not value:
        raise InvalidArgumentError("a clause needs at least one phrase")


@attrs.frozen
class Clause:
    """Alternatives: a clause holds when any of its phrases occurs.

    .. versionadded:: 0.1.0
    """

    phrases: tuple[Phrase, ...] = attrs.field(validator=_some_phrases)


@attrs.frozen
class Query:
    """A parsed query in normal form: every clause must hold and no excluded phrase may occur.

    A query without clauses is *empty* and matches nothing (also when it was all exclusions).

    .. versionadded:: 0.1.0
    """

    clauses: tuple[Clause, ...] = ()
    """All of these must hold (AND); each is an OR of phrases."""
    excluded: tuple[Phrase, ...] = ()
    """None of these may occur (always empty when ``clauses`` is)."""

    @property
    def is_empty(self) -> bool:
        """Whether the query matches nothing at all."""
        return not self.clauses

    def phrases(self) -> tuple[Phrase, ...]:
        """Every distinct phrase: the clauses' phrases in order, then the excluded ones."""
        seen = dict.fromkeys(phrase for clause in self.clauses for phrase in clause.phrases)
        seen.update(dict.fromkeys(self.excluded))
        return tuple(seen)

    def positive_phrases(self) -> tuple[Phrase, ...]:
        """Every distinct phrase of the clauses (what highlighting and ranking look at)."""
        return tuple(dict.fromkeys(p for clause in self.clauses for p in clause.phrases))

    def matches(self, document: Document) -> bool:
        """Whether ``document`` satisfies the query."""
        if not self.clauses:
            return False
        return all(
            any(_occurs(phrase, document) for phrase in clause.phrases) for clause in self.clauses
        ) and not any(_occurs(phrase, document) for phrase in self.excluded)


# -- documents and matching ------------------------------------------------------------------------


def _positions(tokens: Sequence[str]) -> dict[str, list[int]]:
    positions: dict[str, list[int]] = {}
    for index, token in enumerate(tokens):
        found = positions.get(token)
        if found is None:
            positions[token] = [index]
        else:
            found.append(index)
    return positions


@attrs.frozen
class Document:
    """A text's token stream with a token → positions map, ready for matching; cache freely.

    .. versionadded:: 0.1.0
    """

    tokens: tuple[str, ...]
    """The index token stream."""
    positions: dict[str, list[int]] = attrs.field(eq=False, repr=False)
    """Every token → its positions in ``tokens``, ascending (read-only by convention)."""

    @classmethod
    def from_tokens(cls, tokens: Sequence[str]) -> Document:
        """Build a document from an index token stream (for example one read from storage)."""
        return cls(tuple(tokens), _positions(tokens))

    @classmethod
    def from_text(cls, text: str) -> Document:
        """Tokenize ``text`` into a document."""
        return cls.from_tokens(index_tokens(text))

    def __len__(self) -> int:
        return len(self.tokens)


def _starts(phrase: Phrase, document: Document) -> Iterator[int]:
    """Yield every position where ``phrase`` starts in ``document``, ascending."""
    patterns = phrase.patterns
    tokens = document.tokens
    anchor = -1
    anchor_positions: Sequence[int] = ()
    for index, pattern in enumerate(patterns):
        if not pattern.prefix:
            found = document.positions.get(pattern.text)
            if found is None:
                return
            if anchor < 0 or len(found) < len(anchor_positions):
                anchor, anchor_positions = index, found
    if anchor < 0:  # a single prefix pattern
        text = patterns[0].text
        starts = [
            position
            for token, positions in document.positions.items()
            if token.startswith(text)
            for position in positions
        ]
        yield from sorted(starts)
        return
    last = len(tokens) - len(patterns)
    for position in anchor_positions:
        start = position - anchor
        if 0 <= start <= last and all(
            pattern.accepts(tokens[start + index]) for index, pattern in enumerate(patterns)
        ):
            yield start


def _occurs(phrase: Phrase, document: Document) -> bool:
    patterns = phrase.patterns
    if len(patterns) == 1:  # the common case, without building positions
        text = patterns[0].text
        if patterns[0].prefix:
            return any(token.startswith(text) for token in document.positions)
        return text in document.positions
    return next(_starts(phrase, document), None) is not None


def match_spans(query: Query, text: str) -> list[tuple[int, int]]:
    """Return the character spans in ``text`` where the query's positive phrases occur.

    Spans are sorted, and overlapping or touching spans are merged. Exclusions are not
    highlighted, and phrases are found even when the text as a whole does not match. A CJK
    pattern of one character that matched a bigram covers just that character.

    >>> match_spans(parse_query("docker 书"), "Docker 部署到飞书机器人")
    [(0, 6), (11, 12)]

    .. versionadded:: 0.1.0
    """
    if query.is_empty:
        return []
    return stream_spans(query, stream(text))


def stream_spans(query: Query, tokens: Stream) -> list[tuple[int, int]]:
    """:func:`match_spans` on an already tokenized text."""
    document = Document.from_tokens(tokens.tokens)
    starts, ends, cjk = tokens.starts, tokens.ends, tokens.cjk
    count = len(starts)
    spans: list[tuple[int, int]] = []
    for phrase in query.positive_phrases():
        width = len(phrase.patterns)
        for start in _starts(phrase, document):
            last = start + width - 1
            end = ends[last]
            if phrase.prefix and cjk[last] and last + 1 < count and starts[last + 1] < end:
                end = starts[last + 1]  # just the first unit of a bigram
            spans.append((starts[start], end))
    return merge_spans(spans)


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort spans and merge those that overlap or touch."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


# -- parsing ---------------------------------------------------------------------------------------


def _phrase_of(text: str, *, star: bool) -> Phrase | None:
    """The phrase for a stretch of query text: its tokens, consecutively.

    A CJK run becomes its bigrams; followed by more tokens it also needs its terminal unigram
    (the run must end there); a lone CJK character at the very end is a prefix (the character
    starts some CJK token). ``star`` makes a final word token a prefix.
    """
    pieces = scan(text)
    patterns: list[TokenPattern] = []
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        if isinstance(piece, Word):
            patterns.append(TokenPattern(piece.text, prefix=star and last))
            continue
        units = piece.units
        tokens = run_tokens(units)
        if len(units) == 1:
            patterns.append(TokenPattern(units[0], prefix=last))
        else:
            patterns.extend(TokenPattern(token) for token in tokens[:-1])
            if not last:
                patterns.append(TokenPattern(tokens[-1]))
    return Phrase(tuple(patterns)) if patterns else None


def _is_space(char: str) -> bool:
    """Whether a non-ASCII character separates query words like a space does."""
    category = unicodedata.category(char)
    return category[0] == "Z" or category in _SPACE_CATEGORIES


def _is_splitter(char: str) -> bool:
    """Whether ``char`` splits a chunk into separate terms: a separator other than a connector."""
    if char.isascii():
        return not char.isalnum() and char not in _CONNECTORS
    return not char.isalnum() and classify(char) == SEPARATOR


def _chunk_phrases(chunk: str) -> list[Phrase]:
    """Split a whitespace-free chunk at punctuation other than connectors into phrases."""
    phrases: list[Phrase] = []
    current: list[str] = []
    for char in [*chunk, " "]:
        if _is_splitter(char):
            phrase = _phrase_of("".join(current), star=char == "*") if current else None
            if phrase is not None:
                phrases.append(phrase)
            current = []
        else:
            current.append(char)
    return phrases


def _clean(text: str) -> str:
    """Cut the query to its maximum length, fold its width, turn space-likes into spaces."""
    text = fold_width(text[:MAX_QUERY_LENGTH])
    if text.isascii():
        return _ASCII_SPACES.sub(" ", text)
    return "".join(" " if _is_space(char) else char for char in text)


def _items(text: str) -> Iterator[str | tuple[bool, list[Phrase]]]:
    """Lex the cleaned query into operators and (negated, phrases) items."""
    for match in _LEX.finditer(text):
        chunk = match["chunk"]
        if chunk is None:
            phrase = _phrase_of(match["phrase"], star=bool(match["star"]))
            if phrase is not None:
                yield bool(match["neg"]), [phrase]
        elif chunk in _OPERATORS:
            yield chunk
        else:
            stripped = chunk.lstrip("-")
            phrases = _chunk_phrases(stripped)
            if phrases:
                yield len(stripped) < len(chunk), phrases


def parse_query(text: str) -> Query:
    """Parse a search query; never raises.

    >>> q = parse_query("docker OR podman -helm")
    >>> [[p.tokens for p in c.phrases] for c in q.clauses], [p.tokens for p in q.excluded]
    ([[('docker',), ('podman',)]], [('helm',)])
    >>> parse_query("NOT docker").is_empty
    True

    .. versionadded:: 0.1.0
    """
    clauses: list[list[Phrase]] = []
    excluded: list[Phrase] = []
    budget = MAX_QUERY_PHRASES
    can_or = pending_or = pending_not = False
    for item in _items(_clean(text)):
        if isinstance(item, str):
            pending_or = item == "OR" and can_or
            pending_not = item == "NOT"
            can_or = False
            continue
        negated, phrases = item
        phrases = phrases[:budget]
        budget -= len(phrases)
        if negated or pending_not:
            excluded.extend(phrases)
            can_or = False
        else:
            if pending_or:
                clauses[-1].append(phrases[0])
                phrases = phrases[1:]
            clauses.extend([phrase] for phrase in phrases)
            can_or = True
        pending_or = pending_not = False
        if budget <= 0:
            break
    if not clauses:
        return Query()
    unique_clauses = dict.fromkeys(Clause(tuple(dict.fromkeys(c))) for c in clauses)
    return Query(tuple(unique_clauses), tuple(dict.fromkeys(excluded)))
