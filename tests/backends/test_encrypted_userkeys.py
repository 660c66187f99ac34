"""Per-user keys: a user's content under their own key, destroyed by erase_user everywhere."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest
from encrypted_corpus import KEY_1, KEY_2, KINDS, cipher, plain_backend

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends.encrypted import DirectoryUserKeys, EncryptedBackend, UserKeys
from hermes_sessions.backends.encrypted._codec import Codec
from hermes_sessions.cipher import StaticKeys, envelope_key_id
from hermes_sessions.exceptions import EncryptionKeyError, EncryptionMismatchError
from hermes_sessions.state import StateScope

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    Opener = Callable[..., SessionStore]

ALICE = SessionSource(platform="telegram", chat_id="100", user_id="alice")
BOB = SessionSource(platform="telegram", chat_id="200", user_id="bob")


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each built-in persistent backend."""
    return str(request.param)


@pytest.fixture
def open_store(kind: str, tmp_path: Path) -> Callable[..., SessionStore]:
    """Open the encrypted store of ``kind`` with per-user keys in ``tmp_path / "keys"``."""

    def open_(directory: Path | None = None, **given: object) -> SessionStore:
        options = {"cipher": cipher(), "user_keys": UserKeys(DirectoryUserKeys(tmp_path / "keys"))}
        options.update(given)
        inner = plain_backend(kind, directory or tmp_path / "store")
        return SessionStore(EncryptedBackend(inner, **options))  # type: ignore[arg-type]

    return open_


def _chat(store: SessionStore, source: SessionSource, text: str) -> str:
    session_id = store.get_or_create(source).session_id
    store.append(
        session_id,
        Message(role="user", content=text),
        Message(role="assistant", content=f"reply to {text}"),
        state_delta={StateScope.session(session_id): {"topic": text}},
    )
    store.update_state({StateScope.user("main", "telegram", source.user_id or ""): {"lang": "en"}})
    return session_id


def _key_ids(store: SessionStore, session_id: str) -> set[str]:
    inner = store.backend.inner  # type: ignore[attr-defined]
    found = {envelope_key_id(m.extra["hermes_sealed"]) for m in inner.get_messages(session_id)}
    record = inner.get_session(session_id)
    found.add(envelope_key_id(record.metadata["hermes_sealed"]))
    return found


def test_a_users_content_is_sealed_under_their_own_key(open_store: Opener) -> None:
    """Alice's and Bob's sessions, messages and state each use their own per-user key."""
    with open_store() as store:
        alice = _chat(store, ALICE, "alice secret")
        store.backend.update_session(alice, values={"metadata": {"note": "alice"}})
        bob = _chat(store, BOB, "bob secret")
        store.backend.update_session(bob, values={"metadata": {"note": "bob"}})
        (alice_key,) = _key_ids(store, alice)
        (bob_key,) = _key_ids(store, bob)
        assert alice_key.startswith("u-")
        assert bob_key.startswith("u-")
        assert alice_key != bob_key
        inner = store.backend.inner  # type: ignore[attr-defined]
        user_scope = StateScope.user("main", "telegram", "alice").id
        assert envelope_key_id(inner.get_state([user_scope])[user_scope]["lang"]) == alice_key
        assert [m.content for m in store.messages(alice)] == [
            "alice secret",
            "reply to alice secret",
        ]
        assert store.backend.check().ok  # type: ignore[attr-defined]


def test_erase_user_destroys_the_key_and_every_copy_of_what_it_sealed(
    open_store: Opener, kind: str, tmp_path: Path
) -> None:
    """After erase_user, Alice's sealed values taken before (a backup, dead rows) never open."""
    with open_store() as store:
        alice = _chat(store, ALICE, "alice secret")
        bob = _chat(store, BOB, "bob secret")
        inner = store.backend.inner  # type: ignore[attr-defined]
        copies = inner.get_messages(alice)  # what a backup or a dead row version holds
        if kind != "postgres":
            shutil.copytree(tmp_path / "store", tmp_path / "backup")
        report = store.erase_user("telegram", "alice")
        assert report.keys_destroyed == 1
        codec = store.backend.codec  # type: ignore[attr-defined]
        for sealed in copies:
            with pytest.raises(EncryptionKeyError):
                codec.open_message(sealed, alice)
        assert [m.content for m in store.messages(bob)] == ["bob secret", "reply to bob secret"]
    if kind != "postgres":
        with open_store(tmp_path / "backup") as backup:  # the master key, the same key store
            with pytest.raises(EncryptionKeyError):
                backup.messages(alice)
            assert len(backup.messages(bob)) == 2


