"""Incognito lanes (issue 23): in memory only, seen from their own lane only, gone on rotation."""

from __future__ import annotations

import asyncio
import inspect
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_scenarios import DM, THREAD_ALICE, reply, user, with_policy

from hermes_sessions import (
    AsyncSessionStore,
    IncognitoLaneError,
    IncognitoPolicy,
    InvalidArgumentError,
    KeyPolicy,
    Message,
    ResetPolicy,
    SessionNotFoundError,
    SessionQuery,
    SessionSource,
    SessionStore,
    StateScope,
    Usage,
    Visibility,
)
from hermes_sessions.aio import handle_memory_async
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.memory import MemoryStore
from hermes_sessions.protocols import EntryWrite, RotationPlan, SupportsReindex, SupportsScrub
from hermes_sessions.store import IncognitoRouter
from hermes_sessions.tools import SearchToolContext, handle_memory, handle_session_search

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from hermes_sessions.protocols import Backend
    from hermes_sessions.testing import FrozenClock

# Lin's second DM (same platform, same user as DM): the private lane rule would let DM see it.
SECRET = SessionSource(platform="feishu", chat_id="ou_lin_secret", user_id="ou_lin")
SECRET_KEY = KeyPolicy().build(SECRET)
MARK = "zqxghostword"


@pytest.fixture
def lanes(make_backend: Callable[[], Backend], clock: FrozenClock) -> Iterator[SessionStore]:
    """A store on each backend where SECRET's key is incognito."""
    policy = IncognitoPolicy(keys=[SECRET_KEY])
    with SessionStore(make_backend(), clock=clock, incognito=policy) as opened:
        yield opened


def _chat(store: SessionStore, source: SessionSource, text: str) -> str:
    """One turn in ``source``'s lane; the session id."""
    session_id = store.get_or_create(source).session_id
    store.append(session_id, user(text, platform_message_id=f"{text}-1"), reply(f"noted: {text}"))
    return session_id


def test_an_incognito_session_is_held_in_memory_only(lanes):
    """The lane's session and messages exist for the store but not in the persistent backend."""
    session_id = _chat(lanes, SECRET, f"secret {MARK}")
    assert lanes.is_incognito(SECRET_KEY)
    assert lanes.is_incognito(session_id)
    assert lanes.session(session_id).message_count == 2
    assert isinstance(lanes.backend, IncognitoRouter)
    assert lanes.backend.persistent.get_session(session_id) is None
    assert lanes.backend.persistent.get_entry(SECRET_KEY) is None


def test_a_predicate_makes_a_lane_incognito(tmp_path):
    """A source predicate marks the lane when its key is built; other lanes persist."""
    policy = IncognitoPolicy(match=lambda source: source.chat_id == SECRET.chat_id)
    with SessionStore.open(tmp_path, incognito=policy) as store:
        secret = _chat(store, SECRET, "hidden")
        public = _chat(store, DM, "kept")
        assert store.is_incognito(secret)
        assert not store.is_incognito(public)
        assert not store.is_incognito(store.key_for(DM))
    with SessionStore.open(tmp_path) as reopened:
        assert reopened.session(public).message_count == 2
        with pytest.raises(SessionNotFoundError):
            reopened.session(secret)


def test_the_store_api_works_in_an_incognito_lane(lanes):
    """Redelivery, context, titles, edits, undo and state all work on an incognito session."""
    session_id = _chat(lanes, SECRET, "plan")
    assert lanes.seen(SECRET_KEY, "plan-1") is not None
    assert len(lanes.context(session_id, max_messages=10).messages) == 2
    assert lanes.set_title(session_id, "悄悄话").title == "悄悄话"
    lanes.edit(session_id, "plan-1", "plan B")
    assert lanes.transcript(session_id)[0].content == "plan B"
    assert len(lanes.undo(session_id)) == 2
    lanes.update_state({StateScope.session(session_id): {"mood": "quiet"}}, session_id=session_id)
    lanes.update_state({StateScope.lane(SECRET_KEY): {"lang": "zh"}})
    state = lanes.state(session_id)
    assert (state.session, state.lane) == ({"mood": "quiet"}, {"lang": "zh"})


