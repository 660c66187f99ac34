"""The turn ledger on an encrypted store: its rows are sealed like the rest (issue 40)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from encrypted_corpus import KEY_2, KINDS, cipher, plain_backend, stored_bytes

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.cipher import StaticKeys

if TYPE_CHECKING:
    from pathlib import Path

SOURCE = SessionSource(platform="telegram", chat_id="c-1", user_id="u-1")


@pytest.mark.parametrize("kind", KINDS)
def test_rows_are_sealed(kind: str, tmp_path: Path) -> None:
    """Platform ids, holders and reasons are nowhere in the stored bytes; they read back."""
    directory = tmp_path / kind
    backend = EncryptedBackend(plain_backend(kind, directory), cipher=cipher())
    with SessionStore(backend, ledger=True) as store:
        key = store.key_for(SOURCE)
        message = Message(role="user", content="hi", platform_message_id="pmid-zq7")
        store.ledger.accept(SOURCE, message, holder="hq9")
        store.ledger.fail(key, "pmid-zq7", holder="hq9", reason="rsn-zq8")
        failed = store.ledger.get(key, "pmid-zq7")
        assert failed is not None
        assert (failed.status, failed.reason) == ("failed", "rsn-zq8")
        data = stored_bytes(kind, directory)
    for secret in (b"pmid-zq7", b"hq9", b"rsn-zq8"):
        assert secret not in data, secret
    reopened = EncryptedBackend(plain_backend(kind, directory), cipher=cipher())
    with SessionStore(reopened, ledger=True) as store:
        again = store.ledger.get(store.key_for(SOURCE), "pmid-zq7")
        assert again == failed


@pytest.mark.parametrize("kind", KINDS)
def test_rotating_the_key_reseals_the_rows(kind: str, tmp_path: Path) -> None:
    """After ``rotate_key`` the rows open with the new key alone; a second run has nothing."""
    directory = tmp_path / kind
    backend = EncryptedBackend(plain_backend(kind, directory), cipher=cipher())
    with SessionStore(backend, ledger=True) as store:
        key = store.key_for(SOURCE)
        store.ledger.accept(
            SOURCE, Message(role="user", content="q", platform_message_id="p1"), holder="w"
        )
        answer = store.ledger.answer(key, "p1", Message(role="assistant", content="a"), holder="w")
        progress = list(backend.rotate_key(StaticKeys({"k2": KEY_2})))
        assert progress[-1].finished
        assert progress[-1].ledger_rewritten == 2  # the message's row and the reply's intent
        assert list(backend.rotate_key())[-1].ledger_rewritten == 0
    rotated = EncryptedBackend(plain_backend(kind, directory), cipher=cipher({"k2": KEY_2}))
    with SessionStore(rotated, ledger=True) as store:
        inbound = store.ledger.get(key, "p1")
        assert inbound is not None
        assert inbound.status == "answered"
        (intent,) = store.ledger.intents()
        assert intent.message_id == answer.intents[0].message_id
        assert store.ledger.reply(intent).content == "a"
