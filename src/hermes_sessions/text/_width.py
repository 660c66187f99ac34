"""Width folding: full-width ASCII, the ideographic space and half-width katakana, nothing else.

The rules are specified in :mod:`hermes_sessions.text`. :func:`fold_width` is the public fold.
:func:`fold_for_tokens` is what the tokenizer runs first: it folds only the variants that change
tokens (full-width punctuation and U+3000 separate before and after folding, so it leaves them)
and says which characters merged into the one before them (a composed voiced mark), so the
tokenizer can give offsets into the original text. The tests check that both folds give the
same tokens.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

__all__ = ["fold_for_tokens", "fold_width"]

_IDEOGRAPHIC_SPACE: Final = 0x3000
_FULLWIDTH_FIRST: Final = 0xFF01  # ！ … ～ are ! … ~ shifted by 0xFEE0
_FULLWIDTH_LAST: Final = 0xFF5E
_HALFWIDTH_FIRST: Final = 0xFF61  # ｡ ｢ ｣ ､ ･ and the katakana, up to ﾝ (U+FF9D)
_HALFWIDTH_LAST: Final = 0xFF9D
_VOICED: Final = "\uff9e"  # ﾞ
_SEMI_VOICED: Final = "\uff9f"  # ﾟ
# Each half-width mark: the combining mark it composes as, and the spacing mark it is alone.
_COMBINING: Final = {_VOICED: "\u3099", _SEMI_VOICED: "\u309a"}
_SPACING: Final = {_VOICED: "\u309b", _SEMI_VOICED: "\u309c"}


def _halfwidth_table() -> dict[int, int]:
    """Half-width katakana and punctuation → their full-width forms (Unicode's ``<narrow>``).

    Every character of the range has one (the tests check it).
    """
    table = {}
    for code in range(_HALFWIDTH_FIRST, _HALFWIDTH_LAST + 1):
        kind, _, target = unicodedata.decomposition(chr(code)).partition(" ")
        if kind == "<narrow>":
            table[code] = int(target, 16)
    return table


_TABLE: Final[dict[int, int]] = {
    _IDEOGRAPHIC_SPACE: 0x20,
    **{code: code - 0xFEE0 for code in range(_FULLWIDTH_FIRST, _FULLWIDTH_LAST + 1)},
    **_halfwidth_table(),
}
_VARIANT: Final = re.compile("[\u3000\uff01-\uff5e\uff61-\uff9f]")
_VARIANT_RUN: Final = re.compile("[\u3000\uff01-\uff5e\uff61-\uff9d]+")
# The variants whose folding changes the token stream: letters, digits, symbols (＄ ＋ ＜ ＝ ＞
# ＾ ｀ ｜ ～ become ASCII separators) and the katakana. The other variants are punctuation and a
# space, separators before and after folding, so the tokenizer leaves them.
_TOKEN_VARIANT_RUN: Final = re.compile(
    "["
    + "".join(
        chr(code)
        for code in range(_FULLWIDTH_FIRST, _FULLWIDTH_LAST + 1)
        if unicodedata.category(chr(code))[0] != "P"
    )
    + "\uff66-\uff9d]+"
)
_MARK: Final = re.compile("[\uff9e\uff9f]")


def _translate(match: re.Match[str]) -> str:
    return match.group().translate(_TABLE)


@functools.lru_cache(maxsize=1024)
def _composed(before: str, mark: str) -> str | None:
    """The one character ``before`` and a half-width ``mark`` compose into, if Unicode has it."""
    composed = unicodedata.normalize("NFC", before + _COMBINING[mark])
    return composed if len(composed) == 1 else None


def _compose_marks(text: str) -> tuple[str, list[int]]:
    """Compose or space the half-width marks of an otherwise folded text.

    Returns the text and the positions of the marks that merged into the character before them.
    A mark right after another mark never composes: the one before is spacing or already taken.
    """
    pieces: list[str] = []
    merged: list[int] = []
    last = 0
    for match in _MARK.finditer(text):
        index, mark = match.start(), match.group()
        composed = _composed(text[index - 1], mark) if index > last else None
        if composed is None:
            pieces += [text[last:index], _SPACING[mark]]
        else:
            pieces += [text[last : index - 1], composed]
            merged.append(index)
        last = index + 1
    pieces.append(text[last:])
    return "".join(pieces), merged


def fold_width(text: str) -> str:
    """Fold the width variants in ``text``: full-width ASCII, U+3000, half-width katakana.

    ``！`` to ``～`` (U+FF01 to U+FF5E) become ASCII ``!`` to ``~``, the ideographic space U+3000
    a space, and half-width katakana (with ``｡ ｢ ｣ ､ ･``) their full-width forms; a half-width
    voiced or semi-voiced mark (``ﾞ`` ``ﾟ``) composes with the kana before it, or becomes the
    spacing mark ``゛``/``゜`` where no composed character exists. Nothing else changes: no
    compatibility folding (``①``, ``²``, ``㍿`` stay), no case or accent folding. Idempotent.

    >>> fold_width("ＡＰＩ　ｶﾞｲﾄﾞ（ｖ２）")
    'API ガイド(v2)'

    .. versionadded:: 0.1.0
    """
    if _VARIANT.search(text) is None:
        return text
    folded = _VARIANT_RUN.sub(_translate, text)
    return _compose_marks(folded)[0] if _MARK.search(folded) else folded


def fold_for_tokens(text: str) -> tuple[str, list[int]]:
    """The fold the tokenizer runs: the variants that change tokens, and which characters merged.

    The second value lists, ascending, the positions in ``text`` of the half-width marks that
    composed into the character before them (``ｶﾞ`` → ``ガ``); every other character of the
    folded text stands for one character of ``text``, in order.
    """
    # A search first: on the common text without variants it costs a third of a ``sub``.
    folded = _TOKEN_VARIANT_RUN.sub(_translate, text) if _TOKEN_VARIANT_RUN.search(text) else text
    if _VOICED in folded or _SEMI_VOICED in folded:
        return _compose_marks(folded)
    return folded, []
