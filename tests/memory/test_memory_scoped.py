"""Scoped memory: the loading rule by lane privacy, stamps, scope refusals, erasure, processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hermes_sessions
import pg_support
from hermes_sessions import SessionSource
from hermes_sessions.exceptions import (
    IncognitoMemoryError,
    InvalidArgumentError,
    InvalidMemoryContentError,
    MemoryEntryNotFoundError,
    MemoryLimitError,
    MemoryScopeError,
)
from hermes_sessions.memory import (
    MemoryContext,
    MemoryEntry,
    MemoryScope,
    MemoryStore,
    ScopedMemory,
    SupportsMemory,
    WrittenIn,
)
from hermes_sessions.testing import FrozenClock
from hermes_sessions.tools import MEMORY_TOOL_SCHEMA, handle_memory

PACKAGE_ROOT = str(Path(hermes_sessions.__file__).parent.parent)

LIN_DM = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
LIN_GROUP = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="42")
BOB_GROUP = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="7")
LIN_THREAD = SessionSource(
    platform="telegram", chat_type="group", chat_id="-200", thread_id="5", user_id="42"
)


@pytest.fixture
def memory(tmp_path):
    """Scoped memory on a file home, with a frozen clock."""
    return ScopedMemory(tmp_path / "memories", clock=FrozenClock())


def context(source: SessionSource, **overrides) -> MemoryContext:
    """The context of ``source`` with the default key policy."""
    return MemoryContext.of(source, hermes_sessions.build_session_key(source), **overrides)


def tool(memory, ctx, **arguments):
    """One ``memory`` tool call, checked to be JSON."""
    result = handle_memory(memory, arguments, context=ctx)
    assert json.loads(json.dumps(result)) == result
    return result


def plant(memory):
    """Lin and Bob write facts from a DM, a group and a thread; the host writes app memory."""
    memory.add(MemoryScope.app(), "APP-FACT: CI runs on Fridays")
    dm, group, thread = context(LIN_DM), context(LIN_GROUP), context(LIN_THREAD)
    assert tool(memory, dm, action="add", target="user", content="LIN-DM: salary 100k")["success"]
    assert tool(memory, group, action="add", target="user", content="LIN-GROUP: likes tea")[
        "success"
    ]
    assert tool(memory, thread, action="add", target="user", content="LIN-THREAD: uses vim")[
        "success"
    ]
    assert tool(memory, dm, action="add", target="memory", content="DM-NOTE: interview Monday")[
        "success"
    ]
    assert tool(memory, group, action="add", target="memory", content="GROUP-NOTE: ships Go")[
        "success"
    ]
    bob = context(BOB_GROUP)
    assert tool(memory, bob, action="add", target="user", content="BOB-GROUP: on call")["success"]


# -- the loading rule --------------------------------------------------------------------------

# Who asks from where, and what their snapshot holds: app memory, the profile, the lane's notes.
LOADING = [
    pytest.param(
        LIN_DM,
        ["LIN-DM: salary 100k", "LIN-GROUP: likes tea", "LIN-THREAD: uses vim"],
        ["DM-NOTE: interview Monday"],
        id="private lane: whole profile and its own notes",
    ),
    pytest.param(
        LIN_GROUP,
        ["LIN-GROUP: likes tea", "LIN-THREAD: uses vim"],
        ["GROUP-NOTE: ships Go"],
        id="shared lane: only what was written in shared lanes, never the DM",
    ),
    pytest.param(
        LIN_THREAD,
        ["LIN-GROUP: likes tea", "LIN-THREAD: uses vim"],
        [],
        id="another shared lane: shared profile entries, no other lane's notes",
    ),
    pytest.param(
        BOB_GROUP,
        ["BOB-GROUP: on call"],
        [],
        id="another member of the group: his own profile and lane (members are isolated)",
    ),
]


@pytest.mark.parametrize(("source", "profile", "notes"), LOADING)
def test_snapshot_follows_the_lane_rule(memory, source, profile, notes):
    """App memory is everywhere; the profile by lane privacy; a lane sees its own notes only."""
    plant(memory)
    snapshot = memory.snapshot(context(source))
    assert snapshot.memory.entries == ("APP-FACT: CI runs on Fridays",)
    assert list(snapshot.user.entries) == profile
    assert snapshot.lane is not None
    assert list(snapshot.lane.entries) == notes
    block = snapshot.prompt_block
    assert "APP-FACT" in block
    for marker in ("LIN-DM", "DM-NOTE") if not context(source).private else ():
        assert marker not in block
    assert "written-in" not in block  # the stamps never reach the model


def test_loading_rule_on_every_backend_with_real_keys(memory, store):
    """With keys and incognito lanes from a session store, the rule holds on every backend."""
    plant(memory)
    for source, profile, notes in (param.values for param in LOADING):
        key = store.get_or_create(source).entry.session_key
        snapshot = memory.snapshot(MemoryContext.of(source, key))
        assert list(snapshot.user.entries) == profile
        assert snapshot.lane is not None
        assert list(snapshot.lane.entries) == notes
    secret = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
    incognito_key = store.key_for(secret)
    result = handle_memory(
        memory,
        {"action": "add", "target": "user", "content": "INCOGNITO: never"},
        sessions=store,
        context=MemoryContext.of(
            secret, incognito_key, incognito=store.is_incognito(incognito_key)
        ),
    )
    assert result["success"] is (not store.is_incognito(incognito_key))


def test_incognito_lanes_write_nothing(memory):
    """An incognito context is refused for every scope, and no file appears."""
    ctx = context(LIN_DM, incognito=True)
    for target in ("user", "memory"):
        result = tool(memory, ctx, action="add", target=target, content="never stored")
        assert (result["success"], result["code"]) == (False, "incognito")
    assert not memory.directory.exists()


def test_unstamped_profile_entries_count_as_private(memory):
    """An entry the host wrote (or a person typed) without a stamp stays out of shared lanes."""
    lin = MemoryScope.user("telegram", "42")
    memory.add(lin, "typed by hand")
    assert memory.snapshot(context(LIN_DM)).user.entries == ("typed by hand",)
    assert memory.snapshot(context(LIN_GROUP)).user.entries == ()


# -- the memory tool -------------------------------------------------------------------------------


def test_schema_states_the_scope():
    """The schema offers a scope and explains the rule."""
    parameters = MEMORY_TOOL_SCHEMA["function"]["parameters"]
    assert parameters["properties"]["scope"]["enum"] == ["lane", "app", None]
    assert "scope" in MEMORY_TOOL_SCHEMA["function"]["description"]


def test_tool_writes_the_scope_the_rule_gives(memory):
    """'user' goes to the speaker's profile, 'memory' to the lane; results name the scope."""
    group = context(LIN_GROUP)
    user = tool(memory, group, action="add", target="user", content="likes tea")
    note = tool(memory, group, action="add", target="memory", content="ships Go")
    assert (user["scope"], note["scope"]) == ("user", "lane")
    assert memory.path(MemoryScope.user("telegram", "42")).exists()
    assert memory.path(group.lane_scope).parent.parent.name == "lanes"
    assert memory.entries(MemoryScope.app()) == ()


