"""Storage backends, one module each, imported on first use.

``from hermes_sessions.backends import InMemoryBackend`` works, but importing this package does
not import any backend module (nor its driver, such as ``sqlite3`` or ``psycopg``): each is loaded
when its name is first looked up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, cast

from hermes_sessions.cipher import require_plain_store
from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.paths import default_home

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.backends.encrypted import UserKeys
    from hermes_sessions.backends.inmemory import InMemoryBackend
    from hermes_sessions.backends.jsonl import JSONLBackend
    from hermes_sessions.backends.postgres import PostgresBackend
    from hermes_sessions.backends.sqlite import SQLiteBackend
    from hermes_sessions.cipher import Cipher
    from hermes_sessions.protocols import Backend, SearchableBackend

__all__ = ["InMemoryBackend", "JSONLBackend", "PostgresBackend", "SQLiteBackend", "open_backend"]

_MODULES = {
    "InMemoryBackend": "hermes_sessions.backends.inmemory",
    "JSONLBackend": "hermes_sessions.backends.jsonl",
    "PostgresBackend": "hermes_sessions.backends.postgres",
    "SQLiteBackend": "hermes_sessions.backends.sqlite",
}


def open_backend(
    kind: str,
    home: Path | None = None,
    *,
    dsn: str | None = None,
    cipher: Cipher | None = None,
    user_keys: UserKeys | None = None,
) -> Backend:
    """Open the backend ``kind`` (``sqlite``, ``jsonl``, ``memory`` or ``postgres``) under ``home``.

    ``sqlite`` keeps ``<home>/state.db``; ``jsonl`` keeps ``<home>/sessions/<id>.jsonl`` with its
    journal and routing files beside them in ``<home>``; ``memory`` keeps nothing. ``home``
    defaults to :func:`~hermes_sessions.paths.default_home`. ``postgres`` ignores ``home`` and
    connects to ``dsn``, else to ``$HERMES_SESSIONS_DSN`` (extra ``postgres``). With ``cipher``
    the backend is wrapped in an
    :class:`~hermes_sessions.backends.encrypted.EncryptedBackend` (``docs/privacy.md``), with
    ``user_keys`` too when given (per-user keys).

    Raises :class:`~hermes_sessions.exceptions.EncryptionMismatchError` (closing what it opened)
    for an encrypted store without ``cipher``, a plain store with one, or a wrong key.
    """
    backend = _open(kind, home, dsn)
    if cipher is None:
        try:
            require_plain_store(backend)
        except BaseException:
            backend.close()
            raise
        return backend
    from hermes_sessions.backends.encrypted import EncryptedBackend  # noqa: PLC0415  # on use

    return EncryptedBackend(cast("SearchableBackend", backend), cipher=cipher, user_keys=user_keys)


def _open(kind: str, home: Path | None, dsn: str | None) -> Backend:
    if kind == "postgres":
        from hermes_sessions.backends.postgres import PostgresBackend  # noqa: PLC0415

        return PostgresBackend.from_env(dsn)
    if kind == "memory":
        from hermes_sessions.backends.inmemory import InMemoryBackend  # noqa: PLC0415  # loaded on use

        del home  # nothing to keep
        return InMemoryBackend()
    if kind == "sqlite":
        from hermes_sessions.backends.sqlite import SQLiteBackend  # noqa: PLC0415  # loaded on use

        return SQLiteBackend.in_home(home)
    if kind == "jsonl":
        from hermes_sessions.backends.jsonl import JSONLBackend  # noqa: PLC0415  # loaded on use

        return JSONLBackend(home if home is not None else default_home())
    raise InvalidArgumentError(
        f"unknown backend {kind!r}; choose 'sqlite', 'jsonl', 'memory' or 'postgres'"
    )


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
