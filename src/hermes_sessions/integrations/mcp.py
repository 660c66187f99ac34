"""The ``session_search`` and ``memory`` tools, and transcripts, as an MCP server.

:func:`build_server` makes a Model Context Protocol server (the ``mcp`` SDK's low-level
``Server``) for one *requester*, the person whose conversations an MCP client (a desktop
assistant, an IDE, another agent) may look through:

* tool ``session_search`` — the library's tool with its own schema (arguments the schema
  forbids are refused) and its result schema as ``outputSchema``; every call applies the
  resume access rule to the requester (:class:`~hermes_sessions.queries.Visibility`), so no
  argument reaches another user's conversation;
* tool ``memory`` — the memory files (``MEMORY.md``, ``USER.md``), when a
  :class:`~hermes_sessions.memory.MemoryStore` is given;
* read-only resources ``hermes-sessions://sessions/{session_id}`` — a visible session's
  record and active messages as JSON; the sessions listed are the requester's newest.

``hermes-sessions mcp --requester PLATFORM:USER_ID`` serves it over stdio (``docs/cli.md``,
``docs/integrations.md``). The SDK is imported by :func:`build_server`, not by this module.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.exceptions import (
    HermesSessionsError,
    InvalidArgumentError,
    MissingDependencyError,
)
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import SessionSource
from hermes_sessions.queries import Visibility
from hermes_sessions.serde import compact_json, converter, message_dict
from hermes_sessions.tools import (
    MEMORY_RESULT_SCHEMA,
    MEMORY_TOOL_SCHEMA,
    SESSION_SEARCH_RESULT_SCHEMA,
    SESSION_SEARCH_TOOL_SCHEMA,
    SearchToolContext,
    handle_memory,
    handle_session_search,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.server import Server

    from hermes_sessions.memory import MemoryStore, ScopedMemory
    from hermes_sessions.models import SessionRecord
    from hermes_sessions.store import SessionStore

__all__ = [
    "REQUESTER_ENV_VAR",
    "SESSION_URI_TEMPLATE",
    "build_server",
    "parse_requester",
    "serve_stdio",
]

SESSION_URI_TEMPLATE: Final = "hermes-sessions://sessions/{session_id}"
"""The URI of a session's transcript resource.

.. versionadded:: 0.1.0
"""

REQUESTER_ENV_VAR: Final = "HERMES_SESSIONS_REQUESTER"
"""Where ``hermes-sessions mcp`` reads the requester when ``--requester`` is not given.

.. versionadded:: 0.1.0
"""

_SESSION_URI: Final = re.compile(r"hermes-sessions://sessions/(?P<id>[^/?#]+)")
_LISTED: Final = 50
_INVALID_PARAMS: Final = -32602  # JSON-RPC's code, which MCP uses for an unknown resource


def parse_requester(text: str) -> SessionSource:
    """The requester ``PLATFORM:USER_ID`` (``telegram:42``) as a DM source of that user.

    The user id is everything after the first ``:``; it is canonicalised by the store's key
    policy when access is checked, as session records store it.

    >>> parse_requester("slack:U024BE7LH").user_id
    'U024BE7LH'

    .. versionadded:: 0.1.0
    """
    platform, colon, user_id = text.partition(":")
    if not colon or not platform or not user_id:
        raise InvalidArgumentError(
            f"the requester must be PLATFORM:USER_ID (like telegram:42), got {text!r}"
        )
    return SessionSource(platform=platform, chat_type="dm", user_id=user_id)


def _sdk() -> Any:
    try:
        import mcp_types  # noqa: PLC0415  # the SDK loads when a server is built
        from mcp.server import Server  # noqa: PLC0415
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415
    except ImportError as error:
        raise MissingDependencyError("mcp", extra="mcp", feature="the MCP server") from error
    return mcp_types, Server, MCPError


def _visibility(context: SearchToolContext) -> Visibility:
    return Visibility.for_requester(context.current_key, context.requester, keys=context.store.keys)


def _visible(context: SearchToolContext, session_id: str) -> SessionRecord | None:
    try:
        validate_session_id(session_id)
    except HermesSessionsError:
        return None
    record = context.store.backend.get_session(session_id)
    if record is None or not _visibility(context).allows(record):
        return None
    return record


def _listed(context: SearchToolContext) -> list[SessionRecord]:
    page = context.store.list_sessions(visible_to=_visibility(context), limit=_LISTED)
    return [item.record for item in page.items]


def _transcript(context: SearchToolContext, session_id: str) -> str | None:
    record = _visible(context, session_id)
    if record is None:
        return None
    messages = context.store.messages(record.id)
    return compact_json(
        {
            "session": converter().unstructure(record),
            "messages": [message_dict(message) for message in messages],
        }
    )


def _memory_handler(
    store: SessionStore,
    requester: SessionSource,
    memory: MemoryStore | ScopedMemory,
    current_key: str | None,
) -> Callable[[Any], dict[str, Any]]:
    """The ``memory`` tool's handler: for scoped memory, as ``requester`` in their lane."""
    from hermes_sessions.memory import MemoryContext, ScopedMemory  # noqa: PLC0415

    if not isinstance(memory, ScopedMemory):
        return functools.partial(handle_memory, memory)
    key = current_key if current_key is not None else store.key_for(requester)
    context = MemoryContext.of(requester, key, incognito=store.is_incognito(key))
    return functools.partial(handle_memory, memory, sessions=store, context=context)


