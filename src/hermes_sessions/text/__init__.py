r"""Search text: the one tokenizer, query language, matcher, ranking and snippets of every backend.

Every backend (in-memory, JSONL, SQLite FTS5, PostgreSQL) tokenizes with :func:`index_tokens`,
parses with :func:`parse_query` and, where it cannot translate a query exactly, checks candidates
with :meth:`Query.matches`, so all backends agree on what a query matches.

Width folding
-------------
Text and queries are *width-folded* first (:func:`fold_width`), and only width is folded:

* the full-width forms U+FF01 to U+FF5E become ASCII ``!`` to ``~`` (``ＡＰＩ`` is ``API``, ``２``
  is ``2``, ``＃`` is ``#``, ``～`` is ``~``) and the ideographic space U+3000 a space;
* half-width katakana U+FF61 to U+FF9D (the half-width ``｡ ｢ ｣ ､ ･`` included) become their
  full-width forms, and a half-width voiced or semi-voiced mark (``ﾞ`` U+FF9E, ``ﾟ`` U+FF9F)
  composes with the kana before it (``ｶﾞ`` → ``ガ``, ``ﾊﾟ`` → ``パ``, ``ｳﾞ`` → ``ヴ``); where
  Unicode has no composed character (``ｱﾞ``, or a mark with nothing before it) it becomes the
  spacing mark ``゛``/``゜``;
* nothing else: no general NFKC (``①``, ``²``, ``㍿``, half-width Hangul and ``￥`` stay what they
  are), ligatures such as ``ﬁ`` follow case folding (``str.casefold`` makes it ``fi``), and
  still no accent folding.

Folding a folded text changes nothing. The query is folded before it is parsed, so ``ＡＮＤ``,
``ＯＲ``, ``ＮＯＴ``, ``－x``, ``＂a phrase＂`` and ``dock＊`` act as their ASCII forms. Offsets
(:class:`Token`, :func:`match_spans`, :class:`Snippet`) always refer to the original text:
``ｶﾞ`` is one unit ``ガ`` spanning two characters. Changing these rules changes the stream:
:data:`TOKENS_VERSION` says which one a stored index holds.

Tokens
------
The *index token stream* of a text is what the matcher works on and what SQL backends store,
space-joined, in an FTS5 table with the ``ascii`` tokenizer. It is the stream of the
width-folded text. Tokens never contain ASCII punctuation, whitespace or upper-case letters, so
FTS5 sees exactly these tokens.

* **Words**: maximal runs of Unicode letters, digits and combining marks that are not CJK,
  case-folded (``str.casefold``) and NFC-normalised per token; no accent folding (``café`` is
  not ``cafe``); full-width letters are ASCII letters after width folding. ``_``
  separates (``sp_new1`` → ``sp new1``), as does all other punctuation. Control, format and
  zero-width characters (ZWSP, ZWJ, ZWNJ, soft hyphen, BOM, bidi controls) separate like spaces.
* **CJK** characters are Han (all blocks, extensions, compatibility ideographs, radicals),
  ``々 〆``, the ideographic zero, Hiragana, Katakana (phonetic extensions too, ``ー``
  included, the middle dot ``・`` being punctuation; half-width katakana is folded first) and
  Hangul (syllables and all jamo, half-width jamo too).
  **Symbols** (every non-ASCII character of Unicode category ``S*`` — emoji, ``™``, ``©``,
  ``→`` — and private-use or unassigned code points) are treated exactly like CJK characters and
  join CJK runs: ``飞书🚀`` is one run. ASCII symbols (``$ + < = > ^ | ~``) are punctuation.
* A *unit* is one CJK or symbol character plus the combining marks that follow it (a kana's
  decomposed voiced mark, an accent on an emoji) and, for Hangul, the vowel and final jamo of
  a decomposed syllable; units are NFC-normalised and case-folded (compatibility ideographs
  become their unified forms, ``か`` + U+3099 becomes ``が``). Variation selectors are dropped
  everywhere, inside words too (``❤️`` is ``❤``): they choose a glyph, not a character.
* A maximal run of units becomes its overlapping **bigrams plus a terminal unigram** of its last
  unit: ``飞书机器人`` → ``飞书 书机 机器 器人 人``; ``书`` → ``书``. Script changes are
  boundaries: ``修改youer服务端`` → ``修改 改 youer 服务 务端 端``.
* Emoji joined by ZWJ are therefore separate runs (``👨‍👩‍👧`` → ``👨 👩 👧``), each findable;
  skin-tone modifiers and regional indicators are symbols of their own (``🇨🇳`` → ``🇨🇳 🇳``).

Why this stream: a CJK query of one character ``X`` matches "some token starts with ``X``" (FTS5
``"X"*``), two characters are one bigram, three or more the phrase of their bigrams: exact
substring semantics within a run, and nothing matches across runs (the unigram sits between a
run's last bigram and the next run). The terminal unigram also lets a query pin a CJK stretch to
the *end* of a run (``修改youer`` is ``修改 改 youer``), and adjacency to a word pins it to the
start. A CJK unit or a symbol between two words occupies a position, so ``docker部署redis`` does
not contain the phrase ``"docker redis"``, while ``docker-compose`` does contain
``"docker compose"``.

Queries
-------
The query is cut to :data:`MAX_QUERY_LENGTH` characters (a word cut there counts as written),
then width-folded; spaces, controls and format characters separate *words*.

* Words separated by spaces (or by upper-case ``AND``) must all match. Upper-case ``OR`` between
  two words makes them alternatives and binds tighter: ``a b OR c`` is ``a AND (b OR c)``.
  ``NOT word`` and ``-word`` exclude. Lower-case ``and``/``or``/``not``, ``NEAR`` and anything
  else are plain words; parentheses, ``^``, ``:`` and other punctuation are not operators.
* Inside a word the connectors ``- . _ / + # @`` keep one *term*: a token sequence that must
  occur consecutively (``docker-compose``, ``my-app.config.ts``, ``P2.2``). Any other
  punctuation splits the word into separate terms that must all match: ``content:foo`` is
  ``content foo``, and ``飞书`` and ``机器人`` joined by a full-width comma are two terms. A
  term mixing scripts (``修改youer``) is a sequence across the script change.
* ``"a phrase"`` is one term of consecutive tokens, whatever punctuation it holds. An unbalanced
  quote is ignored (it separates like a space).
* ``term*``: the term's last token is a prefix (``dock*``, ``docker-comp*``, ``"docker comp"*``).
  On a CJK term the ``*`` changes nothing (CJK is already substring). ``*`` elsewhere separates.
* Odd combinations: a word that reduces to nothing (``***``, ``-``, ``:``) is dropped first.
  ``OR`` needs a positive term right before and after it, otherwise it is dangling and ignored:
  ``-a OR b`` is ``b -a`` and ``a OR -b`` is ``a -b``. ``NOT`` followed by an operator or by
  nothing is ignored; ``NOT NOT a`` is ``NOT a``. ``-`` and ``NOT`` apply to every term of the
  word that follows (``-content:foo`` excludes ``content`` and ``foo``); ``OR`` binds the nearest
  terms (``a OR content:foo`` is ``(a OR content) foo``). A query without a positive term
  (``NOT docker``, ``-helm``) matches nothing.
* Limits: at most :data:`MAX_QUERY_PHRASES` terms are kept (later ones are dropped, which can
  only widen the result).
* The parser never raises: whatever it cannot read as an operator, a phrase or a word is a
  separator, and what is left is plain words. Hostile input (SQL fragments, FTS syntax, control
  characters, huge strings) is reduced to plain words, possibly none (an empty query).

The normal form (for backend authors)
-------------------------------------
:class:`Query` = ``clauses`` (AND) of :class:`Clause` (OR of :class:`Phrase`) plus
``excluded`` phrases; ``is_empty`` when there are no clauses. A :class:`Phrase` is a tuple of
:class:`TokenPattern` (``text``, ``prefix``) matching consecutive tokens; only the **last**
pattern can be a prefix, so each phrase translates exactly to the FTS5 string
``"t1 t2 ... tn"`` (tokens joined by spaces, followed by ``*`` when the last is a prefix). FTS5
gives ``OR`` a lower precedence than ``AND`` and ``NOT`` the highest, so emit every clause and the
whole exclusion in parentheses: ``(("a") AND ("b" OR "飞书 书机")) NOT ("z")``. With the stream
above that translation is exact (the tests check it against SQLite's FTS5); :meth:`Query.matches`
remains the reference. A :class:`TokenPattern` refuses text that holds ASCII punctuation, spaces
or upper case, so a pattern can be put between double quotes as it is, never needing escapes.

Ranking, index and snippets
---------------------------
:func:`bm25_score` is Okapi BM25 (``k1=1.2``, ``b=0.75``, ``IDF = ln(1 + (N-df+0.5)/(df+0.5))``)
over index tokens; :class:`SearchIndex` is the inverted index of the in-memory and JSONL
backends. :func:`make_snippet` cuts about 40 tokens of the *original* text around the best match
and reports the match offsets; :func:`searchable_text` is what gets indexed for a message.

Blinded streams
---------------
An encrypted store indexes keyed hashes of the tokens instead of the tokens
(:func:`blind_query` for the query side, :func:`query_text` to hand the blinded query to a
backend as text); see ``docs/privacy.md``.

Stored streams
--------------
A backend that stores the stream (SQLite's FTS5 table, PostgreSQL's ``tsvector`` rows) records
:data:`TOKENS_VERSION` beside it. When the stored version differs, the stored tokens are not
what :func:`index_tokens` gives today: the backend must still answer every search exactly (SQLite
and PostgreSQL check candidates with :meth:`Query.matches` on the messages' text) until its
``reindex()`` has rewritten the rows; ``docs/search.md`` describes the migration.

Natural questions
-----------------
:func:`natural_terms` turns a question into content terms (stop words and CJK function words
dropped, English words stemmed, CJK stretches split by what the index holds), :func:`term_count`
checks a text for a term, and :func:`rank_sessions` ranks sessions by coverage and BM25; the
store's ``search(..., mode="natural")`` feeds them with exact searches on any backend.

Modules: ``_width`` (width folding), ``_tokens`` (the stream), ``_query`` (parser, normal form,
matcher), ``_ranking`` (BM25 and :class:`SearchIndex`), ``_snippets``, ``_searchable``,
``_blind``, ``_natural`` (natural questions).
Backends use only the names in ``__all__`` below, never the private modules.

The stream depends on the Unicode database of the running Python (case folding, categories):
re-index after a Python upgrade that changes the Unicode version.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.text._tokens import Token, TokenKind, index_tokens, tokenize
from hermes_sessions.text._width import fold_width

if TYPE_CHECKING:
    from hermes_sessions.text._blind import blind_query, query_text
    from hermes_sessions.text._natural import (
        CJK_FUNCTION_WORDS,
        CONFIDENT_COVERAGE,
        GENERAL_WORDS,
        STOP_WORDS,
        WEAK_COVERAGE,
        Evidence,
        NaturalTerm,
        SessionScore,
        natural_terms,
        rank_sessions,
        stem,
        term_count,
    )
    from hermes_sessions.text._query import (
        MAX_QUERY_LENGTH,
        MAX_QUERY_PHRASES,
        Clause,
        Document,
        Phrase,
        Query,
        TokenPattern,
        match_spans,
        parse_query,
    )
    from hermes_sessions.text._ranking import (
        BM25_B,
        BM25_K1,
        SearchIndex,
        bm25_score,
        scoring_tokens,
    )
    from hermes_sessions.text._searchable import searchable_text
    from hermes_sessions.text._snippets import Snippet, make_snippet
    from hermes_sessions.text._windows import LONG_TEXT, WINDOW, match_window

TOKENS_VERSION: Final = 2
"""The version of the index token stream (:func:`index_tokens`), for backends that store it.

