"""The tokenizer behind search: one canonical token stream for every backend.

See :mod:`hermes_sessions.text` for the rules and the reasons behind them. This module turns text
into *pieces* (word tokens and runs of CJK/symbol characters split into units) with one compiled
regular expression and a short loop, then derives from them the index token stream
(:func:`index_tokens`), tokens with offsets (:func:`tokenize`) and the units that snippets count.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Final, Literal, NamedTuple, TypeAlias

import attrs

__all__ = ["Token", "TokenKind", "index_tokens", "tokenize"]

TokenKind: TypeAlias = Literal["word", "cjk"]
"""``"word"`` for a word token; ``"cjk"`` for a CJK or symbol bigram or unigram."""

# CJK characters (Han, kana, Hangul), as a regular-expression character-class body. Kana
# combining voiced marks (U+3099, U+309A) are left out on purpose: they are combining marks and
# attach to the character before them like any other mark. Planes 2 and 3 belong to CJK
# ideographs as a whole (extensions B to I, compatibility supplement), assigned yet or not.
_CJK_CLASS: Final = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u2ff0-\u2fff"  # ideographic description characters
    "\u3005-\u3007"  # 々 〆 and the ideographic zero U+3007
    "\u3021-\u3029"  # Hangzhou numerals
    "\u3031-\u3035"  # kana repeat marks
    "\u3038-\u303b"  # Hangzhou numerals, 〻
    "\u3041-\u3096"  # Hiragana
    "\u309b-\u309f"  # spacing voiced marks, ゝ ゞ ゟ
    "\u30a1-\u30fa"  # Katakana (without the double hyphen U+30A0)
    "\u30fc-\u30ff"  # ー ヽ ヾ ヿ (without the middle dot ・)
    "\u3131-\u318e"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended-A
    "\uac00-\ud7a3"  # Hangul syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\uffa0-\uffdc"  # half-width Hangul
    "\U0001aff0-\U0001b16f"  # Kana extended-B, supplement, extended-A, small kana
    "\U00020000-\U0003ffff"  # CJK extensions B-I, compatibility supplement
)

# One match per word run, per CJK run, or per single other non-ASCII character. ASCII characters
# that no branch matches (punctuation, spaces, controls, ``_``) are separators.
_SCAN: Final = re.compile(rf"(?P<w>[^\W_{_CJK_CLASS}]+)|(?P<c>[{_CJK_CLASS}]+)|(?P<o>[^\x00-\x7f])")
# Hangul vowel and final jamo: inside a CJK run they join the unit before them, so decomposed
# syllables become one unit (and NFC composes them).
_ATTACHING_JAMO: Final = re.compile("[\u1160-\u11ff\ud7b0-\ud7ff]")
_VARIATION_SELECTORS: Final = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# What may never appear in a token: ASCII other than lower-case letters and digits (the FTS5
# ``ascii`` tokenizer would split there).
_ASCII_JUNK: Final = re.compile("[\x00-\x2f\x3a-\x60\x7b-\x7f]")

_MARK: Final = 1
_SELECTOR: Final = 2
_SYMBOL: Final = 3
SEPARATOR: Final = 4


class Word(NamedTuple):
    text: str
    start: int
    end: int


class Run(NamedTuple):
    units: list[str]
    starts: list[int]
    ends: list[int]


Piece: TypeAlias = Word | Run


@attrs.frozen
class Token:
    """One token of the canonical stream, with where it came from in the original text.

    .. versionadded:: 0.1.0
    """

    text: str
    """The normalised token: case-folded and NFC for words; one or two units for CJK."""
    start: int
    """Offset of the token's first character in the original text."""
    end: int
    """Offset just past the token's last character in the original text."""
    kind: TokenKind
    """``"word"``, or ``"cjk"`` for a CJK/symbol bigram or the unigram that ends a run."""


def classify(char: str) -> int:
    """Classify a non-ASCII character that is neither a word character nor CJK."""
    category = unicodedata.category(char)
    major = category[0]
    if major == "M":
        return _SELECTOR if _VARIATION_SELECTORS.match(char) else _MARK
    if major == "S" or category in {"Co", "Cn"}:
        # A symbol whose normal form is ASCII (only U+1FEF, which becomes a backtick) separates.
        return SEPARATOR if _normalise(char).isascii() else _SYMBOL
    return SEPARATOR  # punctuation, spaces, controls, format characters, surrogates


def _normalise(raw: str) -> str:
    """Normalise a word or unit: variation selectors dropped, NFC, case-folded, NFC again."""
    if raw.isascii():
        return raw.lower()
    text = _VARIATION_SELECTORS.sub("", raw)
    text = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())
    return _ASCII_JUNK.sub("", text)


def _split_units(chars: str, start: int) -> tuple[list[str], list[int], list[int]]:
    """Split a run of CJK characters into units (a character plus attached Hangul jamo)."""
    if _ATTACHING_JAMO.search(chars) is None:
        return (
            list(chars),
            list(range(start, start + len(chars))),
            list(range(start + 1, start + len(chars) + 1)),
        )
    units: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for offset, char in enumerate(chars, start):
        if units and _ATTACHING_JAMO.match(char):
            units[-1] += char
            ends[-1] = offset + 1
        else:
            units.append(char)
            starts.append(offset)
            ends.append(offset + 1)
    return units, starts, ends


