"""State in four scopes, changed with a turn or alone; the session revision (issue 12, item 3)."""

from __future__ import annotations

import asyncio

import pytest
from store_scenarios import ALICE, DM, reply, user

from hermes_sessions import (
    DELETE,
    AsyncSessionStore,
    ConflictError,
    SessionState,
    StateScope,
    StateTooLargeError,
    Usage,
)
from hermes_sessions.exceptions import InvalidValueError
from hermes_sessions.state import MAX_STATE_BYTES

APP = StateScope.app("main")


def _scopes(store, lookup):
    return (
        StateScope.lane(lookup.entry.session_key),
        StateScope.session(lookup.session_id),
        StateScope.user("main", DM.platform, DM.user_id),
    )


def test_the_lookup_reads_all_four_scopes(store):
    """get_or_create returns the app's, user's, lane's and session's state."""
    first = store.get_or_create(DM)
    assert first.state == SessionState()
    lane, session, person = _scopes(store, first)
    store.append(
        first.session_id,
        user("hi", platform_message_id="c:1"),
        state_delta={
            APP: {"flag": True},
            person: {"lang": "zh"},
            lane: {"model": "m-1"},
            session: {"step": 1},
        },
    )
    again = store.get_or_create(DM)
    assert again.state == SessionState(
        app={"flag": True}, user={"lang": "zh"}, lane={"model": "m-1"}, session={"step": 1}
    )
    assert store.state(first.session_id) == again.state


def test_a_group_member_sees_their_own_user_state(store):
    """The user scope follows the sender: Alice's preferences are not Lin's."""
    store.update_state({StateScope.user("main", "feishu", "ou_lin"): {"lang": "zh"}})
    assert store.get_or_create(ALICE).state.user == {}
    assert store.get_or_create(DM).state.user == {"lang": "zh"}


def test_a_reset_keeps_the_lane_and_starts_the_session_empty(store):
    """``/new``: lane state (the chosen model) stays; session state does not carry over."""
    first = store.get_or_create(DM)
    lane, session, _ = _scopes(store, first)
    store.update_state({lane: {"model": "m-2"}, session: {"scratch": [1, 2]}})
    store.reset(first.entry.session_key)
    after = store.get_or_create(DM)
    assert after.session_id != first.session_id
    assert after.state.lane == {"model": "m-2"}
    assert after.state.session == {}


def test_compression_and_branch_copy_the_session_state(store):
    """The child of a compression or a branch starts with its parent's session state."""
    first = store.get_or_create(DM)
    _, session, _ = _scopes(store, first)
    store.update_state({session: {"vars": {"x": 1}}})
    child = store.compress(first.session_id, [user("summary")], holder="t")
    assert store.state(child.id).session == {"vars": {"x": 1}}
    branched = store.branch(first.entry.session_key)
    assert store.state(branched.session_id).session == {"vars": {"x": 1}}
    store.update_state({StateScope.session(branched.session_id): {"vars": DELETE}})
    assert store.state(child.id).session == {"vars": {"x": 1}}


def test_every_append_moves_the_revision_and_if_revision_guards_it(store):
    """The result names the new revision; a write based on an older one is refused."""
    session_id = store.get_or_create(DM).session_id
    start = store.session(session_id).revision
    first = store.append(session_id, user("q"), reply("a"), usage=Usage(input=3))
    assert first.revision == start + 1
    with pytest.raises(ConflictError) as caught:
        store.append(session_id, user("stale"), if_revision=start)
    assert "revision" in str(caught.value)
    assert [m.content for m in store.messages(session_id)] == ["q", "a"]
    second = store.append(
        session_id, user("fresh"), if_revision=first.revision, state_delta={APP: {"n": 1}}
    )
    assert second.revision == first.revision + 1
    assert store.session(session_id).input_tokens == 3


def test_update_state_is_made_through_the_one_session_it_names(store):
    """A delta with one session scope moves that session; several need session_id=."""
    one = store.get_or_create(DM).session_id
    other = store.get_or_create(ALICE).session_id
    record = store.update_state({StateScope.session(one): {"a": 1}})
    assert record is not None
    assert record.revision == store.session(one).revision
    assert store.update_state({APP: {"b": 2}}) is None
    with pytest.raises(ValueError, match="session_id"):
        store.update_state({StateScope.session(one): {"a": 2}, StateScope.session(other): {"a": 2}})
    store.update_state(
        {StateScope.session(one): {"a": 3}, StateScope.session(other): {"a": 3}}, session_id=one
    )
    assert store.state(other).session == {"a": 3}
    with pytest.raises(ConflictError):
        store.update_state({APP: {"c": 1}}, session_id=one, if_revision=0)


@pytest.mark.parametrize(
    ("delta", "error"),
    [
        ({"lane": {"a": 1}}, TypeError),
        ({APP: ["not", "a", "dict"]}, TypeError),
        ({APP: {"": 1}}, ValueError),
        ({APP: {"x": float("nan")}}, InvalidValueError),
        ({APP: {"x": {1, 2}}}, InvalidValueError),
        ({APP: {"x": "\ud800"}}, InvalidValueError),
    ],
)
def test_odd_deltas_are_refused_before_anything_is_written(store, delta, error):
    """Scopes are StateScope values, keys non-empty strings, values strict JSON."""
    session_id = store.get_or_create(DM).session_id
    with pytest.raises(error):
        store.append(session_id, user("q"), state_delta=delta)
    assert store.messages(session_id) == []


def test_a_scope_over_64_kib_is_refused_with_advice(store):
    """The error names the scope, the sizes, and what to do instead."""
    session_id = store.get_or_create(DM).session_id
    with pytest.raises(StateTooLargeError, match="reference") as caught:
        store.append(session_id, user("q"), state_delta={APP: {"doc": "x" * MAX_STATE_BYTES}})
    assert caught.value.scope == APP.id
    assert caught.value.limit == MAX_STATE_BYTES
    assert store.messages(session_id) == []


def test_scope_ids_cannot_collide():
    """Parts are encoded, so a part holding the separator names a different scope."""
    assert StateScope.user("a|b", "c", "d").id != StateScope.user("a", "b|c", "d").id
    assert StateScope.lane("k").id != StateScope.app("k").id
    with pytest.raises(ValueError, match="non-empty"):
        StateScope.app("")


def test_erasure_empties_the_users_state(store):
    """erase_user removes the user's own scope and the state of the keys that go with them."""
    lookup = store.get_or_create(DM)
    lane, _, person = _scopes(store, lookup)
    store.append(
        lookup.session_id,
        user("hi", sender_id=DM.user_id),
        state_delta={person: {"name": "林晓"}, lane: {"model": "m"}, APP: {"keep": 1}},
    )
    report = store.erase_user("feishu", "ou_lin")
    assert set(report.state) == {person.id, lane.id}
    assert store.backend.get_state([person.id, lane.id, APP.id]) == {APP.id: {"keep": 1}}
    assert report.unmatched == ()


def test_the_async_store_has_the_same_state_calls(store):
    """AsyncSessionStore.append, state and update_state are the sync ones as coroutines."""

    async def scenario() -> None:
        aio = AsyncSessionStore(store)
        session_id = (await aio.get_or_create(DM)).session_id
        result = await aio.append(session_id, user("q"), state_delta={APP: {"n": 1}})
        record = await aio.update_state(
            {StateScope.session(session_id): {"s": 1}}, if_revision=result.revision
        )
        assert record is not None
        assert (await aio.state(session_id)).session == {"s": 1}

    asyncio.run(scenario())
