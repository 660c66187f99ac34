"""Encryption at rest: keys, the authenticated cipher, envelopes and keyed token hashes.

A :class:`Cipher` does two things for :class:`~hermes_sessions.backends.encrypted.EncryptedBackend`:

* **encrypts** text with AES-256-GCM (authenticated: a wrong key or a changed byte is an error,
  never garbage) under a fresh random 96-bit nonce. Each ciphertext is a small versioned
  *envelope*, ``hse1:<key id>:<base64url(nonce + ciphertext + tag)>``, so every value names the
  key that opens it and keys can be rotated value by value;
* **blinds** search tokens, titles and platform message ids with HMAC-SHA-256 under a separate
  *token key*, so equal inputs give equal outputs (what an index needs) and nothing else is
  learnt. The token key is never rotated by ``rotate_key()``: every stored hash would change.

Keys come from a :class:`KeyProvider`: :class:`StaticKeys` (keys in hand), :class:`EnvKeys`
(an environment variable) or :class:`CallableKeys` (a function, for a KMS). Data keys are
32 bytes; key ids are 1 to 64 characters of ``A-Z a-z 0-9 _ -``.

The ``cryptography`` package (extra ``encryption``) is imported when the first cipher is made, so
``import hermes_sessions`` does not need it. ``docs/privacy.md`` states what is protected and
what leaks.

>>> cipher = Cipher(StaticKeys({"k1": bytes(32)}), token_key=bytes(32))  # never zero keys
>>> envelope = cipher.encrypt("hello")
>>> envelope.startswith("hse1:k1:"), cipher.decrypt(envelope)
(True, 'hello')
>>> cipher.blind("docker") == cipher.blind("docker") != cipher.blind("dockers")
True
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from hermes_sessions.exceptions import (
    DecryptionError,
    EncryptionKeyError,
    EncryptionMismatchError,
    InvalidValueError,
    MissingDependencyError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from hermes_sessions.protocols import StateStore

__all__ = [
    "ENVELOPE_PREFIX",
    "KEYS_VARIABLE",
    "KEY_BYTES",
    "STORE_SCOPE",
    "TOKEN_KEY_VARIABLE",
    "CallableKeys",
    "Cipher",
    "EnvKeys",
    "KeyProvider",
    "StaticKeys",
    "envelope_key_id",
    "envelope_plaintext_size",
    "generate_key",
    "is_envelope",
    "require_plain_store",
]

ENVELOPE_PREFIX: Final = "hse1:"
"""How every ciphertext starts (format version 1).

.. versionadded:: 0.1.0
"""
KEY_BYTES: Final = 32
"""The length of a data key (AES-256) and the shortest token key, in bytes.

.. versionadded:: 0.1.0
"""
KEYS_VARIABLE: Final = "HERMES_SESSIONS_KEYS"
"""The variable :class:`EnvKeys` and :meth:`Cipher.from_environment` read the data keys from.

.. versionadded:: 0.1.0
"""
TOKEN_KEY_VARIABLE: Final = "HERMES_SESSIONS_TOKEN_KEY"  # noqa: S105  # a variable name, not a key
"""The variable :meth:`Cipher.from_environment` reads the base64 token key from.

.. versionadded:: 0.1.0
"""
STORE_SCOPE: Final = "store|encryption"
"""The state scope where an encrypted store records that it is, in the clear.

It holds the store id, the encryption state and one canary per key id (``docs/privacy.md``).
No :class:`~hermes_sessions.state.StateScope` has this id; the encrypted backend hides it.

