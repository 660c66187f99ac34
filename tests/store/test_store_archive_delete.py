"""Housekeeping on the store (issue 12): archive, unarchive and delete, without the backend."""

from __future__ import annotations

import pytest
from store_scenarios import DM, inject_before_delete, reply, user

from hermes_sessions import SessionInUseError, SessionNotFoundError


def test_archive_and_unarchive(store):
    """Archived sessions leave default listings and come back; nothing is deleted."""
    lookup = store.get_or_create(DM)
    store.append(lookup.session_id, user("keep me"))
    assert store.archive(lookup.session_id).archived
    assert list(store.list_sessions(archived=False).items) == []
    assert not store.unarchive(lookup.session_id).archived
    assert [i.record.id for i in store.list_sessions(archived=False).items] == [lookup.session_id]
    assert len(store.transcript(lookup.session_id)) == 1
    with pytest.raises(SessionNotFoundError):
        store.archive("20260101_000000_deadbeef")


def test_delete_refuses_a_session_a_key_points_to(store):
    """The current session of a key is refused, naming the key and what to do."""
    lookup = store.get_or_create(DM)
    with pytest.raises(SessionInUseError, match="force=True") as info:
        store.delete(lookup.session_id)
    assert info.value.keys == (lookup.entry.session_key,)
    assert store.session(lookup.session_id)


def test_delete_with_force_moves_the_key_on_first(store):
    """force=True rotates the key to a new session, then deletes the old one and its messages."""
    lookup = store.get_or_create(DM)
    store.append(lookup.session_id, user("delete me"), reply("ok"))
    moved = store.delete(lookup.session_id, force=True)
    assert moved == (lookup.entry.session_key,)
    with pytest.raises(SessionNotFoundError):
        store.session(lookup.session_id)
    current = store.entry(lookup.entry.session_key)
    assert current.session_id != lookup.session_id
    assert list(store.search("delete")) == []


def test_a_resume_between_the_check_and_the_delete_keeps_the_session(store, monkeypatch):
    """A /resume landing after delete's check, just before its delete: refused, nothing lost."""
    key = store.get_or_create(DM).entry.session_key
    old = store.entry(key).session_id
    store.append(old, user("keep me"))
    store.reset(key)

    def resume_and_talk() -> None:
        store.resume(key, old)
        store.append(old, user("acknowledged after the resume"))

    inject_before_delete(monkeypatch, store, old, resume_and_talk)
    with pytest.raises(SessionInUseError):
        store.delete(old)
    assert store.entry(key).session_id == old
    assert [m.content for m in store.transcript(old)] == [
        "keep me",
        "acknowledged after the resume",
    ]


def test_a_forced_delete_moves_a_key_that_arrived_meanwhile(store, monkeypatch):
    """With force, a key that resumed the session just before the delete is moved off too."""
    key = store.get_or_create(DM).entry.session_key
    old = store.entry(key).session_id
    store.reset(key)
    inject_before_delete(monkeypatch, store, old, lambda: store.resume(key, old))
    assert store.delete(old, force=True) == (key,)
    with pytest.raises(SessionNotFoundError):
        store.session(old)
    assert store.entry(key).session_id != old
    store.append(store.entry(key).session_id, user("the chat goes on"))


def test_delete_an_ended_session_orphans_its_children(store):
    """An ended session no key points to is deleted; its branch child stays, orphaned."""
    key = store.get_or_create(DM).entry.session_key
    parent = store.entry(key).session_id
    child = store.branch(key).session_id
    assert store.delete(parent) == ()
    assert store.session(child).parent_session_id is None
