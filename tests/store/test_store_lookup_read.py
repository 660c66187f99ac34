"""The lookup of a message on SQLite: the entry and its turn's state in one statement.

``get_or_create`` on a key that has a fresh session reads the routing entry and the state of the
four scopes (app, user, lane, session) with one statement; the state is what ``store.state``
reads scope by scope. Behind the incognito router (which hands its backend's extras on) the
lookup still goes through the router.
"""

from __future__ import annotations

import pytest
from store_scenarios import DM, user

from hermes_sessions import (
    IncognitoPolicy,
    KeyPolicy,
    ResetPolicies,
    ResetPolicy,
    SessionSource,
    SessionState,
    SessionStore,
    StateScope,
)
from hermes_sessions.backends.sqlite import SQLiteBackend

NEVER = ResetPolicies(ResetPolicy(mode="none"))
ODD = SessionSource(platform="telegram", chat_id="100%|7", user_id="u%7C|1")
"""Ids holding the characters scope ids encode (``%`` and ``|``)."""


@pytest.fixture
def sqlite_store(tmp_path):
    """A store on a SQLite backend that never resets."""
    with SessionStore(SQLiteBackend(tmp_path / "state.db"), resets=NEVER) as opened:
        yield opened


def reads_on(store, run):
    """The ``SELECT`` statements the reading connection runs during ``run()``; its result."""
    statements: list[str] = []
    connection = store.backend._connections.connection()
    connection.set_trace_callback(statements.append)
    try:
        result = run()
    finally:
        connection.set_trace_callback(None)
    return [s for s in statements if s.lstrip().upper().startswith("SELECT")], result


@pytest.mark.parametrize("source", [DM, ODD])
def test_the_lookup_reads_entry_and_state_in_one_statement(sqlite_store, source):
    """Every scope's state comes with the entry, equal to what store.state reads."""
    store = sqlite_store
    first = store.get_or_create(source)
    key = first.entry.session_key
    store.update_state(
        {
            StateScope.app(store.keys.namespace): {"flag": True},
            StateScope.user(store.keys.namespace, source.platform, source.user_id): {"tz": "X"},
            StateScope.lane(key): {"model": "m-1"},
            StateScope.session(first.session_id): {"step": 3},
        },
        session_id=first.session_id,
    )
    selects, lookup = reads_on(store, lambda: store.get_or_create(source))
    assert len(selects) == 1
    assert lookup.state == store.state(first.session_id)
    assert lookup.state == SessionState(
        app={"flag": True}, user={"tz": "X"}, lane={"model": "m-1"}, session={"step": 3}
    )
    assert (lookup.session_id, lookup.created) == (first.session_id, False)


def test_the_lookup_without_state_is_empty(sqlite_store):
    """A session with nothing set sees four empty scopes."""
    sqlite_store.get_or_create(DM)
    assert sqlite_store.get_or_create(DM).state == SessionState()


def test_the_lookup_sees_only_its_own_session_state(sqlite_store):
    """Another session's state (and another user's) stays out of the lookup."""
    store = sqlite_store
    mine = store.get_or_create(DM)
    other_source = SessionSource(platform="feishu", chat_id="ou_zhao", user_id="ou_zhao")
    other = store.get_or_create(other_source)
    store.update_state({StateScope.session(other.session_id): {"secret": 1}})
    store.update_state({StateScope.user(store.keys.namespace, "feishu", "ou_zhao"): {"a": 1}})
    assert store.get_or_create(DM).state == SessionState()
    assert store.get_or_create(other_source).state.session == {"secret": 1}
    assert mine.session_id != other.session_id


def test_an_incognito_lane_is_looked_up_through_the_router(tmp_path):
    """The router keeps the lane in memory: the one-statement read does not bypass it."""
    secret = SessionSource(platform="feishu", chat_id="ou_hidden", user_id="ou_lin")
    policy = IncognitoPolicy(keys=[KeyPolicy().build(secret)])
    backend = SQLiteBackend(tmp_path / "state.db")
    with SessionStore(backend, resets=NEVER, incognito=policy) as store:
        first = store.get_or_create(secret)
        store.append(first.session_id, user("hi", platform_message_id="m1"))
        store.update_state({StateScope.session(first.session_id): {"mood": "quiet"}})
        again = store.get_or_create(secret)
        assert (again.session_id, again.created) == (first.session_id, False)
        assert again.state.session == {"mood": "quiet"}
        assert backend.get_entry(again.entry.session_key) is None