def test_app_memory_needs_the_hosts_permission(tmp_path):
    """scope='app' is refused by default, allowed when the host says so, never from a DM."""
    strict = ScopedMemory(tmp_path / "a")
    refused = tool(
        strict, context(LIN_GROUP), action="add", target="memory", content="x", scope="app"
    )
    assert (refused["success"], refused["code"], refused["scope"]) == (
        False,
        "scope_refused",
        "app",
    )
    open_ = ScopedMemory(tmp_path / "b", tool_writes_app=True)
    ok = tool(open_, context(LIN_GROUP), action="add", target="memory", content="x", scope="app")
    assert (ok["success"], ok["scope"]) == (True, "app")
    from_dm = tool(open_, context(LIN_DM), action="add", target="memory", content="y", scope="app")
    assert from_dm["code"] == "scope_refused"
    assert "private" in from_dm["error"]
    wide = ScopedMemory(tmp_path / "c", tool_writes_app=True, widen_private=True)
    assert tool(wide, context(LIN_DM), action="add", target="memory", content="y", scope="app")[
        "success"
    ]


def test_a_shared_lane_cannot_reach_private_entries(memory):
    """From a group, DM-written profile entries cannot be replaced, removed or previewed."""
    plant(memory)
    group = context(LIN_GROUP)
    for arguments in (
        {"action": "replace", "target": "user", "old_text": "salary", "content": "salary: public"},
        {"action": "remove", "target": "user", "old_text": "salary"},
    ):
        result = tool(memory, group, **arguments)
        assert (result["success"], result["code"]) == (False, "no_match")
        assert "100k" not in json.dumps(result)
    added = tool(memory, group, action="add", target="user", content="LIN-GROUP: another")
    assert "LIN-DM: salary 100k" not in added["entries"]


