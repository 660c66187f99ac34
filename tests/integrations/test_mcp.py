"""The MCP server serves tools and transcripts to one requester (tested with the SDK's client)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from extras import FRAMEWORKS_REASON
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.cli import main
from hermes_sessions.exceptions import MissingDependencyError
from hermes_sessions.memory import MemoryContext, MemoryStore, ScopedMemory
from hermes_sessions.models import Message, SessionSource
from hermes_sessions.store import SessionStore
from hermes_sessions.tools import MEMORY_RESULT_SCHEMA, SESSION_SEARCH_RESULT_SCHEMA

pytest.importorskip("mcp", reason=FRAMEWORKS_REASON)
import anyio  # comes with mcp
from mcp import Client, MCPError, StdioServerParameters

from hermes_sessions.integrations.mcp import (
    SESSION_URI_TEMPLATE,
    build_server,
    parse_requester,
)

ALICE = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
BOB = SessionSource(platform="telegram", chat_type="dm", chat_id="7", user_id="7")
GROUP = SessionSource(platform="telegram", chat_type="group", chat_id="-100", user_id="42")


@pytest.fixture
def store():
    """A store where Alice, Bob and a group each talked about the deploy."""
    with SessionStore(InMemoryBackend()) as opened:
        for source, text in [
            (ALICE, "alice: deploy with the blue pipeline"),
            (BOB, "bob: deploy secret is hunter2"),
            (GROUP, "group: deploy on friday"),
        ]:
            session_id = opened.get_or_create(source).entry.session_id
            opened.append(session_id, Message(role="user", content=text))
        yield opened


def session_of(store, source):
    """The current session id of ``source``'s key."""
    return store.entry(store.key_for(source)).session_id


def with_client(server, scenario, mode="auto"):
    """Run ``scenario(client)`` against ``server`` through the SDK's in-process client."""

    async def run():
        async with Client(server, mode=mode) as client:
            return await scenario(client)

    return anyio.run(run)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_tools_are_listed_with_the_library_schemas(store, tmp_path, mode):
    """Both tools are offered with the same JSON schemas the library gives models."""
    server = build_server(store, parse_requester("telegram:42"), memory=MemoryStore(tmp_path))

    async def scenario(client):
        return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in with_client(server, scenario, mode)}
    assert set(tools) == {"session_search", "memory"}
    assert tools["session_search"].input_schema["properties"]["query"]["type"] == [
        "string",
        "null",
    ]
    assert tools["memory"].input_schema["required"] == ["action", "target"]
    assert tools["session_search"].output_schema == SESSION_SEARCH_RESULT_SCHEMA
    assert tools["memory"].output_schema == MEMORY_RESULT_SCHEMA
    assert tools["session_search"].annotations.read_only_hint is True


