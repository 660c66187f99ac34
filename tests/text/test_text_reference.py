"""The matcher, the index and FTS5 agree with a simple reference implementation of the rules.

The reference below is written from the rules of DESIGN §6 alone: it splits a text into Latin
words and CJK runs by looking at each character, matches Latin terms by comparing whole words,
CJK terms with ``in``/``startswith``/``endswith`` on the runs, and sequences by walking the list
of segments. Queries are generated as a structure, rendered to query text, parsed by
``parse_query`` and compared with the reference evaluated on the structure.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hermes_sessions.text import Document, Query, SearchIndex, index_tokens, parse_query

LATIN = "abcxAB1"
CJK = "飞书机器🚀"  # the rocket is a symbol: symbols behave like CJK characters
SEPARATORS = [" ", " ", "-", "_", ".", ",", "\uff0c", ":", "\n"]
DOC_ALPHABET = list(LATIN + CJK + CJK) + SEPARATORS
CONNECTORS = list("-._/+#@")
WORDS = ["a", "b", "c", "ab", "ba", "abc", "x", "a1", "1"]


# -- the reference ---------------------------------------------------------------------------------


def segments(text: str) -> list[tuple[str, str]]:
    """Split text into ("w", lower-case word) and ("c", CJK run), skipping everything else."""
    result: list[tuple[str, str]] = []
    current_kind, current = "", ""
    for char in text:
        kind = "w" if char.isascii() and char.isalnum() else "c" if char in CJK else ""
        if kind != current_kind and current:
            result.append((current_kind, current))
            current = ""
        current_kind = kind
        if kind:
            current += char.lower()
    if current:
        result.append((current_kind, current))
    return result


@dataclass(frozen=True)
class Term:
    """A query term: items ("w", word) / ("c", cjk text), matched on consecutive segments."""

    items: tuple[tuple[str, str], ...]
    prefix: bool = False

    def found_in(self, text: str) -> bool:
        """Whether the term occurs in the text."""
        segs = segments(text)
        count = len(self.items)
        return any(self._at(segs[start : start + count]) for start in range(len(segs)))

    def _at(self, segs: list[tuple[str, str]]) -> bool:
        if len(segs) < len(self.items):
            return False
        last = len(self.items) - 1
        for index, ((kind, value), (seg_kind, seg)) in enumerate(
            zip(self.items, segs, strict=True)
        ):
            if kind != seg_kind:
                return False
            if kind == "w":
                ok = seg.startswith(value) if self.prefix and index == last else seg == value
            elif last == 0:
                ok = value in seg
            elif index == 0:
                ok = seg.endswith(value)
            elif index == last:
                ok = seg.startswith(value)
            else:
                ok = seg == value
            if not ok:
                return False
        return True


@dataclass(frozen=True)
class RefQuery:
    """A query: clauses of alternative terms, and excluded terms."""

    clauses: tuple[tuple[Term, ...], ...]
    negatives: tuple[Term, ...]

    def found_in(self, text: str) -> bool:
        """Whether the query matches the text."""
        if not self.clauses:
            return False
        return all(any(t.found_in(text) for t in c) for c in self.clauses) and not any(
            t.found_in(text) for t in self.negatives
        )


# -- generating queries ----------------------------------------------------------------------------

word_items = st.sampled_from(WORDS[:5]).map(lambda w: ("w", w))
cjk_items = st.one_of(
    st.text(alphabet=CJK, min_size=1, max_size=2), st.text(alphabet=CJK, min_size=1, max_size=3)
).map(lambda c: ("c", c))


@st.composite
def terms(draw) -> tuple[Term, str]:
    """A term and its query text: a word, a CJK string, a compound, a mixed term or a phrase."""
    items = draw(st.lists(st.one_of(word_items, cjk_items), min_size=1, max_size=3))
    items = items[: draw(st.sampled_from([1, 1, 2, 3]))]
    phrase = draw(st.booleans()) and len(items) > 1
    parts = [items[0][1]]
    merged = [items[0]]
    for item in items[1:]:
        previous = merged[-1]
        if item[0] == previous[0] or phrase:  # same kind must be separated to stay two items
            parts.append(" " if phrase else draw(st.sampled_from(CONNECTORS)))
        elif draw(st.booleans()):  # a script change needs no separator, but may have one
            parts.append(draw(st.sampled_from(CONNECTORS)))
        parts.append(item[1])
        merged.append(item)
    body = "".join(parts)
    if any(part in {"AND", "OR", "NOT"} for part in body.split()):
        body = body.lower()
    prefix = draw(st.booleans())
    text = (f'"{body}"' if phrase else body) + ("*" if prefix else "")
    last_is_word = merged[-1][0] == "w"
    return Term(tuple(merged), prefix=prefix and last_is_word), text


@st.composite
def queries(draw) -> tuple[RefQuery, str]:
    """A query structure and its rendering as query text."""
    clauses = draw(st.lists(st.lists(terms(), min_size=1, max_size=3), min_size=1, max_size=2))
    negatives = draw(st.lists(terms(), max_size=1))
    pieces = [" OR ".join(text for _term, text in clause) for clause in clauses]
    for _term, text in negatives:
        position = draw(st.integers(0, len(pieces)))
        pieces.insert(position, ("NOT " if draw(st.booleans()) else "-") + text)
    joiner = draw(st.sampled_from([" ", " AND ", "  "]))
    reference = RefQuery(
        tuple(tuple(term for term, _text in clause) for clause in clauses),
        tuple(term for term, _text in negatives),
    )
    return reference, joiner.join(pieces)


fragments = st.one_of(
    st.sampled_from(WORDS).map(lambda w: w.upper() if w == "ab" else w),
    st.text(alphabet=CJK, min_size=1, max_size=4),
    st.sampled_from(SEPARATORS),
    st.sampled_from(SEPARATORS),
)
# Documents are made of the fragments queries use, so that a good share of them match.
documents = st.one_of(
    st.lists(fragments, max_size=10).map("".join),
    st.text(alphabet=DOC_ALPHABET, max_size=25),
)
corpora = st.lists(documents, min_size=1, max_size=12)


# -- the reference itself behaves as the rules say -------------------------------------------------


def test_reference_splits_scripts():
    """The reference sees words and CJK runs, separated by anything else."""
    assert segments("修书ab飞 A-1") == [
        ("c", "书"),
        ("w", "ab"),
        ("c", "飞"),
        ("w", "a"),
        ("w", "1"),
    ]


# -- agreement -------------------------------------------------------------------------------------


@st.composite
def witnesses(draw, reference: RefQuery) -> str:
    """A document holding one of the query's terms between random fragments."""
    terms_ = [term for clause in reference.clauses for term in clause] + list(reference.negatives)
    term = draw(st.sampled_from(terms_))
    body = ""
    for index, (kind, value) in enumerate(term.items):
        if index and (kind == term.items[index - 1][0] or draw(st.booleans())):
            body += draw(st.sampled_from([" ", "-", "\uff0c", "_"]))
        body += value.upper() if draw(st.booleans()) else value
    before = "".join(draw(st.lists(fragments, max_size=3)))
    after = "".join(draw(st.lists(fragments, max_size=3)))
    return before + body + after


