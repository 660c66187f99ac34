"""The ``hermes-sessions`` command line."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
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
    demo = commands.add_parser(
        "demo",
        help="play a scripted conversation on a temporary store",
        description="Play a short scripted conversation (a Feishu DM, a group, a thread, an "
        "idle reset, /new, /resume, /undo and searches) and print each step.",
    )
    demo.add_argument(
        "--home", type=Path, help="keep the demo data in DIR (default: a new temporary directory)"
    )
    demo.add_argument(
        "--backend",
        choices=("sqlite", "jsonl", "memory"),
        default="sqlite",
        help="storage backend (default: sqlite, the embedded default)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from hermes_sessions._demo import run_demo  # noqa: PLC0415  # keeps --help fast

        home = args.home or Path(tempfile.mkdtemp(prefix="hermes-sessions-demo-"))
        if home.exists() and any(home.iterdir()):
            parser.error(f"--home {home} is not empty; the demo needs a new or empty directory")
        run_demo(home, sys.stdout, backend=args.backend)
        return 0
    parser.print_help()
    return 0
