"""The natural search mode: sessions ranked for a question, from exact searches on any backend.

The ranking lives in :mod:`hermes_sessions.text` (``natural_terms``, ``term_count``,
``rank_sessions``); this module feeds it. Every read is an exact-language search of the backend
with the caller's filters (``visible_to``, lanes, roles, sessions, time), so the natural mode sees
exactly what the exact mode may see, on every backend and through every wrapper:

1. the question's content terms (CJK stretches are checked against the index with one-hit
   searches);
2. per term, up to :data:`PER_TERM` best hits; each hit's text is checked for the term's word
   forms (a prefix search finds candidates, the stem decides);
3. a term that had more hits than that is looked up again inside the best candidate sessions, so
   a common word still counts for them;
4. the question as an exact query marks the sessions that match it as written;
5. sessions are ranked, confident ones first, then weak ones (those below
   ``text.WEAK_COVERAGE`` dropped), and the best messages of each cut into snippets.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final, Literal

import attrs

from hermes_sessions import text
from hermes_sessions.models import Message, SessionRecord
from hermes_sessions.queries import MatchedMessage, SessionMatch
from hermes_sessions.store._lineage import root_id

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.protocols import Backend, SupportsSearch
    from hermes_sessions.queries import SearchHit, SearchQuery

__all__ = ["PER_TERM", "natural_search"]

PER_TERM: Final = 100
"""The most hits read per term before the term is looked up inside the best candidates only."""
_RECHECK: Final = 50
_EXACT_PROBE: Final = 50


@attrs.define
class _Gathered:
    records: dict[str, SessionRecord] = attrs.Factory(dict)
    messages: dict[tuple[str, int], Message] = attrs.Factory(dict)
    counts: dict[str, dict[int, dict[int, int]]] = attrs.Factory(dict)
    words: dict[tuple[str, int], list[str]] = attrs.Factory(dict)
    joined: dict[tuple[str, int], str] = attrs.Factory(dict)

    def count(self, term: text.NaturalTerm, hit: SearchHit) -> int:
        """The term's occurrences in the hit's message (its text read once per search)."""
        key = (hit.session.id, hit.message.id or 0)
        if term.kind == "cjk":
            joined = self.joined.get(key)
            if joined is None:
                folded = text.fold_width(text.searchable_text(hit.message))
                joined = self.joined[key] = "".join(folded.split()).casefold()
            return text.term_count(term, (), joined)
        words = self.words.get(key)
        if words is None:  # CJK bigrams among the tokens never meet an English word
            words = self.words[key] = text.index_tokens(text.searchable_text(hit.message))
        return text.term_count(term, words, "")

    def add(self, index: int, term: text.NaturalTerm, hits: list[SearchHit]) -> None:
        for hit in hits:
            occurrences = self.count(term, hit)
            if not occurrences:
                continue
            session_id, message_id = hit.session.id, hit.message.id or 0
            self.records.setdefault(session_id, hit.session)
            self.messages[session_id, message_id] = hit.message
            by_term = self.counts.setdefault(session_id, {})
            by_term.setdefault(index, {})[message_id] = occurrences


def natural_search(
    backend: SupportsSearch | Backend,
    query: SearchQuery,
    *,
    group: Literal["lineage"] | None = None,
) -> list[SessionMatch]:
    """Sessions answering ``query.text`` as a question: confident ones first, then weak ones.

    ``query``'s filters apply to every read; ``limit`` and ``offset`` count sessions, ``order``
    other than ``"rank"`` sorts the confident sessions by their last activity.
    """
    search = backend.search  # type: ignore[union-attr]  # the caller checked SupportsSearch
    base = attrs.evolve(query, order="rank", offset=0)

    @functools.cache
    def exists(stretch: str) -> bool:
        return bool(search(attrs.evolve(base, text=f'"{stretch}"', limit=1)))

    terms = text.natural_terms(query.text, exists)
    if not terms:
        return []
    gathered = _Gathered()
    ranked = _gather(search, base, terms, gathered)
    strong = [score for score in ranked if score.confident]
    weak = [
        score for score in ranked if not score.confident and score.coverage >= text.WEAK_COVERAGE
    ]
    confident = strong + weak
    if group == "lineage":
        roots: dict[str, str] = {}
        best: dict[str, text.SessionScore] = {}
        for score in confident:
            root = root_id(backend, gathered.records[score.session_id], roots)  # type: ignore[arg-type]
            best.setdefault(root, score)
        confident = list(best.values())
    if query.order != "rank":
        newest = query.order == "newest"
        confident.sort(key=lambda s: gathered.records[s.session_id].last_active, reverse=newest)
        confident.sort(key=lambda s: not s.confident)
    end = None if query.limit is None else query.offset + query.limit
    return [_match(score, terms, gathered) for score in confident[query.offset : end]]


def _gather(
    search: Callable[[SearchQuery], list[SearchHit]],
    base: SearchQuery,
    terms: list[text.NaturalTerm],
    gathered: _Gathered,
) -> list[text.SessionScore]:
    """Read every term's hits into ``gathered``; return the ranking of every candidate."""
    truncated = []
    for index, term in enumerate(terms):
        if term.missing:
            continue
        hits = search(attrs.evolve(base, text=term.query, limit=PER_TERM))
        gathered.add(index, term, hits)
        if len(hits) >= PER_TERM:
            truncated.append(index)
    exact = {hit.session.id for hit in search(attrs.evolve(base, limit=_EXACT_PROBE))}
    ranked = _rank(terms, gathered, exact)
    if truncated and ranked:
        leaders = tuple(score.session_id for score in ranked[:_RECHECK])
        for index in truncated:
            inside = attrs.evolve(base, text=terms[index].query, session_ids=leaders, limit=None)
            gathered.add(index, terms[index], search(inside))
        ranked = _rank(terms, gathered, exact)
    return ranked


def _rank(
    terms: list[text.NaturalTerm], gathered: _Gathered, exact: set[str]
) -> list[text.SessionScore]:
    evidence = [
        text.Evidence(
            session_id=session_id,
            message_count=gathered.records[session_id].message_count,
            counts=counts,
            exact=session_id in exact,
        )
        for session_id, counts in gathered.counts.items()
    ]
    return text.rank_sessions(terms, evidence)


def _match(
    score: text.SessionScore, terms: list[text.NaturalTerm], gathered: _Gathered
) -> SessionMatch:
    counts = gathered.counts[score.session_id]
    shown = []
    for message_id in score.best_messages:
        held = [terms[i] for i in sorted(counts) if message_id in counts[i]]
        message = gathered.messages[score.session_id, message_id]
        marks = text.parse_query(" OR ".join(term.query for term in held))
        snippet = text.make_snippet(text.searchable_text(message), marks).text
        shown.append(
            MatchedMessage(message=message, snippet=snippet, terms=tuple(t.text for t in held))
        )
    return SessionMatch(
        session=gathered.records[score.session_id],
        score=score.score,
        coverage=score.coverage,
        matched=score.matched,
        terms=tuple(terms[i].text for i in score.terms),
        missing=tuple(t.text for i, t in enumerate(terms) if i not in score.terms),
        confident=score.confident,
        messages=tuple(shown),
    )
