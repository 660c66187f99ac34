"""Rows of the PostgreSQL backend: the shared rows and SQL (:mod:`..sqlrows`) in its dialect.

Times are ``timestamptz``; flags are ``boolean``; parameters are ``%s``; tables are named in
the backend's schema (``{s}``, filled in by the pool). JSON bodies are stored as ``text`` (not
``jsonb``, which cannot hold U+0000 and reorders keys), so unknown message fields round-trip
losslessly.

PostgreSQL ``text`` cannot hold U+0000 either. JSON bodies escape it (JSON's own escape); free-text
columns go through :func:`enc` / :func:`dec`, a reversible escape (a backslash is doubled,
U+0000 becomes a backslash and ``0``) that leaves ordinary strings unchanged.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, overload

from hermes_sessions.backends.sqlrows import (
    ENTRY_FIELDS,
    MESSAGE_FIELDS,
    RECORD_COLUMNS,
    SESSION_FIELDS,
    SQLDialect,
    entry_body,
    message_body,
    message_from_row,
    messages_from_rows,
    preview_of,
    session_columns,
)
from hermes_sessions.serde import compact_json

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ENTRY_COLUMNS",
    "INSERT_SESSION",
    "MESSAGE_COLUMNS",
    "POSTGRES",
    "SESSION_COLUMNS",
    "SESSION_WIDTH",
    "dec",
    "dumps",
    "enc",
    "entry_body",
    "entry_from_row",
    "entry_values",
    "in_list",
    "listing",
    "message_body",
    "message_from_row",
    "messages_from_rows",
    "preview_of",
    "record_from_row",
    "record_values",
    "utc",
]

dumps: Final = compact_json
"""Compact JSON; control characters (U+0000 included) are escaped by the encoder."""


@overload
def enc(value: str) -> str: ...
@overload
def enc(value: None) -> None: ...
@overload
def enc(value: str | None) -> str | None: ...
def enc(value: str | None) -> str | None:
    """A string as a ``text`` column holds it (U+0000 escaped, reversibly)."""
    if value is None or ("\\" not in value and "\x00" not in value):
        return value
    return value.replace("\\", "\\\\").replace("\x00", "\\0")


def _unescape(value: str) -> str:
    out: list[str] = []
    chars = iter(value)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append("\x00" if following == "0" else following)
        else:
            out.append(char)
    return "".join(out)


@overload
def dec(value: str) -> str: ...
@overload
def dec(value: None) -> None: ...
@overload
def dec(value: str | None) -> str | None: ...
def dec(value: str | None) -> str | None:
    """The string a ``text`` column written by :func:`enc` holds."""
    if value is None or "\\" not in value:
        return value
    return _unescape(value)


def utc(moment: datetime) -> datetime:
    """A ``timestamptz`` value in UTC (psycopg returns the server session's zone)."""
    return moment.astimezone(UTC)


def _same_time(moment: datetime) -> datetime:
    return moment


def in_list(column: str, values: Sequence[Any], params: list[Any], *, negate: bool = False) -> str:
    """``column = ANY(%s)`` (or its negation) with the values bound as one array."""
    params.append([enc(value) if isinstance(value, str) else value for value in values])
    return f"NOT ({column} = ANY(%s))" if negate else f"{column} = ANY(%s)"


POSTGRES: Final = SQLDialect(
    mark="%s",
    tables="{s}.",
    active="m.active",
    join="JOIN",
    never="false",
    starts_with="left(s.id, length(%s)) = %s",
    time_type=datetime,
    to_time=_same_time,
    from_time=utc,
    to_text=enc,
    from_text=dec,
    to_flag=bool,
    in_list=in_list,
)
"""PostgreSQL's way of storing the shared rows, and the shared SQL in its dialect."""

SESSION_COLUMNS: Final = session_columns()
"""The columns :func:`record_from_row` reads, from ``sessions AS s``."""
SESSION_WIDTH: Final = len(SESSION_FIELDS)
MESSAGE_COLUMNS: Final = ", ".join(f"m.{name}" for name in MESSAGE_FIELDS)
"""The columns :func:`message_from_row` reads, from ``messages AS m``."""
ENTRY_COLUMNS: Final = ", ".join(ENTRY_FIELDS)
"""The columns :func:`entry_from_row` reads, from ``entries``."""

INSERT_SESSION: Final = (
    "INSERT INTO {s}.sessions ("
    + ", ".join(RECORD_COLUMNS)
    + ") VALUES ("
    + ", ".join(f"%({name})s" for name in RECORD_COLUMNS)
    + ") ON CONFLICT (id) DO NOTHING"
)
"""Insert a record from :func:`record_values` (an existing id is left as it is)."""

record_from_row: Final = POSTGRES.record_from_row
record_values: Final = POSTGRES.record_values
entry_from_row: Final = POSTGRES.entry_from_row
entry_values: Final = POSTGRES.entry_values
listing: Final = POSTGRES.listing
