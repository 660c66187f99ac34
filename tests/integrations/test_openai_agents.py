"""AgentsSession keeps an OpenAI Agents SDK session in a hermes-sessions store."""

from __future__ import annotations

import asyncio
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extras import FRAMEWORKS_REASON
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.exceptions import (
    BackendClosedError,
    InvalidValueError,
    MissingDependencyError,
)
from hermes_sessions.models import Message, SessionSource
from hermes_sessions.policy import ResetPolicies, ResetPolicy
from hermes_sessions.store import SessionStore
from hermes_sessions.testing import FrozenClock

agents = pytest.importorskip("agents", reason=FRAMEWORKS_REASON)
from agents import Agent, Runner  # noqa: E402
from agents.memory import Session, SessionSettings  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from hermes_sessions.integrations.openai_agents import (  # noqa: E402
    PLATFORM,
    AgentsSession,
    item_message,
)

ITEMS = [
    {"role": "user", "content": "how do we deploy the staging db?"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and 部署?"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "look it up"}],
        "encrypted_content": "opaque",
    },
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"topic": "deploy"}',
        "id": "fc_1",
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "use the blue pipeline"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Run the blue pipeline.", "annotations": []},
        ],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"q": "x"}},
    {"type": "a_type_of_next_year", "payload": {"nested": [1, 2.5, None, True]}},
    {"type": "function_call", "name": "no_call_id", "arguments": "{}"},
    {"role": "developer", "content": "be brief", "unknown_key": {"kept": True}},
    {"no_type": "and no role", "still": "kept"},
]


def run(coroutine):
    """Run one coroutine on a fresh event loop."""
    return asyncio.run(coroutine)


@pytest.fixture
def memory_store():
    """A store on the in-memory backend with a frozen clock."""
    with SessionStore(InMemoryBackend(), clock=FrozenClock()) as opened:
        yield opened


def test_it_satisfies_the_sdk_session_protocol(memory_store):
    """An AgentsSession is a Session as the SDK checks it, with the SDK's id and settings."""
    session = AgentsSession("conversation-1", memory_store)
    assert isinstance(session, Session)
    assert session.session_id == "conversation-1"
    assert session.session_settings == SessionSettings()


def test_the_default_lane_is_a_dm_of_the_agents_platform(memory_store):
    """Without a source the id is a DM chat of platform openai-agents; ':' and '%' are encoded."""
    session = AgentsSession("user:42%x", memory_store)
    assert session.source == SessionSource(platform=PLATFORM, chat_type="dm", chat_id="user:42%x")
    assert session.key == "agent:main:openai-agents:dm:user%3A42%25x"
    assert AgentsSession("user%3A42%25x", memory_store).key != session.key


def test_a_given_source_names_the_lane(memory_store):
    """With a source, the lane is that source's key, so the host's own conversation is used."""
    source = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
    session = AgentsSession("ignored-for-the-key", memory_store, source=source)
    assert session.key == memory_store.key_for(source)
    run(session.add_items([{"role": "user", "content": "hi"}]))
    assert memory_store.session(memory_store.entry(session.key).session_id).source == "telegram"


def test_every_item_type_comes_back_equal(store):
    """Messages, calls, outputs, reasoning and unknown types round-trip exactly on every backend."""
    session = AgentsSession("round-trip", store)
    run(session.add_items(ITEMS))
    assert run(session.get_items()) == ITEMS
    assert run(AgentsSession("round-trip", store).get_items()) == ITEMS