def test_without_memory_files_only_search_is_offered(store):
    """The memory tool is left out when the server is given no memory files."""
    server = build_server(store, parse_requester("telegram:42"))

    async def scenario(client):
        return [tool.name for tool in (await client.list_tools()).tools]

    assert with_client(server, scenario) == ["session_search"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_search_sees_only_the_requesters_conversations(store, mode):
    """A query finds Alice's own sessions (her DM, her group lane), never Bob's."""
    server = build_server(store, parse_requester("telegram:42"))

    async def scenario(client):
        return await client.call_tool("session_search", {"query": "deploy"})

    result = with_client(server, scenario, mode)
    assert result.is_error is False
    found = {hit["session_id"] for hit in result.structured_content["results"]}
    assert found == {session_of(store, ALICE), session_of(store, GROUP)}
    assert "hunter2" not in result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content


def test_naming_another_users_session_is_refused_like_a_missing_one(store):
    """Reading Bob's session by its id is reported exactly as an id that does not exist."""
    server = build_server(store, parse_requester("telegram:42"))

    async def scenario(client):
        bob = await client.call_tool("session_search", {"session_id": session_of(store, BOB)})
        missing = await client.call_tool("session_search", {"session_id": "20990101_000000_00"})
        return bob, missing

    bob, missing = with_client(server, scenario)
    assert bob.is_error is True
    assert bob.structured_content["code"] == missing.structured_content["code"]
    assert (
        bob.structured_content["error"].split("id")[0]
        == missing.structured_content["error"].split("id")[0]
    )
    assert "hunter2" not in bob.content[0].text


def test_a_current_key_adds_its_lane_and_leaves_its_session_out_of_search(store):
    """From the group's key, the group's sessions are visible, but not its current one in search."""
    server = build_server(store, parse_requester("telegram:42"), current_key=store.key_for(GROUP))

    async def scenario(client):
        listed = await client.list_resources()
        search = await client.call_tool("session_search", {"query": "friday"})
        return [r.name for r in listed.resources], search.structured_content["results"]

    names, results = with_client(server, scenario)
    assert names == [session_of(store, GROUP)]  # a shared lane shows only its own sessions
    assert results == []


def test_the_memory_tool_edits_the_memory_files(store, tmp_path):
    """A memory call adds an entry to the files; bad arguments come back as a tool error."""
    server = build_server(store, parse_requester("telegram:42"), memory=MemoryStore(tmp_path))

    async def scenario(client):
        added = await client.call_tool(
            "memory", {"action": "add", "target": "user", "content": "prefers short answers"}
        )
        bad = await client.call_tool("memory", {"action": "shout", "target": "user"})
        return added, bad

    added, bad = with_client(server, scenario)
    assert added.is_error is False
    assert MemoryStore(tmp_path).entries("user") == ("prefers short answers",)
    assert bad.is_error is True
    assert bad.structured_content["code"] == "invalid_arguments"


def test_the_memory_tool_writes_scoped_memory_as_the_requester(store, tmp_path):
    """With ScopedMemory, the requester writes their own profile and their lane's notes."""
    memory = ScopedMemory(tmp_path / "scoped")
    in_dm = build_server(store, parse_requester("telegram:42"), memory=memory)
    in_group = build_server(
        store, parse_requester("telegram:42"), memory=memory, current_key=store.key_for(GROUP)
    )

    def add(server, target, content):
        async def scenario(client):
            call = {"action": "add", "target": target, "content": content}
            return await client.call_tool("memory", call)

        return with_client(server, scenario).structured_content

    assert add(in_dm, "user", "interviewing at Acme")["scope"] == "user"
    assert add(in_group, "user", "prefers short answers")["scope"] == "user"
    assert add(in_group, "memory", "ships on Fridays")["scope"] == "lane"
    assert add(in_group, "memory", "x")["success"] is True
    group = MemoryContext.of(GROUP, store.key_for(GROUP))
    snapshot = memory.snapshot(group)
    assert snapshot.user.entries == ("prefers short answers",)
    assert snapshot.lane is not None
    assert snapshot.lane.entries == ("ships on Fridays", "x")


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"query": "deploy", "limit": "many"}, "limit"),
        ({"query": "deploy", "limit": 0}, "limit"),
        ({"query": "deploy", "everything": True}, "everything"),
        ({"message_id": 1}, "message_id"),
    ],
)
def test_arguments_the_input_schema_forbids_are_tool_errors(store, arguments, argument):
    """What the advertised inputSchema forbids comes back as an error result naming the argument."""
    server = build_server(store, parse_requester("telegram:42"))

    async def scenario(client):
        return await client.call_tool("session_search", arguments)

    result = with_client(server, scenario)
    assert result.is_error is True
    assert result.structured_content["code"] == "invalid_arguments"
    assert result.structured_content["argument"] == argument


def test_structured_results_fit_the_output_schema(store):
    """Every shape's structured result validates against the tool's declared outputSchema."""
    jsonschema = pytest.importorskip("jsonschema")
    server = build_server(store, parse_requester("telegram:42"))
    alice = session_of(store, ALICE)

    async def scenario(client):
        calls = [
            {},
            {"query": "deploy", "limit": "2"},
            {"session_id": alice},
            {"session_id": alice, "message_id": 1, "window": 50},
            {"limit": "many"},
        ]
        return [await client.call_tool("session_search", arguments) for arguments in calls]

    results = with_client(server, scenario)
    assert [r.is_error for r in results] == [False, False, False, False, True]
    for result in results:
        jsonschema.validate(result.structured_content, SESSION_SEARCH_RESULT_SCHEMA)


