"""SessionStore: the session lifecycle on top of any backend.

The store turns an inbound message's :class:`~hermes_sessions.models.SessionSource` into a key,
evaluates the reset policy lazily (once, in :meth:`SessionStore.get_or_create`), and performs every
change of a key's session — automatic resets, ``/new``, resume, branch, compression — as one
:class:`~hermes_sessions.protocols.RotationPlan` that the backend applies atomically. Races between
threads, processes or hosts surface as :class:`~hermes_sessions.exceptions.ConflictError` inside
the store, which re-reads and decides again; callers see one session per key.

Time comes from an injected clock; nothing here calls ``datetime.now()`` directly.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from hermes_sessions.clock import SystemClock
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import (
    ConflictError,
    LeaseHeldError,
    SessionNotFoundError,
    TitleConflictError,
)
from hermes_sessions.ids import new_session_id, validate_session_id
from hermes_sessions.keys import KeyPolicy
from hermes_sessions.models import (
    Message,
    ResetDecision,
    SessionEntry,
    SessionRecord,
    stamped,
)
from hermes_sessions.policy import ResetPolicies, evaluate_reset
from hermes_sessions.protocols import Backend, Clock, EntryWrite, RotationPlan
from hermes_sessions.store._views import StoreViews
from hermes_sessions.titles import MAX_TITLE_LENGTH, next_title_in_lineage, sanitize_title

if TYPE_CHECKING:
    from hermes_sessions.models import SessionSource

__all__ = ["RotateEvent", "SessionLookup", "SessionStore"]

logger = logging.getLogger(__name__)

MAX_ATTEMPTS: Final = 16
"""How often an operation re-reads and retries after losing a compare-and-swap race."""

BRANCH_MARKER: Final = "_branched_from"
"""Key in a branch's ``model_config`` naming the session it was copied from (as Hermes does)."""

DEFAULT_LEASE_TTL: Final = timedelta(minutes=10)


@attrs.frozen(kw_only=True)
class SessionLookup:
    """What :meth:`SessionStore.get_or_create` found.

    ``created`` is true on first contact, after an automatic reset and with ``force_new``;
    ``reset`` says why an automatic reset happened (``idle``, ``daily`` or ``suspended``).

    .. versionadded:: 0.1.0
    """

    entry: SessionEntry
    created: bool
    reset: ResetDecision | None = None

    @property
    def session_id(self) -> str:
        """The current session id of the key."""
        return self.entry.session_id


@attrs.frozen(kw_only=True)
class RotateEvent:
    """A key's session id changed (passed to ``on_rotate`` callbacks).

    .. versionadded:: 0.1.0
    """

    session_key: str
    old_session_id: str | None
    new_session_id: str
    reason: str
    """``idle``, ``daily``, ``suspended``, ``session_reset``, ``session_switch``, ``branched``
    or ``compression``."""


def _identity(message: Message) -> Message:
    return message


