"""A storage backend written from scratch: plain JSON files in a directory.

``FileBackend`` keeps one file per session (its record and messages), one for the routing
entries, one for state and one for leases. Every call takes a lock (a thread lock and a file
lock, so several processes may share the directory) and reads what it needs from the files;
every write is one commit: the new contents of each file it changes go to ``journal.json``
first, then to the files, then the journal is removed. A crash part-way leaves the journal,
which the next call replays, so a commit is all or nothing. The rules every backend applies
the same way come from ``hermes_sessions.backends.authoring``; ``tests/test_examples.py``
runs the whole conformance suite on this class. ``docs/backends.md`` walks through it.
"""

from __future__ import annotations

import contextlib
import json
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import filelock

from hermes_sessions import SessionSource, SessionStore
from hermes_sessions.backends import authoring as kit

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

JOURNAL = "journal.json"
LIMIT = kit.DEFAULT_MAX_MESSAGE_BYTES  # the largest message, in bytes of its JSON form (16 MiB)


def _dump_transcript(transcript: kit.Transcript) -> dict[str, Any]:
    messages = [kit.unstructure(m) for m in transcript.messages.values()]
    return {
        "record": kit.unstructure(transcript.record),
        "messages": messages,
        "next": transcript.next_id,
    }


def _load_transcript(data: dict[str, Any]) -> kit.Transcript:
    messages = {m.id or 0: m for m in (kit.structure(m, kit.Message) for m in data["messages"])}
    by_platform_id = {
        m.platform_message_id: i for i, m in messages.items() if m.platform_message_id
    }
    record = kit.structure(data["record"], kit.SessionRecord)
    return kit.Transcript(record, messages, by_platform_id, data["next"])


