"""An encrypted store knows it is: its marker and canaries, refusals at open, encrypt_store."""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from encrypted_corpus import KEY_1, KEY_2, KINDS, cipher, fill, plain_backend, stored_bytes

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends import open_backend
from hermes_sessions.backends.encrypted import EncryptedBackend, encrypt_store
from hermes_sessions.cipher import STORE_SCOPE, require_plain_store
from hermes_sessions.exceptions import EncryptionMismatchError, InvalidArgumentError
from hermes_sessions.queries import SearchQuery, SessionQuery
from hermes_sessions.state import StateScope

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.protocols import SearchableBackend

SOURCE = SessionSource(platform="telegram", chat_id="42", user_id="42")


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each built-in persistent backend."""
    return str(request.param)


def _encrypted_store(kind: str, directory: Path) -> str:
    """An encrypted store with one chat on ``directory``; return its session id."""
    with SessionStore(EncryptedBackend(plain_backend(kind, directory), cipher=cipher())) as store:
        session_id = store.get_or_create(SOURCE).session_id
        store.append(session_id, Message(role="user", content="mkmarkerhello1 deploy"))
        return session_id


def _refusal(opening: pytest.ExceptionInfo[EncryptionMismatchError]) -> str:
    return opening.value.reason


def test_a_new_store_records_that_it_is_encrypted(kind: str, tmp_path: Path) -> None:
    """The marker holds a store id, the state, the token check and the current key's canary."""
    _encrypted_store(kind, tmp_path)
    with plain_backend(kind, tmp_path) as inner:
        marker = inner.get_state([STORE_SCOPE])[STORE_SCOPE]
    assert marker["state"] == "sealed"
    assert len(marker["store_id"]) == 22
    assert set(marker) == {"store_id", "state", "token", "canary:k1"}
    assert marker["canary:k1"].startswith("hse1:k1:")


def test_opening_an_encrypted_store_without_a_cipher_is_refused(kind: str, tmp_path: Path) -> None:
    """SessionStore on the plain backend raises EncryptionMismatchError at once."""
    _encrypted_store(kind, tmp_path)
    inner = plain_backend(kind, tmp_path)
    with pytest.raises(EncryptionMismatchError) as caught:
        SessionStore(inner)
    inner.close()
    assert _refusal(caught) == "no-cipher"
    assert "cipher" in str(caught.value)


@pytest.mark.parametrize("backend", ["sqlite", "jsonl"])
def test_open_backend_refuses_an_encrypted_home_without_a_cipher(
    backend: str, tmp_path: Path
) -> None:
    """open_backend and SessionStore.open refuse it (and close what they opened)."""
    with SessionStore.open(tmp_path, backend, cipher=cipher()) as store:  # type: ignore[arg-type]
        store.get_or_create(SOURCE)
    with pytest.raises(EncryptionMismatchError):
        open_backend(backend, tmp_path)
    with pytest.raises(EncryptionMismatchError):
        SessionStore.open(tmp_path, backend)  # type: ignore[arg-type]
    with SessionStore.open(tmp_path, backend, cipher=cipher()) as store:  # type: ignore[arg-type]
        assert store.list_sessions()


def test_a_wrong_key_cannot_write_a_new_chat(kind: str, tmp_path: Path) -> None:
    """A redeployed, regenerated key is refused before any new chat is written under it."""
    _encrypted_store(kind, tmp_path)
    with pytest.raises(EncryptionMismatchError) as caught:
        SessionStore(EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher({"k1": KEY_2})))
    assert (_refusal(caught), caught.value.key_id) == ("wrong-key", "k1")
    with SessionStore(EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher())) as store:
        assert len(store.backend.list_sessions(SessionQuery(limit=None)).items) == 1
        assert [s.record.title for s in store.list_sessions().items] == [None]


