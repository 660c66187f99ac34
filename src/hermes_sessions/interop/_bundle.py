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
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import serde
from hermes_sessions._version import __version__
from hermes_sessions.cipher import require_plain_store
from hermes_sessions.exceptions import (
    CorruptRecordError,
    IncompatibleStoreError,
    InvalidSourceError,
    MemoryRefusedError,
)
from hermes_sessions.files import PRIVATE_FILE
from hermes_sessions.interop._report import BundleReport, ImportProblem
from hermes_sessions.models import Message, SessionEntry, SessionRecord, check_json
from hermes_sessions.queries import SessionQuery
from hermes_sessions.state import StateScope
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from hermes_sessions.memory import MemoryStore
    from hermes_sessions.protocols import Backend

__all__ = ["BUNDLE_FORMAT", "BUNDLE_VERSION", "export_bundle", "import_bundle"]

BUNDLE_FORMAT: Final = "hermes-sessions-bundle"
"""The ``format`` value of a bundle's header line.

.. versionadded:: 0.1.0
"""
BUNDLE_VERSION: Final = 1
"""The bundle version this library writes, and the newest it reads.

.. versionadded:: 0.1.0
"""


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
        out = _open(file, "w", stack)
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


def _open(file: Path | str | IO[str], mode: str, stack: ExitStack) -> IO[str]:
    if isinstance(file, (str, Path)):
        try:
            if mode == "r":
                return stack.enter_context(Path(file).open(mode, encoding="utf-8", newline="\n"))
            # a bundle holds whole transcripts: created private (0600), like every file we write
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
            return stack.enter_context(os.fdopen(fd, "w", encoding="utf-8", newline="\n"))
        except OSError as error:
            raise InvalidSourceError(
                f"cannot open {file} ({error.strerror}); check the path and its permissions",
                path=file,
            ) from error
    return file


def _check_header(line: str | None, where: str) -> None:
    try:
        header = json.loads(line) if line else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != BUNDLE_FORMAT:
        raise InvalidSourceError(
            f"{where} is not a hermes-sessions bundle (its first line has no "
            f"'format': '{BUNDLE_FORMAT}'); make one with `hermes-sessions export`",
            path=where,
        )
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidSourceError(f"{where} has an invalid bundle version {version!r}", path=where)
    if version > BUNDLE_VERSION:
        raise IncompatibleStoreError(
            f"bundle {where}", found_version=version, supported_version=BUNDLE_VERSION
        )


def import_bundle(
    store: SessionStore | Backend,
    file: Path | str | IO[str],
    *,
    memory: MemoryStore | None = None,
    progress: Callable[[int], None] | None = None,
) -> BundleReport:
    """Read a bundle into ``store``, merging by id: nothing in the target is overwritten.

    A session the target already holds is left alone: ``unchanged`` if it is identical, a
    ``conflict`` problem otherwise; the same for routing keys. Memory entries go into ``memory``
    when given (exact duplicates are skipped by the memory store). ``progress(n)`` is called
    after each session line. Importing the same bundle twice changes nothing.

    Raises:
        InvalidSourceError: the file is not a bundle.
        IncompatibleStoreError: the bundle is of a newer version than this library reads.
        EncryptionMismatchError: ``store`` is an encrypted store opened without its cipher.

    .. versionadded:: 0.1.0
    """
    backend = _backend(store)
    where = str(file) if isinstance(file, (str, Path)) else getattr(file, "name", "<stream>")
    state = _Import(backend=backend, memory=memory, where=where)
    with ExitStack() as stack:
        handle = _open(file, "r", stack)
        _check_header(handle.readline(), where)
        for number, line in enumerate(handle, start=1):
            state.line(number + 1, line)
            if progress is not None and state.last_type == "session":
                progress(len(state.sessions) + len(state.unchanged))
    if not state.ended:
        state.problem("truncated_bundle", where, "no end line: the bundle may be incomplete")
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
        self.ended = False
        self.last_type: str | None = None

    def problem(self, kind: str, where: str, detail: str) -> None:
        self.problems.append(ImportProblem(kind=kind, where=where, detail=detail))

    def line(self, number: int, text: str) -> None:
        place = f"{self.where}:{number}"
        self.last_type = None
        if not text.strip():
            return
        try:
            data = json.loads(text)
        except ValueError:
            torn = "truncated_line" if not text.endswith("\n") else "bad_line"
            self.problem(torn, place, "not a complete JSON line; skipped")
            return
        kind: object = data.get("type") if isinstance(data, dict) else None
        self.last_type = kind if isinstance(kind, str) else None
        try:
            if kind == "session":
                self._session(data, place)
            elif kind == "entry":
                self._entry(serde.structure(data.get("entry"), SessionEntry, path=place))
            elif kind == "memory":
                self._memory(data, place)
            elif kind == "state":
                self._state(data, place)
            elif kind == "end":
                self.ended = True
            else:
                self.problem("unknown_record", place, f"record type {kind!r} skipped")
        except CorruptRecordError as error:
            self.problem("bad_record", place, f"{error.reason}; skipped")

    def _session(self, data: dict[str, Any], place: str) -> None:
        record = serde.structure(data.get("session"), SessionRecord, path=place)
        raw = data.get("messages") or []
        if not isinstance(raw, list):
            raise CorruptRecordError("messages must be a list", path=place)
        messages = [serde.structure(item, Message, path=place) for item in raw]
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
            if self.backend.get_session(entry.session_id) is None:
                self.problem(
                    "bad_record",
                    entry.session_key,
                    f"points at {entry.session_id}, which is neither in the bundle nor the target",
                )
                return
            self.backend.put_entry(entry, expected_revision=None)
            self.entries.append(entry.session_key)
            return
        if serde.unstructure(_unversioned(current)) != serde.unstructure(_unversioned(entry)):
            self.problem(
                "conflict",
                entry.session_key,
                f"the key already points at {current.session_id} in the target; it was kept",
            )

    def _state(self, data: dict[str, Any], place: str) -> None:
        scope: object = data.get("scope")
        value: object = data.get("value")
        if not isinstance(scope, str) or not isinstance(value, dict) or not value:
            raise CorruptRecordError(
                "a state line needs 'scope' and a non-empty 'value'", path=place
            )
        try:
            check_json(value, f"state[{scope!r}]")
        except ValueError as error:
            raise CorruptRecordError(str(error), path=place) from error
        held = self.backend.get_state([scope]).get(scope)
        if held is None:
            self.backend.update_state({scope: value})
        elif held != value:
            self.problem(
                "conflict", scope, "the target holds other state in this scope; it was kept"
            )

    def _memory(self, data: dict[str, Any], place: str) -> None:
        target: object = data.get("target")
        items: object = data.get("entries")
        if not isinstance(target, str) or not isinstance(items, list):
            raise CorruptRecordError("a memory line needs 'target' and 'entries'", path=place)
        if self.memory is None:
            return
        for item in items:
            try:
                result = self.memory.add(target, str(item))
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