def test_an_incognito_turn_reads_but_never_writes_persisted_state(lanes):
    """App and user state are read from disk; changing them from an incognito session is refused."""
    app = StateScope.app("main")
    lanes.update_state({app: {"flag": True}})
    session_id = _chat(lanes, SECRET, "hello")
    assert lanes.state(session_id).app == {"flag": True}
    user_scope = StateScope.user("main", "feishu", "ou_lin")
    with pytest.raises(IncognitoLaneError):
        lanes.append(session_id, user("x"), state_delta={user_scope: {"name": "Lin"}})
    with pytest.raises(IncognitoLaneError):
        lanes.update_state({app: {"flag": False}}, session_id=session_id)
    assert lanes.state(session_id).app == {"flag": True}


def test_new_deletes_the_old_incognito_transcript(lanes):
    """``/new`` in an incognito lane deletes the session it leaves (the one such exception)."""
    old = _chat(lanes, SECRET, "forget me")
    events = []
    lanes.on_rotate(events.append)
    new = lanes.reset(SECRET_KEY)
    assert new.session_id != old
    assert [(e.old_session_id, e.reason) for e in events] == [(old, "session_reset")]
    with pytest.raises(SessionNotFoundError):
        lanes.session(old)
    assert lanes.search("forget", session_key=SECRET_KEY) == []


def test_a_policy_reset_deletes_the_old_incognito_transcript(lanes, clock):
    """An idle reset of an incognito lane leaves nothing of the expired session."""
    idle = with_policy(lanes, ResetPolicy(mode="idle", idle_minutes=30))
    old = _chat(idle, SECRET, "stale")
    clock.advance(timedelta(hours=1))
    lookup = idle.get_or_create(SECRET)
    assert lookup.session_id != old
    assert lookup.reset is not None
    with pytest.raises(SessionNotFoundError):
        idle.session(old)


def test_a_redelivery_past_the_idle_window_keeps_the_incognito_session(lanes, clock):
    """The redelivery is recognised before the reset would delete the session holding it."""
    idle = with_policy(lanes, ResetPolicy(mode="idle", idle_minutes=30))
    old = _chat(idle, SECRET, "stale")
    clock.advance(timedelta(hours=1))
    again = idle.get_or_create(SECRET, platform_message_id="stale-1")
    assert again.redelivered is not None
    assert (again.session_id, again.reset) == (old, None)
    assert idle.session(old).message_count == 2


def test_branch_and_compress_keep_the_copy_and_drop_the_parent(lanes):
    """The child of a branch or a compression lives on in memory; its parent is gone."""
    parent = _chat(lanes, SECRET, "branch me")
    child = lanes.branch(SECRET_KEY)
    assert lanes.transcript(child.session_id)[0].content == "branch me"
    with pytest.raises(SessionNotFoundError):
        lanes.session(parent)
    summary = [Message(role="system", content="Summary: a branch.")]
    tip = lanes.compress(child.session_id, summary, holder="worker")
    assert lanes.is_incognito(tip.id)
    assert lanes.entry(SECRET_KEY).session_id == tip.id
    with pytest.raises(SessionNotFoundError):
        lanes.session(child.session_id)


def test_resume_never_crosses_between_kinds_of_lane(lanes):
    """An incognito key cannot resume a persisted session; a persisted key finds none incognito."""
    public = _chat(lanes, DM, "public history")
    secret = _chat(lanes, SECRET, "private")
    with pytest.raises(IncognitoLaneError):
        lanes.resume(SECRET_KEY, public, allow=lambda _requester, _record: True)
    with pytest.raises(SessionNotFoundError):
        lanes.resume(lanes.key_for(DM), secret, allow=lambda _requester, _record: True)
    assert lanes.entry(SECRET_KEY).session_id == secret
    assert lanes.entry(lanes.key_for(DM)).session_id == public


