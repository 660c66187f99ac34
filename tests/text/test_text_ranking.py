"""BM25 scoring and the in-memory search index."""

from __future__ import annotations

import math

import pytest

from hermes_sessions.text import (
    BM25_B,
    BM25_K1,
    Document,
    SearchIndex,
    bm25_score,
    parse_query,
    scoring_tokens,
)


def score(query: str, text: str, *, corpus: list[str]) -> float:
    """BM25 of ``text`` for ``query`` with statistics taken from ``corpus``."""
    documents = [Document.from_text(doc) for doc in corpus]
    return bm25_score(
        parse_query(query),
        Document.from_text(text),
        document_count=len(documents),
        average_length=sum(map(len, documents)) / len(documents),
        document_frequency=lambda token: sum(token in d.positions for d in documents),
    )


# -- BM25 ------------------------------------------------------------------------------------------


def test_bm25_constants_are_the_standard_ones():
    """``k1`` is 1.2 and ``b`` is 0.75."""
    assert (BM25_K1, BM25_B) == (1.2, 0.75)


def test_bm25_matches_the_okapi_formula():
    """The score is IDF times the saturated, length-normalised term frequency."""
    corpus = ["docker docker compose", "podman", "helm chart", "docker"]
    idf = math.log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    tf_part = 2 * (1.2 + 1) / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / 1.75))
    assert score("docker", corpus[0], corpus=corpus) == pytest.approx(idf * tf_part)


def test_bm25_prefers_rarer_tokens():
    """A match on a rare token scores higher than one on a common token."""
    corpus = ["common rare", "common", "common", "common"]
    assert score("rare", "rare x", corpus=corpus) > score("common", "common x", corpus=corpus)


def test_bm25_rewards_term_frequency():
    """More occurrences score higher."""
    corpus = ["a b", "a a a b", "c"]
    assert score("a", "a a a b", corpus=corpus) > score("a", "a b c d", corpus=corpus)


def test_bm25_prefers_shorter_documents():
    """At equal frequency, a shorter document scores higher."""
    corpus = ["a", "a b c d e f g h"]
    assert score("a", "a", corpus=corpus) > score("a", "a b c d e f g h", corpus=corpus)


def test_bm25_idf_never_goes_negative():
    """A token in every document still scores above zero."""
    assert score("a", "a", corpus=["a", "a b", "a c"]) > 0


def test_bm25_survives_inconsistent_statistics():
    """A document frequency above the document count gives zero weight, not a negative one."""
    document = Document.from_text("a")
    query = parse_query("a")
    stats = {"document_count": 1, "average_length": 1.0}
    assert bm25_score(query, document, **stats, document_frequency=lambda _t: 5) == 0.0


def test_bm25_of_a_document_without_query_tokens_is_zero():
    """A document that holds none of the query's tokens scores zero."""
    assert score("zzz", "a b", corpus=["a b"]) == 0.0


def test_bm25_with_zero_average_length():
    """An all-empty corpus does not divide by zero."""
    query = parse_query("a")
    result = bm25_score(
        query,
        Document.from_text("a"),
        document_count=1,
        average_length=0.0,
        document_frequency=lambda _t: 1,
    )
    assert result > 0


def test_scoring_tokens_are_the_query_tokens():
    """CJK terms are scored on their bigrams; exclusions do not count."""
    query = parse_query("docker 飞书机 -helm")
    assert scoring_tokens(query, Document.from_text("x")) == ["docker", "飞书", "书机"]


def test_scoring_tokens_expand_prefixes_within_the_document():
    """A prefix is scored on the document's tokens that it accepts."""
    query = parse_query("dock* 书")
    document = Document.from_text("docker dockerfile 飞书机 书")
    assert scoring_tokens(query, document) == ["docker", "dockerfile", "书机", "书"]


# -- the index -------------------------------------------------------------------------------------


def test_index_finds_and_ranks():
    """Search returns matching ids, the more relevant first, with positive scores."""
    index = SearchIndex()
    index.add(1, "docker compose")
    index.add(2, "docker docker docker")
    index.add(3, "helm")
    hits = index.search(parse_query("docker"))
    assert [doc_id for doc_id, _ in hits] == [2, 1]
    assert all(score > 0 for _, score in hits)


