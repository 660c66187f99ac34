"""HermesSessionService keeps Google ADK sessions, events and state in a hermes-sessions store."""

from __future__ import annotations

import asyncio
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extras import FRAMEWORKS_REASON
from hermes_sessions.aio import AsyncSessionStore
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.exceptions import MissingDependencyError
from hermes_sessions.models import Message
from hermes_sessions.state import StateScope
from hermes_sessions.store import SessionStore
from hermes_sessions.testing import FrozenClock

pytest.importorskip("google.adk", reason=FRAMEWORKS_REASON)
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from hermes_sessions.integrations import adk
from hermes_sessions.integrations.adk import PLATFORM, HermesSessionService

APP = "helpdesk"


def run(coroutine):
    """Run one coroutine on a fresh event loop."""
    return asyncio.run(coroutine)


@pytest.fixture
def memory_store():
    """A store on the in-memory backend with a frozen clock."""
    with SessionStore(InMemoryBackend(), clock=FrozenClock()) as opened:
        yield opened


def rich_event(**changes):
    """An event with a value in every kind of field ADK stores."""
    fields = {
        "author": "support_agent",
        "invocation_id": "inv-1",
        "branch": "root.support_agent",
        "timestamp": 1_750_000_000.25,
        "content": types.Content(
            role="model",
            parts=[
                types.Part(text="Restart the blue pipeline."),
                types.Part(text="thinking it over", thought=True),
                types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\x00\xff")),
                types.Part.from_function_call(name="lookup", args={"topic": "deploy", "n": [1]}),
                types.Part.from_function_response(name="lookup", response={"ok": True}),
            ],
        ),
        "actions": EventActions(
            state_delta={"step": 2, "app:flag": True, "user:lang": "zh"},
            artifact_delta={"report.txt": 3},
            transfer_to_agent="billing_agent",
            escalate=False,
            skip_summarization=True,
        ),
        "grounding_metadata": types.GroundingMetadata(web_search_queries=["blue pipeline"]),
        "usage_metadata": types.GenerateContentResponseUsageMetadata(
            prompt_token_count=12, candidates_token_count=5, total_token_count=17
        ),
        "custom_metadata": {"trace": {"id": "t-9", "spans": [1, 2.5, None]}},
        "long_running_tool_ids": {"call-7"},
        "turn_complete": True,
        "finish_reason": types.FinishReason.STOP,
        "model_version": "scripted-1",
    }
    fields.update(changes)
    return Event(**fields)


def user_event(text, **changes):
    """A user's text event."""
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(author="user", invocation_id="inv-u", content=content, **changes)


def test_it_is_an_adk_session_service(memory_store):
    """The service subclasses ADK's BaseSessionService, so a Runner accepts it."""
    service = HermesSessionService(memory_store)
    assert isinstance(service, BaseSessionService)
    assert service.store is memory_store
    assert adk.HermesSessionService is HermesSessionService


def test_create_then_get_gives_the_session_back(store):
    """A created session is found again with its id, app, user and state, on every backend."""
    service = HermesSessionService(store)
    created = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    assert (created.id, created.app_name, created.user_id) == ("s1", APP, "u1")
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert found is not None
    assert (found.id, found.state, found.events) == ("s1", {}, [])


def test_a_generated_id_is_used_when_none_is_given(memory_store):
    """Without an id (or with a blank one) the service picks a fresh one each time."""
    service = HermesSessionService(memory_store)
    first = run(service.create_session(app_name=APP, user_id="u1"))
    second = run(service.create_session(app_name=APP, user_id="u1", session_id="  "))
    assert first.id
    assert second.id
    assert first.id != second.id


def test_an_id_in_use_raises_what_adk_raises(memory_store):
    """Creating an existing id is ADK's AlreadyExistsError, and the first session is kept."""
    service = HermesSessionService(memory_store)
    run(service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"a": 1}))
    with pytest.raises(AlreadyExistsError, match="Session with id s1 already exists"):
        run(service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"a": 2}))
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert found.state == {"a": 1}


def test_the_same_id_in_another_app_or_user_is_another_session(memory_store):
    """App, user and id together name the lane; ':' and '/' in them do not make keys collide."""
    service = HermesSessionService(memory_store)
    names = [(APP, "u1"), ("other", "u1"), (APP, "u2"), ("a/b", "c"), ("a", "b/c"), ("a:b", "c")]
    for app_name, user_id in names:
        run(service.create_session(app_name=app_name, user_id=user_id, session_id="s"))
    keys = {entry.session_key for entry in memory_store.backend.entries()}
    assert len(keys) == len(names)
    entry = next(e for e in memory_store.backend.entries() if e.origin.scope_id == APP)
    assert entry.origin.platform == PLATFORM
    assert (entry.origin.scope_id, entry.origin.user_id, entry.origin.chat_id) == (APP, "u1", "s")