def test_a_session_kept_by_erasure_stays_readable(open_store: Opener) -> None:
    """A shared session owned by Alice is re-sealed under the data key before her key goes."""
    with open_store() as store:
        group = SessionSource(platform="telegram", chat_id="g1", chat_type="group", user_id="alice")
        session_id = store.get_or_create(group).session_id
        store.set_title(session_id, "alice's group")
        store.append(
            session_id,
            Message(role="user", content="from alice", sender_id="alice"),
            Message(role="user", content="from bob", sender_id="bob"),
            Message(role="assistant", content="to everyone"),
        )
        report = store.erase_user("telegram", "alice")
        assert report.sessions == ()
        assert report.keys_destroyed == 1
        assert [m.content for m in store.messages(session_id)] == ["from bob", "to everyone"]
        assert store.backend.get_session(session_id).title == "alice's group"
        assert store.list_sessions().items
        assert store.backend.check().ok  # type: ignore[attr-defined]


def test_rotate_key_rewraps_the_user_keys(open_store: Opener, tmp_path: Path) -> None:
    """After a rotation the old data key can go: user keys are wrapped under the new one."""
    with open_store() as store:
        alice = _chat(store, ALICE, "alice secret")
        last = list(store.backend.rotate_key(StaticKeys({"k2": KEY_2})))[-1]  # type: ignore[attr-defined]
        assert last.finished
    wrapped = [p.read_text() for p in (tmp_path / "keys").glob("u-*.key")]
    assert [envelope_key_id(w) for w in wrapped] == ["k2"]
    with open_store(cipher=cipher({"k2": KEY_2})) as store:
        assert store.messages(alice)[0].content == "alice secret"


def test_a_store_with_user_keys_is_refused_without_them(
    open_store: Opener, kind: str, tmp_path: Path
) -> None:
    """Once opened with user_keys=, the store records it and refuses an opener without them."""
    with open_store() as store:
        _chat(store, ALICE, "alice secret")
    inner = plain_backend(kind, tmp_path / "store")
    with pytest.raises(EncryptionMismatchError) as caught:
        EncryptedBackend(inner, cipher=cipher({"k1": KEY_1}))
    assert caught.value.reason == "no-user-keys"
    assert "user_keys=" in str(caught.value)


def test_a_user_key_envelope_without_the_user_keys_names_them(
    open_store: Opener, kind: str, tmp_path: Path
) -> None:
    """The codec without user keys says which key a per-user envelope needs."""
    with open_store() as store:
        alice = _chat(store, ALICE, "alice secret")
        sealed = store.backend.inner.get_messages(alice)[0]  # type: ignore[attr-defined]
        bare = Codec(store.backend.cipher, store.backend.store_id)  # type: ignore[attr-defined]
        with pytest.raises(EncryptionKeyError, match="user_keys"):
            bare.open_message(sealed, alice)


def test_the_first_key_created_wins(tmp_path: Path) -> None:
    """Two creators of one user's key get the same stored key; destroy is final."""
    keys = DirectoryUserKeys(tmp_path / "keys")
    assert keys.create("u-abcdefghabcdefgh", "first") == "first"
    assert keys.create("u-abcdefghabcdefgh", "second") == "first"
    assert keys.key_ids() == ["u-abcdefghabcdefgh"]
    assert oct((tmp_path / "keys" / "u-abcdefghabcdefgh.key").stat().st_mode & 0o777) == "0o600"
    assert keys.destroy("u-abcdefghabcdefgh")
    assert not keys.destroy("u-abcdefghabcdefgh")
    assert keys.get("u-abcdefghabcdefgh") is None
    assert list((tmp_path / "keys").iterdir()) == []


def test_a_key_id_that_is_not_a_user_key_is_refused(tmp_path: Path) -> None:
    """A name that could leave the directory is never used as a file name."""
    keys = DirectoryUserKeys(tmp_path / "keys")
    with pytest.raises(EncryptionKeyError):
        keys.get("../state")
    with pytest.raises(EncryptionKeyError):
        keys.create("k1", "x")
