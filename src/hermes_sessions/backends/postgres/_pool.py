"""The connection pool of the PostgreSQL backend, its transactions, retries and error wrapping.

Every call borrows one connection from a ``psycopg_pool.ConnectionPool`` for one transaction
and gives it back at once, so a pooler in *transaction* mode (PgBouncer, Supavisor, RDS Proxy)
may hand each transaction to a different server session. Nothing relies on session state:

* connections are in autocommit mode; a write is one explicit ``BEGIN`` … ``COMMIT``;
* ``prepare_threshold=None``: no named server-side prepared statement outlives a transaction;
* locks are row locks and ``pg_advisory_xact_lock`` (released at commit), never session locks;
* every table name is qualified with the schema (no ``search_path``), and no ``SET`` is issued
  outside a transaction (``lock_timeout`` is ``SET LOCAL``).

Serialisation failures and deadlocks (SQLSTATE ``40001``, ``40P01``) and lock timeouts
(``55P03``) roll the transaction back and retry it after a jittered, doubling pause; when the
retries run out the caller gets :class:`~hermes_sessions.exceptions.LockTimeoutError`. Every
other psycopg error is wrapped in :class:`~hermes_sessions.exceptions.StorageError` at the
boundary (``guarded``), with the cause chained. Messages name the host, database and schema,
never the password.

Connections the server dropped while they sat in the pool (a restart, a failover, an idle-session
timeout, ``pg_terminate_backend``) never reach a caller as an error: a call whose connection turns
out to be broken before its transaction commits is run again on a fresh connection, after the
pool has tested its idle connections (``ConnectionPool.check``) so that one burst costs one retry.
Nothing is re-run once ``COMMIT`` was sent: a connection lost then leaves the outcome unknown,
and the caller gets a ``StorageError`` saying so. Opening connects once directly first, so a DSN
that cannot work (wrong password, unknown database or host, refused port) fails at once with the
server's reason instead of after the pool's ``timeout``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import threading
import time
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, TypeVar

import attrs
import psycopg
import psycopg_pool
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict

from hermes_sessions import backoff, crashpoints
from hermes_sessions.exceptions import (
    BackendClosedError,
    CorruptRecordError,
    InvalidArgumentError,
    LockTimeoutError,
    StorageError,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Connections", "guarded", "lock_id"]

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound="Connections")

_RETRIED: Final = (errors.SerializationFailure, errors.DeadlockDetected, errors.LockNotAvailable)
_RENDERED_LIMIT: Final = 1024
_IDENTIFIER_BYTES: Final = 63
_MASK: Final = "********"
_sleep = time.sleep  # patched by tests to observe the retry loop


def lock_id(*parts: str) -> int:
    """A signed 64-bit advisory-lock id for ``parts`` (stable across processes and hosts)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def guarded(method: Callable[Concatenate[C, P], R]) -> Callable[Concatenate[C, P], R]:
    """Refuse calls on a closed backend; wrap psycopg errors in ``StorageError``."""

    @functools.wraps(method)
    def wrapper(self: C, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._closed:
            raise BackendClosedError(self.describe())
        try:
            return method(self, *args, **kwargs)
        except CorruptRecordError as error:
            located = error.located(self.describe())
            if located is error:
                raise
            raise located from error.__cause__
        except psycopg.Error as error:
            if self._closed:
                raise BackendClosedError(self.describe()) from error
            raise StorageError(f"{self.describe()} failed: {error}") from error

    return wrapper


class _Attempt:
    """What one attempt of a transaction got to: its connection, and whether it sent COMMIT."""

    __slots__ = ("committing", "connection")

    def __init__(self) -> None:
        self.connection: psycopg.Connection[Any] | None = None
        self.committing = False


def _broken(connection: psycopg.Connection[Any] | None) -> bool:
    """Whether ``connection`` can no longer be used (the server or the network dropped it)."""
    return connection is not None and (connection.closed or connection.broken)


def _masked(text: str, dsn: str) -> str:
    """``text`` without the password of ``dsn`` (libpq never prints it; this is a second guard)."""
    try:
        password = conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        password = None
    if password:
        text = text.replace(str(password), _MASK)
    return text


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidArgumentError(f"{attribute.name} must be a positive number, got {value!r}")


def _optional_positive(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _positive(instance, attribute, value)


def _schema_name(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if (
        not isinstance(value, str)
        or not value
        or len(value.encode()) > _IDENTIFIER_BYTES
        or "\x00" in value
    ):
        raise InvalidArgumentError(
            f"{attribute.name} must be a PostgreSQL identifier of 1-63 bytes, got {value!r}"
        )


@attrs.define(eq=False)
class Connections:
    """The pool of one backend object and its transactions (see the module docstring)."""

    dsn: str = attrs.field(validator=attrs.validators.instance_of(str), repr=False)
    schema: str = attrs.field(default="hermes_sessions", kw_only=True, validator=_schema_name)
    min_size: int = attrs.field(
        default=1,
        kw_only=True,
        validator=[attrs.validators.instance_of(int), attrs.validators.ge(0)],
    )
    max_size: int = attrs.field(
        default=8,
        kw_only=True,
        validator=[attrs.validators.instance_of(int), attrs.validators.ge(1)],
    )
    timeout: float = attrs.field(default=30.0, kw_only=True, validator=_positive)
    connect_timeout: float = attrs.field(default=5.0, kw_only=True, validator=_positive)
    lock_timeout: float | None = attrs.field(
        default=None, kw_only=True, validator=_optional_positive
    )
    retries: int = attrs.field(
        default=8,
        kw_only=True,
        validator=[attrs.validators.instance_of(int), attrs.validators.ge(0)],
    )
    _closed: bool = attrs.field(default=False, init=False)
    # The direct connection opening runs on (migrations, checks) while the pool fills behind it.
    _opening: psycopg.Connection[Any] | None = attrs.field(default=None, init=False)
    _pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None = attrs.field(
        default=None, init=False
    )
    _names: dict[str, str] = attrs.field(factory=dict, init=False)
    _names_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def describe(self) -> str:
        """Where the data lives, without credentials (for messages)."""
        try:
            info = conninfo_to_dict(self.dsn)
        except psycopg.Error:
            info = {}
        host = info.get("host") or "localhost"
        port = info.get("port") or "5432"
        database = info.get("dbname") or info.get("user") or "?"
        return f"PostgreSQL schema {self.schema!r} in {database!r} on {host}:{port}"

    def _open_pool(self) -> None:
        if self.min_size > self.max_size:
            raise InvalidArgumentError(
                f"min_size ({self.min_size}) must not exceed max_size ({self.max_size})"
            )
        self._opening = self._connect()
        pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = psycopg_pool.ConnectionPool(
            self.dsn,
            kwargs={
                "autocommit": True,
                "prepare_threshold": None,
                "connect_timeout": max(1, round(self.connect_timeout)),
            },
            min_size=self.min_size,
            max_size=self.max_size,
            timeout=self.timeout,
            open=False,
            name=f"hermes-sessions:{self.schema}",
        )
        self._pool = pool
        pool.open(wait=False)

    def _opened(self) -> None:
        """Opening is done: later calls use the pool only."""
        connection, self._opening = self._opening, None
        if connection is not None:
            connection.close()

    def _connect(self) -> psycopg.Connection[Any]:
        """Connect directly: a DSN that cannot work fails now, with the server's reason."""
        try:
            return psycopg.connect(
                self.dsn,
                autocommit=True,
                prepare_threshold=None,
                connect_timeout=max(1, round(self.connect_timeout)),
            )
        except psycopg.Error as error:
            raise StorageError(self._unreachable(error)) from None

    def _unreachable(self, error: BaseException) -> str:
        reason = _masked(str(error).strip(), self.dsn) or type(error).__name__
        return (
            f"cannot connect to {self.describe()}: {reason}; check the DSN (host, port, "
            "database, user), the password (~/.pgpass or PGPASSWORD) and that the server accepts "
            "connections"
        )

    def q(self, template: str) -> str:
        """``template`` with ``{s}`` replaced by the quoted schema name (``psycopg.sql``)."""
        rendered = self._names.get(template)
        if rendered is None:
            rendered = sql.SQL(template).format(s=sql.Identifier(self.schema)).as_string(None)
            with self._names_lock:
                if len(self._names) > _RENDERED_LIMIT:  # dynamic statements (filters) vary
                    self._names.clear()
                self._names[template] = rendered
        return rendered

    # -- transactions ------------------------------------------------------------------------------

    def _run(self, work: Callable[[psycopg.Connection[Any]], R], *, write: bool = True) -> R:
        """Run ``work`` in one transaction (``write``) or in autocommit, retrying conflicts.

        A connection found broken before ``COMMIT`` was sent (the server dropped it while it sat
        in the pool) is retried on a fresh one, up to ``max_size + 1`` times: nothing of the
        transaction can have been stored, since the server rolls back what a lost connection left
        uncommitted. A connection lost during ``COMMIT`` is not retried (the outcome is unknown).
        """
        pool = self._pool
        if pool is None:
            raise BackendClosedError(self.describe())
        started = time.monotonic()
        attempt = lost = 0
        while True:
            step = _Attempt()
            try:
                return self._once(pool, work, write, step)
            except _RETRIED as error:
                if attempt == self.retries:
                    waited = time.monotonic() - started
                    raise LockTimeoutError(self.describe(), waited) from error
                _sleep(backoff.pause(attempt))
                attempt += 1
            except psycopg_pool.PoolTimeout as error:
                raise StorageError(self._no_connection()) from error
            except psycopg.Error as error:
                lost = self._lost(error, step, lost, pool)

    def _lost(
        self,
        error: psycopg.Error,
        step: _Attempt,
        lost: int,
        pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]],
    ) -> int:
        """Re-raise ``error`` unless it is a connection lost before COMMIT; count the losses."""
        if not _broken(step.connection) or self._closed:
            raise error
        if step.committing:
            raise StorageError(
                f"{self.describe()}: the connection was lost while committing, so this "
                "write may or may not be stored; read it back (or repeat it with the "
                f"same platform_message_id, which is idempotent): {error}"
            ) from error
        if lost >= self.max_size:
            raise error
        if not lost:
            pool.check()  # drop the other idle connections the server dropped too
        return lost + 1

    def _once(
        self,
        pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]],
        work: Callable[[psycopg.Connection[Any]], R],
        write: bool,  # noqa: FBT001
        step: _Attempt,
    ) -> R:
        """One attempt of :meth:`_run`, noting its connection and whether it reached COMMIT."""
        with self._borrow(pool) as connection:
            step.connection = connection
            if not write:
                return work(connection)
            with connection.transaction():
                if self.lock_timeout is not None:
                    connection.execute(
                        "SELECT set_config('lock_timeout', %s, true)",
                        (f"{round(self.lock_timeout * 1000)}ms",),
                    )
                result = work(connection)
                crashpoints.reached("postgres.before_commit")
                step.committing = True
            crashpoints.reached("postgres.after_commit")
            return result

    def _borrow(
        self, pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]]
    ) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        if self._opening is not None:
            return contextlib.nullcontext(self._opening)
        return pool.connection()

    def _no_connection(self) -> str:
        """The message of a pool timeout: the server's reason when a new connection fails."""
        try:
            self._connect().close()
        except StorageError as error:
            return f"no connection within {self.timeout:g} s: {error}"
        return (
            f"{self.describe()}: no free connection within {self.timeout:g} s; raise "
            "max_size or timeout, or check that the server accepts connections"
        )

    def close(self) -> None:
        """Close the pool; later calls raise ``BackendClosedError``. Idempotent."""
        self._closed = True
        self._opened()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