def test_a_missing_session_is_none(memory_store):
    """get_session of an unknown id, app or user returns None."""
    service = HermesSessionService(memory_store)
    run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    assert run(service.get_session(app_name=APP, user_id="u1", session_id="nope")) is None
    assert run(service.get_session(app_name="x", user_id="u1", session_id="s1")) is None
    assert run(service.get_session(app_name=APP, user_id="u2", session_id="s1")) is None


def test_initial_state_is_split_by_prefix_onto_store_scopes(memory_store):
    """app: and user: keys go to the store's app and user scopes; temp: keys are never kept."""
    service = HermesSessionService(memory_store)
    state = {"app:theme": "dark", "user:lang": "zh", "topic": "deploy", "temp:scratch": 1}
    created = run(service.create_session(app_name=APP, user_id="u1", session_id="s1", state=state))
    assert created.state == {"app:theme": "dark", "user:lang": "zh", "topic": "deploy"}
    record_id = memory_store.backend.entries()[0].session_id
    scopes = [
        StateScope.app(APP),
        StateScope.user(APP, PLATFORM, "u1"),
        StateScope.session(record_id),
    ]
    stored = memory_store.backend.get_state([scope.id for scope in scopes])
    assert stored == {
        scopes[0].id: {"theme": "dark"},
        scopes[1].id: {"lang": "zh"},
        scopes[2].id: {"topic": "deploy"},
    }
    other = run(service.create_session(app_name=APP, user_id="u2", session_id="s2"))
    assert other.state == {"app:theme": "dark"}  # the app's state is shared, the user's is not
    assert run(service.get_user_state(app_name=APP, user_id="u1")) == {"lang": "zh"}
    assert run(service.get_user_state(app_name=APP, user_id="nobody")) == {}


