"""A redelivered webhook costs nothing twice: the lookup first, ``AppendResult`` after."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_scenarios import DM, reply, user, with_policy

from hermes_sessions import (
    InvalidArgumentError,
    InvalidIdError,
    ResetPolicies,
    ResetPolicy,
    SessionStore,
)
from hermes_sessions.backends import open_backend
from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.cipher import Cipher, StaticKeys
from hermes_sessions.testing import FrozenClock

if TYPE_CHECKING:
    from pathlib import Path


def test_seen_is_none_for_a_new_message_and_the_copy_after(store):
    """By key or by session id; the host checks it before calling the model."""
    lookup = store.get_or_create(DM)
    key, session_id = lookup.entry.session_key, lookup.session_id
    assert store.seen(key, "chat:1") is None
    stored = store.append(session_id, user("hi", platform_message_id="chat:1"), reply("hello"))
    assert store.seen(key, "chat:1") == stored[0]
    assert store.seen(session_id, "chat:1") == stored[0]
    assert store.seen(key, "chat:2") is None


def test_seen_on_a_key_with_no_session_is_none(store):
    """A first message has never been seen (and seen creates nothing)."""
    key = store.key_for(DM)
    assert store.seen(key, "chat:1") is None
    assert store.backend.get_entry(key) is None


def test_seen_refuses_a_malformed_session_id(store):
    """Anything without ':' is a session id, and must be a valid one."""
    with pytest.raises(InvalidIdError):
        store.seen("../etc", "chat:1")


def test_redelivered_turn_is_stored_once(store):
    """append(user, new reply) of a redelivery stores nothing and says so."""
    session_id = store.get_or_create(DM).session_id
    first = store.append(session_id, user("hi", platform_message_id="chat:1"), reply("one"))
    again = store.append(session_id, user("hi", platform_message_id="chat:1"), reply("two"))
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.existing == (first[0],)
    assert [m.content for m in store.transcript(session_id)] == ["hi", "one"]


def test_redelivery_just_after_an_automatic_reset_is_recognised(store, clock):
    """The idle reset moved the key on; the message is still found in the session it left."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=30))
    lookup = idle.get_or_create(DM)
    idle.append(lookup.session_id, user("hi", platform_message_id="chat:1"), reply("hello"))
    clock.advance(minutes=31)
    rotated = idle.get_or_create(DM)
    assert rotated.reset is not None
    found = idle.seen(rotated.entry.session_key, "chat:1")
    assert found is not None
    assert found.session_id == lookup.session_id


def test_redelivery_just_after_new_is_recognised(store):
    """/new between a message and its redelivery does not make the redelivery new."""
    lookup = store.get_or_create(DM)
    store.append(lookup.session_id, user("hi", platform_message_id="chat:1"))
    entry = store.reset(lookup.entry.session_key)
    assert entry.previous_session_id == lookup.session_id
    assert store.seen(entry.session_key, "chat:1") is not None
    assert store.seen(entry.session_id, "chat:1") is None


def test_seen_counts_rewound_copies(store):
    """An undone message's redelivery is still a redelivery."""
    lookup = store.get_or_create(DM)
    store.append(lookup.session_id, user("hi", platform_message_id="chat:1"), reply("a"))
    store.undo(lookup.session_id)
    found = store.seen(lookup.entry.session_key, "chat:1")
    assert found is not None
    assert not found.active


# -- a redelivery that crosses a reset (issue 34, item 7) ------------------------------------------


