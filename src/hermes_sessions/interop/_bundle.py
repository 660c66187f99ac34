"""Portable bundles: a versioned JSON Lines file of sessions, messages, routing and memory.

The format (``docs/cli.md`` has the details)::

    {"format": "hermes-sessions-bundle", "version": 1, "created_at": "...Z", "generator": "..."}
    {"type": "session", "session": {...record...}, "messages": [{...}, ...]}
    {"type": "entry", "entry": {...routing entry...}}
    {"type": "state", "scope": "lane|agent:main:...", "value": {...}}
    {"type": "memory", "target": "memory", "entries": ["...", ...]}
    {"type": "end", "sessions": 2, "entries": 1}

Records, entries and messages are written by the library's one converter
(:mod:`hermes_sessions.serde`), so every field — unknown message fields in ``extra`` included —
round-trips. ``state`` lines carry the state of the exported sessions' scopes: each session's
own, its key's lane (and every exported entry's), its user's and the app's (the store's key
namespace; ``main`` for a bare backend). Importing sets a scope the target does not hold and
reports a ``conflict`` for one it holds differently (the target's value is kept). A reader meets
a record type it does not know by reporting it (``unknown_record``) and going on, so a version-1
reader can read a version-1 bundle that gained a record type (the ``state`` type came this way).
A bundle with a higher ``version`` is refused. Message ids are assigned again by the target
backend (insertion order is kept), and so are session revisions.

Importing reads the bundle twice: once to check every line (``_bundle_lines``), writing
nothing, then to write. A damaged bundle is refused whole, naming its line.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from hermes_sessions import serde
from hermes_sessions._version import __version__
from hermes_sessions.cipher import require_plain_store
from hermes_sessions.exceptions import InvalidSourceError, MemoryRefusedError
from hermes_sessions.files import PRIVATE_FILE
from hermes_sessions.interop._bundle_lines import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    EntryLine,
    Line,
    MemoryLine,
    SessionLine,
    StateLine,
    UnknownLine,
    check_bundle,
    held_lines,
    records,
)
from hermes_sessions.interop._report import BundleReport, ImportProblem
from hermes_sessions.queries import SessionQuery
from hermes_sessions.state import StateScope
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from hermes_sessions.memory import MemoryStore
    from hermes_sessions.models import Message, SessionEntry, SessionRecord
    from hermes_sessions.protocols import Backend

__all__ = ["BUNDLE_FORMAT", "BUNDLE_VERSION", "export_bundle", "import_bundle"]


def _backend(store: SessionStore | Backend) -> Backend:
    """The backend of ``store``; an encrypted store read without its cipher is refused."""
    backend = store.backend if isinstance(store, SessionStore) else store
    require_plain_store(backend)  # nothing in the clear into it, no ciphertext out of it
    return backend


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def _message_out(message: Message) -> dict[str, Any]:
    data = serde.unstructure(message)
    data.pop("id", None)
    data.pop("session_id", None)
    return data


def export_bundle(
    store: SessionStore | Backend,
    file: Path | str | IO[str],
    *,
    session_ids: Sequence[str] | None = None,
    memory: MemoryStore | None = None,
    now: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> BundleReport:
    """Write the sessions of ``store`` (all, or ``session_ids``) to a bundle.

    Routing entries go with the sessions they point at. ``memory``, when given, adds its entries.
    ``file`` is a path or an open text file (``-`` is not special here; the CLI handles it).
    ``now`` (an aware datetime) stamps the header; default: the current time.

    Raises:
        SessionNotFoundError: one of ``session_ids`` does not exist.

    .. versionadded:: 0.1.0
    """
    from hermes_sessions.clock import SystemClock  # noqa: PLC0415  # only when exporting
    from hermes_sessions.exceptions import SessionNotFoundError  # noqa: PLC0415

    backend = _backend(store)
    if session_ids is None:
        page = backend.list_sessions(SessionQuery(limit=None, order="started", descending=False))
        records = [item.record for item in page.items]
    else:
        records = []
        for session_id in session_ids:
            record = backend.get_session(session_id)
            if record is None:
                raise SessionNotFoundError(session_id=session_id)
            records.append(record)
    wanted = {record.id for record in records}
    entries = [entry for entry in backend.entries() if entry.session_id in wanted]
    stamp = now if now is not None else SystemClock().now()
    header = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "created_at": serde.dump_datetime(stamp),
        "generator": f"hermes-sessions {__version__}",
    }
    messages = 0
    memory_entries = 0
    with ExitStack() as stack:
        out = _open_out(file, stack)
        out.write(_dumps(header))
        for done, record in enumerate(records, start=1):
            transcript = backend.get_messages(record.id, include_inactive=True)
            messages += len(transcript)
            line = {
                "type": "session",
                "session": serde.unstructure(record),
                "messages": [_message_out(m) for m in transcript],
            }
            out.write(_dumps(line))
            if progress is not None:
                progress(done, len(records))
        for entry in entries:
            out.write(_dumps({"type": "entry", "entry": serde.unstructure(entry)}))
        for scope, value in _states(store, backend, records, entries).items():
            out.write(_dumps({"type": "state", "scope": scope, "value": value}))
        if memory is not None:
            for target in ("memory", "user"):
                items = list(memory.entries(target))
                memory_entries += len(items)
                out.write(_dumps({"type": "memory", "target": target, "entries": items}))
        out.write(_dumps({"type": "end", "sessions": len(records), "entries": len(entries)}))
    return BundleReport(
        sessions=[record.id for record in records],
        unchanged=(),
        messages=messages,
        entries=[entry.session_key for entry in entries],
        memory_entries=memory_entries,
        problems=(),
    )


def _states(
    store: SessionStore | Backend,
    backend: Backend,
    records: Sequence[SessionRecord],
    entries: Sequence[SessionEntry],
) -> dict[str, dict[str, Any]]:
    """The state of every scope the exported sessions see, in a stable order."""
    app = store.keys.namespace if isinstance(store, SessionStore) else "main"
    scopes = [StateScope.app(app).id]
    for record in records:
        scopes.append(StateScope.session(record.id).id)
        if record.session_key:
            scopes.append(StateScope.lane(record.session_key).id)
        if record.user_id:
            scopes.append(StateScope.user(app, record.source, record.user_id).id)
    scopes += [StateScope.lane(entry.session_key).id for entry in entries]
    found = backend.get_state(list(dict.fromkeys(scopes)))
    return {scope: found[scope] for scope in sorted(found)}


def _open_out(file: Path | str | IO[str], stack: ExitStack) -> IO[str]:
    if isinstance(file, (str, Path)):
        try:
            # a bundle holds whole transcripts: created private (0600), like every file we write
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
            return stack.enter_context(os.fdopen(fd, "w", encoding="utf-8", newline="\n"))
        except OSError as error:
            raise InvalidSourceError(
                f"cannot open {file} ({error.strerror}); check the path and its permissions",
                path=file,
            ) from error
    return file


def _lines(file: Path | str | IO[str] | IO[bytes], stack: ExitStack) -> Iterable[bytes | str]:
    """The bundle's lines; a path is read as bytes, so text that is not UTF-8 names its line."""
    if isinstance(file, (str, Path)):
        try:
            return stack.enter_context(Path(file).open("rb"))
        except OSError as error:
            raise InvalidSourceError(
                f"cannot open {file} ({error.strerror}); check the path and its permissions",
                path=file,
            ) from error
    return file


