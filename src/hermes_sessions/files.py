"""Durable file writes shared by everything that writes files (the memory store, the JSONL backend).

Every file is created private (mode ``0600``), every directory (:func:`make_private_dir`)
``0700``. The primitives build on each other:

* :func:`write_all` writes every byte through a descriptor, continuing short writes; if it fails
  part-way, the file is cut back to where the write started.
* :func:`write_file` creates (or truncates) one file holding some bytes, ``fsync``-ed with
  ``sync``; with ``exclusive`` the file must not exist yet.
* :func:`create_file` is :func:`write_file` followed by an ``fsync`` of the directory, so the new
  name survives a power failure too.
* :func:`replace_file` replaces a file atomically: a temporary file in the same directory
  (:func:`temp_path` unless told otherwise) is written and ``fsync``-ed, renamed over the target,
  then the directory is ``fsync``-ed. A reader sees the old file or the new one, never a mixture;
  a crash leaves one of the two (and perhaps the temporary file, which its owner clears).
* :func:`fsync_dir` makes a directory's entries (new, renamed or removed files) durable.

``sync=False`` skips every ``fsync`` (still safe when a process crashes, not when the machine
does). Errors are the ``OSError`` of the failing call: callers wrap them in their own
``StorageError``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "create_file",
    "fsync_dir",
    "make_private_dir",
    "replace_file",
    "temp_path",
    "write_all",
    "write_file",
]

PRIVATE_FILE: Final = 0o600
"""The mode of every file written here: read and write for the owner only.

.. versionadded:: 0.1.0
"""


PRIVATE_DIR: Final = 0o700
"""The mode of every directory created here: only the owner may list or enter it.

.. versionadded:: 0.1.0
"""


def make_private_dir(path: Path) -> None:
    """Create ``path`` and every missing parent with mode ``0700``; existing ones are left as is.

    (``Path.mkdir(parents=True)`` would give the parents the umask's mode, usually ``0755``.)

    .. versionadded:: 0.1.0
    """
    if path.is_dir():
        return
    for directory in reversed([path, *path.parents]):
        if not directory.is_dir():
            with contextlib.suppress(FileExistsError):
                directory.mkdir(mode=PRIVATE_DIR)


def write_all(fd: int, data: bytes, *, start: int) -> None:
    """Write all of ``data`` through ``fd``; on failure, cut the file back to ``start`` bytes.

    Short writes (which regular files make only when the disk fills up) are continued.

    .. versionadded:: 0.1.0
    """
    view = memoryview(data)
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, view[written:])
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


def write_file(path: Path, data: bytes, *, sync: bool = True, exclusive: bool = False) -> None:
    """Create ``path`` (mode ``0600``) holding ``data``; ``fsync`` it with ``sync``.

    An existing file is overwritten, unless ``exclusive``: then ``FileExistsError`` is raised and
    nothing is written. The directory is not synced (see :func:`create_file`).

    .. versionadded:: 0.1.0
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, PRIVATE_FILE)
    try:
        write_all(fd, data, start=0)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def create_file(path: Path, data: bytes, *, sync: bool = True, exclusive: bool = False) -> None:
    """:func:`write_file`, then (with ``sync``) ``fsync`` the directory so the name is durable.

    .. versionadded:: 0.1.0
    """
    write_file(path, data, sync=sync, exclusive=exclusive)
    if sync:
        fsync_dir(path.parent)


def temp_path(path: Path) -> Path:
    """The temporary file :func:`replace_file` writes ``path`` through by default.

    It sits beside ``path`` and is hidden: ``.<name>.tmp``.

    .. versionadded:: 0.1.0
    """
    return path.with_name(f".{path.name}.tmp")


def replace_file(
    path: Path, data: bytes, *, sync: bool = True, temporary: Path | None = None
) -> None:
    """Replace ``path`` atomically: temporary file, ``fsync``, rename, ``fsync`` of the directory.

    ``temporary`` (default :func:`temp_path`) must be in the same directory as ``path``; an old
    file of that name is overwritten. If writing or renaming fails, the temporary file is
    removed and ``path`` is left as it was.

    .. versionadded:: 0.1.0
    """
    temporary = temp_path(path) if temporary is None else temporary
    try:
        write_file(temporary, data, sync=sync)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (new, renamed or removed files) durable.

    .. versionadded:: 0.1.0
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
