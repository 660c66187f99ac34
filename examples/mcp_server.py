"""The session_search and memory tools served over MCP, and a client that uses them.

``hermes-sessions mcp --requester feishu:ou_lin`` serves a home over stdio to any MCP client;
here the same server runs in-process and the ``mcp`` SDK's own client talks to it, so the
example runs offline. Requester ``feishu:ou_lin`` sees Lin's conversations and never Wang's.
Run it with ``python examples/mcp_server.py`` (needs the ``mcp`` extra).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from mcp import Client

from hermes_sessions import MemoryStore, Message, SessionSource, SessionStore
from hermes_sessions.integrations.mcp import build_server, parse_requester

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin")
WANG = SessionSource(platform="feishu", chat_id="ou_wang", user_id="ou_wang")


def seed(store: SessionStore) -> None:
    """Lin and Wang each had a conversation about the deployment."""
    talks = [(LIN, "staging 部署 uses port 8443"), (WANG, "prod 部署 password rotation")]
    for source, text in talks:
        session_id = store.get_or_create(source).entry.session_id
        store.append(session_id, Message(role="user", content=text))


async def client_session(store: SessionStore, memory: MemoryStore) -> None:
    """What an MCP client sees: the tools, a search, a memory edit and a transcript."""
    server = build_server(store, parse_requester("feishu:ou_lin"), memory=memory)
    async with Client(server) as client:
        print("tools:", [tool.name for tool in (await client.list_tools()).tools])
        found = await client.call_tool("session_search", {"query": "部署"})
        print("search '部署':", [hit["snippet"] for hit in found.structured_content["results"]])
        saved = await client.call_tool(
            "memory", {"action": "add", "target": "user", "content": "Lin deploys on Fridays"}
        )
        print("memory add:", saved.structured_content["success"])
        resources = (await client.list_resources()).resources
        print("resources:", len(resources))
        transcript = await client.read_resource(resources[0].uri)
        print("transcript starts:", transcript.contents[0].text[:12])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as home, SessionStore.open(home) as opened:
        seed(opened)
        anyio.run(client_session, opened, MemoryStore(Path(home) / "memories"))