@attrs.define(eq=False)
class SessionStore(StoreViews, ClosesOnExit):
    """The session lifecycle: keys, resets, transcripts, resume, branch, compress, search.

    Args:
        backend: Where sessions live (``SQLiteBackend``, ``JSONLBackend``, ``InMemoryBackend``,
            or your own). Available afterwards as ``store.backend``.
        keys: How session keys are built.
        resets: Which reset policy governs which conversation.
        clock: Where the time comes from (inject ``testing.FrozenClock`` in tests).
        active_work: ``key -> bool``: whether background work runs for a key (blocks expiry
            within the policy's ``max_active_work_age``). Called only when a reset would happen.
        redact: Applied to every message before it is stored or indexed (secrets, PII).
        lease_ttl: How long a compression lease lasts.

    .. versionadded:: 0.1.0
    """

    backend: Backend
    keys: KeyPolicy = attrs.field(factory=KeyPolicy, kw_only=True)
    resets: ResetPolicies = attrs.field(factory=ResetPolicies, kw_only=True)
    clock: Clock = attrs.field(factory=SystemClock, kw_only=True)
    active_work: Callable[[str], bool] | None = attrs.field(default=None, kw_only=True)
    redact: Callable[[Message], Message] = attrs.field(default=_identity, kw_only=True)
    lease_ttl: timedelta = attrs.field(default=DEFAULT_LEASE_TTL, kw_only=True)
    _rotate_callbacks: list[Callable[[RotateEvent], None]] = attrs.field(factory=list, init=False)

    def __repr__(self) -> str:
        return f"<SessionStore on {self.backend!r}>"

    @classmethod
    def open(
        cls,
        home: Path | str | None = None,
        backend: Literal["sqlite", "jsonl", "memory", "postgres"] = "sqlite",
        *,
        dsn: str | None = None,
        **options: Any,
    ) -> SessionStore:
        """Open a store under ``home`` (default: :func:`~hermes_sessions.paths.default_home`).

        ``sqlite`` (the default) keeps ``<home>/state.db``; ``jsonl`` keeps one file per session
        in ``<home>/sessions/``, with its journal beside it; ``memory`` keeps nothing;
        ``postgres`` connects to ``dsn`` (default: ``$HERMES_SESSIONS_DSN``) instead of a home.
        ``options`` go to the store's constructor.
        """
        from hermes_sessions.backends import open_backend  # noqa: PLC0415  # backends load lazily

        opened = open_backend(backend, None if home is None else Path(home), dsn=dsn)
        return cls(opened, **options)

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the backend."""
        self.backend.close()

    def on_rotate(self, callback: Callable[[RotateEvent], None]) -> Callable[[RotateEvent], None]:
        """Call ``callback`` after any key's session id changes; usable as a decorator.

        Hosts drop per-session state there (cached agents, sandboxes). A callback that raises is
        logged and does not affect the rotation, which has already happened, or other callbacks.
        """
        self._rotate_callbacks.append(callback)
        return callback

    def _notify(self, events: Sequence[RotateEvent]) -> None:
        for event in events:
            for callback in self._rotate_callbacks:
                try:
                    callback(event)
                except Exception:
                    logger.exception("on_rotate callback %r failed for %s", callback, event)

    # -- the per-message entry point ---------------------------------------------------------------

    def key_for(self, source: SessionSource) -> str:
        """The session key of ``source`` under this store's key policy."""
        return self.keys.build(source)

    def get_or_create(self, source: SessionSource, *, force_new: bool = False) -> SessionLookup:
        """Return the key's current session, creating or rotating it if needed.

        A pure read unless it creates or rotates. The reset policy is evaluated here, once: a
        suspended entry is always rotated (``suspended`` wins over every policy); otherwise the
        policy of the source's platform and chat type decides (``idle``/``daily``). Concurrent
        calls for one key — from threads, processes or hosts — yield one session.
        """
        key = self.key_for(source)
        for _ in range(MAX_ATTEMPTS):
            now = self.clock.now()
            entry = self.backend.get_entry(key)
            if entry is None:
                created = self._first_contact(key, source, now)
                if created is not None:
                    return created
                continue
            reason = self._expiry(entry, source, now)
            if reason is None and not force_new:
                return SessionLookup(entry=entry, created=False)
            rotated = self._rotate(entry, source, now, reason or "session_reset")
            if rotated is not None:
                decision = None
                if reason is not None:
                    decision = ResetDecision(
                        reason=reason,
                        previous_session_id=entry.session_id,
                        notify=self._policy(entry, source).notifies(source.platform),
                    )
                return SessionLookup(entry=rotated, created=True, reset=decision)
        raise ConflictError(key)  # pragma: no cover  # needs MAX_ATTEMPTS lost races in a row

    def _policy(self, entry: SessionEntry, source: SessionSource) -> Any:
        return self.resets.for_source(
            entry.platform or source.platform, entry.chat_type or source.chat_type
        )

    def _expiry(
        self, entry: SessionEntry, source: SessionSource, now: datetime
    ) -> Literal["idle", "daily", "suspended"] | None:
        if entry.suspended:
            return "suspended"
        policy = self._policy(entry, source)
        reason = evaluate_reset(policy, last_activity=entry.updated_at, now=now)
        if (
            reason is not None
            and self.active_work is not None
            and self.active_work(entry.session_key)
        ):
            reason = evaluate_reset(
                policy, last_activity=entry.updated_at, now=now, active_work=True
            )
        return reason

    def _new_record(
        self, key: str, source: SessionSource, now: datetime, **fields: Any
    ) -> SessionRecord:
        return SessionRecord(
            id=new_session_id(now),
            source=source.platform,
            session_key=key,
            user_id=self.keys.canonical(source.platform, source.participant),
            started_at=now,
            **fields,
        )

    def _new_entry(
        self, key: str, session_id: str, source: SessionSource, now: datetime
    ) -> SessionEntry:
        names = [name for name in (source.user_name, source.chat_name) if name]
        return SessionEntry(
            session_key=key,
            session_id=session_id,
            created_at=now,
            updated_at=now,
            origin=source,
            display_name=" @ ".join(names) or None,
            platform=source.platform,
            chat_type=source.chat_type,
        )

    def _first_contact(
        self, key: str, source: SessionSource, now: datetime
    ) -> SessionLookup | None:
        record = self._new_record(key, source, now)
        entry = self._new_entry(key, record.id, source, now)
        plan = RotationPlan(
            at=now, create=record, entries=[EntryWrite(entry=entry, expected_revision=None)]
        )
        try:
            (stored,) = self.backend.apply(plan)
        except ConflictError:
            return None
        self._notify(
            [
                RotateEvent(
                    session_key=key, old_session_id=None, new_session_id=record.id, reason="created"
                )
            ]
        )
        return SessionLookup(entry=stored, created=True)

    def _rotate(
        self,
        entry: SessionEntry,
        source: SessionSource,
        now: datetime,
        reason: str,
        *,
        title: str | None = None,
    ) -> SessionEntry | None:
        """Replace ``entry``'s session by a new one; ``None`` if the entry moved on meanwhile."""
        record = self._new_record(entry.session_key, source, now, title=title)
        new_entry = attrs.evolve(
            self._new_entry(entry.session_key, record.id, source, now),
            origin=entry.origin or source,
        )
        return self._switch(entry, new_entry, reason, now, create=record)

    def _switch(
        self, entry: SessionEntry, target: SessionEntry, reason: str, now: datetime, **plan: Any
    ) -> SessionEntry | None:
        """Move ``entry``'s key to ``target`` and end the session it leaves, in one plan.

        ``plan`` adds to the rotation (a session to create, messages, sessions to reopen).
        Returns the stored entry, or ``None`` if another writer changed the key first.
        """
        try:
            (stored,) = self.backend.apply(
                RotationPlan(
                    at=now,
                    entries=[EntryWrite(entry=target, expected_revision=entry.revision)],
                    end=[(entry.session_id, reason)],
                    **plan,
                )
            )
        except ConflictError:
            return None
        self._notify(
            [
                RotateEvent(
                    session_key=entry.session_key,
                    old_session_id=entry.session_id,
                    new_session_id=target.session_id,
                    reason=reason,
                )
            ]
        )
        return stored

    @staticmethod
    def _retrying(key: str, attempt: Callable[[], SessionEntry | None]) -> SessionEntry:
        """Run ``attempt`` until it does not lose a race (``None``), a bounded number of times."""
        for _ in range(MAX_ATTEMPTS):
            result = attempt()
            if result is not None:
                return result
        raise ConflictError(key)  # pragma: no cover  # needs MAX_ATTEMPTS lost races in a row

    # -- transcripts -------------------------------------------------------------------------------

    def append(self, session_id: str, *messages: Message, touch: bool = True) -> list[Message]:
        """Append messages atomically and idempotently (by ``platform_message_id``).

        Messages without a timestamp get the clock's time; ``redact`` is applied first. With
        ``touch`` (the default) every key pointing at the session records activity in the same
        transaction; internal events (background jobs, system notes) pass ``touch=False``.
        """
        validate_session_id(session_id)
        now = self.clock.now()
        prepared = [
            self.redact(m if m.timestamp is not None else stamped(m, timestamp=now))
            for m in messages
        ]
        return self.backend.append_messages(session_id, prepared, touch_at=now if touch else None)

    def touch(self, key: str, *, last_prompt_tokens: int | None = None) -> SessionEntry:
        """Record activity on ``key`` without a message."""
        entry = self.backend.record_activity(
            key, self.clock.now(), last_prompt_tokens=last_prompt_tokens
        )
        if entry is None:
            raise SessionNotFoundError(key=key, hint="it has no session yet; call get_or_create")
        return entry

    def messages(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        include_inactive: bool = False,
    ) -> list[Message]:
        """A window of the transcript in order (active messages unless asked otherwise)."""
        validate_session_id(session_id)
        return self.backend.get_messages(
            session_id,
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            include_inactive=include_inactive,
        )

    def tail(self, session_id: str, n: int) -> list[Message]:
        """The last ``n`` active messages, in order: the context window of a turn."""
        validate_session_id(session_id)
        return self.backend.get_messages(session_id, limit=n, from_end=True)

    def transcript(self, session_id: str, *, include_inactive: bool = False) -> list[Message]:
        """The whole transcript (for export and display; turns should use :meth:`tail`)."""
        return self.messages(session_id, include_inactive=include_inactive)

    def session(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``; ``SessionNotFoundError`` if there is none."""
        validate_session_id(session_id)
        record = self.backend.get_session(session_id)
        if record is None:
            raise SessionNotFoundError(session_id=session_id)
        return record

    def entry(self, key: str) -> SessionEntry:
        """The routing entry of ``key``; ``SessionNotFoundError`` if there is none."""
        entry = self.backend.get_entry(key)
        if entry is None:
            raise SessionNotFoundError(key=key, hint="it has no session yet; call get_or_create")
        return entry

    # -- key flags ---------------------------------------------------------------------------------

    def _update_entry(self, key: str, **changes: Any) -> SessionEntry:
        def attempt() -> SessionEntry | None:
            entry = self.entry(key)
            try:
                return self.backend.put_entry(
                    attrs.evolve(entry, **changes), expected_revision=entry.revision
                )
            except ConflictError:
                return None

        return self._retrying(key, attempt)

    def suspend(self, key: str) -> SessionEntry:
        """Mark ``key`` suspended: its next message starts a new session (reason ``suspended``)."""
        return self._update_entry(key, suspended=True)

    def mark_resume_pending(self, key: str, reason: str) -> SessionEntry:
        """Flag that the key's session should be resumed (for example after a restart).

        The flag does not bypass the reset policy: an expired session still rotates.
        """
        return self._update_entry(key, resume_pending=True, resume_reason=reason)

    def clear_resume_pending(self, key: str) -> SessionEntry:
        """Clear the resume flag (after a successful turn)."""
        return self._update_entry(key, resume_pending=False, resume_reason=None)

    # -- explicit rotations ------------------------------------------------------------------------

    def reset(self, key: str, *, title: str | None = None) -> SessionEntry:
        """``/new``: start a new session under ``key``; the old one ends ``session_reset``.

        The old transcript stays intact and searchable.
        """
        clean = sanitize_title(title)

        def attempt() -> SessionEntry | None:
            entry = self.entry(key)
            source = entry.origin or _source_of(self.session(entry.session_id))
            if clean is not None:
                self._check_title_free(clean, _owner_of_new(self, key, source), exclude=None)
            return self._rotate(entry, source, self.clock.now(), "session_reset", title=clean)

        return self._retrying(key, attempt)

    def resume(
        self,
        key: str,
        target: str,
        *,
        requester: SessionSource | None = None,
        allow: Callable[[SessionSource | None, SessionRecord], bool] | None = None,
    ) -> SessionEntry:
        """``/resume``: point ``key`` at an earlier session; the one left ends ``session_switch``.

        ``target`` is an exact id, a unique id prefix, or a title (``"my project"`` resumes the
        highest numbered ``"my project #N"``); a compressed session resolves to its newest
        descendant. By default only sessions created under ``key``, or of the same platform and
        user as ``requester`` (default: the key's origin), may be resumed; ``allow(requester,
        record)`` replaces that rule. Resuming records activity on the key.
        """

        def attempt() -> SessionEntry | None:
            entry = self.entry(key)
            record = self._resolve_target(key, target, requester or entry.origin, allow)
            if record.id == entry.session_id:
                return self.touch(key)
            now = self.clock.now()
            moved = attrs.evolve(
                entry, session_id=record.id, updated_at=max(now, entry.updated_at), suspended=False
            )
            reopen = [record.id] if record.is_ended else []
            return self._switch(entry, moved, "session_switch", now, reopen=reopen)

        return self._retrying(key, attempt)

    def branch(self, key: str, *, title: str | None = None) -> SessionEntry:
        """``/branch``: copy the key's transcript into a child session and switch to it.

        The child has ``parent_session_id`` and ``model_config["_branched_from"]``; its title is
        the given one, else the next in the lineage of the current title (or ``"branch"``). The
        parent ends ``branched``.
        """

        def attempt() -> SessionEntry | None:
            entry = self.entry(key)
            parent = self.session(entry.session_id)
            owner = _owner(parent)
            clean = sanitize_title(title)
            if clean is None:
                base = parent.title or "branch"
                clean = _next_title(base, self._titles_in_lineage(base, owner))
            else:
                self._check_title_free(clean, owner, exclude=None)
            now = self.clock.now()
            child = _child_of(
                parent,
                now,
                title=clean,
                model_config={**parent.model_config, BRANCH_MARKER: parent.id},
                archived=False,
            )
            copies = [_copy(m) for m in self.backend.get_messages(parent.id)]
            moved = attrs.evolve(entry, session_id=child.id, updated_at=max(now, entry.updated_at))
            return self._switch(entry, moved, "branched", now, create=child, messages=copies)

        return self._retrying(key, attempt)

    @contextlib.contextmanager
    def compression_lease(self, session_id: str, holder: str) -> Iterator[None]:
        """Hold the compression lease of a session while summarising it (slow work).

        Raises ``LeaseHeldError`` if another holder has a live lease. :meth:`compress` with the
        same ``holder`` inside the block succeeds; other holders are refused until it ends.
        """
        validate_session_id(session_id)
        resource = f"compress:{session_id}"
        if not self.backend.acquire_lease(
            resource, holder, ttl=self.lease_ttl, now=self.clock.now()
        ):
            raise LeaseHeldError(resource, holder)
        try:
            yield
        finally:
            self.backend.release_lease(resource, holder)

    def compress(
        self, session_id: str, messages: Sequence[Message], *, holder: str
    ) -> SessionRecord:
        """Replace a session by a compressed child holding ``messages``.

        The parent ends ``compression``; the child gets ``parent_session_id`` and the next title
        of the lineage (``X`` → ``X #2``); every key pointing at the parent moves to the child.
        Guarded by the session's compression lease, and by requiring the parent to be open, so
        two concurrent compressions can never fork two children (the loser gets
        ``LeaseHeldError`` or ``ConflictError``).
        """
        with self.compression_lease(session_id, holder):
            parent = self.session(session_id)
            if parent.is_ended:
                raise ConflictError(session_id=session_id)
            title = None
            if parent.title is not None:
                title = _next_title(
                    parent.title, self._titles_in_lineage(parent.title, _owner(parent))
                )
            now = self.clock.now()
            child = _child_of(parent, now, title=title)
            prepared = [
                self.redact(_copy(stamped(m, timestamp=m.timestamp or now))) for m in messages
            ]
            written = self.backend.apply(
                RotationPlan(
                    at=now,
                    create=child,
                    messages=prepared,
                    repoint=[(parent.id, child.id)],
                    end=[(parent.id, "compression")],
                    require_open=[parent.id],
                )
            )
        self._notify(
            [
                RotateEvent(
                    session_key=entry.session_key,
                    old_session_id=parent.id,
                    new_session_id=child.id,
                    reason="compression",
                )
                for entry in written
            ]
        )
        return self.session(child.id)

    # -- rewinds and platform edits ----------------------------------------------------------------

    def _user_turns(self, session_id: str, count: int) -> list[Message]:
        """The last ``count`` active user messages, newest first (pages backwards)."""
        found: list[Message] = []
        before: int | None = None
        while len(found) < count:
            page = self.backend.get_messages(session_id, before_id=before, limit=64, from_end=True)
            if not page:
                break
            found.extend(m for m in reversed(page) if m.role == "user")
            before = page[0].id
        return found[:count]

    def retry(self, session_id: str) -> Message | None:
        """Delete (for good) the last user turn and everything after it; return that user message.

        The host re-sends the returned message to get a new answer. ``None`` if the session has
        no user message.
        """
        validate_session_id(session_id)
        turns = self._user_turns(session_id, 1)
        if not turns:
            return None
        last = turns[0]
        doomed = self.backend.get_messages(session_id, after_id=last.id, include_inactive=True)
        self.backend.delete_messages(session_id, [last.id or 0] + [m.id or 0 for m in doomed])
        return last

    def undo(self, session_id: str, n: int = 1) -> list[Message]:
        """Soft-delete back to the ``n``-th most recent user message; return what was removed.

        Removed messages stay stored with ``active=False`` and can be brought back with
        :meth:`restore`.
        """
        validate_session_id(session_id)
        if n < 1:
            raise ValueError(f"undo needs n >= 1, got {n}")
        turns = self._user_turns(session_id, n)
        if not turns:
            return []
        first = turns[-1]
        removed = [first, *self.backend.get_messages(session_id, after_id=first.id)]
        self.backend.set_active(session_id, [m.id or 0 for m in removed], active=False)
        return [attrs.evolve(m, active=False) for m in removed]

    def restore(self, session_id: str, messages: Sequence[Message | int]) -> int:
        """Bring back soft-deleted messages (by message or id); return how many came back."""
        validate_session_id(session_id)
        ids = [m if isinstance(m, int) else (m.id or 0) for m in messages]
        return self.backend.set_active(session_id, ids, active=True)

    def retract(self, session_id: str, platform_message_id: str) -> Message | None:
        """The platform recalled a message (撤回): soft-delete it. ``None`` if it is unknown."""
        validate_session_id(session_id)
        message = self.backend.find_message(session_id, platform_message_id)
        if message is None:
            return None
        self.backend.set_active(session_id, [message.id or 0], active=False)
        return attrs.evolve(message, active=False)

    def edit(self, session_id: str, platform_message_id: str, content: Any) -> Message:
        """The platform edited a message: replace its content (re-indexed, redacted)."""
        validate_session_id(session_id)
        message = self.backend.find_message(session_id, platform_message_id)
        if message is None:
            raise SessionNotFoundError(
                session_id=session_id, hint=f"it has no message {platform_message_id!r}"
            )
        updated = self.redact(attrs.evolve(message, content=content))
        return self.backend.replace_message(session_id, message.id or 0, updated)

    # -- titles ------------------------------------------------------------------------------------

    def set_title(self, session_id: str, title: str | None) -> SessionRecord:
        """Set (or clear, with ``None``/blank) a session's title, unique per owner.

        The owner is the platform and user, or else the key that created the session. Titles
        are compared after NFC normalisation and case folding; a clash raises
        ``TitleConflictError`` naming the other session.
        """
        record = self.session(session_id)
        clean = sanitize_title(title)
        if clean is not None:
            self._check_title_free(clean, _owner(record), exclude=record.id)
        return self.backend.update_session(session_id, values={"title": clean})

    def _owned(self, owner: tuple[str, ...], **filters: Any) -> list[SessionRecord]:
        from hermes_sessions.queries import SessionQuery  # noqa: PLC0415  # cheap, avoids a cycle

        page = self.backend.list_sessions(SessionQuery(limit=None, **filters))
        return [item.record for item in page.items if _owner(item.record) == owner]

    def _check_title_free(self, title: str, owner: tuple[str, ...], *, exclude: str | None) -> None:
        for record in self._owned(owner, title=title):
            if record.id != exclude and record.title is not None:
                raise TitleConflictError(title, record.id)

    def _titles_in_lineage(self, title: str, owner: tuple[str, ...]) -> set[str]:
        return {r.title for r in self._owned(owner, title_lineage=title) if r.title is not None}


def _owner(record: SessionRecord) -> tuple[str, ...]:
    """Who owns a session's title: platform + user, else the creating key, else the platform."""
    if record.user_id:
        return ("user", record.source, record.user_id)
    if record.session_key:
        return ("key", record.session_key)
    return ("source", record.source)


def _owner_of_new(store: SessionStore, key: str, source: SessionSource) -> tuple[str, ...]:
    user = store.keys.canonical(source.platform, source.participant)
    return ("user", source.platform, user) if user else ("key", key)


def _source_of(record: SessionRecord) -> SessionSource:
    from hermes_sessions.models import SessionSource  # noqa: PLC0415

    return SessionSource(platform=record.source, user_id=record.user_id)


def _child_of(parent: SessionRecord, now: datetime, **changes: Any) -> SessionRecord:
    """A new open session continuing ``parent`` (compression, branch), started ``now``."""
    return attrs.evolve(
        parent,
        id=new_session_id(now),
        parent_session_id=parent.id,
        started_at=now,
        ended_at=None,
        end_reason=None,
        **changes,
    )


def _copy(message: Message) -> Message:
    """A message ready to be stored in another session (no id, no session)."""
    return attrs.evolve(message, id=None, session_id=None)


def _next_title(title: str, existing: set[str]) -> str:
    """The next title of ``title``'s lineage, its base shortened if ``#N`` would not fit."""
    proposed = next_title_in_lineage(title, existing)
    if len(proposed) <= MAX_TITLE_LENGTH:
        return proposed
    base, _, number = proposed.rpartition(" #")
    return f"{base[: MAX_TITLE_LENGTH - len(number) - 2].rstrip()} #{number}"