def test_a_redelivery_after_the_idle_window_does_not_reset(store, clock):
    """Past the idle window, the lookup of a stored message reports it and rotates nothing."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=60))
    lookup = idle.get_or_create(DM, platform_message_id="chat:1")
    (stored,) = idle.append(lookup.session_id, user("hi", platform_message_id="chat:1"))
    before = idle.entry(lookup.entry.session_key)
    rotations = []
    idle.on_rotate(rotations.append)
    clock.advance(hours=2)
    again = idle.get_or_create(DM, platform_message_id="chat:1")
    assert again.redelivered == stored
    assert (again.created, again.reset, again.session_id) == (False, None, lookup.session_id)
    assert rotations == []
    assert idle.entry(lookup.entry.session_key) == before  # not touched either
    assert not idle.session(lookup.session_id).is_ended


def test_the_redelivery_check_comes_before_the_reset(store, clock):
    """The tutorial's turn, redelivered after two hours: one session, one copy, no notice."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=60))

    def turn(pid: str) -> str | None:
        lookup = idle.get_or_create(DM, platform_message_id=pid)
        if lookup.redelivered is not None:
            return None
        idle.append(lookup.session_id, user("hi", platform_message_id=pid), reply("hello"))
        return "notice" if lookup.reset is not None else "answer"

    assert turn("chat:1") == "answer"
    clock.advance(hours=2)
    assert turn("chat:1") is None
    sessions = [summary.record for summary in idle.list_sessions().items]
    assert [(r.id, r.message_count) for r in sessions] == [
        (idle.entry(idle.key_for(DM)).session_id, 2)
    ]
    assert turn("chat:2") == "notice"  # the next new message resets as before


def test_a_redelivery_from_the_session_before_new_keeps_the_new_one(store):
    """After /new the lookup finds the copy in the session the key left, and stays put."""
    lookup = store.get_or_create(DM)
    (stored,) = store.append(lookup.session_id, user("hi", platform_message_id="chat:1"))
    fresh = store.reset(lookup.entry.session_key)
    again = store.get_or_create(DM, platform_message_id="chat:1")
    assert again.redelivered == stored
    assert again.session_id == fresh.session_id != lookup.session_id


def test_a_redelivery_is_not_forced_into_a_new_session(store):
    """force_new (a redelivered /new, say) rotates nothing when the message is known."""
    lookup = store.get_or_create(DM)
    store.append(lookup.session_id, user("/new", platform_message_id="chat:1"))
    again = store.get_or_create(DM, force_new=True, platform_message_id="chat:1")
    assert again.redelivered is not None
    assert again.session_id == lookup.session_id


def test_a_new_platform_id_is_looked_up_as_before(store, clock):
    """First contact creates; a new id past the idle window resets; neither is a redelivery."""
    idle = with_policy(store, ResetPolicy(mode="idle", idle_minutes=60))
    first = idle.get_or_create(DM, platform_message_id="chat:1")
    assert first.created
    assert first.redelivered is None
    idle.append(first.session_id, user("hi", platform_message_id="chat:1"))
    clock.advance(hours=2)
    later = idle.get_or_create(DM, platform_message_id="chat:2")
    assert later.reset is not None
    assert later.reset.reason == "idle"
    assert later.redelivered is None


def test_a_redelivery_two_rotations_back_is_new(store):
    """The window is the key's current session and the one it left last (docs/concepts.md)."""
    lookup = store.get_or_create(DM)
    store.append(lookup.session_id, user("hi", platform_message_id="chat:1"))
    store.reset(lookup.entry.session_key)
    store.reset(lookup.entry.session_key)
    assert store.get_or_create(DM, platform_message_id="chat:1").redelivered is None


def test_the_redelivery_lookup_refuses_an_empty_platform_id(store):
    """An empty platform id is a caller's mistake, not a new message."""
    with pytest.raises(InvalidArgumentError, match="platform_message_id"):
        store.get_or_create(DM, platform_message_id="")


OPERATIONS = st.lists(
    st.one_of(
        st.just(("new", 0)),
        st.tuples(st.just("again"), st.integers(min_value=0, max_value=20)),
        st.tuples(st.just("wait"), st.sampled_from([5, 59, 61, 180])),
        st.just(("reset", 0)),
    ),
    max_size=30,
)


