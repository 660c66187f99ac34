"""The files of a Hermes profile, read only from inside it, and the tables of its database.

A profile is data from elsewhere: a link may point out of it, a "transcript" may be a FIFO, the
database may hold a view or a virtual table where Hermes keeps a table. Everything here refuses
such things before reading them, so an import reads nothing outside the profile and takes time
and memory bounded by the size of the profile's own files:

- a path is read only if it resolves (links followed) to a regular file inside the profile's
  real directory; a link that stays inside the profile is followed like the file it names;
- the database's ``sessions`` and ``messages`` must be ordinary tables (not views, whose query
  may never end, nor virtual tables, whose module computes the rows) without generated columns
  (computed on every read), and hold the columns the importer needs.
"""

from __future__ import annotations

import os
import shutil
import stat
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

__all__ = ["REQUIRED_COLUMNS", "UnsafeFileError", "check_tables", "copy_inside", "read_inside"]

REQUIRED_COLUMNS: Final = {
    "sessions": ("id", "source", "started_at"),
    "messages": ("id", "session_id", "role", "timestamp"),
}
"""The columns each table must have: the importer reads every one of them on every row."""

_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
"""``O_NOFOLLOW``: the checked path was not swapped for a link; ``O_NONBLOCK``: nor for a FIFO."""


class UnsafeFileError(Exception):
    """A profile path that is not read: ``kind`` is the import problem's kind."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(detail)


def _resolve_inside(root: Path, path: Path) -> Path:
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop (Python 3.11, 3.12)
        raise UnsafeFileError("outside_profile", f"cannot be resolved ({error})") from None
    if not real.is_relative_to(root):
        raise UnsafeFileError("outside_profile", f"is a link to {real}, outside the profile")
    return real


def _open_regular(root: Path, path: Path) -> int:
    real = _resolve_inside(root, path)
    try:
        fd = os.open(real, _OPEN_FLAGS)
    except OSError as error:
        raise UnsafeFileError("unreadable", f"cannot be opened ({error.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFileError("not_a_file", "is not a regular file (a directory, FIFO or device)")
    return fd


def read_inside(root: Path, path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file inside ``root`` (a real directory).

    Raises:
        UnsafeFileError: the path leads out of ``root``, or is not a regular file.
    """
    with os.fdopen(_open_regular(root, path), "rb") as handle:
        return handle.read()


def copy_inside(root: Path, path: Path, target: Path) -> None:
    """Copy ``path`` to ``target`` if it is a regular file inside ``root``.

    Raises:
        UnsafeFileError: the path leads out of ``root``, or is not a regular file.
    """
    with os.fdopen(_open_regular(root, path), "rb") as source, target.open("wb") as copy:
        shutil.copyfileobj(source, copy)


def check_tables(connection: sqlite3.Connection) -> str | None:
    """Why the database cannot be read as a Hermes database, or ``None`` if it can."""
    found = {
        str(name).lower(): (str(kind), str(sql or ""))
        for kind, name, sql in connection.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE lower(name) IN (?, ?)",
            tuple(REQUIRED_COLUMNS),
        )
    }
    missing = [name for name in REQUIRED_COLUMNS if name not in found]
    if missing:
        return f"it has no {' and no '.join(missing)} table"
    for name, (kind, sql) in found.items():
        if kind != "table":
            article = "an" if kind[:1] in {"a", "e", "i", "o", "u"} else "a"
            return f"its {name} is {article} {kind}, not a table; only tables are read"
        if sql.lstrip().upper().startswith("CREATE VIRTUAL"):
            return f"its {name} is a virtual table; only ordinary tables are read"
        columns = {
            str(row[1]).lower(): int(row[6])
            for row in connection.execute("SELECT * FROM pragma_table_xinfo(?)", (name,))
        }
        generated = sorted(column for column, hidden in columns.items() if hidden in {2, 3})
        if generated:
            return (
                f"its {name} table has generated column(s) {', '.join(generated)}, computed on "
                "every read; Hermes never makes them"
            )
        absent = [column for column in REQUIRED_COLUMNS[name] if column not in columns]
        if absent:
            return f"its {name} table has no {', '.join(absent)} column"
    return None
