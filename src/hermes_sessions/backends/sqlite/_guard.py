"""The guard every public method of the SQLite backend runs under (closed backend, errors).

Calls on a closed backend raise ``BackendClosedError``; a ``sqlite3`` error becomes
``StorageError`` (or the damaged-file error ``_files.corruption`` recognises); a damaged row
is located in the backend's file; a damaged schema name (``UnicodeDecodeError``) is a
``CorruptRecordError`` naming the file.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from hermes_sessions.backends.sqlite import _files as files
from hermes_sessions.exceptions import BackendClosedError, CorruptRecordError, StorageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.backends.sqlite._backend import SQLiteBackend

__all__ = ["guarded"]

P = ParamSpec("P")
R = TypeVar("R")


def guarded(
    method: Callable[Concatenate[SQLiteBackend, P], R],
) -> Callable[Concatenate[SQLiteBackend, P], R]:
    """Refuse calls on a closed backend; wrap sqlite3 errors in ``StorageError``."""

    @functools.wraps(method)
    def wrapper(self: SQLiteBackend, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._connections.closed:
            raise BackendClosedError(f"SQLite backend on {self.path}")
        try:
            return method(self, *args, **kwargs)
        except CorruptRecordError as error:
            located = error.located(self.path)
            if located is error:
                raise
            raise located from error.__cause__
        except sqlite3.Error as error:
            if self._connections.closed:
                raise BackendClosedError(f"SQLite backend on {self.path}") from error
            damaged = files.corruption(error, self.path)
            if damaged is not None:
                raise damaged from error
            raise StorageError(f"SQLite failed on {self.path}: {error}") from error
        except UnicodeDecodeError as error:  # SQLite's message quotes a damaged schema name
            raise files.undecodable(error, self.path) from error

    return wrapper