@given(operations=OPERATIONS)
def test_a_redelivery_in_the_window_never_rotates_or_stores(operations):
    """Within the window a redelivery changes nothing, whatever the mix of gaps and /new."""
    clock = FrozenClock(datetime(2026, 5, 12, 1, 0, tzinfo=UTC))
    idle = ResetPolicies(ResetPolicy(mode="idle", idle_minutes=60))
    store = SessionStore(InMemoryBackend(), clock=clock, resets=idle)
    rotations: list[object] = []
    store.on_rotate(rotations.append)
    holder: dict[str, int] = {}  # platform id -> index of the newest session holding it
    current, idle_since, sent = -1, clock.now(), 0
    for kind, value in operations:
        if kind == "wait":
            clock.advance(minutes=value)
            continue
        if kind == "reset":
            if current >= 0:
                store.reset(store.key_for(DM))
                current, idle_since = current + 1, clock.now()
            continue
        if kind == "new" or value >= sent:
            pid, sent = f"chat:{sent}", sent + 1
        else:
            pid = f"chat:{value}"
        before = len(rotations)
        lookup = store.get_or_create(DM, platform_message_id=pid)
        if pid in holder and holder[pid] >= current - 1:  # in the window: a redelivery
            assert lookup.redelivered is not None
            assert (lookup.reset, len(rotations)) == (None, before)
            continue
        assert lookup.redelivered is None
        expired = current >= 0 and clock.now() - idle_since > timedelta(minutes=60)
        current += 1 if current < 0 or expired else 0
        assert len(rotations) - before == (1 if lookup.created else 0)
        store.append(lookup.session_id, user("q", platform_message_id=pid), reply("a"))
        holder[pid], idle_since = current, clock.now()
    sessions = store.list_sessions(limit=None).items
    assert len(sessions) == current + 1
    assert all(summary.record.message_count % 2 == 0 for summary in sessions)


@pytest.mark.parametrize("inner", ["sqlite", "jsonl"])
def test_an_encrypted_store_recognises_a_redelivery_and_edits_across_a_reset(
    inner, tmp_path, clock
):
    """Under a cipher, as in the clear: the lookup finds the copy, the edit by key reaches it."""
    cipher = Cipher(StaticKeys({"k1": bytes(32)}), token_key=bytes(range(32)))
    backend = EncryptedBackend(open_backend(inner, tmp_path), cipher=cipher)
    idle = ResetPolicies(ResetPolicy(mode="idle", idle_minutes=60))
    with SessionStore(backend, clock=clock, resets=idle) as store:
        lookup = store.get_or_create(DM, platform_message_id="chat:1")
        (stored,) = store.append(
            lookup.session_id, user("ship the canary", platform_message_id="chat:1")
        )
        clock.advance(hours=2)
        assert store.get_or_create(DM, platform_message_id="chat:1").redelivered == stored
        assert store.get_or_create(DM).reset is not None
        store.edit(lookup.entry.session_key, "chat:1", "ship the rollout")
        assert [hit.message.id for hit in store.search("rollout")] == [stored.id]
        assert store.search("canary") == []


# -- two processes delivering the same webhook at once ---------------------------------------------


def deliver(kind: str, home: Path, worker: int, turns: int) -> None:
    """One gateway process getting every webhook (the other one gets them too): check, append."""
    with SessionStore(open_backend(kind, home)) as store:
        for n in range(turns):
            lookup = store.get_or_create(DM)
            pid = f"chat:{n}"
            if store.seen(lookup.entry.session_key, pid) is not None:
                continue
            store.append(
                lookup.session_id,
                user(f"q{n}", platform_message_id=pid),
                reply(f"answer {n} from worker {worker}"),
            )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_two_processes_delivering_the_same_turns_store_each_once(kind, tmp_path):
    """Every turn once, each with exactly one reply, however the two deliveries interleave."""
    context = multiprocessing.get_context("spawn")
    turns = 60
    workers = [
        context.Process(target=deliver, args=(kind, tmp_path, worker, turns)) for worker in (1, 2)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    assert [process.exitcode for process in workers] == [0, 0]
    with SessionStore(open_backend(kind, tmp_path)) as store:
        messages = store.transcript(store.entry(store.key_for(DM)).session_id)
    assert [m.content for m in messages if m.role == "user"] == [f"q{n}" for n in range(turns)]
    replies = [str(m.content) for m in messages if m.role == "assistant"]
    assert [r.split()[1] for r in replies] == [str(n) for n in range(turns)]
