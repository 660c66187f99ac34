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
"""

from __future__ import annotations

import functools
import hashlib
import random
import threading
import time
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, TypeVar

import attrs
import psycopg
import psycopg_pool
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict

from hermes_sessions import crashpoints
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
_BACKOFF_BASE: Final = 0.005
_BACKOFF_CAP: Final = 0.25
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
    connect_timeout: float = attrs.field(default=10.0, kw_only=True, validator=_positive)
    lock_timeout: float | None = attrs.field(
        default=None, kw_only=True, validator=_optional_positive
    )
    retries: int = attrs.field(
        default=8,
        kw_only=True,
        validator=[attrs.validators.instance_of(int), attrs.validators.ge(0)],
    )
    _closed: bool = attrs.field(default=False, init=False)
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
        pool.open(wait=self.min_size > 0, timeout=self.timeout)

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
        """Run ``work`` in one transaction (``write``) or in autocommit, retrying conflicts."""
        if self._pool is None:
            raise BackendClosedError(self.describe())
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                with self._pool.connection() as connection:
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
                    crashpoints.reached("postgres.after_commit")
                    return result
            except _RETRIED as error:
                if attempt == self.retries:
                    waited = time.monotonic() - started
                    raise LockTimeoutError(self.describe(), waited) from error
                _sleep(random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_BASE * 2**attempt)))  # noqa: S311
            except psycopg_pool.PoolTimeout as error:
                raise StorageError(
                    f"{self.describe()}: no free connection within {self.timeout:g} s; raise "
                    "max_size or timeout, or check that the server accepts connections"
                ) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the pool; later calls raise ``BackendClosedError``. Idempotent."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