def test_replacing_from_a_private_lane_narrows_the_entry(memory):
    """An entry replaced in a DM is stamped private: it leaves the shared view."""
    plant(memory)
    result = tool(
        memory,
        context(LIN_DM),
        action="replace",
        target="user",
        old_text="likes tea",
        content="LIN-GROUP: likes tea, and is moving to Berlin",
    )
    assert result["success"]
    assert memory.snapshot(context(LIN_GROUP)).user.entries == ("LIN-THREAD: uses vim",)


def test_direct_calls_check_the_scope_against_the_context(memory):
    """With a context, only the speaker's profile and the lane's own notes are writable."""
    group = context(LIN_GROUP)
    with pytest.raises(MemoryScopeError, match="profile of the user who is speaking"):
        memory.add(MemoryScope.user("telegram", "7"), "x", context=group)
    with pytest.raises(MemoryScopeError, match="own lane"):
        memory.add(context(LIN_DM).lane_scope, "x", context=group)
    with pytest.raises(IncognitoMemoryError):
        memory.remove(group.lane_scope, "x", context=context(LIN_GROUP, incognito=True))


def test_tool_needs_a_context_and_a_user_for_scoped_memory(memory):
    """Without a context the call errors; without a user, 'user' is refused."""
    result = handle_memory(memory, {"action": "add", "target": "user", "content": "x"})
    assert result["code"] == "error"
    assert "context=MemoryContext" in result["error"]
    nobody = MemoryContext(session_key="agent:main:cron:job-1")
    refused = tool(memory, nobody, action="add", target="user", content="x")
    assert refused["code"] == "scope_refused"
    assert tool(memory, nobody, action="add", target="memory", content="x")["scope"] == "lane"


def test_plain_store_results_name_their_scope(tmp_path):
    """A single MemoryStore is one memory: its notes are 'app', a 'lane' scope is refused."""
    store = MemoryStore(tmp_path / "plain")
    note = handle_memory(store, {"action": "add", "target": "memory", "content": "a"})
    user = handle_memory(store, {"action": "add", "target": "user", "content": "b"})
    assert (note["scope"], user["scope"]) == ("app", "user")
    lane = handle_memory(
        store, {"action": "add", "target": "memory", "content": "c", "scope": "lane"}
    )
    assert lane["code"] == "scope_refused"


def test_limits_count_the_text_not_the_stamps(tmp_path):
    """The limit bounds what the model sees; a refusal lists only the entries the caller sees."""
    memory = ScopedMemory(tmp_path / "m", user_char_limit=30)
    dm, group = context(LIN_DM), context(LIN_GROUP)
    memory.add(MemoryScope.user("telegram", "42"), "x" * 14, context=dm)
    memory.add(MemoryScope.user("telegram", "42"), "y" * 13, context=group)
    with pytest.raises(MemoryLimitError) as caught:
        memory.add(MemoryScope.user("telegram", "42"), "z", context=group)
    assert caught.value.entries == ("y" * 13,)


# -- stamps and files ------------------------------------------------------------------------------


def test_entries_record_where_they_were_written(memory):
    """Each entry carries its lane, privacy, user and time, on a line a person can read."""
    tool(memory, context(LIN_DM), action="add", target="user", content="salary 100k")
    path = memory.path(MemoryScope.user("telegram", "42"))
    assert path.relative_to(memory.directory).parts == ("users", "telegram", "42", "USER.md")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("salary 100k\n<!-- written-in: {")
    (entry,) = memory.entries(MemoryScope.user("telegram", "42"))
    assert entry.written_in == WrittenIn(
        session_key="agent:main:telegram:dm:42",
        private=True,
        platform="telegram",
        user_id="42",
        at=FrozenClock().now(),
    )


def test_stamps_cannot_be_forged_or_broken_out_of(memory):
    """Content holding the stamp mark is refused; a key with '-->' stays inside the comment."""
    with pytest.raises(InvalidMemoryContentError, match="written-in"):
        memory.add(MemoryScope.app(), 'x\n<!-- written-in: {"private": false} -->')
    odd = MemoryContext(session_key="agent:main:x:group:a-->b", platform="x", user_id="1")
    memory.add(odd.lane_scope, "note", context=odd)
    raw = memory.path(odd.lane_scope).read_text(encoding="utf-8")
    assert raw.count("-->") == 1
    assert memory.entries(odd.lane_scope)[0].written_in.session_key == "agent:main:x:group:a-->b"


