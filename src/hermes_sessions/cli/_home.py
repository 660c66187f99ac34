"""Finding the store in a home directory: which backend, and never creating one by reading."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from hermes_sessions.cli._output import UsageError
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from hermes_sessions.backends.encrypted import UserKeys
    from hermes_sessions.cipher import Cipher

__all__ = [
    "KEY_FILE_VARIABLE",
    "USER_KEYS_VARIABLE",
    "BackendName",
    "detect_backend",
    "load_cipher",
    "load_user_keys",
    "open_store",
]

BackendName = Literal["sqlite", "jsonl", "postgres"]
KEY_FILE_VARIABLE: Final = "HERMES_SESSIONS_KEY_FILE"
USER_KEYS_VARIABLE: Final = "HERMES_SESSIONS_USER_KEYS"


def load_cipher(key_file: Path | None) -> Cipher | None:
    """The cipher of ``--key-file``, ``$HERMES_SESSIONS_KEY_FILE`` or the key variables, or None.

    A key file wins over the variables; with neither, stores are opened plain (an encrypted
    one is then refused).
    """
    path = key_file or (
        Path(os.environ[KEY_FILE_VARIABLE]) if os.environ.get(KEY_FILE_VARIABLE) else None
    )
    from hermes_sessions.cipher import KEYS_VARIABLE, Cipher  # noqa: PLC0415  # on use

    if path is not None:
        return Cipher.from_key_file(path)
    if os.environ.get(KEYS_VARIABLE):
        return Cipher.from_environment()
    return None


def detect_backend(home: Path) -> BackendName | None:
    """``sqlite`` if ``home`` holds ``state.db``, ``jsonl`` if it holds a JSONL store, else None."""
    if (home / "state.db").is_file():
        return "sqlite"
    if (home / "journal.jsonl").is_file() or (home / "routing.jsonl").is_file():
        return "jsonl"
    return None


def load_user_keys(directory: Path | None, cipher: Cipher | None) -> UserKeys | None:
    """The per-user keys of ``--user-keys`` or ``$HERMES_SESSIONS_USER_KEYS``, or None."""
    chosen = directory or (
        Path(os.environ[USER_KEYS_VARIABLE]) if os.environ.get(USER_KEYS_VARIABLE) else None
    )
    if chosen is None:
        return None
    if cipher is None:
        raise UsageError("--user-keys needs the store's keys too: --key-file FILE (docs/cli.md)")
    if not chosen.is_dir():
        raise UsageError(f"--user-keys {chosen} is not a directory")
    from hermes_sessions.backends.encrypted import DirectoryUserKeys, UserKeys  # noqa: PLC0415

    return UserKeys(DirectoryUserKeys(chosen))


def open_store(
    home: Path,
    backend: BackendName | None,
    *,
    create: bool,
    dsn: str | None = None,
    schema: str | None = None,
    cipher: Cipher | None = None,
    user_keys: UserKeys | None = None,
) -> SessionStore:
    """Open the store under ``home``; unless ``create``, a home without one is a usage error.

    ``postgres`` opens ``schema`` of the database at ``dsn`` (see ``_postgres``) instead; the
    memory files stay in ``home``. ``dsn`` given without ``backend`` means ``postgres``. An
    encrypted store without ``cipher`` (or a plain one with it, or a wrong key) raises
    ``EncryptionMismatchError``: one line, exit 2.
    """
    if backend is None and dsn is not None:
        backend = "postgres"
    if backend == "postgres":
        from hermes_sessions.cli._postgres import open_postgres  # noqa: PLC0415  # optional extra

        return open_postgres(dsn, schema, create=create, cipher=cipher, user_keys=user_keys)
    if dsn is not None or schema is not None:
        option = "--dsn" if dsn is not None else "--schema"
        raise UsageError(f"{option} is for --backend postgres, not {backend or 'a home'}")
    found = detect_backend(home)
    if backend is not None and found is not None and backend != found:
        raise UsageError(f"{home} holds a {found} store, not {backend}; drop --backend {backend}")
    kind = backend or found
    if kind is None or (found is None and not create):
        if not create:
            raise UsageError(
                f"no hermes-sessions store in {home}; pass --home DIR, or create one with "
                "`hermes-sessions import` or `hermes-sessions import-hermes`"
            )
        kind = "sqlite"
    if user_keys is not None:
        from hermes_sessions.backends import open_backend  # noqa: PLC0415  # on use

        return SessionStore(open_backend(kind, home, cipher=cipher, user_keys=user_keys))
    return SessionStore.open(home, backend=kind, cipher=cipher)