def build_server(
    store: SessionStore,
    requester: SessionSource,
    *,
    memory: MemoryStore | ScopedMemory | None = None,
    current_key: str | None = None,
    name: str = "hermes-sessions",
) -> Server[Any]:
    """An MCP server of ``store`` for ``requester``, serving the tools and transcripts.

    Args:
        store: The sessions to search and read.
        requester: Whose conversations are visible (see :func:`parse_requester`).
        memory: The memory the ``memory`` tool edits; without it the tool is not offered. A
            ``ScopedMemory`` is written as ``requester`` speaking in ``current_key`` (default:
            the requester's own key, a DM for a ``platform:user`` requester): their profile and
            that lane's notes, by the lane rule of ``docs/memory.md``.
        current_key: The session key the client talks from, if it is one of the store's lanes:
            its sessions are visible too, and ``session_search`` leaves its current one out.
        name: The server name clients show.

    Store calls run in worker threads, so the server's event loop never waits on storage.

    .. versionadded:: 0.1.0
    """
    types, server_class, mcp_error = _sdk()
    import anyio.to_thread  # noqa: PLC0415  # installed with the SDK

    from hermes_sessions._version import __version__  # noqa: PLC0415

    context = SearchToolContext(store=store, requester=requester, current_key=current_key)
    handlers: dict[str, tuple[dict[str, Any], Callable[[Any], dict[str, Any]]]] = {
        "session_search": (
            SESSION_SEARCH_TOOL_SCHEMA,
            functools.partial(handle_session_search, context),
        ),
    }
    results = {"session_search": SESSION_SEARCH_RESULT_SCHEMA, "memory": MEMORY_RESULT_SCHEMA}
    if memory is not None:
        handlers["memory"] = (
            MEMORY_TOOL_SCHEMA,
            _memory_handler(store, requester, memory, current_key),
        )
    tools = [
        types.Tool(
            name=tool_name,
            description=schema["function"]["description"],
            input_schema=schema["function"]["parameters"],
            output_schema=results[tool_name],
            annotations=types.ToolAnnotations(
                read_only_hint=tool_name == "session_search", open_world_hint=False
            ),
        )
        for tool_name, (schema, _handler) in handlers.items()
    ]

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: Any) -> Any:
        entry = handlers.get(params.name)
        if entry is None:
            result: dict[str, Any] = {
                "success": False,
                "error": f"no tool {params.name!r}; use one of {', '.join(handlers)}",
                "code": "unknown_tool",
            }
        else:
            result = await anyio.to_thread.run_sync(entry[1], params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error=not result.get("success", False),
        )

    async def list_resources(_ctx: Any, _params: Any) -> Any:
        records = await anyio.to_thread.run_sync(_listed, context)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=SESSION_URI_TEMPLATE.format(session_id=record.id),
                    name=record.id,
                    title=record.title
                    or f"{record.source} session of {record.started_at:%Y-%m-%d}",
                    mime_type="application/json",
                )
                for record in records
            ]
        )

    async def list_templates(_ctx: Any, _params: Any) -> Any:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=SESSION_URI_TEMPLATE,
                    name="session",
                    description="A conversation's record and active messages, as JSON.",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(_ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        match = _SESSION_URI.fullmatch(uri)
        text = None
        if match is not None:
            text = await anyio.to_thread.run_sync(_transcript, context, match["id"])
        if text is None:
            raise mcp_error(
                code=_INVALID_PARAMS,
                message=f"no conversation you may read at {uri}; list the resources to see them",
                data={"uri": uri},
            )
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    server: Server[Any] = server_class(
        name,
        version=__version__,
        instructions=(
            "Earlier conversations of one user, and the assistant's memory files. "
            "Call session_search to list, search or read them."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    return server


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's standard input and output until the client leaves.

    .. versionadded:: 0.1.0
    """
    _sdk()
    from mcp.server.stdio import stdio_server  # noqa: PLC0415

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
