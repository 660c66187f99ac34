"""Opening a PostgreSQL store from the command line: the DSN, the schema, one-line errors.

The DSN comes from ``--dsn``, else from ``$HERMES_SESSIONS_DSN``. Before the backend opens its
pool, one probe connection (short timeout) says whether the server is reachable and whether the
schema already holds a store, so an unreachable server fails at once with one line instead of
after the pool's timeout, and a read-only command never creates a schema.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.cli._output import UsageError

if TYPE_CHECKING:
    from hermes_sessions.backends.encrypted import UserKeys
    from hermes_sessions.cipher import Cipher
    from hermes_sessions.store import SessionStore

__all__ = ["DEFAULT_SCHEMA", "INSTALL_HINT", "open_postgres"]

DEFAULT_SCHEMA: Final = "hermes_sessions"
INSTALL_HINT: Final = "pip install 'hermes-sessions[postgres]'"
_DSN_VARIABLE: Final = "HERMES_SESSIONS_DSN"  # the backend's DSN_VARIABLE, without importing it
_PROBE_TIMEOUT: Final = 5
_IDENTIFIER_BYTES: Final = 63
_POOL_SIZE: Final = 2  # one command, one thread: a second connection covers nested reads


def _drivers() -> Any:
    try:
        import psycopg  # noqa: PLC0415  # the optional extra
        import psycopg_pool  # noqa: F401, PLC0415  # the backend needs it too
    except ImportError as error:
        raise UsageError(
            f"the postgres backend needs the psycopg driver, which is not installed: {INSTALL_HINT}"
        ) from error
    return psycopg


def _where(dsn: str) -> str:
    """Host, port and database of ``dsn``, never its password."""
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

    info = conninfo_to_dict(dsn)
    host = info.get("host") or "localhost"
    database = info.get("dbname") or info.get("user") or "?"
    return f"{database!r} on {host}:{info.get('port') or '5432'}"


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _probe(psycopg: Any, dsn: str, schema: str) -> bool:
    """Whether ``schema`` holds a store; a ``UsageError`` when the server cannot be reached."""
    try:
        where = _where(dsn)
    except psycopg.Error as error:
        raise UsageError(
            f"bad --dsn: {_first_line(error)}; write postgresql://user@host:5432/dbname"
        ) from error
    try:
        with psycopg.connect(
            dsn, autocommit=True, connect_timeout=_PROBE_TIMEOUT, prepare_threshold=None
        ) as connection:
            row = connection.execute(
                "SELECT to_regclass(format('%%I.schema_migrations', %s::text)) IS NOT NULL",
                (schema,),
            ).fetchone()
    except psycopg.Error as error:
        raise UsageError(
            f"cannot connect to PostgreSQL {where}: {_first_line(error)}; check --dsn "
            f"(or ${_DSN_VARIABLE}) and that the server is running"
        ) from error
    return bool(row and row[0])


def open_postgres(
    dsn: str | None,
    schema: str | None,
    *,
    create: bool,
    cipher: Cipher | None = None,
    user_keys: UserKeys | None = None,
) -> SessionStore:
    """The store in ``schema`` of the database at ``dsn`` (default: ``$HERMES_SESSIONS_DSN``).

    Unless ``create``, a schema without a store is a usage error (nothing is created). With
    ``cipher`` the store is opened encrypted.
    """
    chosen = dsn or os.environ.get(_DSN_VARIABLE) or None
    if chosen is None:
        raise UsageError(
            f"--backend postgres needs a server: pass --dsn postgresql://user@host:5432/db "
            f"or set {_DSN_VARIABLE}"
        )
    name = DEFAULT_SCHEMA if schema is None else schema
    if not name or "\x00" in name or len(name.encode()) > _IDENTIFIER_BYTES:
        raise UsageError(f"bad --schema {name!r}: a PostgreSQL schema name has 1 to 63 bytes")
    psycopg = _drivers()
    if not _probe(psycopg, chosen, name) and not create:
        raise UsageError(
            f"no hermes-sessions store in schema {name!r} of {_where(chosen)}; pass --schema "
            "NAME, or create one with `hermes-sessions --backend postgres import`"
        )
    from hermes_sessions.backends.postgres import PostgresBackend  # noqa: PLC0415
    from hermes_sessions.store import SessionStore  # noqa: PLC0415

    backend = PostgresBackend(chosen, schema=name, min_size=1, max_size=_POOL_SIZE)
    if cipher is not None:
        from hermes_sessions.backends.encrypted import EncryptedBackend  # noqa: PLC0415

        return SessionStore(EncryptedBackend(backend, cipher=cipher, user_keys=user_keys))
    try:
        return SessionStore(backend)
    except BaseException:
        backend.close()
        raise