@pytest.mark.parametrize(
    "query",
    ["docker", "dock*", "书", "飞书机器", "docker-compose OR 书", "a* -docker", "doc* dock*"],
)
def test_index_scores_are_bm25_with_index_statistics(query):
    """The index ranks with exactly ``bm25_score`` over its own statistics."""
    corpus = [
        "docker compose up",
        "Dockerfile and docker",
        "飞书机器人 书",
        "a b c docker",
        "ab abc 书机",
        "",
    ]
    index = SearchIndex()
    for doc_id, text in enumerate(corpus):
        index.add(doc_id, text)
    parsed = parse_query(query)
    hits = index.search(parsed)
    assert hits
    for doc_id, found in hits:
        assert found == pytest.approx(score(query, corpus[doc_id], corpus=corpus))


def test_index_ties_go_to_the_newer_id():
    """Equal scores are ordered by descending id (newer messages first)."""
    index = SearchIndex()
    for doc_id in (1, 2, 3):
        index.add(doc_id, "same text")
    assert [doc_id for doc_id, _ in index.search(parse_query("same"))] == [3, 2, 1]


def test_index_limit_keeps_the_best():
    """``limit`` keeps the best hits only."""
    index = SearchIndex()
    index.add(1, "a")
    index.add(2, "a a a")
    index.add(3, "a a")
    assert [doc_id for doc_id, _ in index.search(parse_query("a"), limit=2)] == [2, 3]


def test_index_accept_filters_hits():
    """``accept`` vetoes documents, and is only asked about matching ones."""
    index = SearchIndex()
    for doc_id in range(5):
        index.add(doc_id, "even" if doc_id % 2 == 0 else "odd")
    asked = []

    def accept(doc_id):
        asked.append(doc_id)
        return doc_id != 2

    hits = index.search(parse_query("even"), accept=accept)
    assert sorted(doc_id for doc_id, _ in hits) == [0, 4]
    assert sorted(asked) == [0, 2, 4]


def test_index_remove_forgets_a_document():
    """A removed document is no longer found; removing it again does nothing."""
    index = SearchIndex()
    index.add(1, "docker")
    index.add(2, "docker")
    index.remove(1)
    index.remove(1)
    assert [doc_id for doc_id, _ in index.search(parse_query("docker"))] == [2]
    assert 1 not in index
    assert 2 in index
    assert len(index) == 1


def test_index_remove_drops_unused_tokens():
    """Removing the last document holding a token drops the token and its prefix bucket."""
    index = SearchIndex()
    index.add(1, "docker")
    index.remove(1)
    assert repr(index) == "<SearchIndex documents=0 tokens=0>"
    assert index.search(parse_query("dock*")) == []


def test_index_replace_reindexes():
    """``replace`` (and ``add`` on a known id) re-indexes the new text."""
    index = SearchIndex()
    index.add(1, "old text")
    index.replace(1, "new text")
    assert index.search(parse_query("old")) == []
    assert [doc_id for doc_id, _ in index.search(parse_query("new"))] == [1]
    assert len(index) == 1


def test_index_finds_cjk_by_one_character():
    """A one-character CJK query finds every document containing it."""
    index = SearchIndex()
    index.add(1, "飞书机器人")
    index.add(2, "书")
    index.add(3, "飞机")
    assert sorted(doc_id for doc_id, _ in index.search(parse_query("书"))) == [1, 2]


def test_index_prefix_search():
    """Latin prefixes are found through the vocabulary."""
    index = SearchIndex()
    index.add(1, "Dockerfile")
    index.add(2, "docker")
    index.add(3, "podman")
    assert sorted(doc_id for doc_id, _ in index.search(parse_query("dock*"))) == [1, 2]


def test_index_or_and_not():
    """OR unites, AND intersects, NOT excludes."""
    index = SearchIndex()
    index.add(1, "a b")
    index.add(2, "a c")
    index.add(3, "a b c")
    index.add(4, "b c")
    found = index.search(parse_query("a b OR c -b"))
    assert [doc_id for doc_id, _ in found] == [2]


def test_index_empty_query_and_empty_index():
    """An empty query or an empty index finds nothing."""
    index = SearchIndex()
    assert index.search(parse_query("a")) == []
    index.add(1, "a")
    assert index.search(parse_query("-a")) == []


def test_index_document_access():
    """``document`` returns the indexed document, or ``None``."""
    index = SearchIndex()
    index.add(7, "hello world")
    assert index.document(7) == Document.from_text("hello world")
    assert index.document(8) is None


def test_index_handles_empty_texts():
    """Documents without tokens can be added and removed."""
    index = SearchIndex()
    index.add(1, "")
    index.add(2, "a")
    assert [doc_id for doc_id, _ in index.search(parse_query("a"))] == [2]
    index.remove(1)
    assert len(index) == 1