.. versionadded:: 0.1.0
"""
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_TOKEN_BYTES: Final = 8  # 64-bit hashes: a collision among 10 million tokens is ~3e-6 likely
_KEY_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ENVELOPE: Final = re.compile(r"hse1:([A-Za-z0-9_-]{1,64}):([A-Za-z0-9_-]+)")
# Hash bytes written with the letters a-p only: one word to every tokenizer (no digits, which
# some parsers read as numbers), and stable under case folding.
_LETTERS: Final = str.maketrans("0123456789abcdef", "abcdefghijklmnop")
_CACHE_LIMIT: Final = 1 << 16


def generate_key() -> bytes:
    """A fresh random 32-byte key (for a data key or the token key).

    .. versionadded:: 0.1.0
    """
    return os.urandom(KEY_BYTES)


def _check_key(key_id: str, key: object) -> bytes:
    if _KEY_ID.fullmatch(key_id) is None:
        raise InvalidValueError("key id", f"must be 1 to 64 of A-Z a-z 0-9 _ -, got {key_id!r}")
    if not isinstance(key, bytes) or len(key) != KEY_BYTES:
        raise InvalidValueError(f"key {key_id!r}", f"must be {KEY_BYTES} bytes")
    return key


@runtime_checkable
class KeyProvider(Protocol):
    """Where a cipher gets its data keys.

    .. versionadded:: 0.1.0
    """

    def current(self) -> tuple[str, bytes]:
        """The key new ciphertexts are written with: ``(key id, 32-byte key)``.

        Raises :class:`~hermes_sessions.exceptions.EncryptionKeyError` when there is none.
        """
        ...

    def key(self, key_id: str) -> bytes:
        """The key of ``key_id`` (current or retired); ``EncryptionKeyError`` when unknown."""
        ...


class StaticKeys:
    """Keys held in memory: ``{key id: key}``; the current one is ``current`` (else the first).

    Retired keys stay in the mapping until ``rotate_key()`` has re-encrypted their data.

    .. versionadded:: 0.1.0
    """

    def __init__(self, keys: Mapping[str, bytes], *, current: str | None = None) -> None:
        if not keys:
            raise InvalidValueError("StaticKeys", "needs at least one key")
        self._keys = {key_id: _check_key(key_id, key) for key_id, key in keys.items()}
        self._current = next(iter(self._keys)) if current is None else current
        if self._current not in self._keys:
            raise InvalidValueError("StaticKeys.current", f"{current!r} is not one of the keys")

    def current(self) -> tuple[str, bytes]:
        """The current key."""
        return self._current, self._keys[self._current]

    def key(self, key_id: str) -> bytes:
        """The key of ``key_id``."""
        try:
            return self._keys[key_id]
        except KeyError:
            raise EncryptionKeyError(key_id, "StaticKeys does not hold it") from None


def _parse_keys(value: str, where: str) -> StaticKeys:
    """``id:base64key[,id:base64key...]`` as keys, the first current."""
    keys: dict[str, bytes] = {}
    for item in value.split(","):
        key_id, _, encoded = item.strip().partition(":")
        try:
            keys[key_id] = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise EncryptionKeyError(
                key_id or None, f"{where} holds a key that is not base64"
            ) from None
    return StaticKeys(keys)


class EnvKeys:
    """Keys read from an environment variable: ``id:base64key[,id:base64key...]``.

    The first key is the current one; later ones are retired keys still needed for reading.
    The variable is read on first use (a missing or malformed variable is an
    :class:`~hermes_sessions.exceptions.EncryptionKeyError`).

    .. versionadded:: 0.1.0
    """

    def __init__(self, variable: str = KEYS_VARIABLE) -> None:
        self.variable = variable
        self._keys: StaticKeys | None = None

    def _load(self) -> StaticKeys:
        if self._keys is not None:
            return self._keys
        value = os.environ.get(self.variable)
        if not value:
            raise EncryptionKeyError(None, f"the environment variable {self.variable} is not set")
        self._keys = _parse_keys(value, self.variable)
        return self._keys

    def current(self) -> tuple[str, bytes]:
        """The first key of the variable."""
        return self._load().current()

    def key(self, key_id: str) -> bytes:
        """The key of ``key_id`` from the variable."""
        return self._load().key(key_id)


class CallableKeys:
    """Keys fetched by a function (a KMS client), cached for the life of the provider.

    ``fetch(None)`` returns the current ``(key id, key)``; ``fetch(key_id)`` the key of that id
    (the returned id must match). Exceptions of ``fetch`` propagate.

    .. versionadded:: 0.1.0
    """

    def __init__(self, fetch: Callable[[str | None], tuple[str, bytes]]) -> None:
        self._fetch = fetch
        self._current: tuple[str, bytes] | None = None
        self._cache: dict[str, bytes] = {}

    def current(self) -> tuple[str, bytes]:
        """The current key (fetched once)."""
        if self._current is None:
            key_id, key = self._fetch(None)
            self._current = (key_id, _check_key(key_id, key))
            self._cache[key_id] = key
        return self._current

    def key(self, key_id: str) -> bytes:
        """The key of ``key_id`` (fetched once)."""
        cached = self._cache.get(key_id)
        if cached is None:
            fetched_id, key = self._fetch(key_id)
            if fetched_id != key_id:
                raise EncryptionKeyError(key_id, f"the key function returned {fetched_id!r}")
            cached = self._cache[key_id] = _check_key(key_id, key)
        return cached


def _aead_class() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415
    except ImportError:  # pragma: no cover - the dev extra installs it
        raise MissingDependencyError(
            "cryptography", extra="encryption", feature="hermes_sessions.cipher"
        ) from None
    return AESGCM


def _associated(key_id: str, context: str) -> bytes:
    """GCM's associated data: the key id, then the context (a key id never holds a NUL)."""
    if not context:
        return key_id.encode()
    return f"{key_id}\x00{context}".encode("utf-8", "surrogatepass")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def is_envelope(value: object) -> bool:
    """Whether ``value`` is a string in the envelope format (not whether it decrypts).

    .. versionadded:: 0.1.0
    """
    return isinstance(value, str) and _ENVELOPE.fullmatch(value) is not None


