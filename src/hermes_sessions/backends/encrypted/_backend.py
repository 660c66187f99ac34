"""The encrypted backend: any searchable backend, storing only sealed models (see ``_codec``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions.backends.encrypted import _ledger
from hermes_sessions.backends.encrypted._check import encryption_problems
from hermes_sessions.backends.encrypted._codec import RESERVED_SCOPES, Codec
from hermes_sessions.backends.encrypted._marker import StoreMarker, open_marker
from hermes_sessions.backends.encrypted._rotate import RotationProgress, reseal_away, rotate_key
from hermes_sessions.backends.encrypted._search import encrypted_search
from hermes_sessions.backends.rules import check_message_sizes, session_scope
from hermes_sessions.exceptions import InvalidValueError
from hermes_sessions.forwarding import ForwardingBackend, ForwardsReindex, ForwardsScrub
from hermes_sessions.options import DEFAULT_MAX_MESSAGE_BYTES
from hermes_sessions.protocols import (
    EntryWrite,
    RotationPlan,
    SearchableBackend,
    SupportsCheck,
    SupportsLedger,
    SupportsReindex,
    SupportsScrub,
)
from hermes_sessions.queries import SessionPage, SessionSummary, make_preview
from hermes_sessions.results import AppendResult
from hermes_sessions.state import DELETE

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from datetime import datetime

    from hermes_sessions.backends.encrypted._codec import Owner, SessionOwner
    from hermes_sessions.backends.encrypted._userkeys import UserKeys
    from hermes_sessions.checks import CheckReport
    from hermes_sessions.cipher import Cipher, KeyProvider
    from hermes_sessions.models import EndReason, Message, SessionEntry, SessionRecord
    from hermes_sessions.queries import SearchHit, SearchQuery, SessionQuery
    from hermes_sessions.usage import Usage

__all__ = ["EncryptedBackend"]

_PREVIEW_PAGE = 8
_USER_SCOPE_PARTS = 3  # app, platform, user id
_PREVIEW_CACHE = 4096


class EncryptedBackend(ForwardingBackend[SearchableBackend]):
    """A searchable backend whose stored data is encrypted: ``EncryptedBackend(inner, cipher=c)``.

    ``inner`` is a SQLite, JSONL or PostgreSQL backend (any :class:`SearchableBackend`); the
    wrapper seals every model before it reaches ``inner`` and opens every model it reads, so
    ``inner`` stores ciphertext and keyed hashes only. Search runs on ``inner``'s own index of
    hashed tokens; ``term*`` and one-character CJK queries scan and decrypt instead
    (``docs/privacy.md`` has the costs). A
    :class:`~hermes_sessions.forwarding.ForwardingBackend`, it forwards ``scrub`` and
    ``reindex`` and seals the ledger when ``inner`` has them.

    Opening checks the store's record of itself (``_marker``): an empty store is created
    encrypted; a store with plain data, a key that does not open its id's canary or a wrong
    token key raise :class:`~hermes_sessions.exceptions.EncryptionMismatchError` at once, and
    ``inner`` is closed. With ``user_keys`` (:class:`UserKeys`), each user's own content is
    sealed under a key of their own that ``erase_user`` destroys (``docs/privacy.md``).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, inner: SearchableBackend, *, cipher: Cipher, user_keys: UserKeys | None = None
    ) -> None:
        if not isinstance(inner, SearchableBackend):
            raise InvalidValueError(
                "EncryptedBackend(inner)", "must be a searchable backend (SQLite, JSONL, ...)"
            )
        try:
            marker = open_marker(inner, cipher, user_keys=user_keys is not None)
        except BaseException:
            inner.close()
            raise
        self._setup(inner, cipher, marker, user_keys)

    @classmethod
    def _over_marker(
        cls,
        inner: SearchableBackend,
        cipher: Cipher,
        marker: StoreMarker,
        user_keys: UserKeys | None = None,
    ) -> EncryptedBackend:
        """A wrapper on a store whose marker ``encrypt_store`` has already checked."""
        backend = cls.__new__(cls, inner, cipher=cipher)
        backend._setup(inner, cipher, marker, user_keys)  # noqa: SLF001  # the class's own
        return backend

    def _setup(
        self,
        inner: SearchableBackend,
        cipher: Cipher,
        marker: StoreMarker,
        user_keys: UserKeys | None = None,
    ) -> None:
        self.inner = inner
        self.cipher = cipher
        self.store_id = marker.store_id
        self.user_keys = user_keys
        if user_keys is not None:
            user_keys.bind(cipher, marker.store_id)
        self.codec = Codec(cipher, marker.store_id, user_keys)
        self._owners: dict[str, SessionOwner] = {}
        limit = getattr(inner, "max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES)
        self.max_message_bytes: int | None = limit
        self._previews: dict[tuple[str, int, int, datetime], str | None] = {}

    # -- routing -----------------------------------------------------------------------------------

    def _open_entry(self, entry: SessionEntry | None) -> SessionEntry | None:
        return None if entry is None else self.codec.open_entry(entry)

    def get_entry(self, key: str) -> SessionEntry | None:
        """The entry of ``key``, decrypted."""
        return self._open_entry(self.inner.get_entry(key))

    def put_entry(self, entry: SessionEntry, *, expected_revision: int | None) -> SessionEntry:
        """Store an entry (compare-and-swap), encrypted."""
        stored = self.inner.put_entry(
            self.codec.seal_entry(entry), expected_revision=expected_revision
        )
        return self.codec.open_entry(stored)

    def entries(self, *, session_id: str | None = None) -> list[SessionEntry]:
        """Every entry (or those of a session), decrypted."""
        return [self.codec.open_entry(e) for e in self.inner.entries(session_id=session_id)]

    def record_activity(
        self, key: str, at: datetime, *, last_prompt_tokens: int | None = None
    ) -> SessionEntry | None:
        """Move an entry's activity time forward."""
        entry = self.inner.record_activity(key, at, last_prompt_tokens=last_prompt_tokens)
        return self._open_entry(entry)

    # -- sessions ----------------------------------------------------------------------------------

    def _open_record(self, record: SessionRecord | None) -> SessionRecord | None:
        return None if record is None else self.codec.open_record(record)

    def create_session(self, record: SessionRecord) -> SessionRecord:
        """Store a new session, encrypted."""
        self._owners.pop(record.id, None)
        return self.codec.open_record(self.inner.create_session(self.codec.seal_record(record)))

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The record of a session, decrypted."""
        return self._open_record(self.inner.get_session(session_id))

    def update_session(
        self,
        session_id: str,
        *,
        values: Mapping[str, Any] | None = None,
        increments: Mapping[str, int | float] | None = None,
    ) -> SessionRecord:
        """Set fields and add to counters; title and metadata are re-sealed together."""
        sealed = None
        if values is not None:
            current = None
            if "title" in values or "metadata" in values or self.user_keys is not None:
                current = self.inner.get_session(session_id)
            self._owners.pop(session_id, None)
            sealed = self.codec.seal_values(session_id, values, current)
        record = self.inner.update_session(session_id, values=sealed, increments=increments)
        return self.codec.open_record(record)

    def end_session(
        self, session_id: str, reason: EndReason | str, *, at: datetime
    ) -> SessionRecord:
        """End a session (the record returned decrypted)."""
        return self.codec.open_record(self.inner.end_session(session_id, reason, at=at))

    def reopen_session(self, session_id: str) -> SessionRecord:
        """Reopen a session (the record returned decrypted)."""
        return self.codec.open_record(self.inner.reopen_session(session_id))

    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """A page of sessions; titles are looked up by their keyed hashes."""
        changes: dict[str, Any] = {}
        if query.title is not None:
            changes["title"] = self.codec.title_form(query.title)
        if query.title_lineage is not None:
            changes["title_lineage"] = self.codec.lineage_form(query.title_lineage)
        page = self.inner.list_sessions(attrs.evolve(query, **changes) if changes else query)
        items = [
            SessionSummary(record=self.codec.open_record(item.record), preview=self._preview(item))
            for item in page.items
        ]
        return SessionPage(items=items, next_cursor=page.next_cursor)

    def _preview(self, item: SessionSummary) -> str | None:
        """The listing preview (the first active user message), built after decryption.

        Every change to a session's messages bumps its revision, so a preview is cached by
        ``(id, revision, message count, start)``: the store lists sessions on many paths
        (titles, lineages), and reading messages per session each time would double their cost.
        """
        record = item.record
        key = (record.id, record.revision, record.message_count, record.started_at)
        if key in self._previews:
            return self._previews[key]
        if len(self._previews) >= _PREVIEW_CACHE:
            self._previews.clear()
        preview = self._previews[key] = self._read_preview(record.id)
        return preview

    def _read_preview(self, session_id: str) -> str | None:
        after = None
        while True:
            batch = self.inner.get_messages(session_id, after_id=after, limit=_PREVIEW_PAGE)
            for message in batch:
                if message.role == "user":
                    return make_preview(self.codec.open_message(message, session_id).content)
            if len(batch) < _PREVIEW_PAGE:
                return None
            after = batch[-1].id

    # -- messages ----------------------------------------------------------------------------------

    def _seal_messages(self, messages: Sequence[Message], session_id: str) -> list[Message]:
        check_message_sizes(messages, self.max_message_bytes)
        owner = self.session_owner(session_id)
        return [self.codec.seal_message(message, session_id, owner) for message in messages]

    def _seal_created(self, record: SessionRecord, messages: Sequence[Message]) -> list[Message]:
        self._owners[record.id] = (record.source, record.user_id)
        return self._seal_messages(messages, record.id)

    def session_owner(self, session_id: str) -> SessionOwner:
        """The ``(platform, user id)`` of a session, when per-user keys are on (else ``None``)."""
        if self.user_keys is None:
            return None
        if session_id not in self._owners:
            record = self.inner.get_session(session_id)
            self._owners[session_id] = None if record is None else (record.source, record.user_id)
        return self._owners[session_id]

    def scope_owner(self, scope_id: str) -> Owner:
        """Whose key seals a state scope: a user scope's user, a session scope's user."""
        kind, _, rest = scope_id.partition("|")
        if kind == "user":
            parts = [part.replace("%7C", "|").replace("%25", "%") for part in rest.split("|")]
            return (parts[1], parts[2]) if len(parts) == _USER_SCOPE_PARTS else None
        if kind == "session":
            owner = self.session_owner(rest)
            return None if owner is None or owner[1] is None else (owner[0], owner[1])
        return None

    def destroy_user_keys(self, platform: str, user_ids: Sequence[str]) -> int:
        """Destroy these users' keys; what they sealed and survives is sealed anew first.

        Called by ``SessionStore.erase_user`` after it deleted the users' data: a value still
        under one of the keys (a kept session's record, a message without sender in it) is
        re-sealed under the data key, then the keys are destroyed. Returns how many existed.
        """
        keys = self.user_keys
        if keys is None:
            return 0
        self._owners.clear()
        reseal_away(self, {keys.key_id(platform, user_id) for user_id in user_ids})
        return sum(keys.destroy(platform, user_id) for user_id in user_ids)

    def _open_messages(self, messages: Sequence[Message], session_id: str) -> list[Message]:
        return [self.codec.open_message(message, session_id) for message in messages]

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        touch_at: datetime | None = None,
        usage: Usage | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
        if_revision: int | None = None,
    ) -> AppendResult:
        """Append messages, encrypted, with activity, usage and state in the same write."""
        result = self.inner.append_messages(
            session_id,
            self._seal_messages(messages, session_id),
            touch_at=touch_at,
            usage=usage,
            state=self.codec.seal_changes(state, self.scope_owner),
            if_revision=if_revision,
        )
        return AppendResult(
            self._open_messages(result.messages, session_id),
            duplicate=result.duplicate,
            existing=self._open_messages(result.existing, session_id),
            revision=result.revision,
        )

    def get_messages(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        limit: int | None = None,
        include_inactive: bool = False,
        from_end: bool = False,
    ) -> list[Message]:
        """Messages in insertion order, decrypted."""
        stored = self.inner.get_messages(
            session_id,
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            include_inactive=include_inactive,
            from_end=from_end,
        )
        return self._open_messages(stored, session_id)

    def get_message(self, session_id: str, message_id: int) -> Message | None:
        """One message, decrypted."""
        message = self.inner.get_message(session_id, message_id)
        return None if message is None else self.codec.open_message(message, session_id)

    def find_message(self, session_id: str, platform_message_id: str) -> Message | None:
        """The message with this platform id (looked up by its keyed hash)."""
        blinded = self.codec.platform_id(platform_message_id)
        assert blinded is not None  # noqa: S101  # a str in, a hash out
        message = self.inner.find_message(session_id, blinded)
        return None if message is None else self.codec.open_message(message, session_id)

    def replace_message(self, session_id: str, message_id: int, message: Message) -> Message:
        """Replace one message, re-encrypted and re-indexed."""
        sealed = self._seal_messages([message], session_id)[0]
        try:
            stored = self.inner.replace_message(session_id, message_id, sealed)
        except ValueError as error:
            blinded = sealed.platform_message_id
            if blinded is None or blinded not in str(error):
                raise
            raise InvalidValueError(  # the inner error names the hash; say the id instead
                "Message.platform_message_id",
                f"{message.platform_message_id!r} already belongs to another message of session "
                f"{session_id}; give the edit that message's id or another one",
            ) from None
        return self.codec.open_message(stored, session_id)

    def replace_messages(self, session_id: str, messages: Sequence[Message]) -> list[Message]:
        """Replace the whole transcript."""
        stored = self.inner.replace_messages(session_id, self._seal_messages(messages, session_id))
        return self._open_messages(stored, session_id)

    # -- state -------------------------------------------------------------------------------------

    def get_state(self, scope_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Scope values, decrypted (the store's own record of itself is never among them)."""
        wanted = [scope for scope in scope_ids if not scope.startswith(RESERVED_SCOPES)]
        return self.codec.open_state(self.inner.get_state(wanted))

    def update_state(
        self,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        session_id: str | None = None,
        if_revision: int | None = None,
    ) -> SessionRecord | None:
        """Merge state changes, each value encrypted."""
        sealed = self.codec.seal_changes(changes, self.scope_owner)
        assert sealed is not None  # noqa: S101  # changes is a mapping
        record = self.inner.update_state(sealed, session_id=session_id, if_revision=if_revision)
        return self._open_record(record)

    # -- the rest of the protocol ------------------------------------------------------------------

    def apply(self, plan: RotationPlan) -> list[SessionEntry]:
        """Commit a rotation plan, its records, messages and entries sealed for their place.

        A copy (``copy_messages_from``, ``copy_state_from``) is read, opened and sealed anew
        for the created session, so it never carries the parent's envelopes: the copied
        transcript is read just before the write, and the copied state is written just before
        it (a plan that then fails removes it again).
        """
        create = plan.create
        messages = list(plan.messages)
        copy_messages, copy_state = plan.copy_messages_from, plan.copy_state_from
        if (
            create is not None
            and copy_messages is not None
            and self.inner.get_session(copy_messages)
        ):
            copied = self.get_messages(copy_messages)
            messages = [attrs.evolve(m, id=None, session_id=None) for m in copied] + messages
            copy_messages = None
        written: dict[str, Any] = {}
        if create is not None and copy_state is not None and self.inner.get_session(copy_state):
            written = self.get_state([session_scope(copy_state)]).get(session_scope(copy_state), {})
            if written:
                self.update_state({session_scope(create.id): written})
            copy_state = None
        sealed = attrs.evolve(
            plan,
            create=None if create is None else self.codec.seal_record(create),
            messages=[] if create is None else self._seal_created(create, messages),
            entries=[
                EntryWrite(
                    entry=self.codec.seal_entry(write.entry),
                    expected_revision=write.expected_revision,
                )
                for write in plan.entries
            ],
            copy_messages_from=copy_messages,
            copy_state_from=copy_state,
        )
        try:
            stored = self.inner.apply(sealed)
        except BaseException:
            if written and create is not None:
                self.update_state({session_scope(create.id): dict.fromkeys(written, DELETE)})
            raise
        return [self.codec.open_entry(entry) for entry in stored]

    def search(self, query: SearchQuery) -> list[SearchHit]:
        """Search: hashed tokens on ``inner``'s index, or a decrypting scan for prefixes."""
        return encrypted_search(self, query)

    def check(self) -> CheckReport:
        """``inner``'s check of the stored data, then the encryption's.

        Every value must be sealed (none in the clear), under the current key (else
        ``rotate_key()`` has not finished) and open where it is stored (a value copied from
        another place does not): each one that is not is an ``encryption`` problem.
        """
        if not isinstance(self.inner, SupportsCheck):
            raise NotImplementedError(f"{self.inner!r} has no check()")
        report = self.inner.check()
        found = encryption_problems(self)
        return attrs.evolve(report, problems=(*report.problems, *found)) if found else report

    def rotate_key(self, new: KeyProvider | None = None) -> Iterator[RotationProgress]:
        """Re-encrypt everything not under the current key (``new``'s, if given); yield progress.

        See :func:`~hermes_sessions.backends.encrypted.rotate_key`.
        """
        return rotate_key(self, new)


class _LedgerMixin(EncryptedBackend):
    """``SupportsLedger`` of an inner backend that has it, sealed (``_ledger``)."""

    ledger_rows = _ledger.ledger_rows
    ledger_write = _ledger.ledger_write


EncryptedBackend.forwarded = (
    (SupportsScrub, ForwardsScrub),
    (SupportsReindex, ForwardsReindex),
    (SupportsLedger, _LedgerMixin),
)