def import_bundle(
    store: SessionStore | Backend,
    file: Path | str | IO[str] | IO[bytes],
    *,
    memory: MemoryStore | None = None,
    progress: Callable[[int], None] | None = None,
) -> BundleReport:
    """Read a bundle into ``store``, merging by id: nothing in the target is overwritten.

    The whole bundle is checked before anything is written, and a damaged one is refused
    whole: text that is not UTF-8, a line that is not JSON or nested too deeply, a record the
    models refuse, a routing key or state scope that is not one, a session or key twice, an end
    line whose counts disagree with the lines (or lines after it, or no end line), a routing
    entry pointing at a session in neither the bundle nor the target. A record type this
    version does not know is reported (``unknown_record``) and skipped.

    A session the target already holds is left alone: ``unchanged`` if it is identical, a
    ``conflict`` problem otherwise; the same for routing keys and state. Memory entries go into
    ``memory`` when given (exact duplicates are skipped by the memory store). ``progress(n)`` is
    called after each session written. Importing the same bundle twice changes nothing.

    ``file`` is a path, or an open file in text or binary mode; an open file is held in memory
    between the check and the writing, so give a path for a large bundle.

    Raises:
        InvalidSourceError: the file is not a bundle, or is damaged (``line`` names the line).
        IncompatibleStoreError: the bundle is of a newer version than this library reads.
        EncryptionMismatchError: ``store`` is an encrypted store opened without its cipher.

    .. versionadded:: 0.1.0
    """
    backend = _backend(store)
    where = str(file) if isinstance(file, (str, Path)) else getattr(file, "name", "<stream>")
    state = _Import(backend=backend, memory=memory, where=where)
    with ExitStack() as stack:
        first = _lines(file, stack)
        if isinstance(file, (str, Path)):
            check_bundle(first, where, backend)
            lines: Iterable[bytes | str] = _lines(file, stack)
        else:
            held = held_lines(first, where)
            check_bundle(held, where, backend)
            lines = held
        for number, line in records(lines, where):
            state.write(number, line)
            if progress is not None and isinstance(line, SessionLine):
                progress(len(state.sessions) + len(state.unchanged))
    return BundleReport(
        sessions=state.sessions,
        unchanged=state.unchanged,
        messages=state.messages,
        entries=state.entries,
        memory_entries=state.memory_entries,
        problems=state.problems,
    )


