"""The tokenizer behind search: one canonical token stream for every backend.

See :mod:`hermes_sessions.text` for the rules and the reasons behind them.

Tokenizing is on the write path of every message, so there are three speeds. ASCII text is one
``findall``. Text made of word characters, CJK, common emoji and common punctuation is one
``findall`` of a two-branch pattern (words, CJK runs). Anything else (combining marks, rare
symbols, compatibility ideographs, decomposed Hangul, ...) goes through the general scanner,
which classifies characters one by one, but only between the ASCII separators around such
characters: no token ever spans an ASCII separator, so the stretches are independent. The tests
check that the fast paths produce exactly what the general scanner does.
"""

from __future__ import annotations

import functools
import operator
import re
import unicodedata
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, TypeAlias

import attrs

from hermes_sessions.text._width import fold_for_tokens

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Token", "TokenKind", "index_tokens", "tokenize"]

TokenKind: TypeAlias = Literal["word", "cjk"]
"""``"word"`` for a word token; ``"cjk"`` for a CJK or symbol bigram or unigram.

.. versionadded:: 0.1.0
"""

# CJK characters (Han, kana, Hangul), as a regular-expression character-class body. Kana
# combining voiced marks (U+3099, U+309A) are left out on purpose: they are combining marks and
# attach to the character before them like any other mark. Planes 2 and 3 belong to CJK
# ideographs as a whole (extensions B to I, compatibility supplement), assigned yet or not.
_CJK_CLASS: Final = (
    "\u4e00-\u9fff"  # CJK unified ideographs (the most frequent ranges come first)
    "\u3041-\u3096"  # Hiragana
    "\u30a1-\u30fa"  # Katakana (without the double hyphen U+30A0)
    "\u30fc-\u30ff"  # ー ヽ ヾ ヿ (without the middle dot)
    "\uac00-\ud7a3"  # Hangul syllables
    "\u3400-\u4dbf"  # CJK extension A
    "\u3005-\u3007"  # 々 〆 and the ideographic zero U+3007
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u2ff0-\u2fff"  # ideographic description characters
    "\u3021-\u3029"  # Hangzhou numerals
    "\u3031-\u3035"  # kana repeat marks
    "\u3038-\u303b"  # Hangzhou numerals, 〻
    "\u309b-\u309f"  # spacing voiced marks, ゝ ゞ ゟ
    "\u3131-\u318e"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\ua960-\ua97f"  # Hangul Jamo extended-A
    "\ud7b0-\ud7ff"  # Hangul Jamo extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\uffa0-\uffdc"  # half-width Hangul
    "\U0001aff0-\U0001b16f"  # Kana extended-B, supplement, extended-A, small kana
    "\U00020000-\U0003ffff"  # CJK extensions B-I, compatibility supplement
)

# Frequent combining marks (diacritics, Devanagari and Thai vowel signs): the scanner's word
# branch takes them along, as its mark handling would one by one (checked by the tests).
_WORD_MARKS: Final = (
    "\u0300-\u036f\u0900-\u0903\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962-\u0963"
    "\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u1ab0-\u1abe\u1dc0-\u1dff\u20d0-\u20f0\ufe20-\ufe2f"
)
# One match per word run, per CJK run, or per single other non-ASCII character. ASCII characters
# that no branch matches (punctuation, spaces, controls, ``_``) are separators.
_SCAN_PATTERN: Final = (
    rf"(?P<w>[^\W_{_CJK_CLASS}]+(?:[{_WORD_MARKS}]+[^\W_{_CJK_CLASS}]*)*)"
    rf"|(?P<c>[{_CJK_CLASS}]+)|(?P<o>[^\x00-\x7f])"
)
# Symbols common in chat that are NFC and case-folded already (Latin-1 signs, currency, letterlike
# symbols, arrows, mathematical operators, technical symbols, box drawing, geometric shapes,
# dingbats, enclosed CJK, CJK squares, full-width signs, emoji; unassigned gaps inside included):
# the fast path treats them like CJK, exactly as the scanner would (checked by the tests).
_FAST_SYMBOLS: Final = (
    "\u00a2-\u00a6\u00a8-\u00a9\u00ac\u00ae-\u00b1\u00b4\u00b8\u00d7\u00f7\u2044\u2052"
    "\u207a-\u207c\u208a-\u208c\u20a0-\u20c0\u2100-\u2101\u2103-\u2106\u2108-\u2109\u2114"
    "\u2116-\u2118\u211e-\u2123\u2125\u2127\u2129\u212e\u213a-\u213b\u2140-\u2144"
    "\u214a-\u214d\u214f\u218a-\u2307\u230c-\u2328\u232b-\u244a\u249c-\u24b5\u24d0-\u24e9"
    "\u2500-\u2767\u2794-\u27c4\u27c7-\u27e5\u27f0-\u2982\u2999-\u29d7\u29dc-\u29fb"
    "\u29fe-\u2adb\u2add-\u2bff\u3004\u3012-\u3013\u3020\u3036-\u3037\u303e-\u303f"
    "\u3200-\u321e\u322a-\u3247\u3250\u3260-\u327f\u328a-\u32b0\u32c0-\u33ff\ufe62"
    "\ufe64-\ufe66\ufe69\uff04\uff0b\uff1c-\uff1e\uff3e\uff40\uff5c\uff5e\uffe0-\uffee"
    "\U0001f000-\U0001f0f5\U0001f10d-\U0001faf6"
)
_EMOJI_SELECTOR: Final = "\ufe0f"
# The fast path: in text made of ASCII, word characters, CJK, those symbols, the emoji variation
# selector and common separators, the pieces are the matches of this pattern.
_FAST_PATTERN: Final = rf"([^\W_{_CJK_CLASS}]+)|([{_CJK_CLASS}{_FAST_SYMBOLS}{_EMOJI_SELECTOR}]+)"
_ASCII_WORD: Final = re.compile("[a-z0-9]+")


