"""Line I/O of the JSONL backend: checksummed lines, read whole, appended whole; private dirs.

* Every line the backend writes (format 2) is a JSON object whose last member is ``"crc"``: the
  CRC32, as eight lowercase hex digits, of the same line without that member
  (``{"a":1}`` is written ``{"a":1,"crc":"xxxxxxxx"}``). :func:`sign` adds it; reading checks it
  on every line that has one, and :func:`require_checksums` refuses lines without one in a file
  whose header says format 2. The check works on the bytes, so it never depends on how a JSON
  encoder orders or escapes things.
* Appends write whole lines with one ``write()`` on an ``O_APPEND`` descriptor (continued only
  if the kernel wrote less, which regular files do only when the disk fills up); a failure
  part-way truncates the file back to where the append started.
* Reads return complete lines only; bytes after the last newline are a *torn* tail (a write cut
  short by a crash), reported but never parsed.

Files are created and replaced atomically through :mod:`hermes_sessions.files` (mode ``0600``);
every directory is created ``0700``. ``sync=False`` skips the ``fsync`` calls (the
``durability="normal"`` mode).
"""

from __future__ import annotations

import json
import os
import zlib
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions import files
from hermes_sessions.exceptions import CorruptRecordError, StorageError
from hermes_sessions.files import write_all
from hermes_sessions.models import JSONObject

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "PRIVATE_DIR",
    "Chunk",
    "Line",
    "append_journal",
    "append_lines",
    "make_private_dir",
    "parse_chunk",
    "parse_line",
    "read_chunk",
    "read_chunk_at",
    "require_checksums",
    "sign",
    "truncate",
]

PRIVATE_DIR: Final = 0o700
"""The mode of every directory the backend creates."""


_CRC_KEY: Final = b',"crc":"'
_SUFFIX: Final = len(b',"crc":"00000000"}')


def sign(body: bytes) -> bytes:
    """One JSON object (``{...}``, no newline) as a checksummed line, newline included."""
    return b'%s,"crc":"%08x"}\n' % (body[:-1], zlib.crc32(body))


def parse_line(raw: bytes, *, path: Path, number: int) -> tuple[JSONObject, bool]:
    """Decode one line (without its newline): its object and whether it carried a checksum.

    A checksum that does not match raises ``CorruptRecordError``: the line changed after it was
    written (a bit flip, an edit). So does a line that is not a JSON object.
    """
    checked = len(raw) > _SUFFIX and raw[-_SUFFIX:-10] == _CRC_KEY and raw.endswith(b'"}')
    if checked:
        body = raw[:-_SUFFIX] + b"}"
        if raw[-10:-2] != b"%08x" % zlib.crc32(body):
            raise CorruptRecordError(
                "checksum mismatch: the line was changed after it was written",
                path=path,
                line=number,
            )
        raw = body
    try:
        decoded = json.loads(raw)
    except ValueError as error:  # includes invalid UTF-8
        raise CorruptRecordError(f"not a JSON line ({error})", path=path, line=number) from error
    if not isinstance(decoded, dict):
        raise CorruptRecordError("a line must be a JSON object", path=path, line=number)
    return decoded, checked


@attrs.frozen
class Line:
    """One complete line: its number (from 1), its offset, its object, whether it had a checksum."""

    number: int
    start: int
    data: JSONObject
    checked: bool = True


@attrs.frozen
class Chunk:
    """The complete lines of a file from some offset on."""

    lines: list[Line]
    end: int
    """The offset just after the last complete line (where reading should resume)."""
    last_line: int
    """The number of the last complete line (the line before the first one if there is none)."""
    torn: bool
    """Whether bytes without a final newline follow ``end`` (a torn last line)."""
    blank_lines: tuple[int, ...] = ()
    """The numbers of the blank lines (skipped; allowed in format 1 files only)."""


def parse_chunk(data: bytes, *, offset: int, first_line: int, path: Path) -> Chunk:
    """Split ``data`` (read at ``offset``) into lines and decode each; see :class:`Chunk`.

    A complete line that is not a JSON object, or whose checksum fails, raises
    ``CorruptRecordError`` naming the line. Blank lines are skipped but counted.
    """
    lines: list[Line] = []
    blank: list[int] = []
    position = 0
    number = first_line - 1
    while True:
        newline = data.find(b"\n", position)
        if newline < 0:
            break
        number += 1
        raw = data[position:newline]
        if raw.strip():
            decoded, checked = parse_line(raw, path=path, number=number)
            lines.append(Line(number, offset + position, decoded, checked))
        else:
            blank.append(number)
        position = newline + 1
    return Chunk(lines, offset + position, number, position < len(data), tuple(blank))


def require_checksums(chunk: Chunk, path: Path) -> None:
    """Refuse a line without a checksum, or a blank line, in a file of format 2 or later."""
    unchecked = next((line.number for line in chunk.lines if not line.checked), None)
    first = min([*chunk.blank_lines, *([] if unchecked is None else [unchecked])], default=None)
    if first is None:
        return
    what = "an empty line" if first in chunk.blank_lines else "a line with no checksum"
    raise CorruptRecordError(
        f"{what}, in a file whose every line carries one: it was added or changed by another "
        "program",
        path=path,
        line=first,
    )


def read_chunk(path: Path, *, offset: int, first_line: int, end: int | None = None) -> Chunk:
    """Read the complete lines of ``path`` from ``offset`` (line ``first_line``) to its end.

    With ``end``, reading stops there (bytes after it are left alone, not reported torn).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_chunk_at(fd, path, offset=offset, first_line=first_line, end=end)
    finally:
        os.close(fd)


def read_chunk_at(
    fd: int, path: Path, *, offset: int, first_line: int, end: int | None = None
) -> Chunk:
    """:func:`read_chunk` through an open descriptor (the journal keeps one)."""
    size = os.fstat(fd).st_size
    if end is not None:
        size = min(size, end)
    parts = []
    position = offset
    while position < size:
        part = os.pread(fd, size - position, position)
        if not part:  # the file shrank meanwhile (it never does under the lock)
            break
        parts.append(part)
        position += len(part)
    return parse_chunk(b"".join(parts), offset=offset, first_line=first_line, path=path)


def append_lines(path: Path, data: bytes, *, expected_size: int, sync: bool) -> None:
    """Append whole lines to an existing file that must be ``expected_size`` bytes long.

    Raises ``StorageError`` (writing nothing) if it is not: the caller checked the file under
    the directory lock, so a difference means another program is writing to it.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        if size != expected_size:
            raise StorageError(
                f"{path} is {size} bytes, {expected_size} expected: another program is writing "
                "to it; stop it, then run JSONLBackend.repair()"
            )
        write_all(fd, data, start=size)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def append_journal(fd: int, data: bytes, *, sync: bool) -> None:
    """Append whole lines to the journal through its open ``O_APPEND`` descriptor."""
    write_all(fd, data, start=os.fstat(fd).st_size)
    if sync:
        os.fsync(fd)


def truncate(path: Path, size: int, *, sync: bool) -> None:
    """Cut ``path`` back to ``size`` bytes."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def make_private_dir(path: Path) -> None:
    """Create ``path`` and any missing parent (mode ``0700``) unless it exists."""
    files.make_private_dir(path)
