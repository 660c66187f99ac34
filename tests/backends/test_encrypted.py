"""Encrypted stores: search parity with plain stores, no plaintext at rest, keys and rotation."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from encrypted_corpus import (
    KEY_1,
    KEY_2,
    KINDS,
    cipher,
    fill,
    plain_backend,
    queries,
    stored_bytes,
)

from hermes_sessions.backends.encrypted import EncryptedBackend, needs_scan
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.cipher import STORE_SCOPE, StaticKeys, envelope_key_id
from hermes_sessions.exceptions import EncryptionKeyError, EncryptionMismatchError
from hermes_sessions.queries import SearchQuery, SessionQuery
from hermes_sessions.state import StateScope

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from hermes_sessions.cipher import Cipher

    Opener = Callable[..., EncryptedBackend]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each built-in persistent backend."""
    return str(request.param)


@pytest.fixture
def open_encrypted(kind: str, tmp_path: Path) -> Iterator[Opener]:
    """Open (and later close) encrypted backends of ``kind`` on ``tmp_path / "enc"``."""
    opened: list[EncryptedBackend] = []

    def open_(given: Cipher | None = None) -> EncryptedBackend:
        backend = EncryptedBackend(plain_backend(kind, tmp_path / "enc"), cipher=given or cipher())
        opened.append(backend)
        return backend

    yield open_
    for backend in opened:
        backend.close()


def _everything(query_text: str) -> SearchQuery:
    return SearchQuery(text=query_text, roles=None, exclude_sources=(), limit=None)


def test_search_matches_the_plain_store(kind: str, tmp_path: Path, open_encrypted: Opener) -> None:
    """Every corpus query finds the same messages encrypted as plain; whole tokens rank alike."""
    plain = plain_backend(kind, tmp_path / "plain")
    encrypted = open_encrypted()
    try:
        fill(plain)
        fill(encrypted)
        matched = 0
        for query_text in queries():
            expected = plain.search(_everything(query_text))
            got = encrypted.search(_everything(query_text))
            matched += bool(expected)
            ids = sorted((h.session.id, h.message.id) for h in got)
            assert ids == sorted((h.session.id, h.message.id) for h in expected), query_text
            if not needs_scan(encrypted, query_text):
                assert [(h.message.id, h.snippet) for h in got] == [
                    (h.message.id, h.snippet) for h in expected
                ], query_text
                assert [h.message for h in got] == [h.message for h in expected]
        assert matched >= len(queries()) - 6  # random CJK stretches may occur nowhere
    finally:
        plain.close()


def test_prefix_and_single_cjk_queries_scan(open_encrypted: Opener) -> None:
    """Prefixes and one-character CJK queries have no hashed form; whole tokens do."""
    backend = open_encrypted()
    assert needs_scan(backend, "dock*")
    assert needs_scan(backend, "部")
    assert not needs_scan(backend, "docker compose 部署 -helm")


def test_no_marker_is_stored_in_the_clear(
    kind: str, tmp_path: Path, open_encrypted: Opener
) -> None:
    """A byte search of every stored file (SQLite db and WAL, JSONL files, PG rows) finds none."""
    backend = open_encrypted()
    markers = fill(backend)
    backend.search(_everything("deploy"))
    stored = [stored_bytes(kind, tmp_path / "enc")]
    backend.close()
    stored.append(stored_bytes(kind, tmp_path / "enc"))
    assert len(markers.all) > 500
    for data in stored:
        assert len(data) > 10_000
        for marker in markers.all:
            escaped = json.dumps(marker)[1:-1]  # a CJK marker written as JSON escapes
            assert marker.encode() not in data, marker
            assert escaped.encode() not in data, marker


def test_a_wrong_key_under_the_right_id_is_refused_at_open(open_encrypted: Opener) -> None:
    """A key that does not open its id's canary fails at open, and nothing is written."""
    right = open_encrypted()
    fill(right, sessions=1, per_session=2)
    before = right.inner.get_state([STORE_SCOPE]), right.inner.list_sessions(SessionQuery())
    with pytest.raises(EncryptionMismatchError) as caught:
        open_encrypted(cipher({"k1": KEY_2}))
    assert (caught.value.reason, caught.value.key_id) == ("wrong-key", "k1")
    assert (
        right.inner.get_state([STORE_SCOPE]),
        right.inner.list_sessions(SessionQuery()),
    ) == before
    assert right.get_messages("20260301_000000_00000000")  # the right key still reads


