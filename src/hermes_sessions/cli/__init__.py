"""The ``hermes-sessions`` command line (``docs/cli.md``).

Every command works on one home directory (``--home``, default
:func:`~hermes_sessions.paths.default_home`) and its backend, detected from what the home holds
unless ``--backend`` says; ``--backend postgres`` works on a schema (``--schema``) of the
database at ``--dsn`` (default ``$HERMES_SESSIONS_DSN``) instead, the memory files staying in the
home. Read-only commands never create a store. User errors print one line and
exit with status 2; ``check`` exits with 1 when it finds a problem. An encrypted store needs its
keys (``--key-file``, ``$HERMES_SESSIONS_KEY_FILE``, or ``$HERMES_SESSIONS_KEYS`` with
``$HERMES_SESSIONS_TOKEN_KEY``: ``docs/cli.md``); without them every command refuses it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_sessions._version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TextIO

    from hermes_sessions.store import SessionStore

__all__ = ["main"]

_READ_ONLY = frozenset({"list", "show", "search", "stats", "check", "ledger"})


def _zone(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tz", metavar="ZONE", help="show times in this IANA zone (default: the host's)"
    )


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", action="append", help="only this platform (repeatable)")
    parser.add_argument("--user", help="only sessions of this user id")
    parser.add_argument("--key", help="only sessions of this session key")
    parser.add_argument("--since", help="from this time: ISO date/datetime or an age such as 7d")
    parser.add_argument("--until", help="before this time: ISO date/datetime or an age")


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    *,
    json_output: bool = True,
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON (docs/cli.md)")
    return parser


def _parser() -> argparse.ArgumentParser:  # noqa: PLR0915  # one statement per option
    parser = argparse.ArgumentParser(
        prog="hermes-sessions",
        description="Inspect, search and manage hermes-sessions data.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--home", type=Path, help="the data directory (default: the user's)")
    parser.add_argument(
        "--backend",
        choices=("sqlite", "jsonl", "postgres"),
        help="storage backend (default: detected from the home; sqlite for a new one)",
    )
    parser.add_argument(
        "--dsn",
        help="postgres: the server, postgresql://user@host:5432/db (default: $HERMES_SESSIONS_DSN)",
    )
    parser.add_argument(
        "--schema", help="postgres: the schema holding the store (default: hermes_sessions)"
    )
    parser.add_argument(
        "--key-file",
        type=Path,
        help="an encrypted store's keys (default: $HERMES_SESSIONS_KEY_FILE, else "
        "$HERMES_SESSIONS_KEYS and $HERMES_SESSIONS_TOKEN_KEY; docs/cli.md)",
    )
    parser.add_argument(
        "--user-keys",
        type=Path,
        help="the per-user key directory of an encrypted store that has one "
        "(default: $HERMES_SESSIONS_USER_KEYS)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="play a scripted conversation on a temporary store",
        description="Play a short scripted conversation (a Feishu DM, a group, a thread, an "
        "idle reset, /new, /resume, /undo and searches) and print each step.",
    )
    demo.add_argument(
        "--home",
        dest="demo_home",
        type=Path,
        help="keep the demo data in DIR (default: a new temporary directory)",
    )
    demo.add_argument(
        "--backend",
        dest="demo_backend",
        choices=("sqlite", "jsonl", "memory"),
        default="sqlite",
        help="storage backend (default: sqlite, the embedded default)",
    )
    listing = _command(commands, "list", "list sessions, most recently active first")
    _filters(listing)
    listing.add_argument("--all", action="store_true", help="include ended and archived ones")
    listing.add_argument("--limit", type=_positive, default=50, help="at most N (default 50)")
    _zone(listing)
    show = _command(commands, "show", "print a session's transcript")
    show.add_argument("id", help="session id or a unique prefix of one")
    show.add_argument("--inactive", action="store_true", help="include soft-deleted messages")
    _zone(show)
    search = _command(commands, "search", "search messages across sessions")
    search.add_argument("query", help="the query (docs/search.md: AND, OR, NOT, phrases, CJK)")
    _filters(search)
    search.add_argument("--limit", type=_positive, default=20, help="at most N hits (default 20)")
    search.add_argument(
        "--role",
        action="append",
        help="only messages of this role: user, assistant, tool, system, or all "
        "(repeatable; default: user and assistant)",
    )
    _zone(search)
    rename = _command(commands, "rename", "set a session's title")
    rename.add_argument("id")
    rename.add_argument("title", help="the new title ('' removes it)")
    archive = _command(commands, "archive", "archive a session (hidden from list)")
    archive.add_argument("id")
    archive.add_argument("--undo", action="store_true", help="unarchive instead")
    delete = _command(commands, "delete", "delete a session that no key points to")
    delete.add_argument("id")
    prune = _command(commands, "prune", "delete old ended sessions (retention rules)")
    prune.add_argument("--older-than", help="age such as 90d, 12h or 2w")
    prune.add_argument("--max-per-key", type=_positive, help="keep at most N sessions per key")
    prune.add_argument("--max-size", help="keep the store under a size such as 500MB or 2G")
    prune.add_argument("--source", action="append", help="only this platform (repeatable)")
    prune.add_argument("--yes", action="store_true", help="really delete (default: dry run)")
    migrate = _command(commands, "migrate-keys", "move keys to a changed key policy")
    migrate.add_argument("--from", dest="old", default="", help="the old policy (docs/cli.md)")
    migrate.add_argument("--to", dest="new", required=True, help="the new policy, same form")
    migrate.add_argument("--refuse-collisions", action="store_true", help="leave colliding keys")
    migrate.add_argument("--yes", action="store_true", help="really move (default: dry run)")
    erase = _command(commands, "erase-user", "erase one user's data on one platform")
    erase.add_argument("platform")
    erase.add_argument("user", nargs="+", help="the user's ids there (canonical and alternate)")
    erase.add_argument("--yes", action="store_true", help="really erase (default: dry run)")
    export = _command(commands, "export", "write sessions to a bundle file")
    export.add_argument("file", help="the bundle to write, or - for standard output")
    export.add_argument("--session", action="append", help="only this session (repeatable)")
    export.add_argument("--memory", action="store_true", help="include the memory files")
    imported = _command(commands, "import", "read a bundle, merging by id")
    imported.add_argument("file", help="the bundle to read, or - for standard input")
    imported.add_argument("--memory", action="store_true", help="also import memory entries")
    hermes = _command(commands, "import-hermes", "import a Hermes profile (read-only on it)")
    hermes.add_argument("hermes_home", type=Path, help="the Hermes home, usually ~/.hermes")
    hermes.add_argument("--timezone", help="the profile's IANA zone (default: the host's)")
    hermes.add_argument(
        "--user",
        metavar="PLATFORM:ID",
        help="whose profile USER.md is (default: app memory, marked as the owner's profile)",
    )
    _command(commands, "stats", "counts of sessions, messages and keys")
    ledger = _command(commands, "ledger", "what a gateway left to do (docs/ledger.md)")
    ledger.add_argument("listing", choices=("pending", "unknown"))
    ledger.add_argument("--key", help="only this session key")
    _command(commands, "check", "check storage integrity and the library's invariants")
    optimize = _command(commands, "optimize", "run the backend's maintenance")
    optimize.add_argument(
        "--scrub", action="store_true", help="also remove the remains of deleted data (erasure)"
    )
    reindex = _command(commands, "reindex", "rewrite a search index an older version wrote")
    reindex.add_argument(
        "--batch-size", type=_positive, default=500, help="messages per transaction (500)"
    )
    memory = _command(commands, "memory", "show or edit the memory files")
    memory.add_argument("action", choices=("show", "add", "remove"))
    memory.add_argument("target", nargs="?", choices=("memory", "user"))
    memory.add_argument("text", nargs="?", help="the entry to add, or text of one to remove")
    from hermes_sessions.cli._mcp import add_mcp_command  # noqa: PLC0415

    add_mcp_command(commands)
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _handlers() -> dict[str, Callable[[SessionStore, argparse.Namespace, TextIO], int]]:
    from hermes_sessions.cli import _ledger, _manage, _migrate, _read  # noqa: PLC0415  # fast --help

    return {
        "list": _read.cmd_list,
        "show": _read.cmd_show,
        "search": _read.cmd_search,
        "stats": _read.cmd_stats,
        "ledger": _ledger.cmd_ledger,
        "check": _read.cmd_check,
        "rename": _manage.cmd_rename,
        "archive": _manage.cmd_archive,
        "delete": _manage.cmd_delete,
        "prune": _manage.cmd_prune,
        "migrate-keys": _migrate.cmd_migrate_keys,
        "erase-user": _manage.cmd_erase_user,
        "export": _manage.cmd_export,
        "import": _manage.cmd_import,
        "import-hermes": _manage.cmd_import_hermes,
        "optimize": _manage.cmd_optimize,
        "reindex": _manage.cmd_reindex,
    }


def _play_demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from hermes_sessions.cli._demo import run_demo  # noqa: PLC0415  # keeps --help fast

    home = args.demo_home or args.home or Path(tempfile.mkdtemp(prefix="hermes-sessions-demo-"))
    if home.exists() and any(home.iterdir()):
        parser.error(f"--home {home} is not empty; the demo needs a new or empty directory")
    run_demo(home, sys.stdout, backend=args.demo_backend, program=_invocation(sys.argv[0]))
    return 0


def _invocation(argv0: str) -> str:
    """How to run this command line again from the current directory, ready to paste.

    The bare name when the shell finds this very program on ``PATH``; else the path it was
    started by (``.venv/bin/hermes-sessions`` after the README's install), or
    ``python -m hermes_sessions`` with this interpreter.
    """
    script = Path(argv0)
    if script.name == "__main__.py":
        return f"{shlex.quote(sys.executable)} -m hermes_sessions"
    found = shutil.which(script.name)
    if found is not None and Path(found).resolve() == script.resolve():
        return script.name
    return shlex.quote(argv0)


def _run(args: argparse.Namespace) -> int:
    from hermes_sessions.cli import _read  # noqa: PLC0415
    from hermes_sessions.cli._home import (  # noqa: PLC0415
        detect_backend,
        load_cipher,
        load_user_keys,
        open_store,
    )
    from hermes_sessions.cli._manage import cmd_memory  # noqa: PLC0415
    from hermes_sessions.cli._output import UsageError  # noqa: PLC0415
    from hermes_sessions.exceptions import CorruptRecordError  # noqa: PLC0415
    from hermes_sessions.paths import default_home  # noqa: PLC0415

    args.home = args.home if args.home is not None else default_home()
    args.cipher = load_cipher(args.key_file)
    args.user_keys = load_user_keys(args.user_keys, args.cipher)
    if args.command == "memory" and args.cipher is None and detect_backend(args.home):
        open_store(args.home, args.backend, create=False).close()  # refuses an encrypted one
    if args.command == "mcp":
        from hermes_sessions.cli._mcp import cmd_mcp  # noqa: PLC0415

        return cmd_mcp(args)
    if args.command == "memory":
        if args.action != "show" and (args.target is None or not args.text):
            raise UsageError(f"memory {args.action} needs a TARGET (memory or user) and a TEXT")
        if args.action == "show" and not (args.home / "memories").is_dir():
            raise UsageError(f"no memory files in {args.home / 'memories'}")
        return cmd_memory(args, sys.stdout)
    read_only = args.command in _READ_ONLY
    with warnings.catch_warnings():
        if args.command == "reindex":  # the warning says to run this very command
            warnings.filterwarnings("ignore", "the search index of", RuntimeWarning)
        try:
            store = open_store(
                args.home,
                args.backend,
                create=not read_only,
                dsn=args.dsn,
                schema=args.schema,
                cipher=args.cipher,
                user_keys=args.user_keys,
            )
        except CorruptRecordError as error:
            if args.command != "check":
                raise
            return _read.report_unopenable(error, args, sys.stdout)
    with store:
        return _handlers()[args.command](store, args, sys.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        return _play_demo(parser, args)
    from hermes_sessions.cli._output import UsageError  # noqa: PLC0415
    from hermes_sessions.exceptions import HermesSessionsError  # noqa: PLC0415

    try:
        return _run(args)
    except BrokenPipeError:  # `| head` closed the pipe: stop quietly, as other tools do
        _silence_stdout()
        return 0
    except (UsageError, HermesSessionsError, OSError) as error:
        message = " ".join(str(error).split()) or type(error).__name__
        sys.stderr.write(f"hermes-sessions {args.command}: {message}\n")
        return 2


def _silence_stdout() -> None:
    """Point standard output at the null device: the interpreter's last flush finds no pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