def test_a_wrong_token_key_is_refused(kind: str, tmp_path: Path) -> None:
    """A token key other than the store's would break search and titles: refused at open."""
    _encrypted_store(kind, tmp_path)
    with pytest.raises(EncryptionMismatchError) as caught:
        EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher(token_key=KEY_2))
    assert _refusal(caught) == "wrong-token-key"


def test_a_plain_store_opened_with_a_cipher_is_refused(kind: str, tmp_path: Path) -> None:
    """A store holding plain data is refused, and stays plain and readable."""
    with SessionStore(plain_backend(kind, tmp_path)) as store:
        session_id = store.get_or_create(SOURCE).session_id
        store.append(session_id, Message(role="user", content="plain words"))
    with pytest.raises(EncryptionMismatchError) as caught:
        EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher())
    assert _refusal(caught) == "plain-store"
    assert "encrypt_store" in str(caught.value)
    with SessionStore(plain_backend(kind, tmp_path)) as store:
        assert [m.content for m in store.messages(session_id)] == ["plain words"]
        assert not store.backend.get_state([STORE_SCOPE])


def test_a_store_with_only_state_is_not_empty(tmp_path: Path) -> None:
    """App state alone makes a store plain: a cipher is refused on it."""
    with plain_backend("sqlite", tmp_path) as inner:
        inner.update_state({StateScope.app("shop").id: {"theme": "dark"}})
    with pytest.raises(EncryptionMismatchError):
        EncryptedBackend(plain_backend("sqlite", tmp_path), cipher=cipher())


def test_a_new_key_id_gets_its_canary(kind: str, tmp_path: Path) -> None:
    """Opening with a new current key adds its canary; the old one's still guards its key."""
    _encrypted_store(kind, tmp_path)
    both = cipher({"k2": KEY_2, "k1": KEY_1})
    EncryptedBackend(plain_backend(kind, tmp_path), cipher=both).close()
    with plain_backend(kind, tmp_path) as inner:
        marker = inner.get_state([STORE_SCOPE])[STORE_SCOPE]
    assert {"canary:k1", "canary:k2"} <= set(marker)
    with pytest.raises(EncryptionMismatchError) as caught:  # k1 mistyped beside the right k2
        EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher({"k2": KEY_2, "k1": KEY_2}))
    assert caught.value.key_id == "k1"


def test_the_marker_scope_is_hidden_and_reserved(tmp_path: Path) -> None:
    """The encrypted backend never returns the marker and refuses to write it."""
    _encrypted_store("sqlite", tmp_path)
    with EncryptedBackend(plain_backend("sqlite", tmp_path), cipher=cipher()) as backend:
        assert backend.get_state([STORE_SCOPE]) == {}
        require_plain_store(backend)  # what the store calls: the wrapper passes
        with pytest.raises(InvalidArgumentError):
            backend.update_state({STORE_SCOPE: {"state": "sealed"}})


def _plain_store_with_everything(kind: str, directory: Path) -> SearchableBackend:
    inner = plain_backend(kind, directory)
    fill(inner, sessions=3, per_session=4)
    inner.update_state(
        {
            StateScope.app("shop").id: {"theme": "mkappstatemark1"},
            StateScope.user("shop", "telegram", "42").id: {"name": "mkuserstatemark1"},
        }
    )
    return inner


def _content(record: object) -> tuple[object, ...]:
    """A record's sealed fields and identity, not its revision (a conversion rewrites it)."""
    fields = ("id", "title", "system_prompt", "metadata", "model_config", "session_key")
    return tuple(getattr(record, name) for name in fields)