def test_other_lanes_never_see_incognito_content(lanes):
    """Searches and listings, unfiltered or from Lin's other DM, leave the incognito lane out."""
    public = _chat(lanes, DM, f"public {MARK}")
    _chat(lanes, SECRET, f"private {MARK}")
    visible = Visibility.for_requester(lanes.key_for(DM), DM)
    for hits in (lanes.search(MARK), lanes.search(MARK, visible_to=visible)):
        assert {hit.session.id for hit in hits} == {public}
    listed = lanes.list_sessions(visible_to=visible).items
    assert [summary.record.id for summary in listed] == [public]
    assert [summary.record.id for summary in lanes.list_sessions().items] == [public]


def test_the_search_tool_of_another_lane_cannot_read_an_incognito_session(lanes):
    """``session_search`` from Lin's DM neither finds nor reads (by id) the incognito session."""
    _chat(lanes, DM, "public note")
    lanes.reset(lanes.key_for(DM))  # the note is history the tool may show
    secret = _chat(lanes, SECRET, f"private {MARK}")
    context = SearchToolContext(store=lanes, requester=DM, current_key=lanes.key_for(DM))
    assert handle_session_search(context, {"query": MARK})["results"] == []
    browsed = handle_session_search(context, {})["sessions"]
    assert secret not in {result["session_id"] for result in browsed}
    assert handle_session_search(context, {"session_id": secret})["success"] is False


def test_a_search_from_the_incognito_lane_sees_it_first_then_persisted_history(lanes, clock):
    """From its own lane a search finds the lane's hits first, then persisted ones it may see."""
    public = _chat(lanes, DM, f"public {MARK}")
    clock.advance(timedelta(minutes=1))  # the incognito session is the newer: it lists first
    secret = _chat(lanes, SECRET, f"private {MARK}")
    visible = Visibility.for_requester(SECRET_KEY, SECRET)
    hits = lanes.search(MARK, visible_to=visible)
    assert [hit.session.id for hit in hits] == [secret, secret, public, public]
    page = lanes.search(MARK, visible_to=visible, offset=1, limit=2)
    assert [hit.session.id for hit in page] == [secret, public]
    listed = lanes.list_sessions(visible_to=visible, limit=1)
    assert [s.record.id for s in listed.items] == [secret]
    rest = lanes.list_sessions(visible_to=visible, limit=1, cursor=listed.next_cursor)
    assert [s.record.id for s in rest.items] == [public]


def test_the_memory_tool_refuses_writes_from_an_incognito_lane(lanes, tmp_path):
    """A memory call from the incognito lane writes nothing and says why; other lanes may write."""
    memory = MemoryStore(tmp_path / "memories")
    call = {"action": "add", "target": "user", "content": "Lin likes tea"}
    refused = handle_memory(memory, call, sessions=lanes, current_key=SECRET_KEY)
    assert (refused["success"], refused["code"], refused["action"]) == (False, "incognito", "add")
    assert "incognito" in refused["error"]
    assert memory.entries("user") == ()
    allowed = handle_memory(memory, call, sessions=lanes, current_key=lanes.key_for(DM))
    assert allowed["success"] is True


def test_close_drops_every_incognito_lane(tmp_path):
    """Reopening the home finds no trace of the incognito lane; persisted lanes are intact."""
    policy = IncognitoPolicy(keys=[SECRET_KEY])
    with SessionStore.open(tmp_path, incognito=policy) as store:
        secret = _chat(store, SECRET, "gone at close")
        public = _chat(store, DM, "stays")
    with SessionStore.open(tmp_path, incognito=policy) as reopened:
        assert reopened.backend.get_entry(SECRET_KEY) is None
        assert reopened.backend.get_session(secret) is None
        assert reopened.get_or_create(SECRET).session_id != secret
        assert reopened.session(public).message_count == 2