class _Scanner:
    """Turns one text into pieces; a fresh scanner per text (no shared state)."""

    __slots__ = ("end", "pieces", "run", "run_dirty", "text", "word_start")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces: list[Piece] = []
        self.word_start = -1  # start of the open word, or -1
        self.run: Run | None = None  # the open CJK/symbol run
        self.run_dirty = False  # the open run needs per-unit normalisation
        self.end = -1  # where the open word or run ends

    def flush(self) -> None:
        if self.word_start >= 0:
            text = _normalise(self.text[self.word_start : self.end])
            if text:
                self.pieces.append(Word(text, self.word_start, self.end))
            self.word_start = -1
        elif self.run is not None:
            run = self.run
            if self.run_dirty or not unicodedata.is_normalized("NFC", "".join(run.units)):
                run.units[:] = map(_normalise, run.units)
            self.pieces.append(run)
            self.run = None
            self.run_dirty = False
        self.end = -1

    def add_word(self, start: int, end: int) -> None:
        if self.word_start < 0 or self.end != start:
            self.flush()
            self.word_start = start
        self.end = end

    def add_units(self, chars: str, start: int, end: int) -> None:
        units, starts, ends = _split_units(chars, start)
        if self.run is None or self.end != start:
            self.flush()
            self.run = Run(units, starts, ends)
        else:
            self.run.units.extend(units)
            self.run.starts.extend(starts)
            self.run.ends.extend(ends)
        self.end = end

    def add_other(self, char: str, start: int) -> None:
        kind = classify(char)
        end = start + 1
        adjacent = self.end == start
        if kind == _SYMBOL:
            self.add_units(char, start, end)
            self.run_dirty = True
        elif kind == SEPARATOR:
            self.flush()
        elif adjacent and self.run is not None:  # a mark or selector joins the unit before it
            self.run.units[-1] += char
            self.run.ends[-1] = end
            self.end = end
            self.run_dirty = True
        elif kind == _MARK or (adjacent and self.word_start >= 0):
            self.add_word(start, end)
        else:  # a variation selector with nothing to select
            self.flush()

    def scan(self) -> list[Piece]:
        for match in _SCAN.finditer(self.text):
            start, end = match.span()
            group = match.lastgroup
            if group == "w":
                self.add_word(start, end)
            elif group == "c":
                self.add_units(match.group(), start, end)
            else:
                self.add_other(match.group(), start)
        self.flush()
        return self.pieces


def scan(text: str) -> list[Piece]:
    """Split ``text`` into word pieces and CJK/symbol runs (units already normalised)."""
    return _Scanner(text).scan()


def run_tokens(units: list[str]) -> list[str]:
    """The index tokens of one CJK/symbol run: overlapping bigrams, then the last unit."""
    tokens = [first + second for first, second in itertools.pairwise(units)]
    tokens.append(units[-1])
    return tokens


def index_tokens(text: str) -> list[str]:
    """Return the canonical index token stream of ``text``.

    SQL backends store ``" ".join(index_tokens(text))`` in an FTS5 table with the ``ascii``
    tokenizer: tokens never contain ASCII punctuation, spaces or upper-case letters.

    >>> index_tokens("Deploy docker-compose 到飞书机器人 🚀")
    ['deploy', 'docker', 'compose', '到飞', '飞书', '书机', '机器', '器人', '人', '🚀']
    """
    tokens: list[str] = []
    for piece in scan(text):
        if isinstance(piece, Word):
            tokens.append(piece.text)
        else:
            tokens.extend(run_tokens(piece.units))
    return tokens


def tokenize(text: str) -> list[Token]:
    """Return the index token stream of ``text`` with offsets into the original text.

    The token texts are exactly :func:`index_tokens`; a CJK bigram's offsets cover both units.

    >>> [(t.text, t.start, t.end) for t in tokenize("修改youer服务")]
    [('修改', 0, 2), ('改', 1, 2), ('youer', 2, 7), ('服务', 7, 9), ('务', 8, 9)]
    """
    tokens: list[Token] = []
    for piece in scan(text):
        if isinstance(piece, Word):
            tokens.append(Token(piece.text, piece.start, piece.end, "word"))
            continue
        units, starts, ends = piece
        tokens.extend(
            Token(units[index] + units[index + 1], starts[index], ends[index + 1], "cjk")
            for index in range(len(units) - 1)
        )
        tokens.append(Token(units[-1], starts[-1], ends[-1], "cjk"))
    return tokens


def display_units(text: str) -> list[tuple[int, int]]:
    """Spans of what a snippet counts as one token: a word, or one CJK/symbol unit."""
    spans: list[tuple[int, int]] = []
    for piece in scan(text):
        if isinstance(piece, Word):
            spans.append((piece.start, piece.end))
        else:
            spans.extend(zip(piece.starts, piece.ends, strict=True))
    return spans