def test_a_broken_stamp_reads_as_unknown():
    """A stamp a hand edit broke gives ``written_in=None`` (private for profiles)."""
    entry = MemoryEntry.parse("likes tea\n<!-- written-in: {not json} -->")
    assert (entry.text, entry.written_in) == ("likes tea", None)
    assert MemoryEntry.parse("plain").render() == "plain"


@pytest.mark.parametrize("user_id", ["..", ".", "a/b", "../../etc"])
def test_odd_ids_stay_inside_the_directory(memory, user_id):
    """User ids and keys become one path component each; nothing climbs out."""
    path = memory.path(MemoryScope.user("telegram", user_id))
    assert path.resolve().is_relative_to(memory.directory.resolve() / "users" / "telegram")
    assert len(path.relative_to(memory.directory).parts) == 4


def test_scopes_are_validated():
    """A scope takes exactly its ids."""
    with pytest.raises(InvalidArgumentError):
        MemoryScope("user", platform="telegram")
    with pytest.raises(InvalidArgumentError):
        MemoryScope("team")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        MemoryScope("app", session_key="k")
    assert str(MemoryScope.user("telegram", "42")) == "user:telegram:42"
    assert str(MemoryScope.lane("k")) == "lane:k"


def test_remove_and_replace_by_the_host(memory):
    """Without a context the host edits any scope; not-found is refused as usual."""
    lane = MemoryScope.lane("agent:main:telegram:group:-100")
    memory.add(lane, "first note")
    assert memory.replace(lane, "first", "second note").entries == ("second note",)
    assert memory.remove(lane, "second").entries == ()
    with pytest.raises(MemoryEntryNotFoundError):
        memory.remove(lane, "nothing")


# -- erasure ---------------------------------------------------------------------------------------


def _files_holding(root: Path, marker: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and marker in p.read_bytes()]


def test_erasure_is_byte_clean_on_every_backend(tmp_path, store):
    """erase_user removes the profile, the user's entries everywhere, the erased lanes' notes."""
    memory = ScopedMemory(tmp_path / "memories", tool_writes_app=True, clock=FrozenClock())
    plant(memory)
    group = context(LIN_GROUP)
    tool(
        memory,
        group,
        action="add",
        target="memory",
        content="LIN-APP: release is Tuesday",
        scope="app",
    )
    for source in (LIN_DM, LIN_GROUP, BOB_GROUP):
        store.get_or_create(source)
    # A person breaks the app file by hand; the next write keeps a backup holding Lin's entry.
    app = memory.path(MemoryScope.app())
    app.write_bytes(app.read_bytes() + b"\n\xff")
    with pytest.raises(hermes_sessions.MemoryDriftError):
        memory.add(MemoryScope.app(), "host note")
    assert _files_holding(memory.directory, b"LIN-APP")  # the backup holds it too
    memory._storage.store(MemoryScope.app()).repair("memory")

    dry = store.erase_user("telegram", "42", dry_run=True, memory=memory)
    assert dry.memory_entries == 1  # LIN-APP; her DM and group lanes go whole, with their keys
    assert _files_holding(memory.directory, b"LIN-DM")
    report = store.erase_user("telegram", "42", memory=memory)
    assert report.memory_profiles == ("user:telegram:42",)
    assert report.memory_entries == 1
    assert report.memory_files == dry.memory_files
    for marker in (b"LIN-DM", b"LIN-GROUP", b"LIN-THREAD", b"LIN-APP", b"DM-NOTE", b"salary"):
        assert _files_holding(memory.directory, marker) == [], marker
    for marker in (b"APP-FACT", b"BOB-GROUP"):
        assert _files_holding(memory.directory, marker), marker
    assert memory.snapshot(context(BOB_GROUP)).user.entries == ("BOB-GROUP: on call",)


def test_erasure_of_nobody_changes_nothing(memory):
    """An id with no profile and no entries removes nothing; an id is required."""
    plant(memory)
    report = memory.erase_user("telegram", "999")
    assert (report.entries, report.profiles, report.files) == (0, (), ())
    with pytest.raises(InvalidArgumentError):
        memory.erase_user("telegram")


# -- processes -------------------------------------------------------------------------------------

