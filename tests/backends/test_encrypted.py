"""Encrypted stores: search parity with plain stores, no plaintext at rest, keys and rotation."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import pytest
from encrypted_corpus import fill, queries

from hermes_sessions.backends.encrypted import EncryptedBackend, needs_scan
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.cipher import Cipher, StaticKeys, envelope_key_id
from hermes_sessions.exceptions import DecryptionError, EncryptionKeyError
from hermes_sessions.queries import SearchQuery, SessionQuery
from hermes_sessions.state import StateScope
from pg_support import open_pg, requires_pg, schema_dump

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from hermes_sessions.protocols import SearchableBackend

    Opener = Callable[..., EncryptedBackend]

TOKEN_KEY = hashlib.sha256(b"token key of test_encrypted").digest()
KEY_1 = hashlib.sha256(b"data key 1").digest()
KEY_2 = hashlib.sha256(b"data key 2").digest()
KINDS = [
    "sqlite",
    "jsonl",
    pytest.param("postgres", marks=requires_pg),
]


def cipher(keys: dict[str, bytes] | None = None) -> Cipher:
    """A cipher over ``keys`` (by default ``k1``) with the test token key."""
    return Cipher(StaticKeys(keys or {"k1": KEY_1}), token_key=TOKEN_KEY)


def plain_backend(kind: str, directory: Path) -> SearchableBackend:
    """A plain backend of ``kind`` on ``directory``."""
    if kind == "sqlite":
        directory.mkdir(parents=True, exist_ok=True)
        return SQLiteBackend(directory / "state.db")
    if kind == "jsonl":
        return JSONLBackend(directory)
    return open_pg(directory)


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


def _stored_bytes(kind: str, directory: Path) -> bytes:
    if kind == "postgres":
        return schema_dump(directory)
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


def test_no_marker_is_stored_in_the_clear(
    kind: str, tmp_path: Path, open_encrypted: Opener
) -> None:
    """A byte search of every stored file (SQLite db and WAL, JSONL files, PG rows) finds none."""
    backend = open_encrypted()
    markers = fill(backend)
    backend.search(_everything("deploy"))
    stored = [_stored_bytes(kind, tmp_path / "enc")]
    backend.close()
    stored.append(_stored_bytes(kind, tmp_path / "enc"))
    assert len(markers.all) > 500
    for data in stored:
        assert len(data) > 10_000
        for marker in markers.all:
            escaped = json.dumps(marker)[1:-1]  # a CJK marker written as JSON escapes
            assert marker.encode() not in data, marker
            assert escaped.encode() not in data, marker


def test_a_wrong_key_is_an_error_not_garbage(open_encrypted: Opener) -> None:
    """Data opened with another key under the same id raises DecryptionError."""
    fill(open_encrypted(), sessions=1, per_session=2)
    wrong = open_encrypted(cipher({"k1": KEY_2}))
    with pytest.raises(DecryptionError):
        wrong.get_session("20260301_000000_00000000")
    with pytest.raises(DecryptionError):
        wrong.get_messages("20260301_000000_00000000")


def test_a_missing_key_is_an_error(open_encrypted: Opener) -> None:
    """Data whose key id the provider does not hold raises EncryptionKeyError naming it."""
    fill(open_encrypted(), sessions=1, per_session=2)
    other = open_encrypted(cipher({"k9": KEY_2}))
    with pytest.raises(EncryptionKeyError) as caught:
        other.get_messages("20260301_000000_00000000")
    assert caught.value.key_id == "k1"


def test_rotate_key_is_resumable_and_reports_progress(open_encrypted: Opener) -> None:
    """An interrupted rotation run again finishes; then only the new key is needed."""
    backend = open_encrypted()
    fill(backend, sessions=3, per_session=4)
    before = backend.search(_everything("deploy"))
    first = next(backend.rotate_key(StaticKeys({"k2": KEY_2})))  # then interrupted
    assert (first.sessions_done, first.sessions_total) == (1, 3)
    assert first.entries_rewritten == 3
    progress = list(backend.rotate_key())
    assert progress[-1].finished
    assert progress[-1].messages_rewritten == 8  # the first session was done already
    assert list(backend.rotate_key())[-1].messages_rewritten == 0
    backend.close()
    rotated = open_encrypted(cipher({"k2": KEY_2}))
    after = rotated.search(_everything("deploy"))
    assert [(h.message, h.snippet) for h in after] == [(h.message, h.snippet) for h in before]
    session_id = "20260301_000000_00000002"
    assert rotated.get_state([StateScope.session(session_id).id])
    assert rotated.entries()[0].origin is not None
    sealed = rotated.inner.get_messages(session_id)
    assert {envelope_key_id(m.extra["hermes_sealed"]) for m in sealed} == {"k2"}
    assert rotated.list_sessions(SessionQuery(limit=None)).items[0].preview is not None


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
        assert b"mkopenmarker1" not in _stored_bytes(kind, home)


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
    assert b"mkstoreopen1" not in _stored_bytes("sqlite", tmp_path / "sync")

    async def scenario() -> None:
        async with await AsyncSessionStore.open(tmp_path / "async", "jsonl", cipher=cipher()) as s:
            lookup = await s.get_or_create(source)
            await s.append(lookup.session_id, Message(role="user", content="mkstoreopen2"))
            assert len(await s.search("mkstoreopen2")) == 1

    asyncio.run(scenario())
    assert b"mkstoreopen2" not in _stored_bytes("jsonl", tmp_path / "async")


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