class _Import:
    def __init__(self, *, backend: Backend, memory: MemoryStore | None, where: str) -> None:
        self.backend = backend
        self.memory = memory
        self.where = where
        self.sessions: list[str] = []
        self.unchanged: list[str] = []
        self.entries: list[str] = []
        self.messages = 0
        self.memory_entries = 0
        self.problems: list[ImportProblem] = []

    def problem(self, kind: str, where: str, detail: str) -> None:
        self.problems.append(ImportProblem(kind=kind, where=where, detail=detail))

    def write(self, number: int, line: Line) -> None:
        if isinstance(line, SessionLine):
            self._session(line.record, line.messages)
        elif isinstance(line, EntryLine):
            self._entry(line.entry)
        elif isinstance(line, MemoryLine):
            self._memory(line.target, line.entries)
        elif isinstance(line, StateLine):
            self._state(line.scope, line.value)
        elif isinstance(line, UnknownLine):
            self.problem(
                "unknown_record", f"{self.where}:{number}", f"record type {line.kind!r} skipped"
            )

    def _session(self, record: SessionRecord, messages: list[Message]) -> None:
        existing = self.backend.get_session(record.id)
        if existing is None:
            self.backend.create_session(record)
            if messages:
                self.backend.append_messages(record.id, messages)
            self.sessions.append(record.id)
            self.messages += len(messages)
            return
        held = self.backend.get_messages(record.id, include_inactive=True)
        if serde.unstructure(_unrevised(existing)) == serde.unstructure(_unrevised(record)) and [
            _message_out(m) for m in held
        ] == [_message_out(m) for m in messages]:
            self.unchanged.append(record.id)
            return
        self.problem(
            "conflict",
            record.id,
            "the target holds a different session under this id; it was kept, the bundle's "
            "copy skipped",
        )

    def _entry(self, entry: SessionEntry) -> None:
        current = self.backend.get_entry(entry.session_key)
        if current is None:
            self.backend.put_entry(entry, expected_revision=None)
            self.entries.append(entry.session_key)
            return
        if serde.unstructure(_unversioned(current)) != serde.unstructure(_unversioned(entry)):
            self.problem(
                "conflict",
                entry.session_key,
                f"the key already points at {current.session_id} in the target; it was kept",
            )

    def _state(self, scope: str, value: dict[str, Any]) -> None:
        held = self.backend.get_state([scope]).get(scope)
        if held is None:
            self.backend.update_state({scope: value})
        elif held != value:
            self.problem(
                "conflict", scope, "the target holds other state in this scope; it was kept"
            )

    def _memory(self, target: str, items: list[str]) -> None:
        if self.memory is None:
            return
        for item in items:
            try:
                result = self.memory.add(target, item)
            except MemoryRefusedError as error:
                self.problem("memory_refused", target, str(error))
            else:
                self.memory_entries += int(result.changed)


def _unrevised(record: SessionRecord) -> SessionRecord:
    """``record`` as imported: its revision starts again in the receiving store."""
    return attrs.evolve(record, revision=0)


def _unversioned(entry: SessionEntry) -> SessionEntry:
    """``entry`` as imported: its revision starts again in the receiving store."""
    return attrs.evolve(entry, revision=0)