def test_every_event_field_round_trips(store):
    """Content parts (bytes too), actions, grounding, usage and custom metadata come back equal."""
    service = HermesSessionService(store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    events = [user_event("how do I deploy?", timestamp=1_750_000_000.0), rich_event()]
    for event in events:
        run(service.append_event(session, event))
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert found.events == events
    assert found.events[1].content.parts[2].inline_data.data == b"\x89PNG\x00\xff"
    assert found.events == session.events


def test_event_text_is_searchable_and_roles_follow_the_author(memory_store):
    """Text parts are the message content (thoughts left out); user is user, agents assistant."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    run(service.append_event(session, user_event("部署 staging please")))
    run(service.append_event(session, rich_event()))
    record_id = memory_store.backend.entries()[0].session_id
    messages = memory_store.messages(record_id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "部署 staging please"),
        ("assistant", "Restart the blue pipeline."),
    ]
    assert [hit.message.role for hit in memory_store.search("pipeline")] == ["assistant"]
    assert memory_store.search("部署")
    assert not memory_store.search("thinking")


def test_the_event_delta_lands_on_the_scopes_in_the_same_append(memory_store):
    """One append stores the event and its state delta: the revision moves once."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    record_id = memory_store.backend.entries()[0].session_id
    before = memory_store.session(record_id).revision
    event = rich_event(
        actions=EventActions(state_delta={"step": 1, "app:v": 2, "user:u": 3, "temp:t": 4})
    )
    run(service.append_event(session, event))
    assert memory_store.session(record_id).revision == before + 1
    assert event.actions.state_delta == {"step": 1, "app:v": 2, "user:u": 3}
    assert session.state == {"step": 1, "app:v": 2, "user:u": 3, "temp:t": 4}
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert found.state == {"step": 1, "app:v": 2, "user:u": 3}
    assert found.events[0].actions.state_delta == {"step": 1, "app:v": 2, "user:u": 3}


def test_partial_events_are_not_stored(memory_store):
    """A streamed partial event is returned as is and neither stored nor applied."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    partial = rich_event(partial=True, actions=EventActions(state_delta={"x": 1}))
    assert run(service.append_event(session, partial)) is partial
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert (found.events, found.state, session.events) == ([], {}, [])


def test_a_stale_session_is_refused_with_adk_wording(memory_store):
    """After another copy of the session appended, the older copy's append stores nothing."""
    service = HermesSessionService(memory_store)
    run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    first = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    second = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    run(service.append_event(first, user_event("one")))
    run(service.append_event(first, user_event("two")))  # its own appends keep it current
    with pytest.raises(ValueError, match="modified in storage since it was loaded"):
        run(
            service.append_event(
                second, user_event("stale", actions=EventActions(state_delta={"k": 1}))
            )
        )
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert [e.content.parts[0].text for e in found.events] == ["one", "two"]
    assert found.state == {}
    run(service.append_event(found, user_event("three")))  # a reloaded session appends again


def test_a_state_change_alone_makes_a_session_stale(memory_store):
    """A host's update_state on the session moves its revision, so ADK's copy must reload."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    record_id = memory_store.backend.entries()[0].session_id
    memory_store.update_state({StateScope.session(record_id): {"set_by": "host"}})
    with pytest.raises(ValueError, match="modified in storage"):
        run(service.append_event(session, user_event("hi")))


def test_of_two_concurrent_stale_appends_exactly_one_wins(store):
    """Two copies read at one revision append at once: one is stored, the other refused."""
    service = HermesSessionService(store)
    run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))

    async def race():
        copies = [
            await service.get_session(app_name=APP, user_id="u1", session_id="s1") for _ in "ab"
        ]
        events = [user_event(f"writer {n}") for n in "ab"]
        return await asyncio.gather(
            *(service.append_event(c, e) for c, e in zip(copies, events, strict=True)),
            return_exceptions=True,
        )

    outcomes = run(race())
    refused = [o for o in outcomes if isinstance(o, ValueError)]
    assert len(refused) == 1
    assert "modified in storage" in str(refused[0])
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert len(found.events) == 1


def test_get_session_config_narrows_the_events(memory_store):
    """num_recent_events keeps the newest n (0: none); after_timestamp keeps those at or after."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    for n in range(5):
        run(service.append_event(session, user_event(f"m{n}", timestamp=100.0 + n)))

    def texts(**config):
        found = run(
            service.get_session(
                app_name=APP, user_id="u1", session_id="s1", config=GetSessionConfig(**config)
            )
        )
        return [e.content.parts[0].text for e in found.events]

    assert texts(num_recent_events=2) == ["m3", "m4"]
    assert texts(num_recent_events=0) == []
    assert texts(after_timestamp=102.0) == ["m2", "m3", "m4"]
    assert texts(num_recent_events=2, after_timestamp=104.0) == ["m4"]
    assert texts() == ["m0", "m1", "m2", "m3", "m4"]


def test_list_sessions_per_user_and_for_the_whole_app(memory_store):
    """A user's sessions, or all users' of the app, without events and oldest first."""
    clock = memory_store.clock
    service = HermesSessionService(memory_store)
    for app_name, user_id, session_id in [(APP, "u1", "a"), (APP, "u2", "b"), ("x", "u1", "c")]:
        session = run(
            service.create_session(app_name=app_name, user_id=user_id, session_id=session_id)
        )
        run(service.append_event(session, user_event("hello")))
        clock.advance(seconds=5)
    listed = run(service.list_sessions(app_name=APP, user_id="u1")).sessions
    assert [(s.id, s.events) for s in listed] == [("a", [])]
    everyone = run(service.list_sessions(app_name=APP)).sessions
    assert [(s.user_id, s.id) for s in everyone] == [("u1", "a"), ("u2", "b")]
    assert run(service.list_sessions(app_name="none")).sessions == []


def test_delete_removes_the_lane_and_its_lineage(memory_store):
    """Deleting a session removes its lane, its hermes sessions (a compressed parent too)."""
    service = HermesSessionService(memory_store)
    session = run(
        service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"k": 1})
    )
    run(service.append_event(session, user_event("hello")))
    key = memory_store.backend.entries()[0].session_key
    memory_store.reset(key)  # the lane now holds a second hermes session
    run(service.create_session(app_name=APP, user_id="u1", session_id="keep"))
    run(service.delete_session(app_name=APP, user_id="u1", session_id="s1"))
    assert run(service.get_session(app_name=APP, user_id="u1", session_id="s1")) is None
    assert memory_store.backend.get_entry(key) is None
    remaining = memory_store.list_sessions(limit=None, include_compressed=True).items
    assert [summary.record.session_key for summary in remaining] != []
    assert all(summary.record.session_key != key for summary in remaining)
    run(service.delete_session(app_name=APP, user_id="u1", session_id="s1"))  # twice is fine
    again = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    assert again.state == {}


def test_appending_to_a_deleted_session_says_it_is_not_found(memory_store):
    """ADK's SessionNotFoundError (a ValueError) when the session is gone."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    run(service.delete_session(app_name=APP, user_id="u1", session_id="s1"))
    with pytest.raises(ValueError, match="Session s1 not found"):
        run(service.append_event(session, user_event("hi")))


def test_a_session_built_by_hand_appends_only_when_current(memory_store):
    """A Session the service did not read appends when it holds the newest stored event."""
    service = HermesSessionService(memory_store)
    stored = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    by_hand = stored.model_copy(deep=True)
    by_hand._storage_update_marker = None
    run(service.append_event(by_hand, user_event("one")))
    outdated = stored.model_copy(deep=True)
    outdated._storage_update_marker = None
    with pytest.raises(ValueError, match="modified in storage"):
        run(service.append_event(outdated, user_event("two")))


def test_messages_the_host_added_read_as_text_events(memory_store):
    """A message appended to the lane's session by the host shows up as a plain text event."""
    service = HermesSessionService(memory_store)
    run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    record_id = memory_store.backend.entries()[0].session_id
    memory_store.append(record_id, Message(role="assistant", content="a note from the host"))
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert [(e.author, e.content.parts[0].text) for e in found.events] == [
        ("assistant", "a note from the host")
    ]