def test_a_missing_key_is_an_error(open_encrypted: Opener) -> None:
    """Data whose key id the provider does not hold raises EncryptionKeyError naming it."""
    fill(open_encrypted(), sessions=1, per_session=2)
    other = open_encrypted(cipher({"k9": KEY_2}))
    with pytest.raises(EncryptionKeyError) as caught:
        other.get_messages("20260301_000000_00000000")
    assert caught.value.key_id == "k1"


def _state_everywhere(backend: EncryptedBackend) -> list[str]:
    """App, user and lane state beside the corpus's session state; return their scope ids."""
    scopes = [
        StateScope.app("shop").id,
        StateScope.user("shop", "telegram", "42").id,
        StateScope.lane("agent:main:telegram:dm:0").id,
        "migration|custom",
    ]
    backend.update_state({scope: {"flag": scope, "n": 1} for scope in scopes})
    return scopes


def _sealed_key_ids(backend: EncryptedBackend) -> set[str]:
    """The key id of every envelope the inner backend stores (entries, records, messages, state)."""
    inner = backend.inner
    found = set()
    for entry in inner.entries():
        assert entry.origin is not None
        found.add(envelope_key_id(str(entry.origin.chat_id)))
    for scope, values in inner.get_state(inner.state_scopes()).items():  # type: ignore[attr-defined]
        if scope != STORE_SCOPE:
            found.update(envelope_key_id(value) for value in values.values())
    for item in inner.list_sessions(SessionQuery(limit=None)).items:
        found.add(envelope_key_id(item.record.metadata["hermes_sealed"]))
        for message in inner.get_messages(item.record.id, include_inactive=True):
            found.add(envelope_key_id(message.extra["hermes_sealed"]))
    return found


def test_rotate_key_is_resumable_and_reports_progress(open_encrypted: Opener) -> None:
    """An interrupted rotation run again finishes; then only the new key is needed."""
    backend = open_encrypted()
    fill(backend, sessions=3, per_session=4)
    before = backend.search(_everything("deploy"))
    rotation = backend.rotate_key(StaticKeys({"k2": KEY_2}))
    first = next(rotation)  # entries and scopes, then interrupted
    assert (first.sessions_done, first.sessions_total) == (0, 3)
    assert (first.entries_visited, first.entries_rewritten) == (3, 3)
    assert (first.scopes_visited, first.scopes_rewritten) == (3, 3)
    next(rotation)  # the first session
    progress = list(backend.rotate_key())
    assert progress[-1].finished
    assert progress[-1].messages_rewritten == 8  # the first session was done already
    assert progress[-1].messages_visited == 12
    again = list(backend.rotate_key())[-1]
    assert again.finished
    assert again.messages_rewritten == again.records_rewritten == again.scopes_rewritten == 0
    backend.close()
    rotated = open_encrypted(cipher({"k2": KEY_2}))
    after = rotated.search(_everything("deploy"))
    assert [(h.message, h.snippet) for h in after] == [(h.message, h.snippet) for h in before]
    session_id = "20260301_000000_00000002"
    assert rotated.get_state([StateScope.session(session_id).id])
    assert rotated.entries()[0].origin is not None
    assert _sealed_key_ids(rotated) == {"k2"}
    assert rotated.list_sessions(SessionQuery(limit=None)).items[0].preview is not None


def test_rotate_key_finds_every_state_scope_itself(open_encrypted: Opener, tmp_path: Path) -> None:
    """App, user, lane and other scopes are rotated without being named; check() agrees."""
    backend = open_encrypted()
    fill(backend, sessions=2, per_session=2)
    scopes = _state_everywhere(backend)
    backend.close()
    backend = open_encrypted(cipher({"k2": KEY_2, "k1": KEY_1}))  # k2 writes, k1 still reads
    assert any(p.kind == "encryption" and "k2" in p.detail for p in backend.check().problems)
    last = list(backend.rotate_key())[-1]
    assert last.finished
    assert last.scopes_visited == len(scopes) + 2
    assert backend.check().ok
    backend.close()
    rotated = open_encrypted(cipher({"k2": KEY_2}))  # the old key is gone
    assert rotated.get_state(scopes) == {scope: {"flag": scope, "n": 1} for scope in scopes}
    assert _sealed_key_ids(rotated) == {"k2"}
    canaries = rotated.inner.get_state([STORE_SCOPE])[STORE_SCOPE]
    assert [name for name in canaries if name.startswith("canary:")] == ["canary:k2"]