def envelope_key_id(envelope: str) -> str:
    """The key id an envelope names; ``DecryptionError`` if it is not an envelope.

    .. versionadded:: 0.1.0
    """
    match = _ENVELOPE.fullmatch(envelope)
    if match is None:
        raise DecryptionError(None, "the value is not an envelope (written without the cipher?)")
    return match[1]


def envelope_plaintext_size(value: str) -> int | None:
    """The UTF-8 size of the text an envelope holds (``None`` for other strings).

    GCM adds a fixed nonce and tag, so the size is known without the key; state limits
    count it, so an encrypted scope holds what a plain one does.

    .. versionadded:: 0.1.0
    """
    match = _ENVELOPE.fullmatch(value)
    if match is None:
        return None
    payload = len(match[2])
    if payload % 4 == 1:
        return None
    return payload * 3 // 4 - _NONCE_BYTES - _TAG_BYTES


class Cipher:
    """Authenticated encryption under a key provider, and keyed hashes under a token key.

    Args:
        keys: The data keys (current and retired).
        token_key: At least 32 bytes for HMAC-SHA-256; keep it apart from the data keys and
            never change it for a store (its search index and title hashes depend on it).

    Thread-safe: the AES objects and the hash cache are only ever added to.

    .. versionadded:: 0.1.0
    """

    def __init__(self, keys: KeyProvider, *, token_key: bytes) -> None:
        if len(token_key) < KEY_BYTES:
            raise InvalidValueError("token_key", f"must be at least {KEY_BYTES} bytes")
        self.keys = keys
        self._token_key = token_key
        self._aead = _aead_class()
        self._opened: dict[str, Any] = {}
        self._tokens: dict[str, str] = {}

    def _aes(self, key_id: str, key: bytes | None = None) -> Any:
        aes = self._opened.get(key_id)
        if aes is None:
            aes = self._opened[key_id] = self._aead(self.keys.key(key_id) if key is None else key)
        return aes

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Cipher:
        """The cipher of ``$HERMES_SESSIONS_KEYS`` and ``$HERMES_SESSIONS_TOKEN_KEY``.

        The data keys are read as :class:`EnvKeys` reads them; the token key is base64.
        ``environ`` defaults to ``os.environ``. A missing or malformed variable raises
        :class:`~hermes_sessions.exceptions.EncryptionKeyError`.

        .. versionadded:: 0.1.0
        """
        values = os.environ if environ is None else environ
        return _from_variables(values, "the environment")

    @classmethod
    def from_key_file(cls, path: str | os.PathLike[str]) -> Cipher:
        """The cipher of a key file: ``HERMES_SESSIONS_KEYS=...`` and ``..._TOKEN_KEY=...`` lines.

        The file holds the two variables of :meth:`from_environment`, one ``NAME=value`` per
        line (blank lines and ``#`` comments allowed: a systemd ``EnvironmentFile`` works). It
        must not be readable by group or others (``chmod 600``), else
        :class:`~hermes_sessions.exceptions.EncryptionKeyError`.

        .. versionadded:: 0.1.0
        """
        return _from_variables(_read_key_file(Path(path)), f"the key file {path}")

    def use_keys(self, keys: KeyProvider) -> None:
        """Read and write with ``keys`` from now on (the token key stays)."""
        self.keys = keys
        self._opened = {}

    @property
    def current_key_id(self) -> str:
        """The id new ciphertexts are written under."""
        return self.keys.current()[0]

    def with_keys(self, keys: KeyProvider) -> Cipher:
        """A cipher over ``keys`` with this one's token key (per-user keys use one).

        .. versionadded:: 0.1.0
        """
        return Cipher(keys, token_key=self._token_key)

    def forget_key(self, key_id: str) -> None:
        """Drop what this cipher keeps of ``key_id`` (its next use asks the provider again).

        .. versionadded:: 0.1.0
        """
        self._opened.pop(key_id, None)

    def encrypt(
        self, plaintext: str, *, context: str = "", key: tuple[str, bytes] | None = None
    ) -> str:
        """The envelope of ``plaintext`` under the current key (a fresh nonce each time).

        ``context`` is authenticated with the key id (GCM's associated data) but not stored:
        :meth:`decrypt` needs the same ``context``, so an envelope opens only in the place it
        was sealed for (the encrypted backend binds its store, kind, id and field). ``key``
        (``(key id, key)``) seals under that key instead of the current one.
        """
        key_id, key_bytes = self.keys.current() if key is None else key
        nonce = os.urandom(_NONCE_BYTES)
        data = plaintext.encode("utf-8", "surrogatepass")
        sealed = self._aes(key_id, key_bytes).encrypt(nonce, data, _associated(key_id, context))
        return f"{ENVELOPE_PREFIX}{key_id}:{_b64(nonce + sealed)}"

    def decrypt(self, envelope: str, *, context: str = "") -> str:
        """The text of an envelope sealed with ``context``.

        Raises:
            EncryptionKeyError: the provider has no key of the envelope's id.
            DecryptionError: the envelope is malformed, the key or data is not the right one,
                or it was sealed for another ``context`` (copied from elsewhere).
        """
        key_id = envelope_key_id(envelope)
        try:
            blob = _unb64(envelope[len(ENVELOPE_PREFIX) + len(key_id) + 1 :])
        except (binascii.Error, ValueError):
            raise DecryptionError(key_id, "the envelope is not base64") from None
        if len(blob) < _NONCE_BYTES + _TAG_BYTES:
            raise DecryptionError(key_id, "the envelope is truncated")
        try:
            data = self._aes(key_id).decrypt(
                blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], _associated(key_id, context)
            )
        except EncryptionKeyError:
            raise
        except Exception:  # noqa: BLE001  # cryptography's InvalidTag (imported lazily)
            raise DecryptionError(key_id, "the authentication tag does not match") from None
        opened: bytes = data
        return opened.decode("utf-8", "surrogatepass")

    def blind(self, value: str, purpose: str = "token") -> str:
        """The keyed hash of ``value``: 16 letters ``a``-``p``, equal exactly for equal inputs.

        ``purpose`` separates uses (``token``, ``title``, ``lineage``, ``platform-id``), so
        a title's hash never equals a token's.
        """
        cache_key = f"{purpose}\x00{value}"
        cached = self._tokens.get(cache_key)
        if cached is None:
            digest = hmac.digest(
                self._token_key, cache_key.encode("utf-8", "surrogatepass"), "sha256"
            )
            cached = digest[:_TOKEN_BYTES].hex().translate(_LETTERS)
            if len(self._tokens) < _CACHE_LIMIT:
                self._tokens[cache_key] = cached
        return cached

    def blind_tokens(self, tokens: Iterable[str]) -> list[str]:
        """The keyed hashes of search tokens, in order."""
        return [self.blind(token) for token in tokens]


