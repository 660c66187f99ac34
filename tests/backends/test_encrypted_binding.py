"""Envelopes bound to their place: a ciphertext copied elsewhere does not open there."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import pytest
from encrypted_corpus import KINDS, cipher, fill, plain_backend

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.exceptions import DecryptionError
from hermes_sessions.state import StateScope

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

A, B = "20260301_000000_00000000", "20260301_000000_00000001"


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EncryptedBackend]:
    """An encrypted backend of each kind holding the corpus's first two sessions."""
    opened = EncryptedBackend(plain_backend(str(request.param), tmp_path), cipher=cipher())
    fill(opened, sessions=2, per_session=3)
    yield opened
    opened.close()


def test_a_message_copied_to_another_session_does_not_open(backend: EncryptedBackend) -> None:
    """A's sealed message stored over a message of B (same role and time) is refused."""
    inner = backend.inner
    stolen = inner.get_messages(A)[0]
    target = inner.get_messages(B)[0]
    forged = attrs.evolve(stolen, id=None, session_id=None, timestamp=target.timestamp)
    assert target.id is not None
    inner.replace_message(B, target.id, forged)
    with pytest.raises(DecryptionError):
        backend.get_messages(B)


def test_a_message_copied_to_another_row_of_its_session_does_not_open(
    backend: EncryptedBackend,
) -> None:
    """A sealed body moved onto another message of the same session (another time) is refused."""
    inner = backend.inner
    first, second, _ = inner.get_messages(A)
    assert second.id is not None
    moved = attrs.evolve(first, id=None, role=second.role, platform_message_id=None)
    inner.replace_message(A, second.id, moved)
    with pytest.raises(DecryptionError):
        backend.get_message(A, second.id)


def test_a_record_field_copied_to_another_session_does_not_open(
    backend: EncryptedBackend,
) -> None:
    """A's sealed metadata and system prompt written into B's record are refused."""
    inner = backend.inner
    stolen = inner.get_session(A)
    assert stolen is not None
    inner.update_session(B, values={"system_prompt": stolen.system_prompt})
    with pytest.raises(DecryptionError):
        backend.get_session(B)


def test_a_title_envelope_is_bound_to_its_field(backend: EncryptedBackend) -> None:
    """The title's envelope moved into the system prompt of its own session is refused."""
    inner = backend.inner
    record = inner.get_session(A)
    assert record is not None
    inner.update_session(A, values={"system_prompt": record.metadata["hermes_title"]})
    with pytest.raises(DecryptionError):
        backend.get_session(A)


def test_an_entry_origin_copied_to_another_key_does_not_open(backend: EncryptedBackend) -> None:
    """The sealed origin of one key stored on another key's entry is refused."""
    first, second = backend.inner.entries()
    forged = attrs.evolve(second, origin=first.origin)
    backend.inner.put_entry(forged, expected_revision=second.revision)
    with pytest.raises(DecryptionError):
        backend.get_entry(second.session_key)


def test_a_state_value_copied_to_another_scope_or_key_does_not_open(
    backend: EncryptedBackend,
) -> None:
    """A sealed state value is bound to its scope id and its key within the scope."""
    inner = backend.inner
    scope_a, scope_b = StateScope.session(A).id, StateScope.session(B).id
    stolen = inner.get_state([scope_a])[scope_a]["memo"]
    inner.update_state({scope_b: {"memo": stolen}})
    with pytest.raises(DecryptionError):
        backend.get_state([scope_b])
    inner.update_state({scope_a: {"other": stolen}})
    with pytest.raises(DecryptionError):
        backend.get_state([scope_a])


def test_a_ciphertext_from_another_store_does_not_open(tmp_path: Path) -> None:
    """Two stores under the same keys have different store ids: envelopes do not travel."""
    one = EncryptedBackend(plain_backend("sqlite", tmp_path / "one"), cipher=cipher())
    two = EncryptedBackend(plain_backend("sqlite", tmp_path / "two"), cipher=cipher())
    try:
        fill(one, sessions=1, per_session=2)
        fill(two, sessions=1, per_session=2)
        assert one.store_id != two.store_id
        stolen = one.inner.get_messages(A)[0]
        target = two.inner.get_messages(A)[0]
        assert target.id is not None
        two.inner.replace_message(A, target.id, attrs.evolve(stolen, id=None))
        with pytest.raises(DecryptionError):
            two.get_messages(A)
    finally:
        one.close()
        two.close()


def test_a_branch_seals_its_copies_anew(tmp_path: Path) -> None:
    """A branch's copied messages and state are new envelopes for the new session."""
    with SessionStore(
        EncryptedBackend(plain_backend("sqlite", tmp_path), cipher=cipher())
    ) as store:
        source = SessionSource(platform="telegram", chat_id="7", user_id="7")
        key = store.key_for(source)
        parent = store.get_or_create(source).session_id
        store.append(parent, Message(role="user", content="copy me"))
        store.update_state({StateScope.session(parent): {"step": 3}}, session_id=parent)
        child = store.branch(key).session_id
        assert child != parent
        inner = store.backend.inner  # type: ignore[attr-defined]
        parent_body = inner.get_messages(parent)[0].extra["hermes_sealed"]
        child_body = inner.get_messages(child)[0].extra["hermes_sealed"]
        assert parent_body != child_body
        assert [m.content for m in store.messages(child)] == ["copy me"]
        assert store.backend.get_state([StateScope.session(child).id]) == {
            StateScope.session(child).id: {"step": 3}
        }