def test_the_async_store_honours_incognito_lanes(tmp_path):
    """Turns, search and the async memory handler keep to the same rules."""

    async def scenario() -> None:
        policy = IncognitoPolicy(keys=[SECRET_KEY])
        async with await AsyncSessionStore.open(tmp_path, incognito=policy) as astore:
            async with astore.turn(SECRET) as turn:
                await astore.append(turn.session_id, user(f"async {MARK}"))
            assert astore.is_incognito(turn.session_id)
            assert await astore.search(MARK) == []
            assert len(await astore.search(MARK, session_key=SECRET_KEY)) == 1
            memory = MemoryStore(tmp_path / "memories")
            call = {"action": "add", "target": "memory", "content": "x"}
            refused = await handle_memory_async(memory, call, sessions=astore, current_key=turn.key)
            assert refused["code"] == "incognito"
            old = turn.session_id
            await astore.reset(turn.key)
            with pytest.raises(SessionNotFoundError):
                await astore.session(old)

    asyncio.run(scenario())


def test_a_policy_takes_a_collection_of_keys():
    """One string is refused (it would be read as characters); any collection of keys works."""
    with pytest.raises(InvalidArgumentError, match="pass"):
        IncognitoPolicy(keys=SECRET_KEY)
    assert IncognitoPolicy(keys=[SECRET_KEY, SECRET_KEY]).keys == frozenset({SECRET_KEY})


def test_lanes_named_by_key_cover_threads_only_by_their_own_key(lanes):
    """A policy key is exact: a thread of the same chat is a different, persisted lane."""
    session_id = _chat(lanes, THREAD_ALICE, "thread")
    assert not lanes.is_incognito(session_id)


def test_delete_and_suspend_work_in_an_incognito_lane(lanes):
    """A forced delete moves the key to a new session; a suspended key's next message rotates."""
    first = _chat(lanes, SECRET, "delete me")
    moved = lanes.delete(first, force=True)
    assert moved == (SECRET_KEY,)
    with pytest.raises(SessionNotFoundError):
        lanes.session(first)
    second = lanes.entry(SECRET_KEY).session_id
    lanes.suspend(SECRET_KEY)
    assert lanes.get_or_create(SECRET).session_id != second
    with pytest.raises(SessionNotFoundError):
        lanes.session(second)


def test_housekeeping_leaves_incognito_lanes_alone(lanes, clock):
    """Prune and erase_user work on persisted sessions; the incognito lane stays usable."""
    secret = _chat(lanes, SECRET, "still here")
    _chat(lanes, DM, "public")
    lanes.reset(lanes.key_for(DM))
    clock.advance(timedelta(days=2))
    lanes.touch(lanes.key_for(DM))  # the public chat still talks: only its ended session is old
    assert len(lanes.prune(timedelta(days=1), dry_run=False).session_ids) == 1
    lanes.erase_user("feishu", "ou_lin")
    assert lanes.session(secret).message_count == 2
    assert SECRET_KEY not in {entry.session_key for entry in lanes.backend.entries()}


def test_one_incognito_lane_cannot_resume_another(make_backend, clock):
    """Two incognito DMs of one user stay apart: neither resumes the other's session by id."""
    other = SessionSource(platform="feishu", chat_id="ou_lin_other", user_id="ou_lin")
    policy = IncognitoPolicy(match=lambda source: source.chat_id.startswith("ou_lin_"))
    with SessionStore(make_backend(), clock=clock, incognito=policy) as store:
        secret = _chat(store, SECRET, "first lane")
        _chat(store, other, "second lane")
        with pytest.raises((IncognitoLaneError, SessionNotFoundError)):
            store.resume(store.key_for(other), secret, allow=lambda _requester, _record: True)
        assert store.entry(SECRET_KEY).session_id == secret
        hits = store.search(
            "lane", visible_to=Visibility.for_requester(store.key_for(other), other)
        )
        assert {hit.session.session_key for hit in hits} == {store.key_for(other)}


