"""Helpers of the PostgreSQL tests: the server to use, and one schema per test directory.

The tests run against the server named by ``HERMES_SESSIONS_TEST_PG_DSN`` (CI sets it) and skip,
saying so, without it. Every schema a test session creates starts with one prefix, shared with
the worker processes it spawns through the environment, and ``tests/conftest.py`` drops them all
when the session ends.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.backends.postgres import PostgresBackend

DSN_VARIABLE = "HERMES_SESSIONS_TEST_PG_DSN"
PREFIX_VARIABLE = "HERMES_SESSIONS_TEST_PG_PREFIX"
SKIP_REASON = (
    f"PostgreSQL tests need a server: set {DSN_VARIABLE}=postgresql://user@host:5432/db "
    "(CI sets it; one way: docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust "
    f"postgres:16, then {DSN_VARIABLE}=postgresql://postgres@127.0.0.1:5432/postgres)"
)


def test_dsn() -> str | None:
    """The DSN of the test server, or ``None`` (then the PostgreSQL tests skip)."""
    dsn = os.environ.get(DSN_VARIABLE) or None
    if dsn is None:
        return None
    try:
        import psycopg  # noqa: F401, PLC0415  # only to know whether the extra is installed
    except ImportError:  # pragma: no cover  # CI installs it
        return None
    return dsn


test_dsn.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test

requires_pg = pytest.mark.skipif(test_dsn() is None, reason=SKIP_REASON)
"""Mark a test (or module) that needs the PostgreSQL server."""


def schema_prefix() -> str:
    """This test session's schema prefix (made once, inherited by spawned workers)."""
    return os.environ.setdefault(PREFIX_VARIABLE, f"hs_test_{secrets.token_hex(4)}_")


def schema_for(directory: Path) -> str:
    """The schema that stands for a test's data directory (same directory, same schema)."""
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:20]
    return schema_prefix() + digest


def open_pg(directory: Path, **options: Any) -> PostgresBackend:
    """A backend on the test server, in the schema of ``directory``."""
    from hermes_sessions.backends.postgres import PostgresBackend  # noqa: PLC0415

    dsn = test_dsn()
    assert dsn is not None, SKIP_REASON
    options.setdefault("max_size", 4)
    return PostgresBackend(dsn, schema=schema_for(directory), **options)


def drop_schemas(prefix: str) -> int:
    """Drop every schema whose name starts with ``prefix``; return how many."""
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    dsn = test_dsn()
    assert dsn is not None
    with psycopg.connect(dsn, autocommit=True) as connection:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
            )
        ]
        for name in names:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    return len(names)


def schema_rows(directory: Path) -> dict[str, list[str]]:
    """Every row of every table in ``directory``'s schema, as PostgreSQL's text of the row.

    Tables by name and rows sorted: a query without ``ORDER BY`` returns rows in no fixed order,
    so two reads of an unchanged schema could differ.
    """
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    dsn = test_dsn()
    assert dsn is not None
    schema = schema_for(directory)
    rows: dict[str, list[str]] = {}
    with psycopg.connect(dsn, autocommit=True) as connection:
        tables = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
            " ORDER BY table_name",
            (schema,),
        ).fetchall()
        for (table,) in tables:
            query = sql.SQL("SELECT t::text FROM {} AS t").format(sql.Identifier(schema, table))
            rows[table] = sorted(row[0] for row in connection.execute(query))
    return rows


def schema_dump(directory: Path) -> bytes:
    """The rows of :func:`schema_rows`, one per line: what a byte search of a schema reads."""
    return "\n".join(row for rows in schema_rows(directory).values() for row in rows).encode()
