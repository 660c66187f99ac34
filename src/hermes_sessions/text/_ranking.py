"""BM25 ranking and the in-memory inverted index used by the in-memory and JSONL backends."""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.text._query import Document

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Sequence

    from hermes_sessions.text._query import Phrase, Query, TokenPattern

__all__ = ["BM25_B", "BM25_K1", "SearchIndex", "bm25_score", "scoring_tokens"]

BM25_K1: Final = 1.2
"""BM25 term-frequency saturation.

.. versionadded:: 0.1.0
"""
BM25_B: Final = 0.75
"""BM25 length normalisation.

.. versionadded:: 0.1.0
"""


def scoring_tokens(query: Query, document: Document) -> list[str]:
    """The distinct tokens that BM25 scores ``document`` on for ``query``.

    Every exact token of the query's positive phrases (for CJK, the bigrams and unigrams they
    were turned into), plus each of the document's tokens that a prefix pattern accepts.
    Excluded phrases do not count.

    .. versionadded:: 0.1.0
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


def _idf(document_count: int, document_frequency: int) -> float:
    """``ln(1 + (N - df + 0.5) / (df + 0.5))``, clamped at zero for inconsistent statistics."""
    return math.log1p(
        max(document_count - document_frequency + 0.5, 0.0) / (document_frequency + 0.5)
    )


def _saturation(length: int, average_length: float, k1: float, b: float) -> float:
    """The length-normalised ``k1`` term of a document."""
    return k1 * (1.0 - b + b * length / average_length) if average_length else k1


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

    .. versionadded:: 0.1.0
    """
    saturation = _saturation(len(document), average_length, k1, b)
    score = 0.0
    for token in scoring_tokens(query, document):
        frequency = len(document.positions.get(token, ()))
        if frequency:
            idf = _idf(document_count, document_frequency(token))
            score += idf * frequency * (k1 + 1.0) / (frequency + saturation)
    return score


@attrs.define
class SearchIndex:
    """An in-memory inverted index over integer document ids (message ids).

    Candidates come from posting lists (intersected across a clause's AND, united across an
    OR, prefixes looked up by first character); candidates that posting lists cannot decide
    (phrases of several tokens) are verified with the shared matcher, and hits are ranked with
    BM25 over this index's own statistics. Not thread-safe: callers hold their own lock around
    every call.

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
        candidates = self._candidates(query)
        # Posting lists decide single-token phrases exactly; longer ones need the matcher.
        exact = all(len(phrase.patterns) == 1 for phrase in query.phrases())
        if exact and query.excluded:
            excluded = _union(self._phrase_candidates(phrase) for phrase in query.excluded)
            candidates = [doc_id for doc_id in candidates if doc_id not in excluded]
        scorer = self._scorer(query)
        hits: list[tuple[float, int]] = []
        for doc_id in candidates:
            document = self._documents[doc_id]
            if (exact or query.matches(document)) and (accept is None or accept(doc_id)):
                hits.append((scorer.score(document), doc_id))
        best = sorted(hits, reverse=True) if limit is None else heapq.nlargest(limit, hits)
        return [(doc_id, score) for score, doc_id in best]

    def _scorer(self, query: Query) -> _Scorer:
        patterns = [p for phrase in query.positive_phrases() for p in phrase.patterns]
        exact = list(dict.fromkeys(p.text for p in patterns if not p.prefix))
        expanded = {t for p in patterns if p.prefix for t in self._expand(p.text)}
        return _Scorer(
            self._postings,
            document_count=len(self._documents),
            average_length=self._total_length / len(self._documents),
            exact=exact,
            expanded=expanded.difference(exact),
        )

    def _expand(self, prefix: str) -> list[str]:
        """Every indexed token starting with ``prefix``."""
        bucket = self._by_first_char.get(prefix[0], ())
        return [token for token in bucket if token.startswith(prefix)]

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
        return _union(self._postings[token] for token in self._expand(pattern.text))


class _Scorer:
    """BM25 for one search of one index: the query's tokens resolved once, IDFs cached.

    Gives the scores :func:`bm25_score` gives with the index's statistics.
    """

    __slots__ = ("_average", "_count", "_exact", "_expanded", "_idf", "_postings")

    def __init__(
        self,
        postings: dict[str, set[int]],
        *,
        document_count: int,
        average_length: float,
        exact: list[str],
        expanded: set[str],
    ) -> None:
        self._postings = postings
        self._count = document_count
        self._average = average_length
        self._exact = exact  # the query's exact tokens
        self._expanded = expanded  # indexed tokens that a prefix accepts, minus the exact ones
        self._idf: dict[str, float] = {}

    def _weight(self, token: str, frequency: int, saturation: float) -> float:
        idf = self._idf.get(token)
        if idf is None:
            idf = self._idf[token] = _idf(self._count, len(self._postings[token]))
        return idf * frequency * (BM25_K1 + 1.0) / (frequency + saturation)

    def score(self, document: Document) -> float:
        """The BM25 score of one indexed document."""
        saturation = _saturation(len(document), self._average, BM25_K1, BM25_B)
        positions = document.positions
        score = 0.0
        for token in self._exact:
            found = positions.get(token)
            if found:
                score += self._weight(token, len(found), saturation)
        if self._expanded:
            for token, found in positions.items():
                if token in self._expanded:
                    score += self._weight(token, len(found), saturation)
        return score


def _union(sets: Iterable[Collection[int]]) -> set[int]:
    result: set[int] = set()
    for found in sets:
        result.update(found)
    return result


def _intersection(sets: Sequence[Collection[int]]) -> set[int]:
    ordered = sorted(sets, key=len)
    result = set(ordered[0])
    for found in ordered[1:]:
        if not result:
            break
        result.intersection_update(found)
    return result
