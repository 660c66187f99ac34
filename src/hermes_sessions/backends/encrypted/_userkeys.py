"""Per-user keys: a user's own content sealed under a key of their own, destroyed on erasure.

A user key is 32 random bytes, drawn the first time something of that user is sealed, and
kept *wrapped* — sealed by the store's current data key for this store and this key id — in a
:class:`UserKeyStore` that lives apart from the data (:class:`DirectoryUserKeys`: one file
per user). Its id, ``u-`` and the keyed hash of the store id, ``platform`` and user id under
the token key, names it in every envelope it seals, so reading needs no owner lookup.
:meth:`UserKeys.destroy` deletes the wrapped key: every copy of what it sealed — a backup of
the data, PostgreSQL's dead row versions, a JSONL journal — no longer opens, with any data key.
``docs/privacy.md`` says what this covers and what it leaks.
"""

from __future__ import annotations

import base64
import contextlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from hermes_sessions.cipher import KEY_BYTES, envelope_key_id
from hermes_sessions.exceptions import DecryptionError, EncryptionKeyError
from hermes_sessions.files import fsync_dir, make_private_dir, replace_file, write_file

if TYPE_CHECKING:
    from hermes_sessions.cipher import Cipher

__all__ = ["USER_KEY_PREFIX", "DirectoryUserKeys", "UserKeyStore", "UserKeys", "is_user_key"]

USER_KEY_PREFIX: Final = "u-"
"""How the id of a per-user key starts (``u-`` and 16 letters)."""
_SUFFIX: Final = ".key"


@runtime_checkable
class UserKeyStore(Protocol):
    """Where wrapped per-user keys live: apart from the data, so that destroying one is final.

    Names are key ids (``u-`` and 16 letters: no user id); values are envelopes (text).

    .. versionadded:: 0.1.0
    """

    def get(self, key_id: str) -> str | None:
        """The wrapped key of ``key_id``, or ``None`` (never created, or destroyed)."""
        ...

    def create(self, key_id: str, wrapped: str) -> str:
        """Store ``wrapped`` unless ``key_id`` has one; return the one stored (atomic)."""
        ...

    def replace(self, key_id: str, wrapped: str) -> None:
        """Store ``wrapped`` for an existing ``key_id`` (re-wrapped under a new data key)."""
        ...

    def destroy(self, key_id: str) -> bool:
        """Delete the wrapped key for good; whether there was one."""
        ...

    def key_ids(self) -> list[str]:
        """Every key id held, sorted."""
        ...


