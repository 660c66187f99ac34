"""No plain write into an encrypted store, from any path: library, imports, repair, check()."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from encrypted_corpus import KEY_2, KINDS, cipher, fill, plain_backend, stored_bytes

from hermes_sessions import SessionStore
from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.cipher import STORE_SCOPE
from hermes_sessions.exceptions import EncryptionMismatchError
from hermes_sessions.interop import export_bundle, import_bundle, import_hermes
from hermes_sessions.queries import SessionQuery
from interop.conftest import Profile

if TYPE_CHECKING:
    from pathlib import Path

HERMES_TEXT = "mkhermesimportsecret"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each built-in persistent backend."""
    return str(request.param)


def _encrypted(kind: str, directory: Path) -> None:
    with EncryptedBackend(plain_backend(kind, directory), cipher=cipher()) as backend:
        fill(backend, sessions=2, per_session=3)


def _profile(root: Path) -> Path:
    profile = Profile(root)
    profile.session("s1", title="mkhermestitlesecret")
    profile.message("s1", "user", f"please deploy {HERMES_TEXT}")
    profile.close()
    return root


def test_a_bundle_is_not_imported_into_an_encrypted_store_without_its_cipher(
    kind: str, tmp_path: Path
) -> None:
    """import_bundle and export_bundle on the plain backend of an encrypted store refuse."""
    source = plain_backend("sqlite", tmp_path / "source")
    fill(source, sessions=1, per_session=2, seed=99)
    export_bundle(source, tmp_path / "bundle.jsonl")
    source.close()
    _encrypted(kind, tmp_path / "enc")
    with plain_backend(kind, tmp_path / "enc") as inner:
        with pytest.raises(EncryptionMismatchError):
            import_bundle(inner, tmp_path / "bundle.jsonl")
        with pytest.raises(EncryptionMismatchError):
            export_bundle(inner, tmp_path / "out.jsonl")
        assert len(inner.list_sessions(SessionQuery(limit=None)).items) == 2


def test_a_bundle_imported_through_the_cipher_is_sealed(kind: str, tmp_path: Path) -> None:
    """import_bundle into an encrypted store leaves none of the bundle's markers in the clear."""
    source = plain_backend("sqlite", tmp_path / "source")
    markers = fill(source, sessions=2, per_session=3, seed=5)
    export_bundle(source, tmp_path / "bundle.jsonl")
    source.close()
    with EncryptedBackend(plain_backend(kind, tmp_path / "enc"), cipher=cipher()) as backend:
        report = import_bundle(backend, tmp_path / "bundle.jsonl")
        assert len(report.sessions) == 2
        assert backend.check().ok
    stored = stored_bytes(kind, tmp_path / "enc")
    assert [m for m in markers.all if m.encode() in stored] == []


def test_a_hermes_profile_is_not_imported_into_an_encrypted_store_without_its_cipher(
    kind: str, tmp_path: Path
) -> None:
    """import_hermes on the plain backend refuses; through the cipher everything is sealed."""
    home = _profile(tmp_path / "hermes")
    _encrypted(kind, tmp_path / "enc")
    with plain_backend(kind, tmp_path / "enc") as inner, pytest.raises(EncryptionMismatchError):
        import_hermes(home, inner, timezone="UTC")
    with EncryptedBackend(plain_backend(kind, tmp_path / "enc"), cipher=cipher()) as backend:
        report = import_hermes(home, backend, timezone="UTC")
        assert report.sessions == ("s1",)
        assert [m.content for m in backend.get_messages("s1")] == [f"please deploy {HERMES_TEXT}"]
        assert backend.check().ok
    stored = stored_bytes(kind, tmp_path / "enc")
    assert HERMES_TEXT.encode() not in stored
    assert b"mkhermestitlesecret" not in stored


def test_a_jsonl_repair_keeps_the_store_encrypted(tmp_path: Path) -> None:
    """repair() of a damaged encrypted directory writes nothing in the clear; it opens sealed."""
    _encrypted("jsonl", tmp_path)
    session_file = next((tmp_path / "sessions").glob("*.jsonl"))
    lines = session_file.read_bytes().splitlines(keepends=True)
    session_file.write_bytes(b"".join([*lines[:-1], b"{not json\n"]))
    report = JSONLBackend.repair(tmp_path)
    assert report.changed
    with EncryptedBackend(JSONLBackend(tmp_path), cipher=cipher()) as backend:
        problems = [p for p in backend.check().problems if p.kind == "encryption"]
        assert problems == []
        assert backend.entries()


def test_a_lost_jsonl_index_loses_state_but_not_the_store_id(tmp_path: Path) -> None:
    """After repair() rebuilt a lost journal and snapshot, the store opens encrypted again."""
    _encrypted("jsonl", tmp_path)
    for name in ("journal.jsonl", "routing.jsonl"):
        (tmp_path / name).unlink(missing_ok=True)
    JSONLBackend.repair(tmp_path)
    with JSONLBackend(tmp_path) as inner:
        assert not inner.get_state([STORE_SCOPE])  # the marker was state: lost with the journal
    with pytest.raises(EncryptionMismatchError) as wrong:
        EncryptedBackend(JSONLBackend(tmp_path), cipher=cipher({"k1": KEY_2}))
    assert wrong.value.reason == "wrong-key"
    with EncryptedBackend(JSONLBackend(tmp_path), cipher=cipher()) as backend:
        assert backend.get_messages("20260301_000000_00000000")
    with pytest.raises(EncryptionMismatchError), SessionStore(JSONLBackend(tmp_path)):
        pass  # the marker is back: a plain reader is refused again


def test_rebuild_routing_seals_the_entries_it_writes(tmp_path: Path) -> None:
    """The store's rebuild_routing through the cipher writes sealed origins only."""
    _encrypted("sqlite", tmp_path)
    with SessionStore(
        EncryptedBackend(plain_backend("sqlite", tmp_path), cipher=cipher())
    ) as store:
        for entry in store.backend.entries():
            store.backend.delete_entry(entry.session_key, expected_revision=entry.revision)
        assert store.rebuild_routing() == 2
        for entry in store.backend.inner.entries():  # type: ignore[attr-defined]
            assert entry.origin is not None
            assert entry.origin.chat_id is not None
            assert entry.origin.chat_id.startswith("hse1:k1:")
            assert entry.origin.user_id is None


def test_check_reports_a_value_written_in_the_clear(tmp_path: Path) -> None:
    """A title written in the clear behind the cipher's back is an ``encryption`` problem."""
    _encrypted("sqlite", tmp_path)
    with plain_backend("sqlite", tmp_path) as inner:
        inner.update_session("20260301_000000_00000000", values={"title": "renamed in the clear"})
    with EncryptedBackend(plain_backend("sqlite", tmp_path), cipher=cipher()) as backend:
        problems = [p for p in backend.check().problems if p.kind == "encryption"]
        assert [p.where for p in problems if "clear" in p.detail] == [
            "session 20260301_000000_00000000"
        ]
        assert json.dumps([str(p) for p in problems])  # printable as the CLI prints them
