"""SessionStore: the session lifecycle on top of any backend.

The store turns an inbound message's source into a key, evaluates the reset policy lazily (once,
in :meth:`SessionStore.get_or_create`), and performs every change of a key's session (resets,
``/new``, resume, branch, compression) as one ``RotationPlan`` the backend applies atomically.
Races between threads, processes or hosts surface as ``ConflictError`` inside the store, which
re-reads and decides again; callers see one session per key. The methods delegate to the
private modules of this package, one per concern; time comes from ``clock``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Unpack

import attrs

from hermes_sessions.cipher import require_plain_store
from hermes_sessions.clock import SystemClock
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import InvalidArgumentError, SessionNotFoundError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.keys import KeyPolicy
from hermes_sessions.models import Message, RotateReason, SessionEntry, SessionRecord, stamped
from hermes_sessions.policy import ResetPolicies
from hermes_sessions.protocols import Backend, Clock, RotationPlan
from hermes_sessions.queries import SessionQuery
from hermes_sessions.store import (
    _commands,
    _edits,
    _incognito,
    _rotations,
    _state,
    _titles,
    _views,
)
from hermes_sessions.store._incognito import IncognitoPolicy, IncognitoRouter
from hermes_sessions.store._ledger import LedgerMode
from hermes_sessions.store._options import DEFAULT_LEASE_TTL, StoreOptions, identity
from hermes_sessions.store._rotations import EndingSession as Ending
from hermes_sessions.store._rotations import RotateEvent, SessionLookup, SwitchReason
from hermes_sessions.store._searching import Searches
from hermes_sessions.window import ContextWindow, context_window

if TYPE_CHECKING:
    from hermes_sessions.cipher import Cipher
    from hermes_sessions.models import SessionSource
    from hermes_sessions.queries import (
        SessionPage,
        SessionQueryFields,
    )
    from hermes_sessions.results import AppendResult
    from hermes_sessions.state import SessionState, StateDelta
    from hermes_sessions.store._housekeeping import EraseReport, MemoryEraser, PruneReport
    from hermes_sessions.store._lineage import Lineage
    from hermes_sessions.store._migration import Collisions, KeyMigrationReport
    from hermes_sessions.store._retention import (  # loaded with maintain(), not per process
        RetentionPolicy,  # noqa: TC004  # the field's annotation is never evaluated
        RetentionReport,
    )
    from hermes_sessions.store._targets import ResumeFilter
    from hermes_sessions.usage import Usage

__all__ = ["SessionStore", "StoreOptions"]  # StoreOptions lives in _options

_ARCHIVED, _UNARCHIVED = {"archived": True}, {"archived": False}


@attrs.define(eq=False)
class SessionStore(Searches, ClosesOnExit, LedgerMode):
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
        retention: The default policy of :meth:`maintain` (``None``: pass one each time).
        incognito: Lanes kept in memory only; ``store.backend`` is then an ``IncognitoRouter``.
        ledger: Record turns so restarts lose and repeat none (``store.ledger``, ``ledger.md``).

    .. versionadded:: 0.1.0
    """

    backend: Backend
    keys: KeyPolicy = attrs.field(factory=KeyPolicy, kw_only=True)
    resets: ResetPolicies = attrs.field(factory=ResetPolicies, kw_only=True)
    clock: Clock = attrs.field(factory=SystemClock, kw_only=True)
    active_work: Callable[[str], bool] | None = attrs.field(default=None, kw_only=True)
    redact: Callable[[Message], Message] = attrs.field(default=identity, kw_only=True)
    lease_ttl: timedelta = attrs.field(default=DEFAULT_LEASE_TTL, kw_only=True)
    retention: RetentionPolicy | None = attrs.field(default=None, kw_only=True)
    incognito: IncognitoPolicy | None = attrs.field(default=None, kw_only=True)
    ledger_on: bool = attrs.field(default=False, kw_only=True, alias="ledger")
    _rotate_callbacks: list[Callable[[RotateEvent], None]] = attrs.field(factory=list, init=False)
    _before_hooks: list[Callable[[Ending], None]] = attrs.field(factory=list, init=False)

    def __attrs_post_init__(self) -> None:
        require_plain_store(self.backend)  # an encrypted store needs its cipher
        if self.incognito is not None and not isinstance(self.backend, IncognitoRouter):
            self.backend = IncognitoRouter.over(self.backend, self.incognito)

    def __repr__(self) -> str:
        return f"<SessionStore on {self.backend!r}>"

    @classmethod
    def open(
        cls,
        home: Path | str | None = None,
        backend: Literal["sqlite", "jsonl", "memory", "postgres"] = "sqlite",
        *,
        dsn: str | None = None,
        cipher: Cipher | None = None,
        **options: Unpack[StoreOptions],
    ) -> SessionStore:
        """Open a store under ``home`` (default: :func:`~hermes_sessions.paths.default_home`).

        ``sqlite`` keeps ``<home>/state.db``; ``jsonl`` ``<home>/sessions/`` and its journal;
        ``memory`` nothing; ``postgres`` connects to ``dsn`` (default ``$HERMES_SESSIONS_DSN``).
        ``cipher`` encrypts at rest, searchably (``docs/privacy.md``); ``options`` go to ``cls``.
        """
        from hermes_sessions.backends import open_backend  # noqa: PLC0415  # backends load lazily

        opened = open_backend(backend, None if home is None else Path(home), dsn=dsn, cipher=cipher)
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

    def before_rotate(self, callback: Callable[[Ending], None]) -> Callable[[Ending], None]:
        """Call ``callback`` before a rotation ends a session; usable as a decorator.

        It gets an :class:`~hermes_sessions.store.EndingSession` (key, ending session id,
        reason) while that session is still open and its key still points at it — on every
        reset, ``/new``, resume, branch, compression and retention rotation — so a host can
        flush memory from it. It runs in the rotating thread; it may read the store but must
        not rotate the same key. One that raises is logged and the rotation goes ahead. A
        rotation that loses a race is retried, so it may hear of a session twice.
        """
        self._before_hooks.append(callback)
        return callback

    def _before(self, plan: RotationPlan, session_key: str | None) -> None:
        ending = _rotations.ending(plan, session_key) if self._before_hooks else ()
        _rotations.call_each(self._before_hooks, ending, "before_rotate")

    def _notify(self, events: Sequence[RotateEvent]) -> None:
        _rotations.call_each(self._rotate_callbacks, events, "on_rotate")

    def _rotate_one(self, plan: RotationPlan, old: str | None, why: RotateReason) -> SessionEntry:
        """Apply a plan writing one entry; ``ConflictError`` if another writer got there first."""
        if plan.end:
            self._before(plan, plan.entries[0].entry.session_key if plan.entries else None)
        written = self.backend.apply(plan)
        self._notify(_rotations.events(written, old, why))
        return written[0]

    # -- the per-message entry point ---------------------------------------------------------------

    def key_for(self, source: SessionSource) -> str:
        """The session key of ``source`` under this store's key policy (noting incognito lanes)."""
        return _incognito.note(self.backend, source, self.keys.build(source))

    def is_incognito(self, key_or_session_id: str) -> bool:
        """Whether a key (or a session) is an incognito lane's: in memory, never persisted."""
        return _incognito.is_incognito(self.backend, key_or_session_id)

    def get_or_create(
        self,
        source: SessionSource,
        *,
        force_new: bool = False,
        platform_message_id: str | None = None,
    ) -> SessionLookup:
        """Return the key's current session, creating or rotating it if needed.

        A pure read unless it creates or rotates. Given the message's ``platform_message_id``, a
        copy :meth:`seen` finds is returned as ``redelivered`` and nothing rotates. Otherwise the
        reset policy is evaluated, once: a suspended key always rotates, else the policy of the
        source's platform and chat type decides. Concurrent calls for one key yield one session.
        """
        pmid = platform_message_id
        return _commands.get_or_create(self, source, force_new=force_new, platform_message_id=pmid)

    def _rotate(
        self,
        entry: SessionEntry,
        source: SessionSource,
        now: datetime,
        reason: SwitchReason,
        *,
        title: str | None = None,
    ) -> SessionEntry:
        """Replace ``entry``'s session by a new one; ``ConflictError`` if it moved on meanwhile."""
        plan = _rotations.new_session_plan(self.keys, entry, source, now, reason, title=title)
        return self._rotate_one(plan, entry.session_id, reason)

    # -- transcripts -------------------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        *messages: Message,
        touch: bool = True,
        usage: Usage | None = None,
        state_delta: StateDelta | None = None,
        if_revision: int | None = None,
    ) -> AppendResult:
        """Append messages atomically and idempotently (by ``platform_message_id``).

        A batch whose first platform id is already stored is a redelivery: nothing is stored and
        the result is ``duplicate`` (see :meth:`seen`). Messages without a timestamp get the
        clock's time; ``redact`` is applied first. With ``touch`` (the default) every key pointing
        at the session records activity in the same transaction; internal events (background
        jobs, system notes) pass ``touch=False``. ``usage`` (the call's tokens and cost) and
        ``state_delta`` (``{StateScope: {key: value or DELETE}}``, see :mod:`hermes_sessions.state`)
        change the session in the same transaction, so a turn stays one commit. The revision moves
        on by one (the result's ``revision``); with ``if_revision`` a session that moved on since
        raises ``ConflictError`` and nothing is stored.
        """
        validate_session_id(session_id)
        now = self.clock.now()
        prepared = [
            self.redact(m if m.timestamp is not None else stamped(m, timestamp=now))
            for m in messages
        ]
        return self.backend.append_messages(
            session_id,
            prepared,
            touch_at=now if touch else None,
            usage=usage,
            state=_state.as_changes(state_delta),
            if_revision=if_revision,
        )

    def record_usage(self, session_id: str, usage: Usage) -> SessionRecord:
        """Add usage that arrived after the turn was stored (a streamed bill, a batch job)."""
        validate_session_id(session_id)
        return self.backend.update_session(
            session_id, values=usage.values(), increments=usage.increments()
        )

    def state(self, session_id: str) -> SessionState:
        """The state a turn of the session sees: its app's, user's, lane's and its own."""
        return _state.read_for_record(self.backend, self.keys.namespace, self.session(session_id))

    def update_state(
        self,
        delta: StateDelta,
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Change state without a message: ``{StateScope: {key: value or DELETE}}``, atomically.

        Made through ``session_id`` (or the one session whose scope the delta changes), the
        change moves that session's revision, ``if_revision`` guards it, and its record is
        returned; app, user and lane changes alone return ``None``. The app scope of this
        store's sessions is ``StateScope.app(store.keys.namespace)``.
        """
        if session_id is not None:
            validate_session_id(session_id)
        changes, through = _state.changes_of(delta, session_id)
        return self.backend.update_state(changes, session_id=through, if_revision=if_revision)

    def seen(self, key_or_session_id: str, platform_message_id: str) -> Message | None:
        """The stored message with this platform id, if this delivery was seen before (a read).

        Given a key (keys contain ``:``), in its current session and the one it last moved away
        from; given a session id, in that session. Inactive (rewound) copies count. ``None``: new.
        """
        return _views.seen(self.backend, key_or_session_id, platform_message_id)

    def touch(self, key: str, *, last_prompt_tokens: int | None = None) -> SessionEntry:
        """Record activity on ``key`` without a message."""
        tokens = last_prompt_tokens
        entry = self.backend.record_activity(key, self.clock.now(), last_prompt_tokens=tokens)
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

    def context(
        self,
        session_id: str,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        count_tokens: Callable[[Message], int] | None = None,
        keep_system: bool = True,
    ) -> ContextWindow:
        """The newest whole turns that fit the budgets (see :func:`~.window.context_window`)."""
        return context_window(
            self.messages(session_id),
            max_messages=max_messages,
            max_tokens=max_tokens,
            count_tokens=count_tokens,
            keep_system=keep_system,
        )

    def transcript(self, session_id: str, *, include_inactive: bool = False) -> list[Message]:
        """The whole transcript (for export and display; turns should use :meth:`tail`)."""
        return self.messages(session_id, include_inactive=include_inactive)

    def session(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``; ``SessionNotFoundError`` if there is none."""
        record = self.backend.get_session(validate_session_id(session_id))
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

    def suspend(self, key: str) -> SessionEntry:
        """Mark ``key`` suspended: its next message starts a new session (reason ``suspended``)."""
        return _rotations.update_entry(self, key, lambda entry: attrs.evolve(entry, suspended=True))

    def mark_resume_pending(self, key: str, reason: str) -> SessionEntry:
        """Flag that the key's session should be resumed (for example after a restart).

        The flag does not bypass the reset policy: an expired session still rotates.
        """
        return _rotations.update_entry(
            self, key, lambda entry: attrs.evolve(entry, resume_pending=True, resume_reason=reason)
        )

    def clear_resume_pending(self, key: str) -> SessionEntry:
        """Clear the resume flag (after a successful turn)."""
        return _rotations.update_entry(
            self, key, lambda entry: attrs.evolve(entry, resume_pending=False, resume_reason=None)
        )

    # -- explicit rotations ------------------------------------------------------------------------

    def reset(
        self, key: str, *, source: SessionSource | None = None, title: str | None = None
    ) -> SessionEntry:
        """``/new``: start a new session under ``key``; the old one ends ``session_reset``.

        The old transcript stays intact and searchable. On a key with no session yet, pass the
        message's ``source``: the key's first session is created (titled), and nothing else.
        """
        return _commands.reset(self, key, source=source, title=title)

    def resume(
        self,
        key: str,
        target: str,
        *,
        source: SessionSource | None = None,
        requester: SessionSource | None = None,
        allow: ResumeFilter | None = None,
    ) -> SessionEntry:
        """``/resume``: point ``key`` at an earlier session; the one left ends ``session_switch``.

        ``target`` is an exact id, a unique id prefix, or a title (an exact title first, else
        the highest numbered ``"title #N"``); a compressed session resolves to its newest
        descendant. By default only sessions created under ``key``, or of the same platform and
        user as ``requester`` (default: the key's origin), may be resumed; ``allow(requester,
        record)`` replaces that rule. Resuming records activity on the key. With ``source``, a
        key with no session yet is pointed straight at the target.
        """
        return _commands.resume(self, key, target, source=source, requester=requester, allow=allow)

    def branch(
        self, key: str, *, source: SessionSource | None = None, title: str | None = None
    ) -> SessionEntry:
        """``/branch``: copy the key's transcript into a child session and switch to it.

        The child has ``parent_session_id`` and ``model_config["_branched_from"]``; its title is
        the given one, else the next in the current title's lineage (or ``"branch"``); the parent
        ends ``branched``. With ``source``, a key with no session gets an empty, titled one.
        """
        return _commands.branch(self, key, source=source, title=title)

    @contextlib.contextmanager
    def compression_lease(self, session_id: str, holder: str) -> Iterator[None]:
        """Hold the compression lease of a session while summarising it (slow work).

        Raises ``LeaseHeldError`` if another holder has a live lease. :meth:`compress` with the
        same ``holder`` inside the block succeeds; other holders are refused until it ends.
        """
        validate_session_id(session_id)
        now = self.clock.now()
        with _rotations.leased(self.backend, f"compress:{session_id}", holder, self.lease_ttl, now):
            yield

    def compress(
        self, session_id: str, messages: Sequence[Message], *, holder: str
    ) -> SessionRecord:
        """Replace a session by a compressed child holding ``messages``.

        The parent ends ``compression``; the child gets ``parent_session_id`` and the next title
        of the lineage (``X`` → ``X #2``); every key pointing at the parent moves to the child.
        The lease and the open-parent check mean two compressions never fork two children.
        """
        return _commands.compress(self, session_id, messages, holder=holder)

    # -- rewinds and platform edits ----------------------------------------------------------------

    def retry(self, session_id: str) -> Message | None:
        """Delete (for good) the last user turn and everything after it; return that user message.

        The host re-sends the returned message to get a new answer. ``None`` if the session has
        no user message.
        """
        validate_session_id(session_id)
        return _edits.retry(self.backend, session_id)

    def undo(self, session_id: str, n: int = 1) -> list[Message]:
        """Soft-delete back to the ``n``-th most recent user message; return what was removed.

        Removed messages stay stored with ``active=False`` and can be brought back with
        :meth:`restore`.
        """
        validate_session_id(session_id)
        if n < 1:
            raise InvalidArgumentError(f"undo needs n >= 1, got {n}")
        return _edits.undo(self.backend, session_id, n)

    def restore(self, session_id: str, messages: Sequence[Message | int]) -> int:
        """Bring back soft-deleted messages (by message or id); return how many came back."""
        ids = [m if isinstance(m, int) else (m.id or 0) for m in messages]
        return self.backend.set_active(validate_session_id(session_id), ids, active=True)

    retract = _edits.retract
    """The platform recalled a message (撤回): soft-delete it, by key or session id."""
    edit = _edits.edit
    """The platform edited a message: replace its content, by key or session id."""

    # -- titles ------------------------------------------------------------------------------------

    def set_title(self, session_id: str, title: str | None) -> SessionRecord:
        """Set (or clear, with ``None``/blank) a session's title, unique per owner.

        The owner is the platform and user, or else the key that created the session. Titles
        are compared after NFC normalisation and case folding; a clash raises
        ``TitleConflictError`` naming the other session.
        """
        return _titles.set_title(self.backend, self.session(session_id), title)

    def archive(self, session_id: str) -> SessionRecord:
        """Hide a session from default listings (``archived=True``); nothing is deleted."""
        return self.backend.update_session(validate_session_id(session_id), values=_ARCHIVED)

    def unarchive(self, session_id: str) -> SessionRecord:
        """Bring an archived session back into default listings."""
        return self.backend.update_session(validate_session_id(session_id), values=_UNARCHIVED)

    def delete(self, session_id: str, *, force: bool = False) -> tuple[str, ...]:
        """Delete a session, its messages and their search rows (children are orphaned).

        A session a key points to is refused with ``SessionInUseError``, unless ``force``: then
        each such key first moves to a new session (``session_reset``). Returns the moved keys.
        """
        return _commands.delete(self, session_id, force=force)

    # -- listing, lineage, search and context -----------------------------------------------------

    def list_sessions(
        self,
        query: SessionQuery | None = None,
        *,
        include_compressed: bool = False,
        **filters: Unpack[SessionQueryFields],
    ) -> SessionPage:
        """One page of sessions, most recently active first (see :class:`SessionQuery`).

        Pass a ``SessionQuery`` or its fields as keywords. A compressed conversation shows as
        its newest descendant: sessions ended by compression are left out unless
        ``include_compressed``. An open session whose key's reset policy has expired it is
        marked ``expired`` (:attr:`SessionSummary.state`).
        """
        query = query if query is not None else SessionQuery(**filters)
        page = _views.list_sessions(self.backend, query, include_compressed=include_compressed)
        from hermes_sessions.store import _retention  # noqa: PLC0415  # not on the turn path

        return _retention.mark_expired(self, page)

    def lineage(self, session_id: str) -> Lineage:
        """The session's family: its ancestors and all their descendants, root first."""
        from hermes_sessions.store import _lineage  # noqa: PLC0415  # not on the turn path

        return _lineage.lineage_of(self.backend, session_id)

    # -- housekeeping ------------------------------------------------------------------------------

    def prune(
        self,
        older_than: timedelta | datetime,
        *,
        dry_run: bool = True,
        sources: Sequence[str] | None = None,
        busy: Callable[[str], bool] | None = None,
    ) -> PruneReport:
        """Delete ended sessions idle since the cutoff (a dry run by default); maintain's age."""
        from hermes_sessions.store import _housekeeping  # noqa: PLC0415  # not on the turn path

        return _housekeeping.prune(self, older_than, dry_run=dry_run, sources=sources, busy=busy)

    def maintain(
        self,
        policy: RetentionPolicy | None = None,
        *,
        dry_run: bool = False,
        busy: Callable[[str], bool] | None = None,
    ) -> RetentionReport:
        """Enforce ``policy`` (default ``self.retention``); ``busy(key)`` marks more active work."""
        from hermes_sessions.store import _retention  # noqa: PLC0415  # not on the turn path

        return _retention.maintain(self, policy, dry_run=dry_run, busy=busy)

    def erase_user(
        self,
        platform: str,
        *user_ids: str,
        dry_run: bool = False,
        memory: MemoryEraser | None = None,
    ) -> EraseReport:
        """Erase one user of one platform (right to erasure), with ``memory=`` their memory too."""
        from hermes_sessions.store import _housekeeping  # noqa: PLC0415  # not on the turn path

        return _housekeeping.erase_user_of(
            self, platform, *user_ids, dry_run=dry_run, memory=memory
        )

    def migrate_keys(
        self,
        old_policy: KeyPolicy,
        new_policy: KeyPolicy,
        *,
        dry_run: bool = True,
        remap: Callable[[SessionSource], SessionSource] | None = None,
        collisions: Collisions = "merge",
    ) -> KeyMigrationReport:
        """Move every key to a changed ``KeyPolicy``'s (a dry run): ``docs/key-migration.md``."""
        from hermes_sessions.store import _migration  # noqa: PLC0415  # not on the turn path

        return _migration.migrate_keys(
            self, old_policy, new_policy, dry_run=dry_run, remap=remap, collisions=collisions
        )

    def rebuild_routing(self) -> int:
        """Give keys without an entry their newest open session again (from records); count."""
        from hermes_sessions.store import _housekeeping  # noqa: PLC0415  # not on the turn path

        return _housekeeping.rebuild_routing(self.backend)