class DirectoryUserKeys:
    """Wrapped user keys as files ``<directory>/<key id>.key`` (mode ``0600``, synced).

    Keep the directory out of the data's backups, or back it up with a retention shorter than
    your erasure deadline: a destroyed key must not come back from a backup.

    .. versionadded:: 0.1.0
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        make_private_dir(self.directory)

    def __repr__(self) -> str:
        return f"DirectoryUserKeys({str(self.directory)!r})"

    def _path(self, key_id: str) -> Path:
        if not key_id.startswith(USER_KEY_PREFIX) or not key_id[2:].isalpha():
            raise EncryptionKeyError(key_id, "not a per-user key id")
        return self.directory / f"{key_id}{_SUFFIX}"

    def get(self, key_id: str) -> str | None:
        """The wrapped key, or ``None``."""
        try:
            return self._path(key_id).read_text(encoding="ascii")
        except FileNotFoundError:
            return None

    def create(self, key_id: str, wrapped: str) -> str:
        """Write the key through a temporary file and link it in: the first writer wins."""
        path = self._path(key_id)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        write_file(temporary, wrapped.encode("ascii"))
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink(missing_ok=True)
        fsync_dir(self.directory)
        stored = self.get(key_id)
        assert stored is not None  # noqa: S101  # linked just above, never removed meanwhile
        return stored

    def replace(self, key_id: str, wrapped: str) -> None:
        """Replace the file atomically."""
        replace_file(self._path(key_id), wrapped.encode("ascii"))

    def destroy(self, key_id: str) -> bool:
        """Unlink the file and sync the directory."""
        try:
            self._path(key_id).unlink()
        except FileNotFoundError:
            return False
        fsync_dir(self.directory)
        return True

    def key_ids(self) -> list[str]:
        """The ids of the files held."""
        return sorted(
            path.name.removesuffix(_SUFFIX)
            for path in self.directory.glob(f"{USER_KEY_PREFIX}*{_SUFFIX}")
        )


class _Unwrapped:
    """The key provider of the per-user cipher: each key unwrapped from the store on use."""

    def __init__(self, keys: UserKeys) -> None:
        self.keys = keys

    def current(self) -> tuple[str, bytes]:
        raise EncryptionKeyError(None, "per-user keys are chosen by owner, never current")

    def key(self, key_id: str) -> bytes:
        return self.keys.unwrap(key_id)


class UserKeys:
    """The per-user keys of one encrypted store: chosen by owner, unwrapped, destroyed.

    ``UserKeys(store)`` is given to :class:`EncryptedBackend` as ``user_keys=``; the backend
    binds it to its cipher and store id.

    .. versionadded:: 0.1.0
    """

    def __init__(self, store: UserKeyStore) -> None:
        self.store = store
        self._master: Cipher | None = None
        self._store_id = ""
        self._lock = threading.Lock()
        self._unwrapped: dict[str, bytes] = {}
        self.retiring: set[str] = set()
        """Key ids about to be destroyed: nothing new is sealed under them."""
        self.cipher: Cipher | None = None

    def bind(self, master: Cipher, store_id: str) -> None:
        """Use ``master`` (the store's cipher) to wrap keys for the store ``store_id``."""
        self._master = master
        self._store_id = store_id
        self.cipher = master.with_keys(_Unwrapped(self))

    def _bound(self) -> Cipher:
        if self._master is None:
            raise EncryptionKeyError(None, "UserKeys is not bound to an encrypted store yet")
        return self._master

    def key_id(self, platform: str, user_id: str) -> str:
        """The id of a user's key: ``u-`` and the keyed hash of store, platform and user id."""
        name = f"{self._store_id}\x00{platform}\x00{user_id}"
        return USER_KEY_PREFIX + self._bound().blind(name, "user-key")

    def _context(self, key_id: str) -> str:
        return f"{self._store_id}\x00user-key\x00key\x00{key_id}"

    def for_user(self, platform: str, user_id: str) -> tuple[str, bytes] | None:
        """``(key id, key)`` of a user, drawn and stored the first time (``None``: retiring).

        The store is read on every call (a destroyed key is never written under again, even
        by another process); the unwrapping is cached by the wrapped text.
        """
        key_id = self.key_id(platform, user_id)
        if key_id in self.retiring:
            return None
        wrapped = self.store.get(key_id)
        if wrapped is None:
            fresh = base64.b64encode(os.urandom(KEY_BYTES)).decode()
            wrapped = self.store.create(
                key_id, self._bound().encrypt(fresh, context=self._context(key_id))
            )
        return key_id, self._open(key_id, wrapped)

    def _open(self, key_id: str, wrapped: str) -> bytes:
        cached = self._unwrapped.get(wrapped)
        if cached is not None:
            return cached
        try:
            opened = self._bound().decrypt(wrapped, context=self._context(key_id))
        except DecryptionError as error:
            raise EncryptionKeyError(key_id, f"its wrapped key does not open ({error})") from None
        key = self._unwrapped[wrapped] = base64.b64decode(opened)
        return key

    def unwrap(self, key_id: str) -> bytes:
        """The key of ``key_id``; ``EncryptionKeyError`` once it was destroyed."""
        wrapped = self.store.get(key_id)
        if wrapped is None:
            raise EncryptionKeyError(key_id, "the user's key was destroyed (erase_user)")
        return self._open(key_id, wrapped)

    def destroy(self, platform: str, user_id: str) -> bool:
        """Destroy a user's key (and forget it in this process); whether there was one."""
        key_id = self.key_id(platform, user_id)
        with self._lock:
            wrapped = self.store.get(key_id)
            self._unwrapped.pop(wrapped or "", None)
            if self.cipher is not None:
                self.cipher.forget_key(key_id)
            return self.store.destroy(key_id)

    def rewrap(self) -> int:
        """Wrap every key not under the current data key again; return how many."""
        master, current, done = self._bound(), self._bound().current_key_id, 0
        for key_id in self.store.key_ids():
            wrapped = self.store.get(key_id)
            if wrapped is None or envelope_key_id(wrapped) == current:
                continue
            key = base64.b64encode(self._open(key_id, wrapped)).decode()
            with contextlib.suppress(FileNotFoundError):
                self.store.replace(key_id, master.encrypt(key, context=self._context(key_id)))
                done += 1
        return done

    def stale(self) -> list[str]:
        """Key ids whose wrapping is not under the current data key."""
        current = self._bound().current_key_id
        return [
            key_id
            for key_id in self.store.key_ids()
            if (wrapped := self.store.get(key_id)) is not None
            and envelope_key_id(wrapped) != current
        ]


def is_user_key(key_id: str) -> bool:
    """Whether ``key_id`` names a per-user key."""
    return key_id.startswith(USER_KEY_PREFIX)
