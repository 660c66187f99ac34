"""Housekeeping on the store (issue 12): archive, unarchive and delete, without the backend."""

from __future__ import annotations

import pytest
from store_scenarios import DM, reply, user

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


def test_delete_an_ended_session_orphans_its_children(store):
    """An ended session no key points to is deleted; its branch child stays, orphaned."""
    key = store.get_or_create(DM).entry.session_key
    parent = store.entry(key).session_id
    child = store.branch(key).session_id
    assert store.delete(parent) == ()
    assert store.session(child).parent_session_id is None