class FileBackend(kit.ClosesOnExit):
    """Sessions, entries, state and leases as JSON files under ``root``; crash-safe, shared."""

    def __init__(self, root: Path) -> None:
        self.root = root
        kit.make_private_dir(root / "sessions")
        self._thread_lock = threading.RLock()
        self._file_lock = filelock.FileLock(root / "lock", mode=0o600)
        self._closed = False

    def capabilities(self) -> kit.Capabilities:
        """Everything is on disk, and a file lock lets processes share it."""
        return kit.Capabilities(persistent=True, multiprocess=True)

    def close(self) -> None:
        """Later calls raise ``BackendClosedError`` (there is nothing held open between calls)."""
        self._closed = True

    # -- files: every call reads under the lock; every write is one journaled commit ---------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock, self._file_lock:
            if self._closed:
                raise kit.BackendClosedError(f"file backend at {self.root}")
            journal = self.root / JOURNAL
            if journal.exists():  # a writer crashed mid-commit: finish its commit
                self._write_files(json.loads(journal.read_bytes()))
                journal.unlink()
            yield

    def _commit(self, files: dict[str, Any]) -> None:
        """Write the new contents of every file (``None``: remove it), all or none."""
        kit.replace_file(self.root / JOURNAL, kit.compact_json(files).encode())
        self._write_files(files)
        (self.root / JOURNAL).unlink()

    def _write_files(self, files: dict[str, Any]) -> None:
        for name, content in files.items():
            if content is None:
                (self.root / name).unlink(missing_ok=True)
            else:
                kit.replace_file(self.root / name, kit.compact_json(content).encode())

    def _read(self, name: str) -> Any:
        path = self.root / name
        return json.loads(path.read_bytes()) if path.exists() else None

    @staticmethod
    def _name(session_id: str) -> str:
        return f"sessions/{kit.validate_session_id(session_id)}.json"  # a crafted id never escapes

    def _table(self) -> kit.EntryTable:
        table = kit.EntryTable()
        for data in (self._read("entries.json") or {}).values():
            table.put(kit.structure(data, kit.SessionEntry))
        return table

    @staticmethod
    def _table_file(table: kit.EntryTable) -> dict[str, Any]:
        return {"entries.json": {e.session_key: kit.unstructure(e) for e in table.listing()}}

    def _find(self, session_id: str) -> kit.Transcript | None:
        data = self._read(self._name(session_id))
        return None if data is None else _load_transcript(data)

    def _transcript(self, session_id: str) -> kit.Transcript:
        transcript = self._find(session_id)
        if transcript is None:
            raise kit.missing_session(session_id)
        return transcript

    def _transcripts(self) -> list[kit.Transcript]:
        paths = sorted((self.root / "sessions").glob("*.json"))
        return [_load_transcript(json.loads(path.read_bytes())) for path in paths]

    def _session_file(self, transcript: kit.Transcript) -> dict[str, Any]:
        return {self._name(transcript.record.id): _dump_transcript(transcript)}

    def _save(self, transcript: kit.Transcript) -> None:
        self._commit(self._session_file(transcript))

    # -- routing index -----------------------------------------------------------------------------

    def get_entry(self, key: str) -> kit.SessionEntry | None:
        """The entry of ``key``, or ``None``."""
        with self._locked():
            return self._table().get(key)

    def put_entry(
        self, entry: kit.SessionEntry, *, expected_revision: int | None
    ) -> kit.SessionEntry:
        """Compare-and-swap: store ``entry`` if the key is still at ``expected_revision``."""
        with self._locked():
            table = self._table()
            table.check_revision(entry.session_key, expected_revision)
            if self._find(entry.session_id) is None:
                raise kit.missing_session(entry.session_id)
            stored = table.store(entry, expected_revision)
            self._commit(self._table_file(table))
            return stored

    def delete_entry(self, key: str, *, expected_revision: int) -> None:
        """Remove the entry of ``key`` if it is still at ``expected_revision``."""
        with self._locked():
            table = self._table()
            table.check_revision(key, expected_revision)
            table.delete(key)
            self._commit(self._table_file(table))

    def entries(self, *, session_id: str | None = None) -> list[kit.SessionEntry]:
        """All entries, or those pointing at ``session_id``, in key order."""
        with self._locked():
            return self._table().listing(session_id)

    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> kit.SessionEntry | None:
        """Move the entry's ``updated_at`` forward (no revision check, no revision bump)."""
        with self._locked():
            table = self._table()
            touched = table.touch(key, at, last_prompt_tokens)
            if touched is not None:
                self._commit(self._table_file(table))
            return touched

    # -- sessions ----------------------------------------------------------------------------------

    def create_session(self, record: kit.SessionRecord) -> kit.SessionRecord:
        """Store a new session; an existing id returns the stored record unchanged."""
        with self._locked():
            existing = self._find(record.id)
            if existing is not None:
                return existing.record
            stored = kit.fresh_record(record)
            kit.check_title_free(stored, (t.record for t in self._transcripts()))
            self._save(kit.Transcript(stored))
            return stored

    def get_session(self, session_id: str) -> kit.SessionRecord | None:
        """The record of ``session_id``, or ``None``."""
        with self._locked():
            transcript = self._find(session_id)
            return None if transcript is None else transcript.record

    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> kit.SessionRecord:
        """Set fields and add to counters in one commit."""
        changes, amounts = kit.check_update(values, increments)
        with self._locked():
            transcript = self._transcript(session_id)
            transcript.record = kit.apply_update(transcript.record, changes, amounts)
            if "title" in changes:
                kit.check_title_free(transcript.record, (t.record for t in self._transcripts()))
            self._save(transcript)
            return transcript.record

    def end_session(self, session_id: str, reason: str, *, at: datetime) -> kit.SessionRecord:
        """End a session; the first reason and time stay."""
        with self._locked():
            transcript = self._transcript(session_id)
            if transcript.record.end_reason is None:
                transcript.record = attrs.evolve(transcript.record, end_reason=reason, ended_at=at)
                self._save(transcript)
            return transcript.record

    def reopen_session(self, session_id: str) -> kit.SessionRecord:
        """Clear a session's end."""
        with self._locked():
            transcript = self._transcript(session_id)
            transcript.record = attrs.evolve(transcript.record, end_reason=None, ended_at=None)
            self._save(transcript)
            return transcript.record

    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its messages and its state; its children lose their parent."""
        with self._locked():
            if self._find(session_id) is None:
                return False
            files: dict[str, Any] = {self._name(session_id): None}
            for child in self._transcripts():
                if child.record.parent_session_id == session_id:
                    child.record = attrs.evolve(child.record, parent_session_id=None)
                    files |= self._session_file(child)
            state = self._read("state.json") or {}
            if state.pop(kit.session_scope(session_id), None) is not None:
                files["state.json"] = state
            self._commit(files)
            return True

    def list_sessions(self, query: kit.SessionQuery) -> kit.SessionPage:
        """One page of sessions: the shared rule over every session file."""
        with self._locked():
            return kit.session_page(query, self._transcripts())

    # -- messages ----------------------------------------------------------------------------------

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[kit.Message],
        *,
        touch_at: datetime | None = None,
        usage: kit.Usage | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
        if_revision: int | None = None,
    ) -> kit.AppendResult:
        """Append in one commit, idempotent by platform message id (the redelivery rule)."""
        kit.check_message_sizes(messages, LIMIT)
        with self._locked():
            transcript = self._transcript(session_id)
            plan = transcript.prepare(messages)
            if not plan.result.duplicate:
                kit.check_session_revision(session_id, if_revision, transcript.record.revision)
                files = self._state_files(state or {})
                transcript.add(plan.new)
                transcript.bump(kit.revision_step(bool(plan.new), files))
                if usage is not None:
                    record = kit.apply_update(transcript.record, usage.values(), usage.increments())
                    transcript.record = record
                if touch_at is not None:
                    table = self._table()
                    for key in list(table.keys_of(session_id)):
                        table.touch(key, touch_at)
                    files |= self._table_file(table)
                self._commit(files | self._session_file(transcript))
            return attrs.evolve(plan.result, revision=transcript.record.revision)

    def get_messages(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        include_inactive: bool = False,
        from_end: bool = False,
    ) -> list[kit.Message]:
        """Messages in insertion order, optionally a window of them."""
        with self._locked():
            return self._transcript(session_id).select(
                after_id=after_id,
                before_id=before_id,
                limit=limit,
                include_inactive=include_inactive,
                from_end=from_end,
            )

    def get_message(self, session_id: str, message_id: int) -> kit.Message | None:
        """One message, active or not, or ``None``."""
        with self._locked():
            transcript = self._find(session_id)
            return None if transcript is None else transcript.messages.get(message_id)

    def find_message(self, session_id: str, platform_message_id: str) -> kit.Message | None:
        """The message with this platform id, active or not, or ``None``."""
        with self._locked():
            transcript = self._find(session_id)
            message_id = (
                None if transcript is None else transcript.by_platform_id.get(platform_message_id)
            )
            return (
                None
                if transcript is None or message_id is None
                else transcript.messages[message_id]
            )

    def replace_message(
        self, session_id: str, message_id: int, message: kit.Message
    ) -> kit.Message:
        """An edit: new fields, same id."""
        kit.check_message_sizes([message], LIMIT)
        with self._locked():
            transcript = self._transcript(session_id)
            new = transcript.replace(message_id, message)
            transcript.bump()
            self._save(transcript)
            return new

    def replace_messages(
        self, session_id: str, messages: Sequence[kit.Message]
    ) -> list[kit.Message]:
        """Swap the whole transcript (new ids)."""
        kit.check_message_sizes(messages, LIMIT)
        with self._locked():
            transcript = self._transcript(session_id)
            transcript.clear()
            plan = transcript.prepare(messages)
            transcript.add(plan.new)
            transcript.bump()
            self._save(transcript)
            return list(plan.result)

    def set_active(self, session_id: str, message_ids: Sequence[int], *, active: bool) -> int:
        """Soft-delete or restore messages; how many changed."""
        with self._locked():
            transcript = self._transcript(session_id)
            changed = len(transcript.set_active(message_ids, active=active))
            if changed:
                transcript.bump()
                self._save(transcript)
            return changed

    def delete_messages(self, session_id: str, message_ids: Sequence[int]) -> int:
        """Delete messages for good; how many were deleted."""
        with self._locked():
            transcript = self._transcript(session_id)
            deleted = len(transcript.delete(message_ids))
            if deleted:
                transcript.bump()
                self._save(transcript)
            return deleted

    # -- state -------------------------------------------------------------------------------------

    def _state_files(self, changes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """``state.json`` after merging ``changes`` (raises before anything is written)."""
        if not changes:
            return {}
        state: dict[str, Any] = self._read("state.json") or {}
        state |= kit.merged_states(changes, state)
        return {"state.json": {scope: value for scope, value in state.items() if value}}

    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The value of every scope in ``scope_ids`` that holds one."""
        with self._locked():
            state = self._read("state.json") or {}
            return {scope_id: state[scope_id] for scope_id in scope_ids if scope_id in state}

    def state_scopes(self) -> list[str]:
        """Every scope id holding a value, sorted (``SupportsStateScopes``)."""
        with self._locked():
            return sorted(self._read("state.json") or {})

    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> kit.SessionRecord | None:
        """Merge ``changes`` in one commit; through a session, check and bump its revision."""
        kit.check_state_target(session_id, if_revision)
        with self._locked():
            transcript = None if session_id is None else self._transcript(session_id)
            files = self._state_files(changes)
            if transcript is not None:
                kit.check_session_revision(
                    transcript.record.id, if_revision, transcript.record.revision
                )
                transcript.bump()
                files |= self._session_file(transcript)
            self._commit(files)
            return None if transcript is None else transcript.record

    # -- the atomic rotation -----------------------------------------------------------------------

    def apply(self, plan: kit.RotationPlan) -> list[kit.SessionEntry]:
        """Check every precondition, then write every changed file in one commit."""
        kit.check_message_sizes(plan.messages, LIMIT)
        with self._locked():
            table = self._table()
            sessions = {t.record.id: t for t in self._transcripts()}
            resolved = kit.resolve_plan(  # checks the plan, changing nothing
                plan, table, lambda i: sessions[i].record if i in sessions else None
            )
            files: dict[str, Any] = {}
            changed: set[str] = {*plan.reopen, *(i for i, _ in plan.rekey)}
            if plan.create is not None:
                files |= self._create(plan, plan.create, sessions)
                changed.add(plan.create.id)
            for session_id in plan.reopen:
                record = sessions[session_id].record
                sessions[session_id].record = attrs.evolve(record, end_reason=None, ended_at=None)
            for key in resolved.deleted:
                table.delete(key)
            for entry in resolved.written:
                table.put(entry)
            for session_id, key in plan.rekey:
                record = sessions[session_id].record
                sessions[session_id].record = attrs.evolve(record, session_key=key)
            for session_id, reason in resolved.end:  # the first reason wins
                record = sessions[session_id].record
                if record.end_reason is None:
                    ended = attrs.evolve(record, end_reason=reason, ended_at=plan.at)
                    sessions[session_id].record = ended
                    changed.add(session_id)
            files |= self._drop(plan, sessions, changed, files)
            for session_id in changed:
                files |= self._session_file(sessions[session_id])
            self._commit(files | self._table_file(table))
            return resolved.written

    def _create(
        self,
        plan: kit.RotationPlan,
        record: kit.SessionRecord,
        sessions: dict[str, kit.Transcript],
    ) -> dict[str, Any]:
        """Add the plan's new session to ``sessions``; ``state.json`` if it copies state."""
        created = kit.Transcript(kit.fresh_record(record))
        kit.check_title_free(created.record, (t.record for t in sessions.values()))
        source = sessions.get(plan.copy_messages_from or "")
        copied = [] if source is None else source.active()
        created.add(created.prepare(kit.first_messages(plan, copied)).new)
        sessions[record.id] = created
        state = self._read("state.json") or {}
        if plan.copy_state_from is None or kit.session_scope(plan.copy_state_from) not in state:
            return {}
        value = state[kit.session_scope(plan.copy_state_from)]
        return {"state.json": state | {kit.session_scope(record.id): value}}

    def _drop(
        self,
        plan: kit.RotationPlan,
        sessions: dict[str, kit.Transcript],
        changed: set[str],
        files: dict[str, Any],
    ) -> dict[str, Any]:
        """The files the plan's drops change; each goes with its state, its children orphaned.

        ``resolve_plan`` checked the drops with the rest: unreferenced and unchanged.
        """
        dropped: dict[str, Any] = {}
        state = files.get("state.json") or self._read("state.json") or {}
        for session_id, _ in plan.drop:
            del sessions[session_id]
            changed.discard(session_id)
            dropped[self._name(session_id)] = None
            if state.pop(kit.session_scope(session_id), None) is not None:
                dropped["state.json"] = state
            for child in sessions.values():
                if child.record.parent_session_id == session_id:
                    child.record = attrs.evolve(child.record, parent_session_id=None)
                    changed.add(child.record.id)
        return dropped

    # -- leases, search and check ------------------------------------------------------------------

    def acquire_lease(self, resource: str, holder: str, *, ttl: timedelta, now: datetime) -> bool:
        """Take or renew an exclusive lease until ``now + ttl``."""
        with self._locked():
            leases = self._read("leases.json") or {}
            current = leases.get(resource)
            held = None if current is None else (current[0], datetime.fromisoformat(current[1]))
            if not kit.lease_is_free(held, holder, now):
                return False
            leases[resource] = [holder, (now + ttl).isoformat()]
            self._commit({"leases.json": leases})
            return True

    def release_lease(self, resource: str, holder: str) -> None:
        """Release ``holder``'s lease on ``resource`` (a no-op for anyone else)."""
        with self._locked():
            leases = self._read("leases.json") or {}
            if leases.get(resource, [None])[0] == holder:
                del leases[resource]
                self._commit({"leases.json": leases})

    def search(self, query: kit.SearchQuery) -> list[kit.SearchHit]:
        """Search with the shared text engine, over an index built for this one query."""
        with self._locked():
            transcripts = {t.record.id: t for t in self._transcripts()}
            index = kit.MessageIndex()
            for transcript in transcripts.values():
                for message in transcript.messages.values():
                    index.add(message)
            return index.search(query, transcripts.__getitem__)

    def check(self) -> kit.CheckReport:
        """The library's invariants, checked through the methods above."""
        with self._locked():
            return kit.make_report(self)


def main() -> None:
    """Run one turn of a store on a file backend, then read it back from the files."""
    root = Path("custom-backend-data")
    with SessionStore(FileBackend(root)) as store:
        lookup = store.get_or_create(SessionSource(platform="cli", chat_id="demo"))
        store.append(lookup.session_id, kit.Message(role="user", content="hello"))
    with SessionStore(FileBackend(root)) as store:
        (message,) = store.transcript(lookup.session_id)
        print(f"read back after reopening: {message.content!r}")
    print(f"files: {sorted(str(p.relative_to(root)) for p in root.rglob('*.json'))}")


if __name__ == "__main__":
    main()
