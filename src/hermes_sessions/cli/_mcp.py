"""``hermes-sessions mcp``: serve the tools and transcripts of a home to an MCP client (stdio)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hermes_sessions.cli._output import UsageError

if TYPE_CHECKING:
    import argparse

__all__ = ["add_mcp_command", "cmd_mcp"]


def add_mcp_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the ``mcp`` command and its options."""
    text = "serve session_search, memory and transcripts to an MCP client over stdio"
    parser = commands.add_parser("mcp", help=text, description=text[0].upper() + text[1:] + ".")
    parser.add_argument(
        "--requester",
        help="whose conversations are visible, as PLATFORM:USER_ID "
        "(default: $HERMES_SESSIONS_REQUESTER)",
    )
    parser.add_argument("--key", help="the session key the client talks from, if it has one")
    parser.add_argument(
        "--no-memory", action="store_true", help="leave the memory tool out (read-only use)"
    )


def cmd_mcp(args: argparse.Namespace) -> int:
    """Open the store of ``args.home`` and serve it until the client disconnects."""
    import anyio  # noqa: PLC0415  # comes with the mcp extra

    from hermes_sessions.cli._home import open_store  # noqa: PLC0415
    from hermes_sessions.cli._manage import memory_store  # noqa: PLC0415
    from hermes_sessions.integrations.mcp import (  # noqa: PLC0415
        REQUESTER_ENV_VAR,
        build_server,
        parse_requester,
        serve_stdio,
    )

    text = args.requester or os.environ.get(REQUESTER_ENV_VAR)
    if not text:
        raise UsageError(
            f"mcp needs the requester: pass --requester PLATFORM:USER_ID or set {REQUESTER_ENV_VAR}"
        )
    try:
        requester = parse_requester(text)
    except ValueError as error:
        raise UsageError(str(error)) from None
    with open_store(
        args.home, args.backend, create=False, cipher=args.cipher, user_keys=args.user_keys
    ) as store:
        memory = None if args.no_memory else memory_store(args.home)
        server = build_server(store, requester, memory=memory, current_key=args.key)
        anyio.run(serve_stdio, server)
    return 0
