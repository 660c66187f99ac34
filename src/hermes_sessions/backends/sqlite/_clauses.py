"""SQL conditions shared by the statement modules: bound ``IN`` lists and the session filters.

Every value is bound (``?``); only fixed column names are written into the SQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hermes_sessions.queries import SearchQuery, SessionQuery, Visibility

__all__ = ["CHUNK", "in_list", "session_filters", "visibility_sql"]

CHUNK: Final = 500
"""Values bound per ``IN (...)`` list (well under every build's variable limit)."""


def in_list(column: str, values: Sequence[Any], params: list[Any], *, negate: bool = False) -> str:
    """``column IN (?, ...)`` (or ``NOT IN``) with the values bound."""
    params.extend(values)
    marks = ", ".join("?" * len(values))
    return f"{column} {'NOT IN' if negate else 'IN'} ({marks})"


def visibility_sql(rule: Visibility, params: list[Any]) -> str:
    """The SQL condition of :meth:`Visibility.allows` on ``sessions AS s``."""
    options = []
    if rule.session_key is not None:
        options.append("s.session_key = ?")
        params.append(rule.session_key)
    if rule.user_id is not None:
        options.append("(s.user_id = ? AND s.source = ?)")
        params += [rule.user_id, rule.platform]
    return "(" + " OR ".join(options) + ")" if options else "0"


def session_filters(query: SessionQuery | SearchQuery, params: list[Any]) -> list[str]:
    """The conditions on ``sessions AS s`` that listings and searches share.

    The SQL form of the session filters both query types have (sources, key, user, archived,
    visibility), with their values appended to ``params`` in order.
    """
    where = []
    if query.sources is not None:
        where.append(in_list("s.source", query.sources, params))
    if query.exclude_sources:
        where.append(in_list("s.source", query.exclude_sources, params, negate=True))
    if query.session_key is not None:
        where.append("s.session_key = ?")
        params.append(query.session_key)
    if query.user_id is not None:
        where.append("s.user_id = ?")
        params.append(query.user_id)
    if query.archived is not None:
        where.append("s.archived = ?")
        params.append(int(query.archived))
    if query.visible_to is not None:
        where.append(visibility_sql(query.visible_to, params))
    return where