def test_item_text_is_searchable_and_tool_calls_are_counted(store):
    """The items' text is found by store.search, and function calls count as tool calls."""
    session = AgentsSession("searchable", store)
    run(session.add_items(ITEMS))
    found = {hit.message.session_id for hit in store.search("pipeline")}
    current = store.entry(session.key).session_id
    assert found == {current}
    assert store.search("部署")
    record = store.session(current)
    assert record.message_count == len(ITEMS)
    assert record.tool_call_count == 2  # the call without call_id is kept whole and counted too


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@given(
    kind=st.sampled_from(["message", "function_call", "function_call_output", "reasoning"])
    | st.text(min_size=1, max_size=10),
    fields=st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4),
)
def test_any_json_item_round_trips(kind, fields):
    """Whatever keys and values an item holds, the message that stores it gives it back."""
    item = {**fields, "type": kind}
    if kind == "message":
        item.setdefault("role", "user")
        if not isinstance(item["role"], str) or not item["role"]:
            item["role"] = "user"
    message = item_message(item)
    with SessionStore(InMemoryBackend()) as store:
        session = AgentsSession("hypothesis", store)
        run(session.add_items([item]))
        assert run(session.get_items()) == [item]
    assert message.role


def test_get_items_returns_the_newest_in_order(memory_store):
    """A limit gives the newest items oldest first; 0 gives none; a negative limit gives all."""
    session = AgentsSession("limits", memory_store)
    items = [{"role": "user", "content": f"m{n}"} for n in range(5)]
    run(session.add_items(items))
    assert run(session.get_items(2)) == items[3:]
    assert run(session.get_items(0)) == []
    assert run(session.get_items(-1)) == items
    assert run(session.get_items(50)) == items


def test_the_settings_limit_is_the_default(memory_store):
    """session_settings.limit applies when get_items is given none; an explicit limit wins."""
    session = AgentsSession("settings", memory_store, session_settings=SessionSettings(limit=2))
    items = [{"role": "user", "content": f"m{n}"} for n in range(4)]
    run(session.add_items(items))
    assert run(session.get_items()) == items[2:]
    assert run(session.get_items(3)) == items[1:]


def test_settings_are_normalised_like_the_sdk_does(memory_store):
    """A dict becomes SessionSettings; a field the SDK does not know is refused."""
    session = AgentsSession("dict", memory_store, session_settings={"limit": 0})
    assert session.session_settings == SessionSettings(limit=0)
    with pytest.raises((TypeError, ValueError)):
        AgentsSession("bad", memory_store, session_settings={"limitt": 1})


def test_reading_an_unused_lane_creates_nothing(memory_store):
    """get_items, pop_item and clear_session on a new lane store no session."""
    session = AgentsSession("untouched", memory_store)
    assert run(session.get_items()) == []
    assert run(session.pop_item()) is None
    run(session.clear_session())
    assert not memory_store.list_sessions().items


def test_pop_item_soft_deletes_the_newest(memory_store):
    """pop_item returns the newest item and keeps it stored inactive, so it can be restored."""
    session = AgentsSession("pop", memory_store)
    run(session.add_items(ITEMS[:3]))
    assert run(session.pop_item()) == ITEMS[2]
    assert run(session.get_items()) == ITEMS[:2]
    session_id = memory_store.entry(session.key).session_id
    kept = memory_store.transcript(session_id, include_inactive=True)
    assert [m.active for m in kept] == [True, True, False]
    memory_store.restore(session_id, [kept[-1]])
    assert run(session.get_items()) == ITEMS[:3]


def test_pop_item_on_an_emptied_lane_returns_none(memory_store):
    """Once every item is popped, pop_item returns None."""
    session = AgentsSession("drain", memory_store)
    run(session.add_items(ITEMS[:2]))
    assert [run(session.pop_item()) for _ in range(3)] == [ITEMS[1], ITEMS[0], None]