def test_rotate_key_is_unfinished_while_an_old_writer_remains(open_encrypted: Opener) -> None:
    """A value written under the old key during the run makes the last progress say so."""
    backend = open_encrypted()
    fill(backend, sessions=2, per_session=2)
    old_writer = open_encrypted()
    rotation = backend.rotate_key(StaticKeys({"k2": KEY_2}))
    *_, before_verification = [next(rotation) for _ in range(3)]
    assert before_verification.remaining is None
    assert not before_verification.finished
    old_writer.update_state({StateScope.app("late").id: {"x": 1}})  # still under k1
    last = next(rotation)
    assert (last.remaining, last.finished) == (1, False)
    assert list(backend.rotate_key())[-1].finished


def test_a_plain_store_converts_through_a_bundle(tmp_path: Path) -> None:
    """export_bundle from a plain store and import_bundle into an encrypted one keep everything."""
    from hermes_sessions.interop import export_bundle, import_bundle  # noqa: PLC0415

    plain = SQLiteBackend(tmp_path / "plain.db")
    sealed = EncryptedBackend(SQLiteBackend(tmp_path / "sealed.db"), cipher=cipher())
    try:
        fill(plain, sessions=3, per_session=4)
        export_bundle(plain, tmp_path / "bundle.jsonl")
        assert import_bundle(sealed, tmp_path / "bundle.jsonl").problems == ()
        ids = [item.record.id for item in plain.list_sessions(SessionQuery(limit=None)).items]
        assert [sealed.get_messages(i) for i in ids] == [plain.get_messages(i) for i in ids]
        assert sealed.entries() == plain.entries()
    finally:
        plain.close()
        sealed.close()


def test_open_backend_takes_a_cipher(tmp_path: Path) -> None:
    """``open_backend(kind, home, cipher=c)`` stores encrypted and reads back in the clear."""
    from hermes_sessions import Message, SessionSource, SessionStore  # noqa: PLC0415
    from hermes_sessions.backends import open_backend  # noqa: PLC0415

    for kind in ("sqlite", "jsonl"):
        home = tmp_path / kind
        with SessionStore(open_backend(kind, home, cipher=cipher())) as store:
            assert isinstance(store.backend, EncryptedBackend)
            lookup = store.get_or_create(SessionSource(platform="cli", chat_id="1"))
            store.append(lookup.session_id, Message(role="user", content="mkopenmarker1"))
            assert len(store.search("mkopenmarker1")) == 1
        assert b"mkopenmarker1" not in stored_bytes(kind, home)


def test_store_open_takes_a_cipher(tmp_path: Path) -> None:
    """``SessionStore.open`` and ``AsyncSessionStore.open`` take ``cipher=`` and encrypt at rest."""
    import asyncio  # noqa: PLC0415

    from hermes_sessions import AsyncSessionStore, Message, SessionSource, SessionStore  # noqa: PLC0415

    source = SessionSource(platform="cli", chat_id="1")
    with SessionStore.open(tmp_path / "sync", cipher=cipher()) as store:
        assert isinstance(store.backend, EncryptedBackend)
        store.append(
            store.get_or_create(source).session_id, Message(role="user", content="mkstoreopen1")
        )
        assert len(store.search("mkstoreopen1")) == 1
    assert b"mkstoreopen1" not in stored_bytes("sqlite", tmp_path / "sync")

    async def scenario() -> None:
        async with await AsyncSessionStore.open(tmp_path / "async", "jsonl", cipher=cipher()) as s:
            lookup = await s.get_or_create(source)
            await s.append(lookup.session_id, Message(role="user", content="mkstoreopen2"))
            assert len(await s.search("mkstoreopen2")) == 1

    asyncio.run(scenario())
    assert b"mkstoreopen2" not in stored_bytes("jsonl", tmp_path / "async")


@pytest.mark.parametrize(
    "values", [{"metadata": [1]}, {"title": 5}, {"system_prompt": 3}, {"model_config": "x"}]
)
def test_wrongly_typed_updates_fail_as_on_a_plain_store(tmp_path: Path, values: dict) -> None:
    """A value of the wrong type reaches the backend unsealed and is refused with its error."""
    from datetime import UTC, datetime  # noqa: PLC0415

    from hermes_sessions.models import SessionRecord  # noqa: PLC0415

    record = SessionRecord(id="s1", source="cli", started_at=datetime(2026, 1, 1, tzinfo=UTC))
    with EncryptedBackend(SQLiteBackend(tmp_path / "s.db"), cipher=cipher()) as backend:
        backend.create_session(record)
        with pytest.raises(TypeError):
            backend.update_session("s1", values=values)
