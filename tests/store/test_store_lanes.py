"""A private conversation never reaches a shared audience (issue 12): the lane rule."""

from __future__ import annotations

import attrs
import pytest
from store_scenarios import ALICE, DM, THREAD_ALICE, THREAD_BOB, user

from hermes_sessions import (
    SessionNotFoundError,
    SessionSource,
    Visibility,
    handle_session_search,
    is_private_lane,
)
from hermes_sessions.tools import SearchToolContext

LIN_IN_GROUP = attrs.evolve(ALICE, user_id="ou_lin")  # a group key isolated per member: shared
LIN_IN_THREAD = attrs.evolve(THREAD_ALICE, user_id="ou_lin")
LIN_OTHER_DM = SessionSource(platform="feishu", chat_id="oc_second_dm", user_id="ou_lin")


def test_only_dm_keys_are_private(store):
    """The predicate: a DM is private; groups (isolated or not), channels and threads are not."""
    assert is_private_lane(store.key_for(DM))
    for shared in (ALICE, LIN_IN_GROUP, THREAD_ALICE):
        assert not is_private_lane(store.key_for(shared))
    assert not is_private_lane("not a key")  # unknown: the safe side


@pytest.fixture
def lanes(store):
    """Lin's DM session 'secret plan', and a thread session 'thread notes' Alice started."""
    dm = store.reset(store.key_for(DM), source=DM, title="secret plan")
    store.append(dm.session_id, user("the acquisition closes friday", sender_id="ou_lin"))
    thread = store.reset(store.key_for(THREAD_ALICE), source=THREAD_ALICE, title="thread notes")
    store.append(thread.session_id, user("deploy checklist", sender_id="ou_alice"))
    store.reset(store.key_for(THREAD_ALICE))  # the thread moved on; its notes are history now
    return {"dm": dm.session_id, "thread": thread.session_id}


@pytest.mark.parametrize(
    ("asker", "target", "requester", "widen", "allowed"),
    [
        # private -> shared: refused by title and by id, whoever is named as the requester
        (LIN_IN_THREAD, "secret plan", None, False, False),
        (LIN_IN_THREAD, "dm", DM, False, False),
        (LIN_IN_GROUP, "dm", None, False, False),
        (LIN_IN_GROUP, "secret plan", DM, False, False),
        # shared -> the same shared lane: allowed, for every member
        (THREAD_BOB, "thread notes", None, False, True),
        (THREAD_BOB, "thread", None, False, True),
        # DM -> a DM of the same user on the same platform: allowed
        (LIN_OTHER_DM, "secret plan", None, False, True),
        # only the host's allow= widens a shared lane
        (LIN_IN_THREAD, "secret plan", None, True, True),
    ],
    ids=[
        "dm-to-thread-by-title",
        "dm-to-thread-by-id-with-requester",
        "dm-to-isolated-group-by-id",
        "dm-to-isolated-group-requester-does-not-widen",
        "thread-to-same-thread-by-title",
        "thread-to-same-thread-by-id",
        "dm-to-dm-same-user",
        "allow-widens",
    ],
)
def test_resume_across_lanes(store, lanes, asker, target, requester, widen, allowed):
    """The cross-lane table: private to shared refused, the rest as the rule says."""
    key = store.key_for(asker)
    store.get_or_create(asker)
    target = lanes.get(target, target)
    allow = (lambda _requester, _record: True) if widen else None
    if allowed:
        entry = store.resume(key, target, requester=requester, allow=allow)
        assert entry.session_id in lanes.values()
    else:
        with pytest.raises(SessionNotFoundError):
            store.resume(key, target, requester=requester, allow=allow)
        assert store.entry(key).session_id not in lanes.values()


def test_search_for_a_shared_lane_sees_only_that_lane(store, lanes):
    """store.search for a requester in a thread never returns the DM."""
    thread_key = store.key_for(LIN_IN_THREAD)
    store.get_or_create(LIN_IN_THREAD)
    everyone = store.search("acquisition OR checklist")
    assert {h.session.id for h in everyone} == set(lanes.values())
    seen = Visibility.for_requester(thread_key, LIN_IN_THREAD, keys=store.keys)
    hits = store.search("acquisition OR checklist", visible_to=seen)
    assert {h.session.id for h in hits} == {lanes["thread"]}
    from_dm = Visibility.for_requester(store.key_for(LIN_OTHER_DM), LIN_OTHER_DM, keys=store.keys)
    assert lanes["dm"] in {h.session.id for h in store.search("acquisition", visible_to=from_dm)}


def test_the_search_tool_in_a_shared_lane_never_shows_the_dm(store, lanes):
    """browse, discover, read and scroll from a thread: the DM is as if it did not exist."""
    store.get_or_create(LIN_IN_THREAD)
    context = SearchToolContext(
        store=store, requester=LIN_IN_THREAD, current_key=store.key_for(LIN_IN_THREAD)
    )
    browse = handle_session_search(context, {})
    assert lanes["dm"] not in {s["session_id"] for s in browse["sessions"]}
    discover = handle_session_search(context, {"query": "acquisition"})
    assert discover["results"] == []
    read = handle_session_search(context, {"session_id": lanes["dm"]})
    assert read["success"] is False
    (message,) = store.transcript(lanes["dm"])
    scroll = handle_session_search(context, {"session_id": lanes["dm"], "message_id": message.id})
    assert scroll["success"] is False
    assert "closes friday" not in str([browse, discover, read, scroll])


def test_scroll_never_anchors_on_a_retracted_message(store):
    """A recalled message cannot be read back through the tool, not even as the anchor."""
    lookup = store.get_or_create(DM)
    stored = store.append(
        lookup.session_id,
        user("keep this"),
        user("oops, my password is hunter2", platform_message_id="oc:9"),
        user("and this"),
    )
    store.retract(lookup.session_id, "oc:9")
    context = SearchToolContext(store=store, requester=DM, current_key=lookup.entry.session_key)
    scroll = handle_session_search(
        context, {"session_id": lookup.session_id, "message_id": stored[1].id}
    )
    assert scroll["success"] is False
    assert "hunter2" not in str(scroll)
    around = handle_session_search(
        context, {"session_id": lookup.session_id, "message_id": stored[0].id}
    )
    assert around["success"] is True
    assert "hunter2" not in str(around)