@settings(deadline=None, max_examples=400)
@given(queries(), corpora, st.data())
def test_matcher_agrees_with_reference(query, corpus, data):
    """``parse_query(...).matches`` agrees with the reference on every document."""
    reference, text = query
    parsed = parse_query(text)
    corpus += data.draw(st.lists(witnesses(reference), max_size=4))
    for doc in corpus:
        assert parsed.matches(Document.from_text(doc)) == reference.found_in(doc), (text, doc)


@settings(deadline=None, max_examples=200)
@given(queries(), corpora, st.data())
def test_search_index_returns_exactly_the_matching_documents(query, corpus, data):
    """``SearchIndex.search`` finds exactly the documents the matcher accepts."""
    _reference, text = query
    parsed = parse_query(text)
    index = SearchIndex()
    texts = dict(enumerate(corpus))
    for doc_id, doc in texts.items():
        index.add(doc_id, doc)
    for doc_id in data.draw(st.lists(st.sampled_from(sorted(texts)), max_size=3)):
        index.remove(doc_id)
        texts.pop(doc_id, None)  # removing twice is a no-op
    if texts and data.draw(st.booleans()):
        doc_id = data.draw(st.sampled_from(sorted(texts)))
        texts[doc_id] = data.draw(documents)
        index.replace(doc_id, texts[doc_id])
    expected = {i for i, doc in texts.items() if parsed.matches(Document.from_text(doc))}
    hits = index.search(parsed)
    assert {doc_id for doc_id, _score in hits} == expected
    assert len(hits) == len(expected)


