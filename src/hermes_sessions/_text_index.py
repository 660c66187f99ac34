"""BM25 ranking and the in-memory inverted index used by the in-memory and JSONL backends."""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions._text_query import Document

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable

    from hermes_sessions._text_query import Phrase, Query, TokenPattern

__all__ = ["BM25_B", "BM25_K1", "SearchIndex", "bm25_score", "scoring_tokens"]

BM25_K1: Final = 1.2
"""BM25 term-frequency saturation."""
BM25_B: Final = 0.75
"""BM25 length normalisation."""


def scoring_tokens(query: Query, document: Document) -> list[str]:
    """The distinct tokens that BM25 scores ``document`` on for ``query``.

    Every exact token of the query's positive phrases (for CJK, the bigrams and unigrams they
    were turned into), plus each of the document's tokens that a prefix pattern accepts.
    Excluded phrases do not count.
    """
    tokens: dict[str, None] = {}
    for phrase in query.positive_phrases():
        for pattern in phrase.patterns:
            if pattern.prefix:
                tokens.update(
                    dict.fromkeys(t for t in document.positions if t.startswith(pattern.text))
                )
            else:
                tokens[pattern.text] = None
    return list(tokens)


def bm25_score(
    query: Query,
    document: Document,
    *,
    document_count: int,
    average_length: float,
    document_frequency: Callable[[str], int],
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> float:
    """Score ``document`` for ``query`` with Okapi BM25 (higher is better, never negative).

    ``IDF = ln(1 + (N - df + 0.5) / (df + 0.5))``, which stays positive for common tokens; the
    document length is its number of index tokens. Scores are comparable within one corpus.

    Args:
        query: The parsed query; its positive phrases are scored, see :func:`scoring_tokens`.
        document: The document to score.
        document_count: ``N``, the number of documents in the corpus.
        average_length: The corpus's mean document length in tokens.
        document_frequency: How many documents contain a token.
        k1: Term-frequency saturation.
        b: Length normalisation.
    """
    length_norm = k1 * (1.0 - b + b * len(document) / average_length) if average_length else k1
    score = 0.0
    for token in scoring_tokens(query, document):
        frequency = len(document.positions.get(token, ()))
        if not frequency:
            continue
        df = document_frequency(token)
        idf = math.log1p(max(document_count - df + 0.5, 0.0) / (df + 0.5))
        score += idf * frequency * (k1 + 1.0) / (frequency + length_norm)
    return score


@attrs.define
class SearchIndex:
    """An in-memory inverted index over integer document ids (message ids).

    Candidates come from posting lists (intersected across a clause's AND, united across an
    OR, prefixes looked up by first character); every candidate is verified with the shared
    matcher and ranked with BM25 over this index's own statistics. Not thread-safe: callers
    hold their own lock around every call.

    .. versionadded:: 0.1.0
    """

    _documents: dict[int, Document] = attrs.field(factory=dict, init=False)
    _postings: dict[str, set[int]] = attrs.field(factory=dict, init=False)
    _by_first_char: dict[str, set[str]] = attrs.field(factory=dict, init=False)
    _total_length: int = attrs.field(default=0, init=False)

    def __repr__(self) -> str:
        return f"<SearchIndex documents={len(self._documents)} tokens={len(self._postings)}>"

    def __len__(self) -> int:
        return len(self._documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._documents

    def add(self, doc_id: int, text: str) -> None:
        """Index ``text`` under ``doc_id``, replacing what was indexed under it before."""
        self.remove(doc_id)
        document = Document.from_text(text)
        self._documents[doc_id] = document
        self._total_length += len(document)
        for token in document.positions:
            posting = self._postings.get(token)
            if posting is None:
                self._postings[token] = {doc_id}
                self._by_first_char.setdefault(token[0], set()).add(token)
            else:
                posting.add(doc_id)

    def replace(self, doc_id: int, text: str) -> None:
        """Re-index ``doc_id`` with new text (an edit); the same as :meth:`add`."""
        self.add(doc_id, text)

    def remove(self, doc_id: int) -> None:
        """Forget ``doc_id``; nothing happens if it is not indexed."""
        document = self._documents.pop(doc_id, None)
        if document is None:
            return
        self._total_length -= len(document)
        for token in document.positions:
            posting = self._postings[token]
            posting.discard(doc_id)
            if not posting:
                del self._postings[token]
                bucket = self._by_first_char[token[0]]
                bucket.discard(token)
                if not bucket:
                    del self._by_first_char[token[0]]

    def document(self, doc_id: int) -> Document | None:
        """The indexed document for ``doc_id``, if any."""
        return self._documents.get(doc_id)

    def search(
        self,
        query: Query,
        *,
        accept: Callable[[int], bool] | None = None,
        limit: int | None = None,
    ) -> list[tuple[int, float]]:
        """Return ``(doc_id, score)`` for every document matching ``query``, best first.

        Ties in score go to the higher (newer) id. ``accept`` is asked about each matching
        document and can veto it (filters on role, session, time, ...); ``limit`` keeps the best
        ``limit`` hits.
        """
        if query.is_empty or not self._documents:
            return []
        hits: list[tuple[float, int]] = []
        for doc_id in self._candidates(query):
            document = self._documents[doc_id]
            if not query.matches(document) or (accept is not None and not accept(doc_id)):
                continue
            hits.append((self._score(query, document), doc_id))
        best = sorted(hits, reverse=True) if limit is None else heapq.nlargest(limit, hits)
        return [(doc_id, score) for score, doc_id in best]

    def _score(self, query: Query, document: Document) -> float:
        count = len(self._documents)
        return bm25_score(
            query,
            document,
            document_count=count,
            average_length=self._total_length / count,
            document_frequency=lambda token: len(self._postings.get(token, ())),
        )

    def _candidates(self, query: Query) -> Collection[int]:
        clause_sets = [
            _union(self._phrase_candidates(phrase) for phrase in clause.phrases)
            for clause in query.clauses
        ]
        return _intersection(clause_sets)

    def _phrase_candidates(self, phrase: Phrase) -> Collection[int]:
        return _intersection([self._pattern_candidates(p) for p in phrase.patterns])

    def _pattern_candidates(self, pattern: TokenPattern) -> Collection[int]:
        if not pattern.prefix:
            return self._postings.get(pattern.text, ())
        text = pattern.text
        bucket = self._by_first_char.get(text[0], ())
        return _union(self._postings[token] for token in bucket if token.startswith(text))


def _union(sets: Iterable[Collection[int]]) -> Collection[int]:
    result: set[int] = set()
    for found in sets:
        result.update(found)
    return result


def _intersection(sets: list[Collection[int]]) -> Collection[int]:
    ordered = sorted(sets, key=len)
    result = set(ordered[0])
    for found in ordered[1:]:
        if not result:
            break
        result.intersection_update(found)
    return result