def _read_key_file(path: Path) -> dict[str, str]:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise EncryptionKeyError(None, f"the key file {path} cannot be read ({error})") from None
    if os.name == "posix" and stat.S_IMODE(mode) & 0o077:
        raise EncryptionKeyError(
            None, f"the key file {path} is readable by others; chmod 600 {path}"
        )
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, equals, value = line.strip().partition("=")
        if not equals or name.startswith("#"):
            continue
        values[name.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values


def _from_variables(values: Mapping[str, str], where: str) -> Cipher:
    keys, token = values.get(KEYS_VARIABLE, ""), values.get(TOKEN_KEY_VARIABLE, "")
    for name, value in ((KEYS_VARIABLE, keys), (TOKEN_KEY_VARIABLE, token)):
        if not value:
            raise EncryptionKeyError(None, f"{name} is not set in {where}")
    try:
        token_key = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionKeyError(None, f"{TOKEN_KEY_VARIABLE} in {where} is not base64") from None
    return Cipher(_parse_keys(keys, f"{KEYS_VARIABLE} in {where}"), token_key=token_key)


def require_plain_store(backend: StateStore) -> None:
    """Refuse ``backend`` when it is an encrypted store read without its cipher.

    Everything that writes through a backend of its own (the store, the bundle and Hermes
    imports) calls this first, so nothing is written in the clear into an encrypted store.
    The encrypted backend hides :data:`STORE_SCOPE`, so it passes.

    Raises:
        EncryptionMismatchError: ``backend``'s store records that it is encrypted.

    .. versionadded:: 0.1.0
    """
    if backend.get_state([STORE_SCOPE]).get(STORE_SCOPE):
        raise EncryptionMismatchError("no-cipher", where=_where(backend))


def _where(backend: object) -> str:
    """The path or schema of a built-in backend (for messages), else ``""``."""
    describe = getattr(backend, "describe", None)
    if callable(describe):
        return str(describe())
    return str(getattr(backend, "path", None) or getattr(backend, "directory", None) or "")
