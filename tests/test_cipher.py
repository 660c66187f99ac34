"""The cipher: envelopes, key providers, errors, keyed hashes and the state size of envelopes."""

from __future__ import annotations

import base64
import os
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.cipher import (
    CallableKeys,
    Cipher,
    EnvKeys,
    StaticKeys,
    envelope_key_id,
    envelope_plaintext_size,
    generate_key,
    is_envelope,
)
from hermes_sessions.exceptions import DecryptionError, EncryptionKeyError, InvalidValueError
from hermes_sessions.state import state_size

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
TOKEN_KEY = bytes(range(2, 34))


def make(keys: dict[str, bytes] | None = None) -> Cipher:
    """A cipher over ``keys`` (default ``k1``)."""
    return Cipher(StaticKeys(keys or {"k1": KEY}), token_key=TOKEN_KEY)


@settings(deadline=None, max_examples=60)
@given(st.text())
def test_any_text_round_trips(value: str) -> None:
    """Every string, lone surrogates included, decrypts to itself."""
    cipher = make()
    assert cipher.decrypt(cipher.encrypt(value)) == value


def test_each_encryption_uses_a_fresh_nonce() -> None:
    """The same text encrypts differently every time, and names its key."""
    cipher = make()
    first, second = cipher.encrypt("same"), cipher.encrypt("same")
    assert first != second
    assert envelope_key_id(first) == "k1"
    assert is_envelope(first)
    assert not is_envelope("hello")


def test_a_wrong_key_raises_decryption_error() -> None:
    """A ciphertext opened with another key under its id fails the tag: an error, never garbage."""
    envelope = make().encrypt("secret")
    with pytest.raises(DecryptionError) as caught:
        make({"k1": OTHER}).decrypt(envelope)
    assert caught.value.key_id == "k1"


def test_a_changed_byte_raises_decryption_error() -> None:
    """Tampering with the ciphertext is detected."""
    envelope = make().encrypt("secret")
    head, payload = envelope.rsplit(":", 1)
    flipped = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
    with pytest.raises(DecryptionError):
        make().decrypt(f"{head}:{flipped}")
    with pytest.raises(DecryptionError):
        make().decrypt("plain text")


def test_an_unknown_key_id_raises_encryption_key_error() -> None:
    """A provider without the envelope's key says which key is missing."""
    envelope = make().encrypt("secret")
    with pytest.raises(EncryptionKeyError) as caught:
        make({"k2": OTHER}).decrypt(envelope)
    assert caught.value.key_id == "k1"
    assert "k1" in str(caught.value)


def test_errors_pickle_with_their_attributes() -> None:
    """Both errors cross process boundaries intact."""
    for error in (DecryptionError("k1", "tag"), EncryptionKeyError(None, "unset")):
        copy = pickle.loads(pickle.dumps(error))  # noqa: S301  # our own bytes
        assert (type(copy), copy.key_id, str(copy)) == (type(error), error.key_id, str(error))


def test_env_keys_read_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """``id:base64`` pairs; the first is current and later ones still read."""
    old = make({"old": OTHER}).encrypt("x")
    value = f"new:{base64.b64encode(KEY).decode()},old:{base64.b64encode(OTHER).decode()}"
    monkeypatch.setenv("HS_TEST_KEYS", value)
    cipher = Cipher(EnvKeys("HS_TEST_KEYS"), token_key=TOKEN_KEY)
    assert cipher.current_key_id == "new"
    assert cipher.decrypt(old) == "x"


def test_env_keys_without_the_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unset variable raises EncryptionKeyError naming it."""
    monkeypatch.delenv("HS_TEST_KEYS", raising=False)
    cipher = Cipher(EnvKeys("HS_TEST_KEYS"), token_key=TOKEN_KEY)
    with pytest.raises(EncryptionKeyError, match="HS_TEST_KEYS"):
        cipher.encrypt("x")


def test_callable_keys_fetch_once_per_id() -> None:
    """A KMS-style function is asked for the current key and for each id once."""
    asked: list[str | None] = []

    def fetch(key_id: str | None) -> tuple[str, bytes]:
        asked.append(key_id)
        return ("kms1", KEY) if key_id in (None, "kms1") else ("old", OTHER)

    cipher = Cipher(CallableKeys(fetch), token_key=TOKEN_KEY)
    envelope = cipher.encrypt("a")
    old = make({"old": OTHER}).encrypt("b")
    assert [cipher.decrypt(envelope), cipher.decrypt(old), cipher.decrypt(old)] == ["a", "b", "b"]
    assert asked == [None, "old"]


def test_keys_of_the_wrong_size_are_refused() -> None:
    """Data keys are 32 bytes, the token key at least 32, key ids plain names."""
    with pytest.raises(InvalidValueError):
        StaticKeys({"k1": b"short"})
    with pytest.raises(InvalidValueError):
        StaticKeys({"bad id": KEY})
    with pytest.raises(InvalidValueError):
        Cipher(StaticKeys({"k1": KEY}), token_key=b"short")
    assert len(generate_key()) == 32


def test_blind_is_keyed_deterministic_and_token_shaped() -> None:
    """Equal inputs give equal 16-letter hashes; another token key or purpose gives others."""
    cipher = make()
    other = Cipher(StaticKeys({"k1": KEY}), token_key=os.urandom(32))
    hashed = cipher.blind("docker")
    assert hashed == cipher.blind("docker")
    assert len(hashed) == 16
    assert set(hashed) <= set("abcdefghijklmnop")
    assert hashed not in (other.blind("docker"), cipher.blind("docker", "title"))


@settings(deadline=None, max_examples=40)
@given(st.dictionaries(st.text(min_size=1), st.text() | st.integers() | st.lists(st.booleans())))
def test_an_envelope_counts_as_the_json_it_holds(values: dict[str, object]) -> None:
    """A scope of envelopes has exactly the state size of the plain scope."""
    import json  # noqa: PLC0415

    cipher = make()
    try:
        plain_size = state_size(values)
    except UnicodeEncodeError:  # lone surrogates: a plain scope cannot hold them either
        return
    sealed = {
        key: cipher.encrypt(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        for key, value in values.items()
    }
    assert state_size(sealed) == plain_size
    assert envelope_plaintext_size("not an envelope") is None


def test_importing_the_library_does_not_import_cryptography() -> None:
    """``cryptography`` loads when the first cipher is made, not on import."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = (
        "import sys, hermes_sessions, hermes_sessions.cipher, hermes_sessions.state, "
        "hermes_sessions.backends.encrypted; assert 'cryptography' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
