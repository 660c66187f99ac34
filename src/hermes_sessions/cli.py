"""The ``hermes-sessions`` command line."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from hermes_sessions._version import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-sessions",
        description="Inspect, search and manage hermes-sessions data.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("demo", help="play a scripted conversation on a temporary store")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        sys.stdout.write(
            "The demo walkthrough is coming soon: it needs the session store, which is not "
            "built yet.\n"
        )
        return 0
    parser.print_help()
    return 0