@settings(deadline=None, max_examples=150)
@given(st.lists(st.text(alphabet=DOC_ALPHABET, max_size=40), min_size=1, max_size=15))
def test_every_cjk_substring_finds_exactly_the_messages_containing_it(corpus):
    """Each 1-, 2- and 3-character CJK substring has precision and recall 1.0."""
    index = SearchIndex()
    for doc_id, doc in enumerate(corpus):
        index.add(doc_id, doc)
    needles = {
        doc[start : start + size]
        for doc in corpus
        for size in (1, 2, 3)
        for start in range(len(doc) - size + 1)
        if all(char in CJK for char in doc[start : start + size])
    }
    for needle in needles:
        expected = {doc_id for doc_id, doc in enumerate(corpus) if needle in doc}
        assert {doc_id for doc_id, _ in index.search(parse_query(needle))} == expected, needle
        for doc_id, doc in enumerate(corpus):
            found = parse_query(needle).matches(Document.from_text(doc))
            assert found == (doc_id in expected)


# -- FTS5 ------------------------------------------------------------------------------------------


def fts5_expression(query: Query) -> str:
    """The recommended translation of the normal form into an FTS5 MATCH expression."""

    def phrase(p):
        return '"' + " ".join(p.tokens) + '"' + ("*" if p.prefix else "")

    positive = " AND ".join(
        "(" + " OR ".join(phrase(p) for p in clause.phrases) + ")" for clause in query.clauses
    )
    if not query.excluded:
        return positive
    return f"({positive}) NOT (" + " OR ".join(phrase(p) for p in query.excluded) + ")"


def fts5_available() -> bool:
    """Whether this Python's SQLite has FTS5."""
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    return True


needs_fts5 = pytest.mark.skipif(not fts5_available(), reason="this SQLite has no FTS5")


@needs_fts5
def test_fts5_translation_example():
    """The documented translation of a mixed query runs in FTS5 and finds the right rows."""
    query = parse_query('a b OR 飞书机 "x y" -z tok*')
    assert fts5_expression(query) == (
        '(("a") AND ("b" OR "飞书 书机") AND ("x y") AND ("tok"*)) NOT ("z")'
    )
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='ascii', prefix='1')")
    rows = ["a 飞书机器 x-y tokens", "a b x y tok", "a b x y tok z", "a 飞书 机 x y tok"]
    for row in rows:
        db.execute("INSERT INTO t(body) VALUES (?)", (" ".join(index_tokens(row)),))
    found = db.execute(
        "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid", (fts5_expression(query),)
    ).fetchall()
    assert [rowid for (rowid,) in found] == [1, 2]


@needs_fts5
@settings(deadline=None, max_examples=150)
@given(queries(), corpora)
def test_fts5_translation_agrees_with_matcher(query, corpus):
    """FTS5 over the stored stream, queried with the translation, finds what the matcher does."""
    _reference, text = query
    parsed = parse_query(text)
    assume(not parsed.is_empty)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='ascii')")
    for doc in corpus:
        db.execute("INSERT INTO t(body) VALUES (?)", (" ".join(index_tokens(doc)),))
    found = {
        rowid - 1
        for (rowid,) in db.execute(
            "SELECT rowid FROM t WHERE t MATCH ?", (fts5_expression(parsed),)
        )
    }
    expected = {i for i, doc in enumerate(corpus) if parsed.matches(Document.from_text(doc))}
    assert found == expected, fts5_expression(parsed)