def test_the_router_refuses_pointing_a_lane_at_another_lanes_session(make_backend, clock):
    """Even a hand-made plan cannot point one incognito key at another incognito lane's session."""
    other = SessionSource(platform="feishu", chat_id="ou_lin_other", user_id="ou_lin")
    policy = IncognitoPolicy(match=lambda source: source.chat_id.startswith("ou_lin_"))
    with SessionStore(make_backend(), clock=clock, incognito=policy) as store:
        secret = _chat(store, SECRET, "first lane")
        _chat(store, other, "second lane")
        entry = store.entry(store.key_for(other))
        moved = EntryWrite(
            entry=attrs.evolve(entry, session_id=secret), expected_revision=entry.revision
        )
        with pytest.raises(IncognitoLaneError):
            store.backend.apply(RotationPlan(at=clock.now(), entries=[moved]))
        assert store.entry(store.key_for(other)).session_id == entry.session_id


@pytest.mark.parametrize(
    ("backend", "abilities"),
    [("sqlite", {"check", "scrub", "reindex"}), ("memory", {"check"})],
)
def test_the_router_has_the_optional_abilities_of_its_backend(tmp_path, backend, abilities):
    """The router has ``check``, ``scrub`` and ``reindex`` as methods iff its backend has them."""
    with SessionStore.open(tmp_path, backend, incognito=IncognitoPolicy()) as store:
        found = {
            name
            for name in ("check", "scrub", "reindex")
            if inspect.getattr_static(store.backend, name, None) is not None
        }
        assert found == abilities
        assert isinstance(store.backend, SupportsScrub) == ("scrub" in abilities)
        assert isinstance(store.backend, SupportsReindex) == ("reindex" in abilities)
        assert store.backend.check().ok
        if "scrub" in abilities:
            store.backend.scrub()
            assert not store.backend.reindex_needed()
            assert store.backend.reindex() == 0


def test_threads_racing_into_an_incognito_lane_share_one_session(lanes):
    """Eight threads' first messages of one incognito chat land in one in-memory session."""
    barrier = threading.Barrier(8)

    def first_message() -> str:
        barrier.wait()
        return lanes.get_or_create(SECRET).session_id

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = set(pool.map(lambda _n: first_message(), range(8)))
    assert len(ids) == 1
    assert lanes.is_incognito(ids.pop())


def test_the_less_common_calls_work_in_an_incognito_lane(lanes):
    """Touch, usage, archive, context views, retry and the resume flag stay in memory."""
    session_id = _chat(lanes, SECRET, "first")
    lanes.append(session_id, user("second"), reply("again"))
    assert lanes.touch(SECRET_KEY, last_prompt_tokens=10).last_prompt_tokens == 10
    assert lanes.record_usage(session_id, Usage(input=3)).input_tokens == 3
    assert lanes.archive(session_id).archived
    assert len(lanes.messages_around(session_id, 2, window=1)) == 3
    assert lanes.anchored_view(session_id, 3).anchor.content == "second"
    assert lanes.retry(session_id).content == "second"
    assert lanes.mark_resume_pending(SECRET_KEY, "restart").resume_pending
    assert lanes.is_incognito(session_id)
    assert lanes.backend.persistent.get_session(session_id) is None
    assert lanes.search("first", session_key=SECRET_KEY, limit=1)[0].session.id == session_id