1: the stream before width folding; 2: width folding (see above). A store whose recorded version
differs from this one needs a re-index.

.. versionadded:: 0.1.0
"""

__all__ = [
    "BM25_B",
    "BM25_K1",
    "CJK_FUNCTION_WORDS",
    "CONFIDENT_COVERAGE",
    "GENERAL_WORDS",
    "LONG_TEXT",
    "MAX_QUERY_LENGTH",
    "MAX_QUERY_PHRASES",
    "STOP_WORDS",
    "TOKENS_VERSION",
    "WEAK_COVERAGE",
    "WINDOW",
    "Clause",
    "Document",
    "Evidence",
    "NaturalTerm",
    "Phrase",
    "Query",
    "SearchIndex",
    "SessionScore",
    "Snippet",
    "Token",
    "TokenKind",
    "TokenPattern",
    "blind_query",
    "bm25_score",
    "fold_width",
    "index_tokens",
    "make_snippet",
    "match_spans",
    "match_window",
    "natural_terms",
    "parse_query",
    "query_text",
    "rank_sessions",
    "scoring_tokens",
    "searchable_text",
    "stem",
    "term_count",
    "tokenize",
]

_LAZY: Final = {
    **dict.fromkeys(("blind_query", "query_text"), "_blind"),
    **dict.fromkeys(
        (
            "MAX_QUERY_LENGTH",
            "MAX_QUERY_PHRASES",
            "Clause",
            "Document",
            "Phrase",
            "Query",
            "TokenPattern",
            "match_spans",
            "parse_query",
        ),
        "_query",
    ),
    **dict.fromkeys(
        ("BM25_B", "BM25_K1", "SearchIndex", "bm25_score", "scoring_tokens"), "_ranking"
    ),
    "searchable_text": "_searchable",
    **dict.fromkeys(
        (
            "CJK_FUNCTION_WORDS",
            "CONFIDENT_COVERAGE",
            "GENERAL_WORDS",
            "STOP_WORDS",
            "WEAK_COVERAGE",
            "Evidence",
            "NaturalTerm",
            "SessionScore",
            "natural_terms",
            "rank_sessions",
            "stem",
            "term_count",
        ),
        "_natural",
    ),
    **dict.fromkeys(("Snippet", "make_snippet"), "_snippets"),
    **dict.fromkeys(("LONG_TEXT", "WINDOW", "match_window"), "_windows"),
}
"""The search side (query language, matcher, ranking, snippets), loaded on first use: storing a
message needs only the tokenizer, so the first turn of a process does not load the rest."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_sessions.text' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hermes_sessions.text.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