def test_an_unknown_tool_is_a_tool_error(store):
    """Calling a tool the server does not have returns an error result naming the tools."""
    server = build_server(store, parse_requester("telegram:42"))

    async def scenario(client):
        return await client.call_tool("rm_rf", {})

    result = with_client(server, scenario)
    assert result.is_error is True
    assert "session_search" in result.structured_content["error"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_transcripts_are_resources_of_visible_sessions(store, mode):
    """The resources are the requester's sessions; reading one gives its record and messages."""
    server = build_server(store, parse_requester("telegram:42"))
    alice = session_of(store, ALICE)

    async def scenario(client):
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        read = await client.read_resource(SESSION_URI_TEMPLATE.format(session_id=alice))
        return listed, templates, read

    listed, templates, read = with_client(server, scenario, mode)
    uris = {str(r.uri) for r in listed.resources}
    assert f"hermes-sessions://sessions/{alice}" in uris
    assert f"hermes-sessions://sessions/{session_of(store, BOB)}" not in uris
    assert templates.resource_templates[0].uri_template == SESSION_URI_TEMPLATE
    body = json.loads(read.contents[0].text)
    assert body["session"]["id"] == alice
    assert [m["content"] for m in body["messages"]] == ["alice: deploy with the blue pipeline"]


@pytest.mark.parametrize(
    "uri",
    ["hermes-sessions://sessions/{bob}", "hermes-sessions://sessions/nope", "file:///etc/passwd"],
)
def test_other_resources_cannot_be_read(store, uri):
    """Another user's transcript, an unknown id or a foreign URI is one and the same error."""
    server = build_server(store, parse_requester("telegram:42"))

    async def scenario(client):
        with pytest.raises(MCPError, match="no conversation you may read") as raised:
            await client.read_resource(uri.format(bob=session_of(store, BOB)))
        return raised.value

    assert "hunter2" not in str(with_client(server, scenario))


@pytest.mark.parametrize("text", ["telegram", ":42", "telegram:", "Tele gram:42"])
def test_a_malformed_requester_is_refused(text):
    """A requester that is not PLATFORM:USER_ID raises ValueError saying the form."""
    with pytest.raises(ValueError, match=r"PLATFORM:USER_ID|lowercase slug"):
        parse_requester(text)


def test_a_requester_id_may_hold_colons():
    """Everything after the first colon is the user id."""
    assert parse_requester("matrix:@a:example.org").user_id == "@a:example.org"


def test_a_missing_sdk_names_the_extra(store, monkeypatch):
    """Without the mcp package, building a server says which extra to install."""
    monkeypatch.setitem(sys.modules, "mcp.server", None)
    with pytest.raises(MissingDependencyError, match=r"hermes-sessions\[mcp\]"):
        build_server(store, parse_requester("telegram:42"))


def test_the_cli_needs_a_requester(tmp_path, capsys, monkeypatch):
    """hermes-sessions mcp without --requester or the variable is a usage error (status 2)."""
    monkeypatch.delenv("HERMES_SESSIONS_REQUESTER", raising=False)
    assert main(["--home", str(tmp_path), "mcp"]) == 2
    assert "--requester PLATFORM:USER_ID" in capsys.readouterr().err
    assert main(["--home", str(tmp_path), "mcp", "--requester", "nocolon"]) == 2


def test_the_cli_serves_a_client_over_stdio(store, tmp_path):
    """A real client starts `hermes-sessions mcp` as a subprocess and searches through it."""
    home = tmp_path / "home"
    with SessionStore.open(home) as disk:
        session_id = disk.get_or_create(ALICE).entry.session_id
        disk.append(session_id, Message(role="user", content="the stdio deploy works"))
    source = Path(__file__).resolve().parents[2] / "src"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(source),
        "HERMES_SESSIONS_REQUESTER": "telegram:42",
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hermes_sessions", "--home", str(home), "mcp", "--no-memory"],
        env=env,
    )

    async def scenario(client):
        tools = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("session_search", {"query": "stdio"})
        return tools, result

    tools, result = with_client(params, scenario)
    assert tools == ["session_search"]
    assert [hit["session_id"] for hit in result.structured_content["results"]] == [session_id]


def test_importing_the_library_imports_no_framework():
    """``import hermes_sessions`` and its integration modules load neither agents nor mcp."""
    code = (
        "import sys, hermes_sessions, hermes_sessions.integrations.mcp, "
        "hermes_sessions.integrations.openai_agents; "
        "loaded = {'agents', 'mcp', 'mcp_types'} & {m.split('.')[0] for m in sys.modules}; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
