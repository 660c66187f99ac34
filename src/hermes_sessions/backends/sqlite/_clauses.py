"""Bound ``IN`` lists, in chunks the statement modules iterate over.

Every value is bound (``?``); only fixed column names are written into the SQL. The session
filters of listings and searches are the shared ones (:class:`~..sqlrows.SQLDialect`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence


__all__ = ["CHUNK", "in_list"]

CHUNK: Final = 500
"""Values bound per ``IN (...)`` list (well under every build's variable limit)."""


def in_list(column: str, values: Sequence[Any], params: list[Any], *, negate: bool = False) -> str:
    """``column IN (?, ...)`` (or ``NOT IN``) with the values bound."""
    params.extend(values)
    marks = ", ".join("?" * len(values))
    return f"{column} {'NOT IN' if negate else 'IN'} ({marks})"
