"""Blinded search: the query's tokens through a keyed hash, for an index of hashed tokens.

An encrypted store indexes ``blind(token)`` for every token of :func:`index_tokens` instead of
the token (space-joined, like any stream), and searches with :func:`blind_query` of the parsed
query, rendered back into the query language by :func:`query_text`. Hashing is done per token,
so positions, phrases, CJK bigrams, term frequencies and document lengths are those of the plain
stream: every whole-token query matches and ranks exactly as unencrypted. A prefix pattern
(``dock*``, a lone CJK character) has no hashed form; :func:`blind_query` gives ``None`` and the
caller scans the decrypted messages instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.text._query import Clause, Phrase, Query, TokenPattern

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["blind_query", "query_text"]


def _blind_phrase(phrase: Phrase, blind: Callable[[str], str]) -> Phrase | None:
    if phrase.prefix:
        return None
    return Phrase(tuple(TokenPattern(blind(pattern.text)) for pattern in phrase.patterns))


def blind_query(query: Query, blind: Callable[[str], str]) -> Query | None:
    """``query`` with every token replaced by ``blind(token)``; ``None`` if it has a prefix.

    ``blind`` must return token text (letters and digits, no upper case), as
    :meth:`hermes_sessions.cipher.Cipher.blind` does.

    .. versionadded:: 0.1.0
    """
    clauses = []
    for clause in query.clauses:
        phrases = [_blind_phrase(phrase, blind) for phrase in clause.phrases]
        if any(phrase is None for phrase in phrases):
            return None
        clauses.append(Clause(tuple(phrase for phrase in phrases if phrase is not None)))
    excluded = [_blind_phrase(phrase, blind) for phrase in query.excluded]
    if any(phrase is None for phrase in excluded):
        return None
    return Query(tuple(clauses), tuple(phrase for phrase in excluded if phrase is not None))


def _quoted(phrase: Phrase) -> str:
    return '"' + " ".join(phrase.tokens) + '"' + ("*" if phrase.prefix else "")


def query_text(query: Query) -> str:
    """A query string that :func:`parse_query` reads back as ``query`` (its normal form).

    >>> from hermes_sessions.text import parse_query
    >>> query_text(parse_query("docker-compose OR podman 飞书 -helm"))
    '"docker compose" OR "podman" "飞书" -"helm"'

    .. versionadded:: 0.1.0
    """
    parts = [" OR ".join(map(_quoted, clause.phrases)) for clause in query.clauses]
    parts.extend("-" + _quoted(phrase) for phrase in query.excluded)
    return " ".join(parts)
