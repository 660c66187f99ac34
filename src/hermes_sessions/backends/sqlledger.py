"""The ``ledger`` table of the SQL backends: the turn ledger's rows, written once.

One row per ``(kind, id)``; ``data`` is the row's JSON object, kept as it is. The columns, the
row's decoding and encoding, the filtered read, the version lookup and the delete are written
here in a :class:`~hermes_sessions.backends.sqlrows.SQLDialect`; only how a write checks the
stored versions differs per backend (SQLite reads them inside its one writer's transaction;
PostgreSQL writes compare-and-swap per row).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.ledger import LedgerRow
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hermes_sessions.backends.sqlrows import SQLDialect

__all__ = [
    "LEDGER_COLUMNS",
    "forget_sql",
    "ledger_from_row",
    "ledger_values",
    "select_sql",
    "unique_ids",
    "version_sql",
]

LEDGER_COLUMNS: Final = "kind, id, session_id, session_key, status, updated_at, data, version"
"""The columns :func:`ledger_from_row` reads and :func:`ledger_values` writes, in that order."""


def ledger_from_row(dialect: SQLDialect, values: Sequence[Any]) -> LedgerRow:
    """Build a ledger row from the :data:`LEDGER_COLUMNS` of a row."""
    text = dialect.from_text
    try:
        return LedgerRow(
            kind=values[0],
            id=text(values[1]) or "",
            session_id=text(values[2]) or "",
            session_key=text(values[3]) or "",
            status=values[4],
            updated_at=dialect.from_time(values[5]),
            data=json.loads(values[6]),
            version=values[7],
        )
    except (ValueError, TypeError) as error:
        raise CorruptRecordError(f"ledger row {values[1]!r}: {error}") from error


def ledger_values(dialect: SQLDialect, row: LedgerRow) -> tuple[Any, ...]:
    """The :data:`LEDGER_COLUMNS` values of ``row``."""
    text = dialect.to_text
    return (
        row.kind,
        text(row.id),
        text(row.session_id),
        text(row.session_key),
        row.status,
        dialect.to_time(row.updated_at),
        compact_json(row.data),
        row.version,
    )


def unique_ids(ids: Sequence[str] | None) -> list[str] | None:
    """``ids`` without repeats (first place kept), or ``None`` for every row."""
    return None if ids is None else list(dict.fromkeys(ids))


def select_sql(
    dialect: SQLDialect,
    kind: str,
    ids: Sequence[str] | None,
    status: str | None,
    session_key: str | None,
) -> tuple[str, list[Any]] | None:
    """The read of the rows of ``kind`` passing the filters, by ``(updated_at, id)``.

    ``None`` when no row can pass (an empty ``ids``).
    """
    mark = dialect.mark
    clauses, params = [f"kind = {mark}"], [kind]
    if ids is not None:
        if not ids:
            return None
        clauses.append(dialect.in_list("id", ids, params))
    if status is not None:
        clauses.append(f"status = {mark}")
        params.append(status)
    if session_key is not None:
        clauses.append(f"session_key = {mark}")
        params.append(dialect.to_text(session_key))
    query = (
        f"SELECT {LEDGER_COLUMNS} FROM {dialect.tables}ledger "  # noqa: S608  # fixed clauses
        f"WHERE {' AND '.join(clauses)} ORDER BY updated_at, id"
    )
    return query, params


def version_sql(dialect: SQLDialect) -> str:
    """The stored version of one row, bound as ``(kind, id)``."""
    mark = dialect.mark
    return f"SELECT version FROM {dialect.tables}ledger WHERE kind = {mark} AND id = {mark}"  # noqa: S608


def forget_sql(dialect: SQLDialect) -> str:
    """The delete of a session's rows, bound as ``(session_id,)``."""
    return f"DELETE FROM {dialect.tables}ledger WHERE session_id = {dialect.mark}"  # noqa: S608