def _common_separators() -> str:
    """Punctuation, spaces and format characters of the blocks chat text uses most."""
    blocks = ((0x80, 0xBF), (0x2000, 0x206F), (0x3000, 0x303F), (0xFE30, 0xFE6F), (0xFF00, 0xFF65))
    return "".join(
        f"\\U{code:08x}"
        for first, last in blocks
        for code in range(first, last + 1)
        if unicodedata.category(chr(code))[0] in "PZ"
        or unicodedata.category(chr(code)) in {"Cc", "Cf"}
    )


# What needs the general scanner: a mark, variation selector, symbol, rare punctuation, Hangul
# jamo that attaches, compatibility ideograph (not NFC), or an emoji variation selector right
# after a word character (inside a word it is transparent). Tokens never span an ASCII
# separator, so the scanner only runs between the separators around such characters.
_NEEDS_SCANNER_PATTERN: Final = (
    rf"[^\x00-\x7f\w{_CJK_CLASS}{_FAST_SYMBOLS}{_EMOJI_SELECTOR}{_common_separators()}]"
    "|[\u1160-\u11ff\ud7b0-\ud7ff\uf900-\ufaff\U0002f800-\U0002fa1f]"
    rf"|[^\W_{_CJK_CLASS}]{_EMOJI_SELECTOR}"
)
_MERGE_DISTANCE: Final = 32
"""Stretches for the scanner closer than this many characters are scanned in one go."""
_SEPARATOR_CLASS: Final = "[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]"
_NEXT_SEPARATOR: Final = re.compile(_SEPARATOR_CLASS)
_UP_TO_LAST_SEPARATOR: Final = re.compile(f".*{_SEPARATOR_CLASS}", re.DOTALL)


class _Patterns(NamedTuple):
    scan: re.Pattern[str]
    fast: re.Pattern[str]
    needs_scanner: re.Pattern[str]


@functools.cache
def _patterns() -> _Patterns:
    """The large patterns, compiled once on first use (it takes ~15 ms, too long for import)."""
    return _Patterns(
        re.compile(_SCAN_PATTERN), re.compile(_FAST_PATTERN), re.compile(_NEEDS_SCANNER_PATTERN)
    )


# Hangul vowel and final jamo: inside a CJK run they join the unit before them, so decomposed
# syllables become one unit (and NFC composes them).
_ATTACHING_JAMO: Final = re.compile("[\u1160-\u11ff\ud7b0-\ud7ff]")
_VARIATION_SELECTORS: Final = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# What may never appear in a token: ASCII other than lower-case letters and digits (the FTS5
# ``ascii`` tokenizer would split there).
_ASCII_JUNK: Final = re.compile("[\x00-\x2f\x3a-\x60\x7b-\x7f]")
# Symbols whose normal form is ASCII punctuation (U+1FEF becomes a backtick): separators.
_ASCII_SYMBOLS: Final = frozenset("\u1fef")

_MARK: Final = 1
_SELECTOR: Final = 2
_SYMBOL: Final = 3
SEPARATOR: Final = 4


class Word(NamedTuple):
    """A normalised word token and its span in the original text."""

    text: str
    start: int
    end: int


