"""Search on an encrypted store: hashed tokens on the inner index, else a decrypting scan.

Whole-token queries (words, phrases, CJK of two or more characters, ``OR``, exclusions) are
blinded token by token (:func:`hermes_sessions.text.blind_query`) and run by the inner backend
on its index of blinded streams, which matches and scores exactly as the plain index does; the
hits are decrypted and their snippets built from the clear text. A query with a prefix pattern
(``dock*``, a lone CJK character) cannot be blinded: the messages are decrypted and matched with
the shared engine (:class:`hermes_sessions.text.SearchIndex`), as the in-memory backend does —
only those the query's whole-token clauses find on the index when it has such clauses
(``docker comp*``), else every message the filters accept. Matches are exact either way; scores
of a scan come from the scanned messages, so ties and close scores may order differently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions import text
from hermes_sessions.backends.rules import make_hit, rank_hits
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    from hermes_sessions.backends.encrypted._backend import EncryptedBackend
    from hermes_sessions.models import Message, SessionRecord
    from hermes_sessions.queries import SearchHit, SearchQuery

__all__ = ["encrypted_search", "needs_scan"]


def _blinded_text(backend: EncryptedBackend, parsed: text.Query) -> str | None:
    """The query string of the blinded query, or ``None`` when only a scan can answer."""
    if parsed.is_empty:
        return None
    blinded = text.blind_query(parsed, backend.cipher.blind)
    if blinded is None:
        return None
    rendered = text.query_text(blinded)
    # The inner backend parses the string again: it must read back as the blinded query (a very
    # long query cut at MAX_QUERY_LENGTH would not).
    return rendered if text.parse_query(rendered) == blinded else None


def needs_scan(backend: EncryptedBackend, query_text: str) -> bool:
    """Whether ``query_text`` is answered by the decrypting scan (a prefix, mostly)."""
    parsed = text.parse_query(query_text)
    return not parsed.is_empty and _blinded_text(backend, parsed) is None


def encrypted_search(backend: EncryptedBackend, query: SearchQuery) -> list[SearchHit]:
    """Run ``query`` on an encrypted store."""
    parsed = text.parse_query(query.text)
    if parsed.is_empty:
        return []
    rendered = _blinded_text(backend, parsed)
    if rendered is None:
        narrowing = _blinded_text(backend, _whole_token_clauses(parsed))
        if narrowing is not None:
            return _narrowed_scan(backend, query, parsed, narrowing)
        return _scan(backend, query, parsed)
    codec = backend.codec
    records: dict[str, SessionRecord] = {}
    hits = []
    for hit in backend.inner.search(attrs.evolve(query, text=rendered)):
        session_id = hit.session.id
        record = records.get(session_id)
        if record is None:
            record = records[session_id] = codec.open_record(hit.session)
        message = codec.open_message(hit.message, session_id)
        hits.append(make_hit(message, record, hit.score, parsed))
    return hits


def _whole_token_clauses(parsed: text.Query) -> text.Query:
    """The clauses of ``parsed`` without a prefix: every match of ``parsed`` matches them."""
    kept = tuple(c for c in parsed.clauses if not any(p.prefix for p in c.phrases))
    return text.Query(kept, ())


def _narrowed_scan(
    backend: EncryptedBackend, query: SearchQuery, parsed: text.Query, narrowing: str
) -> list[SearchHit]:
    """Decrypt only the messages the whole-token clauses find on the index, then match them."""
    codec = backend.codec
    wide = attrs.evolve(query, text=narrowing, limit=None, offset=0, order="rank")
    records: dict[str, SessionRecord] = {}
    sealed_messages: list[tuple[Message, str]] = []
    index = text.SearchIndex()
    for hit in backend.inner.search(wide):
        session_id = hit.session.id
        if session_id not in records:
            records[session_id] = codec.open_record(hit.session)
        index.add(len(sealed_messages), codec.searchable_text(hit.message, session_id))
        sealed_messages.append((hit.message, session_id))
    scored = index.search(parsed)
    pairs = [(codec.open_message(*sealed_messages[doc]), score) for doc, score in scored]
    return rank_hits(pairs, query, parsed, records.__getitem__)


def _scan(backend: EncryptedBackend, query: SearchQuery, parsed: text.Query) -> list[SearchHit]:
    """Decrypt every message of the sessions the filters accept and match them in memory."""
    codec = backend.codec
    records: dict[str, SessionRecord] = {}
    sealed_messages: list[tuple[Message, str]] = []
    index = text.SearchIndex()
    page = backend.inner.list_sessions(SessionQuery(limit=None))
    for item in page.items:
        record = codec.open_record(item.record)
        if not query.accepts_session(record):
            continue
        records[record.id] = record
        stored = backend.inner.get_messages(record.id, include_inactive=query.include_inactive)
        for sealed in stored:
            if not query.accepts_message(sealed):  # role, time and flag are in the clear
                continue
            # Only the searchable fields are needed to index; whole messages are built for hits.
            index.add(len(sealed_messages), codec.searchable_text(sealed, record.id))
            sealed_messages.append((sealed, record.id))
    scored = index.search(parsed)
    pairs = [(codec.open_message(*sealed_messages[doc]), score) for doc, score in scored]
    return rank_hits(pairs, query, parsed, records.__getitem__)