def test_the_router_keeps_the_sides_apart_on_direct_calls(lanes, clock):
    """Direct backend calls route by key and session; pointing a key across sides is refused."""
    router = lanes.backend
    public = _chat(lanes, DM, "public")
    secret = _chat(lanes, SECRET, "secret")
    assert router.capabilities() == router.persistent.capabilities()
    assert "IncognitoRouter over" in repr(router)
    entry = router.get_entry(SECRET_KEY)
    with pytest.raises(IncognitoLaneError):
        router.put_entry(attrs.evolve(entry, session_id=public), expected_revision=entry.revision)
    assert router.end_session(secret, "host_reason", at=clock.now()).is_ended
    assert not router.reopen_session(secret).is_ended
    record = attrs.evolve(router.get_session(secret), id="20260512_010000_0badc0de", title=None)
    router.create_session(record)
    assert router.overlay.get_session(record.id) is not None
    assert router.persistent.get_session(record.id) is None
    assert router.delete_messages(secret, [1]) == 1
    assert len(router.replace_messages(secret, [user("only")])) == 1
    with pytest.raises(AttributeError):
        router._not_forwarded  # noqa: B018  # private names are never forwarded


def test_a_store_without_lanes_has_no_incognito_key(tmp_path):
    """Without a policy nothing is incognito and the backend is the one passed in."""
    with SessionStore.open(tmp_path, "memory") as store:
        assert not store.is_incognito(store.key_for(SECRET))
        assert not isinstance(store.backend, IncognitoRouter)


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["chat", "new", "branch", "compress", "title"]),
        st.booleans(),  # True: in the incognito lane
        st.text(alphabet="ab隐身 ", min_size=1, max_size=6),
    ),
    max_size=12,
)


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(OPERATIONS)
def test_no_sequence_of_commands_carries_an_incognito_lane_to_the_persistent_side(operations):
    """Whatever runs in which lane, nothing of the incognito lane reaches the persistent side."""
    store = SessionStore(InMemoryBackend(), incognito=IncognitoPolicy(keys=[SECRET_KEY]))
    for number, (command, hidden, text) in enumerate(operations):
        source = SECRET if hidden else DM
        key = store.key_for(source)
        if command == "chat":
            store.append(store.get_or_create(source).session_id, user(f"zz {text}"))
        elif command == "new":
            store.reset(key, source=source)
        elif command == "branch":
            store.branch(key, source=source, title=f"b{number}")
        elif command == "compress":
            session_id = store.get_or_create(source).session_id
            store.compress(session_id, [reply(f"s{text}")], holder="h")
        else:
            store.set_title(store.get_or_create(source).session_id, f"t{number} {text}")
    persistent = store.backend.persistent
    assert SECRET_KEY not in {entry.session_key for entry in persistent.entries()}
    stored = persistent.list_sessions(SessionQuery(limit=None)).items
    assert SECRET_KEY not in {summary.record.session_key for summary in stored}
    public = Visibility.for_requester(store.key_for(DM), DM)
    hits = store.search("zz", visible_to=public, limit=None)
    assert all(hit.session.session_key != SECRET_KEY for hit in hits)
    assert len(hits) >= sum(  # branches copy messages
        1 for command, hidden, _text in operations if command == "chat" and not hidden
    )
    store.close()


def test_the_natural_mode_keeps_incognito_lanes_apart(lanes, clock):
    """A natural question finds the incognito session only from its own lane (ranked as any)."""
    public = _chat(lanes, DM, f"public {MARK} notes")
    clock.advance(timedelta(minutes=1))
    secret = _chat(lanes, SECRET, f"private {MARK} notes")
    question = f"what were the {MARK} notes?"
    from_dm = Visibility.for_requester(lanes.key_for(DM), DM)
    assert [m.session.id for m in lanes.search(question, mode="natural")] == [public]
    assert [m.session.id for m in lanes.search(question, mode="natural", visible_to=from_dm)] == [
        public
    ]
    own = Visibility.for_requester(SECRET_KEY, SECRET)
    found = lanes.search(question, mode="natural", visible_to=own)
    assert {m.session.id for m in found} == {secret, public}
