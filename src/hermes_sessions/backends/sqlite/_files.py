"""The SQLite backend's database file: created whole, and refused when it is not one of ours.

**Creating.** A new database is built under a temporary name in the same directory
(``.state.db.creating-<pid>-<token>``): the schema is committed there, the connection closed
(which folds the write-ahead log into the file), the file fsynced, and only then linked to its
real name — a hard link, which fails if another process got there first (that one's file is
then used). A process killed during creation therefore never leaves a ``state.db`` behind, let
alone an empty one; the temporary files of creations whose process is gone are removed by the
next creation in the directory.

**Opening.** An existing file is checked first: a 0-byte file (no database this library wrote
is ever empty), a file SQLite cannot read as a database, and a database with tables but no
``schema_migrations`` (another program's) are refused with
:class:`~hermes_sessions.exceptions.CorruptRecordError` naming the file, and left as they are.
A valid SQLite file without any table holds nothing to lose and is set up in place.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from hermes_sessions.exceptions import CorruptRecordError, StorageError
from hermes_sessions.files import fsync_dir

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "check_existing",
    "corruption",
    "create_database",
    "foreign_tables",
    "probe",
    "refuse_foreign",
    "temporary_name",
]

R = TypeVar("R")

TEMP_MARK: Final = ".creating-"
_CORRUPTION_CODES: Final = {sqlite3.SQLITE_CORRUPT: "damaged", sqlite3.SQLITE_NOTADB: "not"}
_NOT_UTF8: Final = "Could not decode to UTF-8"
_SIDE_FILES: Final = ("", "-wal", "-shm", "-journal")


def temporary_name(path: Path, *, pid: int, tag: str) -> Path:
    """Where process ``pid`` builds a new database for ``path``."""
    return path.with_name(f".{path.name}{TEMP_MARK}{pid}-{tag}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover  # someone else's live process
        return True
    return True


def _remove(path: Path) -> None:
    """Remove a temporary database and the files SQLite may have left beside it."""
    for suffix in _SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()


def _remove_stale(path: Path) -> None:
    """Remove the temporary databases of creations whose process no longer exists."""
    prefix = f".{path.name}{TEMP_MARK}"
    if not path.parent.is_dir():
        return  # creating the file will say why
    for candidate in path.parent.iterdir():
        if not candidate.name.startswith(prefix):
            continue
        pid_text = candidate.name.removeprefix(prefix).split("-", 1)[0]
        if pid_text.isdigit() and not _alive(int(pid_text)):
            _remove(candidate)


def create_database(path: Path, build: Callable[[Path], None], *, sync: bool) -> None:
    """Create the database ``path``: ``build`` sets up a temporary file, which is linked into place.

    ``build`` gets the temporary path and must leave a complete, closed database there. If
    another process created ``path`` meanwhile, its database is kept and this one discarded.
    """
    _remove_stale(path)
    temp = temporary_name(path, pid=os.getpid(), tag=secrets.token_hex(4))
    try:
        descriptor = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    except OSError as error:
        raise StorageError(f"cannot create the database {path}: {error}") from error
    try:
        os.close(descriptor)
        build(temp)
        if sync:
            descriptor = os.open(temp, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        with contextlib.suppress(FileExistsError):  # another process was first: use its file
            path.hardlink_to(temp)
        if sync:
            fsync_dir(path.parent)
    finally:
        _remove(temp)


def check_existing(path: Path) -> None:
    """Refuse an existing file that is empty, not SQLite, or another program's database.

    Reads only: the file is left exactly as it was (a probe connection, closed again; SQLite
    keeps the locks of this process's other connections to the file intact).
    """
    if not path.stat().st_size:
        try:
            log = Path(f"{path}-wal").stat().st_size
        except FileNotFoundError:
            log = 0
        if not log:  # with a log, everything may still be in it: SQLite decides
            raise CorruptRecordError(
                "the file is empty (0 bytes), so it is not a database hermes-sessions wrote: "
                "a new database is built under another name and appears whole",
                path=path,
                hint="if it should hold your sessions, restore it from a backup; if it holds "
                "nothing, delete it and open again (nothing was changed)",
            )
    probe = sqlite3.connect(path, isolation_level=None)
    try:
        tables = foreign_tables(probe)  # a file that is not a database fails here
    finally:
        probe.close()
    if tables and "schema_migrations" not in tables:
        raise refuse_foreign(path, tables)


def probe(path: Path, work: Callable[[sqlite3.Connection], R]) -> R:
    """Run ``work`` on a new connection to ``path`` (its own page cache: it reads the file now).

    ``check()`` uses it: the backend's connections may answer from pages cached before the
    file was damaged. The connection is closed again (the other connections' locks stay).
    """
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        try:
            return work(connection)
        finally:
            connection.execute("ROLLBACK")
    finally:
        connection.close()


def foreign_tables(connection: sqlite3.Connection) -> list[str]:
    """The names of the tables of a database, in order."""
    rows = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' "
        "ORDER BY name"
    ).fetchall()
    return [str(row[0]) for row in rows]


def refuse_foreign(path: Path, tables: list[str]) -> CorruptRecordError:
    """The error for another program's database found under our name."""
    shown = ", ".join(tables[:10]) + (", ..." if len(tables) > 10 else "")  # noqa: PLR2004
    return CorruptRecordError(
        f"a SQLite database of another program (tables {shown}; no schema_migrations)",
        path=path,
        hint="open a hermes-sessions database instead; to bring in a Hermes profile's "
        "state.db use hermes_sessions.interop.import_hermes or `hermes-sessions import` "
        "(nothing was changed)",
    )


def undecodable(error: UnicodeDecodeError, path: Path) -> CorruptRecordError:
    """The library's error for text of the file that Python cannot decode.

    sqlite3 decodes SQLite's error messages as UTF-8; a message quoting a damaged schema name
    (bytes that are not UTF-8) makes it raise ``UnicodeDecodeError`` instead of the error.
    """
    return CorruptRecordError(
        f"the database's schema holds a name that is not valid UTF-8 ({error.reason}), so "
        "SQLite reports the schema as malformed",
        path=path,
        hint="run `hermes-sessions check` on a copy to see the damage, then restore the "
        "database from a backup (nothing was changed)",
    )


def corruption(error: sqlite3.Error, path: Path) -> CorruptRecordError | None:
    """The library's error for a sqlite3 error that means a damaged or foreign file, else None."""
    if str(error).startswith(_NOT_UTF8):  # text of a row is not UTF-8: sqlite3 cannot decode it
        return CorruptRecordError(
            f"a text column is not valid UTF-8 ({error})",
            path=path,
            hint="run `hermes-sessions check` to find the damage, then restore the database "
            "from a backup (nothing was changed)",
        )
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    kind = _CORRUPTION_CODES.get(code)
    if kind is None:
        return None
    if kind == "not":
        return CorruptRecordError(
            f"not an SQLite database ({error})",
            path=path,
            hint="check the path; if the file should hold your sessions, restore it from a "
            "backup (nothing was changed)",
        )
    return CorruptRecordError(
        f"SQLite reports the database damaged ({error})",
        path=path,
        hint="restore it from a backup; `sqlite3 state.db .recover` can salvage what is "
        "readable into a new file (the damaged one was left as it is)",
    )