def test_pop_item_splits_a_message_the_host_stored(memory_store):
    """A host message with text and a tool call gives up its last item; the text stays."""
    session = AgentsSession("host", memory_store)
    session_id = memory_store.get_or_create(session.source).entry.session_id
    call = {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    memory_store.append(
        session_id, Message(role="assistant", content="calling f", tool_calls=[call])
    )
    popped = run(session.pop_item())
    assert popped == {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"}
    assert run(session.get_items()) == [{"role": "assistant", "content": "calling f"}]


def test_clear_session_starts_a_new_session_and_keeps_the_old(memory_store):
    """clear_session moves the lane to a new session; the old one ends and stays searchable."""
    session = AgentsSession("clear", memory_store)
    run(session.add_items(ITEMS[:1]))
    old = memory_store.entry(session.key).session_id
    run(session.clear_session())
    assert run(session.get_items()) == []
    assert memory_store.entry(session.key).session_id != old
    assert memory_store.session(old).end_reason == "session_reset"
    assert [h.message.session_id for h in memory_store.search("staging")] == [old]


def test_clear_session_purge_deletes_the_old_session(memory_store):
    """With purge=True the old session and its messages are deleted."""
    session = AgentsSession("purge", memory_store)
    run(session.add_items(ITEMS[:1]))
    old = memory_store.entry(session.key).session_id
    run(session.clear_session(purge=True))
    assert run(session.get_items()) == []
    assert memory_store.backend.get_session(old) is None
    assert memory_store.search("staging") == []


def test_the_lane_never_resets_by_default():
    """On a store with the gateway default (idle 24 h + daily 04:00), the history stays.

    Two items at 14:00 are still there the next morning, as with the SDK's own sessions.
    """
    clock = FrozenClock(datetime(2026, 5, 12, 14, tzinfo=UTC))
    with SessionStore(InMemoryBackend(), clock=clock) as store:
        session = AgentsSession("overnight", store)
        run(session.add_items(ITEMS[:2]))
        clock.advance(timedelta(hours=19))  # 09:00 the next day: past 04:00
        assert run(session.get_items()) == ITEMS[:2]
        clock.advance(timedelta(days=3))
        run(session.add_items(ITEMS[2:3]))
        assert run(session.get_items()) == ITEMS[:3]


def test_the_reset_policy_applies_to_the_lane_when_asked():
    """With ``resets=True``, after the idle timeout the lane's history starts afresh."""
    clock = FrozenClock()
    resets = ResetPolicies(default=ResetPolicy(mode="idle", idle_minutes=30))
    with SessionStore(InMemoryBackend(), clock=clock, resets=resets) as store:
        session = AgentsSession("idle", store, resets=True)
        run(session.add_items(ITEMS[:1]))
        old = store.entry(session.key).session_id
        clock.advance(timedelta(minutes=31))
        assert run(session.get_items()) == []
        assert store.session(old).end_reason == "idle"


def test_a_compressed_lane_continues_in_the_child(memory_store):
    """After the store compresses the lane's session, the session reads the compressed child."""
    session = AgentsSession("compress", memory_store)
    run(session.add_items(ITEMS[:3]))
    parent = memory_store.entry(session.key).session_id
    summary = {"role": "user", "content": "summary: we deploy staging with the blue pipeline"}
    child = memory_store.compress(parent, [item_message(summary)], holder="test")
    assert run(session.get_items()) == [summary]
    assert child.parent_session_id == parent
    assert [link.record.id for link in memory_store.lineage(child.id).links] == [parent, child.id]


def test_it_runs_on_an_async_store(memory_store):
    """Given an AsyncSessionStore, the session works the same, under the store's key lock."""

    async def scenario():
        astore = AsyncSessionStore(memory_store)
        session = AgentsSession("async", astore)
        await session.add_items(ITEMS[:2])
        held, release = asyncio.Event(), asyncio.Event()

        async def host_turn():
            async with astore.lock(session.key):
                held.set()
                await release.wait()
                session_id = memory_store.entry(session.key).session_id
                await astore.append(session_id, item_message(ITEMS[5]))

        host = asyncio.ensure_future(host_turn())
        await held.wait()
        popping = asyncio.ensure_future(session.pop_item())
        for _ in range(5):
            await asyncio.sleep(0)
        release.set()
        await host
        assert await popping == ITEMS[5]  # it waited for the host's turn to end
        return await session.get_items()

    assert run(scenario()) == ITEMS[:2]


def test_store_calls_run_off_the_event_loop():
    """The blocking store calls run in worker threads, never on the loop's thread."""
    threads = []

    def redact(message):
        threads.append(threading.current_thread())
        return message

    with SessionStore(InMemoryBackend(), redact=redact) as store:
        session = AgentsSession("threads", store)
        run(session.add_items(ITEMS[:2]))
    assert len(threads) == 2
    assert threading.main_thread() not in threads


def test_a_cancelled_write_finishes_before_the_cancel_arrives():
    """Cancelling add_items mid-write lets the write complete, then raises CancelledError."""
    entered, release = threading.Event(), threading.Event()

    def redact(message):
        entered.set()
        assert release.wait(10)
        return message

    async def scenario(session):
        task = asyncio.ensure_future(session.add_items(ITEMS[:1]))
        assert await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    with SessionStore(InMemoryBackend(), redact=redact) as store:
        session = AgentsSession("cancel", store)
        run(scenario(session))
        release.set()
        assert run(session.get_items()) == ITEMS[:1]


def test_a_non_json_item_is_refused_before_anything_is_written(memory_store):
    """An item holding a non-JSON value raises InvalidValueError and stores none of the batch."""
    session = AgentsSession("odd", memory_store)
    with pytest.raises(InvalidValueError):
        run(session.add_items([ITEMS[0], {"role": "user", "content": object()}]))
    assert run(session.get_items()) == []
    run(session.add_items(ITEMS[:1]))
    assert run(session.get_items()) == ITEMS[:1]


def test_a_closed_session_refuses_every_call_and_leaves_the_store_open(memory_store):
    """After close() each call raises BackendClosedError (a RuntimeError); the store still works."""
    session = AgentsSession("closed", memory_store)
    session.close()
    for call in (
        session.add_items([]),
        session.add_items(ITEMS[:1]),
        session.get_items(),
        session.pop_item(),
        session.clear_session(),
    ):
        with pytest.raises(BackendClosedError, match="AgentsSession 'closed' is closed"):
            run(call)
    assert isinstance(BackendClosedError(), RuntimeError)
    assert not memory_store.list_sessions().items


def test_one_session_serves_several_event_loops(memory_store):
    """The same session works from one loop after another (Runner.run_sync makes its own)."""
    session = AgentsSession("loops", memory_store)
    for n in range(3):
        run(session.add_items([{"role": "user", "content": f"turn {n}"}]))
    assert len(run(session.get_items())) == 3


def test_bad_arguments_are_refused(memory_store):
    """A session id that is not a string, or a store of another kind, is a TypeError."""
    with pytest.raises(TypeError, match="session_id must be a str"):
        AgentsSession(42, memory_store)
    with pytest.raises(TypeError, match="SessionStore or an AsyncSessionStore"):
        AgentsSession("x", object())


def test_a_missing_sdk_names_the_extra(memory_store, monkeypatch):
    """Without the SDK, creating a session says which extra to install."""
    monkeypatch.setitem(sys.modules, "agents.memory", None)
    with pytest.raises(MissingDependencyError, match=r"hermes-sessions\[openai-agents\]"):
        AgentsSession("x", memory_store)


def test_a_runner_keeps_its_history_in_the_store(store):
    """Two turns of a scripted agent: the second call sees the first, and the store holds both."""
    model = ScriptedModel(
        [
            [function_call("lookup", {"topic": "deploy"}, call_id="call_7")],
            [assistant_message("Use the blue pipeline.")],
            [assistant_message("Yes, on Fridays too.")],
        ]
    )
    agents.set_tracing_disabled(disabled=True)

    @agents.function_tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"{topic}: blue pipeline"

    agent = Agent(name="ops", model=model, tools=[lookup])
    session = AgentsSession("ops-chat", store)
    first = run(Runner.run(agent, "how do we deploy?", session=session))
    second = run(Runner.run(agent, "on Fridays too?", session=session))
    assert (first.final_output, second.final_output) == (
        "Use the blue pipeline.",
        "Yes, on Fridays too.",
    )
    seen = model.last_call.input
    assert seen[0] == {"role": "user", "content": "how do we deploy?"}
    assert seen[-1] == {"role": "user", "content": "on Fridays too?"}
    record = store.session(store.entry(session.key).session_id)
    assert record.tool_call_count == 1
    assert store.search("blue pipeline")
    assert run(session.get_items())[: len(seen)] == seen