def test_sessions_never_reset_unless_asked(memory_store):
    """By default an idle lane keeps its session; with resets=True the store's policy applies."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    run(service.append_event(session, user_event("old")))
    memory_store.clock.advance(days=3)
    kept = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert len(kept.events) == 1
    fresh = run(
        HermesSessionService(memory_store, resets=True).get_session(
            app_name=APP, user_id="u1", session_id="s1"
        )
    )
    assert fresh.events == []


def test_an_async_store_works_the_same(memory_store):
    """Given an AsyncSessionStore, calls hold its per-key lock and behave the same."""

    async def scenario():
        service = HermesSessionService(AsyncSessionStore(memory_store))
        session = await service.create_session(app_name=APP, user_id="u1", session_id="s1")
        await service.append_event(session, user_event("via the async store"))
        return await service.get_session(app_name=APP, user_id="u1", session_id="s1")

    found = run(scenario())
    assert found.events[0].content.parts[0].text == "via the async store"


def test_bad_stores_are_refused():
    """A store of another kind is a TypeError that names the accepted ones."""
    with pytest.raises(TypeError, match="SessionStore or an AsyncSessionStore"):
        HermesSessionService(object())


def test_a_missing_adk_names_the_extra(monkeypatch):
    """Without google-adk, using the service says which extra to install."""
    monkeypatch.delitem(sys.modules, "hermes_sessions.integrations._adk_service")
    monkeypatch.delattr(sys.modules["hermes_sessions.integrations"], "_adk_service")
    monkeypatch.setitem(sys.modules, "google.adk.sessions", None)
    with pytest.raises(MissingDependencyError, match=r"hermes-sessions\[adk\]"):
        _ = adk.HermesSessionService
    with pytest.raises(AttributeError):
        _ = adk.NoSuchThing


def test_last_update_time_is_the_newest_event_time(memory_store):
    """As ADK's services give it: the creation time, then the newest event's exact timestamp."""
    service = HermesSessionService(memory_store)
    created = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    assert created.last_update_time == memory_store.clock.now().timestamp()
    run(service.append_event(created, user_event("hi", timestamp=1_750_000_123.4567891)))
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert found.last_update_time == created.last_update_time == 1_750_000_123.4567891
    listed = run(service.list_sessions(app_name=APP, user_id="u1")).sessions
    assert listed[0].last_update_time == 1_750_000_123.4567891


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@settings(deadline=None, max_examples=40)
@given(
    words=st.text(max_size=20),
    blob=st.binary(max_size=16),
    metadata=st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=3),
    delta=st.dictionaries(
        st.sampled_from(["a", "app:b", "user:c", "temp:d"]), json_values, max_size=4
    ),
)
def test_any_event_round_trips(words, blob, metadata, delta):
    """Whatever text, bytes, custom metadata and state delta an event holds, it comes back."""
    parts = [types.Part(text=words), types.Part(inline_data=types.Blob(mime_type="x/y", data=blob))]
    event = Event(
        author="agent",
        invocation_id="inv",
        content=types.Content(role="model", parts=parts),
        custom_metadata=metadata or None,
        actions=EventActions(state_delta=delta),
    )
    with SessionStore(InMemoryBackend()) as store:
        service = HermesSessionService(store)
        session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
        run(service.append_event(session, event))
        found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert found.events == [event]
    assert found.state == {k: v for k, v in delta.items() if not k.startswith("temp:")}


def test_a_retried_append_of_the_same_event_stores_it_once(memory_store):
    """Appending the stored newest event again changes nothing; another event of that id is kept."""
    service = HermesSessionService(memory_store)
    session = run(service.create_session(app_name=APP, user_id="u1", session_id="s1"))
    event = user_event("once", actions=EventActions(state_delta={"n": 1}))
    run(service.append_event(session, event))
    run(service.append_event(session, event))
    assert len(session.events) == 1
    found = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert found.events == [event]
    same_id = user_event("another", id=event.id)
    run(service.append_event(found, same_id))
    again = run(service.get_session(app_name=APP, user_id="u1", session_id="s1"))
    assert [e.content.parts[0].text for e in again.events] == ["once", "another"]