ADD_AS = """
import sys
from hermes_sessions import SessionSource, build_session_key
from hermes_sessions.memory import MemoryContext, MemoryScope, ScopedMemory
source = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="42")
context = MemoryContext.of(source, build_session_key(source))
memory = ScopedMemory(sys.argv[1], user_char_limit=1_000_000, lock_timeout=300)
for number in range(25):
    memory.add(context.user_scope, f"process {sys.argv[2]} fact {number}", context=context)
"""


@pytest.mark.slow
def test_two_processes_writing_one_scope_lose_nothing(tmp_path):
    """Two processes adding to one profile at once keep every entry, each stamped."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    directory = tmp_path / "memories"
    processes = [
        subprocess.Popen([sys.executable, "-c", ADD_AS, str(directory), str(n)], env=env)
        for n in range(2)
    ]
    assert [process.wait() for process in processes] == [0, 0]
    memory = ScopedMemory(directory, user_char_limit=1_000_000)
    entries = memory.entries(MemoryScope.user("telegram", "42"))
    assert {e.text for e in entries} == {
        f"process {n} fact {i}" for n in range(2) for i in range(25)
    }
    assert all(e.written_in is not None and not e.written_in.private for e in entries)


# -- memory in the database (SupportsMemory: PostgreSQL, the in-memory backend) --------------------


def test_loading_rule_and_erasure_in_the_database(store):
    """Where the backend stores memory, the rule and byte-clean erasure hold on its rows."""
    if not isinstance(store.backend, SupportsMemory):
        pytest.skip("this backend keeps memory in files (the file home tests cover it)")
    memory = ScopedMemory(backend=store.backend, tool_writes_app=True, clock=FrozenClock())
    plant(memory)
    for source, profile, notes in (param.values for param in LOADING):
        snapshot = memory.snapshot(context(source))
        assert list(snapshot.user.entries) == profile
        assert snapshot.lane is not None
        assert list(snapshot.lane.entries) == notes
    tool(
        memory, context(LIN_GROUP), action="add", target="memory", content="LIN-APP: x", scope="app"
    )
    with pytest.raises(InvalidArgumentError, match="database"):
        memory.path(MemoryScope.app())
    for source in (LIN_DM, LIN_GROUP, BOB_GROUP):
        store.get_or_create(source)
    report = store.erase_user("telegram", "42", memory=memory)
    assert report.memory_profiles == ("user:telegram:42",)
    assert report.memory_entries == 1
    rows = [
        raw
        for scope in store.backend.memory_scope_ids()
        for raw in store.backend.memory_entries(scope)
    ]
    for marker in ("LIN-", "DM-NOTE", "GROUP-NOTE", "salary"):
        assert not [row for row in rows if marker in row], marker
    assert any("BOB-GROUP" in row for row in rows)
    assert any("APP-FACT" in row for row in rows)


def test_a_backend_without_memory_is_refused(tmp_path):
    """Only a backend offering SupportsMemory can hold memory."""
    with pytest.raises(TypeError, match="does not store memory"):
        ScopedMemory(backend=object())  # type: ignore[arg-type]


ADD_AS_PG_HOST = """
import sys
from hermes_sessions.backends.postgres import PostgresBackend
from hermes_sessions.memory import MemoryContext, MemoryScope, ScopedMemory
backend = PostgresBackend(sys.argv[1], schema=sys.argv[2], min_size=1, max_size=2)
key = "agent:main:telegram:group:-100:42"
context = MemoryContext(session_key=key, platform="telegram", user_id="42")
memory = ScopedMemory(backend=backend, user_char_limit=1_000_000)
for number in range(25):
    memory.add(context.user_scope, f"host {sys.argv[3]} fact {number}", context=context)
backend.close()
"""


@pytest.mark.slow
@pg_support.requires_pg
def test_two_postgres_hosts_writing_one_scope_lose_nothing(tmp_path):
    """Two processes, each its own PostgreSQL host, adding to one profile keep every entry."""
    dsn = pg_support.test_dsn()
    backend = pg_support.open_pg(tmp_path)  # creates the schema
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    schema = pg_support.schema_for(tmp_path)
    processes = [
        subprocess.Popen([sys.executable, "-c", ADD_AS_PG_HOST, dsn, schema, str(n)], env=env)
        for n in range(2)
    ]
    assert [process.wait() for process in processes] == [0, 0]
    memory = ScopedMemory(backend=backend, user_char_limit=1_000_000)
    texts = {e.text for e in memory.entries(MemoryScope.user("telegram", "42"))}
    assert texts == {f"host {n} fact {i}" for n in range(2) for i in range(25)}
    backend.close()