def test_encrypt_store_converts_in_place_resumably(kind: str, tmp_path: Path) -> None:
    """An interrupted conversion refuses every opener until a rerun finishes it; nothing is lost."""
    inner = _plain_store_with_everything(kind, tmp_path)
    sessions = inner.list_sessions(SessionQuery(limit=None)).items
    expected = {
        "entries": inner.entries(),
        "records": [inner.get_session(i.record.id) for i in sessions],
        "messages": [inner.get_messages(i.record.id, include_inactive=True) for i in sessions],
        "state": inner.get_state(inner.state_scopes()),  # type: ignore[attr-defined]
    }
    run = encrypt_store(inner, cipher())
    first = next(run)
    assert (first.entries_rewritten, first.scopes_rewritten) == (3, 5)
    next(run)  # one session, then the run is interrupted
    with pytest.raises(EncryptionMismatchError) as plain:
        SessionStore(plain_backend(kind, tmp_path))
    assert _refusal(plain) == "no-cipher"
    with pytest.raises(EncryptionMismatchError) as sealed:
        EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher())
    assert _refusal(sealed) == "unfinished"
    last = list(encrypt_store(inner, cipher()))[-1]
    assert last.finished
    assert (last.records_rewritten, last.messages_rewritten) == (2, 8)
    inner.close()
    with EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher()) as backend:
        assert backend.check().ok
        unrevised = [attrs.evolve(e, revision=0) for e in backend.entries()]
        assert unrevised == [attrs.evolve(e, revision=0) for e in expected["entries"]]
        got = [backend.get_session(i.record.id) for i in sessions]
        assert [_content(r) for r in got] == [_content(r) for r in expected["records"]]
        messages = [backend.get_messages(i.record.id, include_inactive=True) for i in sessions]
        assert messages == expected["messages"]
        assert backend.get_state(list(expected["state"])) == expected["state"]
        everything = SearchQuery(text="deploy", roles=None, exclude_sources=(), limit=None)
        assert backend.search(everything)
    stored = stored_bytes(kind, tmp_path)
    assert b"mkappstatemark1" not in stored
    assert b"mkuserstatemark1" not in stored


def test_encrypt_store_on_an_encrypted_store_seals_stray_plain_values(tmp_path: Path) -> None:
    """A value once written in the clear into an encrypted store is sealed by a rerun."""
    _encrypted_store("sqlite", tmp_path)
    with plain_backend("sqlite", tmp_path) as inner:
        inner.update_state({StateScope.app("shop").id: {"leak": "mkstrayplain1"}})
        with EncryptedBackend(plain_backend("sqlite", tmp_path), cipher=cipher()) as backend:
            problems = backend.check().problems
            assert "state app|shop leak" in [p.where for p in problems if "clear" in p.detail]
        assert list(encrypt_store(inner, cipher()))[-1].finished
    with EncryptedBackend(plain_backend("sqlite", tmp_path), cipher=cipher()) as backend:
        assert backend.check().ok
        assert backend.get_state([StateScope.app("shop").id]) == {
            "app|shop": {"leak": "mkstrayplain1"}
        }


def _create_and_write(kind: str, directory: Path, barrier: Any, worker: int) -> str:
    """Open a new encrypted store at the barrier, write one chat, return the store id."""
    barrier.wait()
    with EncryptedBackend(plain_backend(kind, directory), cipher=cipher()) as backend:
        with SessionStore(backend) as store:
            source = SessionSource(platform="telegram", chat_id=f"c{worker}")
            lookup = store.get_or_create(source)
            store.append(lookup.session_id, Message(role="user", content=f"from {worker}"))
        return backend.store_id


def test_processes_creating_one_store_agree_on_its_id(kind: str, tmp_path: Path) -> None:
    """Four processes opening a new store at the same moment draw one store id between them."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(4)
        with context.Pool(4) as workers:
            ids = workers.starmap(
                _create_and_write, [(kind, tmp_path, barrier, n) for n in range(4)]
            )
    assert len(set(ids)) == 1
    with SessionStore(EncryptedBackend(plain_backend(kind, tmp_path), cipher=cipher())) as store:
        sessions = store.backend.list_sessions(SessionQuery(limit=None)).items
        contents = {m.content for s in sessions for m in store.messages(s.record.id)}
    assert contents == {f"from {n}" for n in range(4)}