class Run(NamedTuple):
    """A run of CJK/symbol units (normalised) with each unit's span in the original text."""

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
    if (major == "S" or category in {"Co", "Cn"}) and char not in _ASCII_SYMBOLS:
        return _SYMBOL
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
        count = len(chars)
        return (
            list(chars),
            list(range(start, start + count)),
            list(range(start + 1, start + count + 1)),
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
    """The general scanner: turns a stretch of text into pieces (a fresh scanner each time)."""

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
            # Never empty: a word holds a letter, digit or mark, and none normalises to nothing.
            text = _normalise(self.text[self.word_start : self.end])
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

    def scan(self, start: int, end: int) -> list[Piece]:
        for match in _patterns().scan.finditer(self.text, start, end):
            first, last = match.span()
            group = match.lastgroup
            if group == "w":
                self.add_word(first, last)
            elif group == "c":
                self.add_units(match.group(), first, last)
            else:
                self.add_other(match.group(), first)
        self.flush()
        return self.pieces


def scan(text: str) -> list[Piece]:
    """Split ``text`` into words and CJK/symbol runs (normalised) with the general scanner."""
    return _Scanner(text).scan(0, len(text))


def _segments(text: str) -> Iterator[tuple[bool, int, int]]:
    """Cut ``text`` at ASCII separators into ``(needs_scanner, start, end)`` stretches.

    The stretches that need the general scanner reach from the separator before a character
    that needs it to the separator after; the fast pattern handles the rest.
    """
    needs_scanner = _patterns().needs_scanner
    position, length = 0, len(text)
    while position < length:
        found = needs_scanner.search(text, position)
        if found is None:
            yield False, position, length
            return
        before = _UP_TO_LAST_SEPARATOR.match(text, position, found.start())
        start = position if before is None else before.end()
        if start > position:
            yield False, position, start
        after = _NEXT_SEPARATOR.search(text, found.end())
        position = length if after is None else after.start()
        # Take in what needs the scanner soon after: one scanner run beats many short ones.
        while position < length:
            found = needs_scanner.search(text, position, position + _MERGE_DISTANCE)
            if found is None:
                break
            after = _NEXT_SEPARATOR.search(text, found.end())
            position = length if after is None else after.start()
        yield True, start, position


def run_tokens(units: list[str]) -> list[str]:
    """The index tokens of one CJK/symbol run: overlapping bigrams, then the last unit."""
    tokens = list(map(operator.add, units, units[1:]))
    tokens.append(units[-1])
    return tokens


def index_tokens(text: str) -> list[str]:
    """Return the canonical index token stream of ``text`` (width-folded first).

    SQL backends store ``" ".join(index_tokens(text))`` in an FTS5 table with the ``ascii``
    tokenizer: tokens never contain ASCII punctuation, spaces or upper-case letters.

    >>> index_tokens("Deploy docker-compose 到飞书机器人 🚀")
    ['deploy', 'docker', 'compose', '到飞', '飞书', '书机', '机器', '器人', '人', '🚀']

    .. versionadded:: 0.1.0
    """
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    return folded_index_tokens(fold_for_tokens(text)[0])


def folded_index_tokens(text: str) -> list[str]:
    """The index tokens of a text that is width-folded already.

    On text that is not, this is the stream of :data:`~hermes_sessions.text.TOKENS_VERSION` 1
    (before width folding), which the tests use to build stores an older version wrote.
    """
    tokens: list[str] = []
    for needs_scanner, start, end in _segments(text):
        if needs_scanner:
            _add_scanned_tokens(tokens, text, start, end)
        else:
            _add_fast_tokens(tokens, text, start, end)
    return tokens


def _add_scanned_tokens(tokens: list[str], text: str, start: int, end: int) -> None:
    for piece in _Scanner(text).scan(start, end):
        if isinstance(piece, Word):
            tokens.append(piece.text)
        else:
            tokens.extend(run_tokens(piece.units))


def _add_fast_tokens(tokens: list[str], text: str, start: int, end: int) -> None:
    append = tokens.append
    for word, run in _patterns().fast.findall(text, start, end):
        if word:
            append(word.lower() if word.isascii() else _normalise(word))
            continue
        units = run.replace(_EMOJI_SELECTOR, "") if _EMOJI_SELECTOR in run else run
        if units:
            tokens.extend(map(operator.add, units, units[1:]))
            append(units[-1])


class Stream(NamedTuple):
    """The index token stream of a text with offsets, as parallel lists."""

    tokens: list[str]
    starts: list[int]
    ends: list[int]
    cjk: list[bool]
    """Whether each token is a CJK/symbol token (a bigram or a run's unigram)."""

    def unit_spans(self) -> list[tuple[int, int]]:
        """What a snippet counts as one token: each word, and each CJK/symbol unit."""
        starts, ends, cjk = self.starts, self.ends, self.cjk
        spans: list[tuple[int, int]] = []
        last = len(starts) - 1
        for index, start in enumerate(starts):
            end = ends[index]
            if cjk[index] and index < last and cjk[index + 1] and starts[index + 1] < end:
                end = starts[index + 1]  # a bigram: its first unit
            spans.append((start, end))
        return spans


def stream(text: str) -> Stream:
    """Tokenize ``text`` into a :class:`Stream` (the index stream with offsets into ``text``)."""
    result = Stream([], [], [], [])
    tokens, starts, ends, cjk = result
    if text.isascii():
        for match in _ASCII_WORD.finditer(text.lower()):
            tokens.append(match.group())
            starts.append(match.start())
            ends.append(match.end())
        cjk.extend([False] * len(tokens))
        return result
    folded, merged = fold_for_tokens(text)
    _folded_stream(result, folded)
    if merged:  # a composed voiced mark: folded offsets → offsets into the original
        gone = set(merged)
        origins = [index for index in range(len(text) + 1) if index not in gone]
        starts[:] = [origins[start] for start in starts]
        ends[:] = [origins[end] for end in ends]
    return result


def _folded_stream(result: Stream, text: str) -> None:
    """Add the stream of a width-folded ``text`` to ``result``."""
    tokens, starts, ends, cjk = result
    for needs_scanner, start, end in _segments(text):
        if needs_scanner:
            for piece in _Scanner(text).scan(start, end):
                if isinstance(piece, Word):
                    tokens.append(piece.text)
                    starts.append(piece.start)
                    ends.append(piece.end)
                    cjk.append(False)
                else:
                    tokens.extend(run_tokens(piece.units))
                    starts.extend(piece.starts)
                    ends.extend(piece.ends[1:])
                    ends.append(piece.ends[-1])
                    cjk.extend([True] * len(piece.units))
            continue
        for match in _patterns().fast.finditer(text, start, end):
            first, last = match.span()
            word, run = match.groups()
            if word is None and _EMOJI_SELECTOR in run:
                _add_selected_run(result, run, first)
            elif word is None:
                tokens.extend(map(operator.add, run, run[1:]))
                tokens.append(run[-1])
                starts.extend(range(first, last))
                ends.extend(range(first + 2, last + 1))
                ends.append(last)
                cjk.extend([True] * (last - first))
            else:
                tokens.append(word.lower() if word.isascii() else _normalise(word))
                starts.append(first)
                ends.append(last)
                cjk.append(False)


def _add_selected_run(result: Stream, run: str, first: int) -> None:
    """Add a fast-path run holding emoji variation selectors, which join the unit before them.

    A selector right after a word never reaches here (the scanner handles it); one with nothing
    before it in the run is dropped.
    """
    tokens, starts, ends, cjk = result
    units: list[str] = []
    unit_starts: list[int] = []
    unit_ends: list[int] = []
    for offset, char in enumerate(run, first):
        if char != _EMOJI_SELECTOR:
            units.append(char)
            unit_starts.append(offset)
            unit_ends.append(offset + 1)
        elif units:
            unit_ends[-1] = offset + 1
    if units:
        tokens.extend(run_tokens(units))
        starts.extend(unit_starts)
        ends.extend(unit_ends[1:])
        ends.append(unit_ends[-1])
        cjk.extend([True] * len(units))


def tokenize(text: str) -> list[Token]:
    """Return the index token stream of ``text`` with offsets into the original text.

    The token texts are exactly :func:`index_tokens`; a CJK bigram's offsets cover both units.
    Offsets are into ``text`` as given, also where width folding changed it (``ｶﾞ`` is one unit
    ``ガ`` spanning two characters).

    >>> [(t.text, t.start, t.end) for t in tokenize("修改youer服务")]
    [('修改', 0, 2), ('改', 1, 2), ('youer', 2, 7), ('服务', 7, 9), ('务', 8, 9)]

    .. versionadded:: 0.1.0
    """
    tokens, starts, ends, cjk = stream(text)
    return [
        Token(token, start, end, "cjk" if is_cjk else "word")
        for token, start, end, is_cjk in zip(tokens, starts, ends, cjk, strict=True)
    ]
