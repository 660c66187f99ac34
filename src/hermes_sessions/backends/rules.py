"""Rules every backend applies the same way, whatever it keeps its data in, written once.

Which fields ``update_session`` may change and how; what a new session's record looks like;
the error for a missing session; how search hits are built and ordered; the preconditions of a
rotation plan; when a lease is free. The in-memory building blocks that ``InMemoryBackend`` and
``JSONLBackend`` share live in :mod:`hermes_sessions.backends.memtables`.
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

import attrs

from hermes_sessions.backends.hits import deferred_hit
from hermes_sessions.exceptions import (
    ConflictError,
    CorruptRecordError,
    InvalidArgumentError,
    LedgerConflictError,
    MessageTooLargeError,
    SessionNotFoundError,
    TitleConflictError,
)
from hermes_sessions.models import Message, stamped
from hermes_sessions.results import AppendResult
from hermes_sessions.serde import compact_json, message_dict
from hermes_sessions.state import StateScope, merge_state
from hermes_sessions.titles import title_holder

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
    from datetime import datetime

    from hermes_sessions import text
    from hermes_sessions.ledger import LedgerRow
    from hermes_sessions.models import SessionEntry, SessionRecord
    from hermes_sessions.protocols import RotationPlan
    from hermes_sessions.queries import SearchHit, SearchQuery

__all__ = [
    "DECODING_ERRORS",
    "INCREMENTABLE_FIELDS",
    "SETTABLE_FIELDS",
    "AppendPlan",
    "apply_update",
    "check_drop_revisions",
    "check_drops_unreferenced",
    "check_ledger_versions",
    "check_ledger_write",
    "check_message_sizes",
    "check_plan",
    "check_revision",
    "check_session_revision",
    "check_state_target",
    "check_title_free",
    "check_update",
    "decodes",
    "first_messages",
    "fresh_record",
    "lease_is_free",
    "ledger_order",
    "ledger_row_matches",
    "make_hit",
    "merged_states",
    "message_size",
    "missing_session",
    "plan_append",
    "rank_hits",
    "revision_step",
    "row_key",
    "session_scope",
    "tool_call_count",
    "touched_entry",
    "written_ledger_rows",
]

SETTABLE_FIELDS: Final = frozenset(
    {"title", "user_id", "model", "model_config", "system_prompt", "archived", "metadata"}
)
"""Record fields that ``update_session(values=...)`` may set."""

INCREMENTABLE_FIELDS: Final = frozenset(
    {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "estimated_cost_usd",
    }
)
"""Record fields that ``update_session(increments=...)`` may add to."""

P = ParamSpec("P")
R = TypeVar("R")

DECODING_ERRORS: Final = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
)
"""What decoding a damaged stored row can raise: invalid JSON (``json.JSONDecodeError``) or
UTF-8 (``UnicodeDecodeError``), both ``ValueError``; a value of the wrong type or a missing
field; an out-of-range time."""


def row_key(row: Sequence[Any], *_: object) -> object:
    """The first column of a row (its id), or ``None`` when the row has none."""
    try:
        return row[0]
    except (IndexError, KeyError, TypeError):
        return None


def decodes(
    table: str, key: Callable[..., object] | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make a row decoder raise :class:`CorruptRecordError` naming ``table`` and the row.

    ``key`` gets the decoder's arguments and returns the row's key (a message or session id);
    it must not fail on a damaged row. The database file is filled in by the backend, which
    knows it (:meth:`CorruptRecordError.located`).
    """

    def decorate(decoder: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(decoder)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return decoder(*args, **kwargs)
            except DECODING_ERRORS as error:
                row = None if key is None else key(*args, **kwargs)
                if isinstance(error, CorruptRecordError):
                    if error.table is not None:
                        raise
                    reason, hint = error.reason, error.hint
                else:
                    reason, hint = f"{type(error).__name__}: {error}", None
                located = CorruptRecordError(
                    reason, path=getattr(error, "path", None), table=table, row=row, hint=hint
                )
                raise located from error

        return wrapper

    return decorate


def check_update(
    values: Mapping[str, Any] | None, increments: Mapping[str, int | float] | None
) -> tuple[dict[str, Any], dict[str, int | float]]:
    """Validate the field names of an ``update_session`` call and return plain dicts."""
    values = dict(values or {})
    increments = dict(increments or {})
    bad = sorted(set(values) - SETTABLE_FIELDS) + sorted(set(increments) - INCREMENTABLE_FIELDS)
    if bad:
        raise InvalidArgumentError(
            f"update_session cannot change {bad}; settable: {sorted(SETTABLE_FIELDS)}, "
            f"incrementable: {sorted(INCREMENTABLE_FIELDS)}"
        )
    for name, amount in increments.items():
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            raise TypeError(f"increment of {name} must be a number, got {type(amount).__name__}")
    return values, increments


def apply_update(
    record: SessionRecord, values: Mapping[str, Any], increments: Mapping[str, int | float]
) -> SessionRecord:
    """Return ``record`` with ``values`` set and ``increments`` added (validated by attrs)."""
    changes = dict(values)
    for name, amount in increments.items():
        current = getattr(record, name)
        changes[name] = (current or 0) + amount
    return attrs.evolve(record, **changes)


def fresh_record(record: SessionRecord) -> SessionRecord:
    """The record as a new session stores it: no messages yet, active since it started."""
    return attrs.evolve(
        record,
        message_count=0,
        tool_call_count=0,
        last_active_at=record.started_at,
        revision=0,
    )


# -- the size of a message -------------------------------------------------------------------------

_KEPT_APART: Final = frozenset({"id", "session_id", "active"})
_TEXT_FIELDS: Final = (
    "role",
    "content",
    "tool_call_id",
    "tool_name",
    "finish_reason",
    "reasoning",
    "platform_message_id",
    "sender_id",
    "sender_name",
)
_TEXT_VALUES: Final = operator.attrgetter(*_TEXT_FIELDS)
_FIXED_BYTES: Final = 512
"""More than every field name, quote, colon and comma, the timestamp and the token count take."""
_MOST_BYTES_PER_CHARACTER: Final = 6  # ``\u001f``: an escaped control character


def message_size(message: Message) -> int:
    """The size of a message as stored: its JSON form without id, session and active flag.

    In UTF-8 bytes; the same for every backend, whatever its own framing adds.
    """
    return len(compact_json(message_dict(message, skip=_KEPT_APART)).encode())


def _bound(message: Message) -> int | None:
    """A cheap upper bound of :func:`message_size` for a text-only message (else ``None``)."""
    if message.extra or message.tool_calls or isinstance(message.content, list):
        return None
    characters = len("".join(filter(None, _TEXT_VALUES(message))))
    return _FIXED_BYTES + _MOST_BYTES_PER_CHARACTER * characters


def check_message_sizes(messages: Iterable[Message], limit: int | None) -> None:
    """Refuse a batch holding a message over ``limit`` bytes (``None``: no limit).

    Called before anything is written. A text-only message far below the limit is passed
    without being encoded.
    """
    if limit is None:
        return
    for index, message in enumerate(messages):
        bound = _bound(message)
        if bound is not None and bound <= limit:
            continue
        size = message_size(message)
        if size > limit:
            raise MessageTooLargeError(size=size, limit=limit, index=index)


def tool_call_count(message: Message) -> int:
    """How many tool calls a message carries."""
    return len(message.tool_calls) if message.tool_calls else 0


def touched_entry(
    entry: SessionEntry, at: datetime, last_prompt_tokens: int | None = None
) -> SessionEntry:
    """``entry`` after activity at ``at``: ``updated_at`` only moves forward, revision unchanged."""
    changes: dict[str, Any] = {}
    if at > entry.updated_at:
        changes["updated_at"] = at
    if last_prompt_tokens is not None:
        changes["last_prompt_tokens"] = last_prompt_tokens
    return attrs.evolve(entry, **changes) if changes else entry


@attrs.frozen
class AppendPlan:
    """What appending a batch to a session does: the result to return and the rows to write."""

    result: AppendResult
    new: tuple[Message, ...]
    """The messages to store, numbered from the ``next_id`` given, with the session id set."""


def plan_append(
    session_id: str,
    messages: Sequence[Message],
    known: Mapping[str, Message],
    next_id: int,
) -> AppendPlan:
    """Apply the redelivery rule to a batch, given the stored messages of its platform ids.

    ``known`` maps platform ids of the batch that the session already holds (active or not) to
    the stored message. If the batch's first message that carries a platform id is known, the
    whole batch is a redelivery and nothing is written. Otherwise known messages are skipped one
    by one (their stored copy returned in place), as are repeats within the batch.
    """
    first = next((m.platform_message_id for m in messages if m.platform_message_id), None)
    if first is not None and first in known:
        existing: dict[int | None, Message] = {}
        for message in messages:
            copy = known.get(message.platform_message_id or "")
            if copy is not None:
                existing.setdefault(copy.id, copy)
        found = tuple(existing.values())
        return AppendPlan(AppendResult(found, duplicate=True, existing=found), ())
    returned: list[Message] = []
    new: list[Message] = []
    skipped: list[Message] = []
    batch: dict[str, Message] = {}
    for message in messages:
        platform_id = message.platform_message_id
        if platform_id is not None:
            earlier = known.get(platform_id)
            if earlier is not None:
                skipped.append(earlier)
                returned.append(earlier)
                continue
            earlier = batch.get(platform_id)
            if earlier is not None:
                returned.append(earlier)
                continue
        numbered = stamped(message, message_id=next_id, session_id=session_id)
        next_id += 1
        if platform_id is not None:
            batch[platform_id] = numbered
        new.append(numbered)
        returned.append(numbered)
    return AppendPlan(AppendResult(returned, existing=skipped), tuple(new))


def missing_session(session_id: str) -> SessionNotFoundError:
    """The error for a write to a session that does not exist."""
    return SessionNotFoundError(
        session_id=session_id, hint="create it first, or check the id (ids are case-sensitive)"
    )


def make_hit(
    message: Message, session: SessionRecord, score: float, query: text.Query
) -> SearchHit:
    """A search hit; its snippet (from the message's original searchable text) is cut when read."""
    return deferred_hit(message, session, score, query)


def _time_key(message: Message) -> float:
    return message.timestamp.timestamp() if message.timestamp is not None else 0.0


def rank_hits(
    scored: list[tuple[Message, float]],
    query: SearchQuery,
    parsed: text.Query,
    record_of: Callable[[str], SessionRecord],
) -> list[SearchHit]:
    """Order ``(message, score)`` pairs as ``query`` asks, cut its page, and build the hits.

    ``rank`` puts the best score first (newer first on ties); ``newest``/``oldest`` order by
    message time. For backends that score in Python (in-memory, JSONL).
    """
    if query.order == "rank":
        scored.sort(key=lambda pair: (-pair[1], -_time_key(pair[0])))
    else:
        scored.sort(key=lambda pair: _time_key(pair[0]), reverse=query.order == "newest")
    end = None if query.limit is None else query.offset + query.limit
    hits = []
    for message, score in scored[query.offset : end]:
        assert message.session_id is not None  # noqa: S101  # stored messages have one
        hits.append(make_hit(message, record_of(message.session_id), score, parsed))
    return hits


# -- the rotation plan and leases ------------------------------------------------------------------


def check_revision(key: str, expected: int | None, actual: int | None) -> None:
    """Raise ``ConflictError`` unless the key's ``actual`` revision is the ``expected`` one."""
    if actual != expected:
        raise ConflictError(key, expected_revision=expected, actual_revision=actual)


def check_session_revision(session_id: str, expected: int | None, actual: int) -> None:
    """Raise ``ConflictError`` when an ``if_revision=`` write finds the session moved on."""
    if expected is not None and expected != actual:
        raise ConflictError(
            session_id=session_id, expected_revision=expected, actual_revision=actual
        )


def check_state_target(session_id: str | None, if_revision: int | None) -> None:
    """``update_state``'s arguments: ``if_revision`` needs the session it refers to."""
    if if_revision is not None and session_id is None:
        raise InvalidArgumentError(
            "if_revision= needs session_id=: a revision belongs to a session"
        )
    if isinstance(if_revision, bool) or not isinstance(if_revision, int | None):
        raise TypeError(f"if_revision must be an int, got {if_revision!r}")


def session_scope(session_id: str) -> str:
    """The scope id of a session's own state (what ``delete_session`` and plans refer to)."""
    return StateScope.session(session_id).id


def merged_states(
    changes: Mapping[str, Mapping[str, Any]], current: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Every changed scope's new value (``{}``: the scope is now empty), from the stored ones.

    Raises ``StateTooLargeError`` before anything is written.
    """
    return {
        scope_id: merge_state(scope_id, current.get(scope_id), scope_changes)
        for scope_id, scope_changes in changes.items()
    }


def revision_step(stored_anything: bool, changes: Mapping[str, Any] | None) -> int:  # noqa: FBT001
    """How much an append moves the session's revision: one if it stored or changed anything."""
    return 1 if stored_anything or changes else 0


def check_plan(
    plan: RotationPlan,
    revision_of: Callable[[str], int | None],
    ended_of: Callable[[str], bool | None],
) -> None:
    """Check a plan's preconditions; raise ``ConflictError`` or ``SessionNotFoundError``.

    ``revision_of`` gives a key's current revision (``None``: no entry) and ``ended_of`` whether a
    session has ended (``None``: no such session), as the backend holds them now.
    """
    for write in plan.entries:
        key = write.entry.session_key
        check_revision(key, write.expected_revision, revision_of(key))
    for key, expected in plan.delete:
        check_revision(key, expected, revision_of(key))
    for session_id in plan.require_open:
        ended = ended_of(session_id)
        if ended is None:
            raise missing_session(session_id)
        if ended:
            raise ConflictError(session_id=session_id)
    created = plan.create.id if plan.create is not None else None
    if created is not None and ended_of(created) is not None:
        raise ConflictError(session_id=created)
    needed = [w.entry.session_id for w in plan.entries] + [t for _, t in plan.repoint]
    needed += list(plan.reopen) + [s for s, _ in plan.end] + [s for s, _ in plan.rekey]
    needed += [s for s in (plan.copy_state_from, plan.copy_messages_from) if s is not None]
    for session_id in dict.fromkeys(needed):
        if session_id != created and ended_of(session_id) is None:
            raise missing_session(session_id)


def check_drop_revisions(plan: RotationPlan, revision_of: Callable[[str], int | None]) -> None:
    """Check each ``plan.drop`` session's revision before the plan writes anything.

    ``revision_of`` gives a session's current revision (``None``: no such session). A session
    that moved on is a ``ConflictError``; one that is gone is ``SessionNotFoundError``.
    """
    for session_id, expected in plan.drop:
        check_session_revision(session_id, expected, _existing_revision(session_id, revision_of))


def _existing_revision(session_id: str, revision_of: Callable[[str], int | None]) -> int:
    actual = revision_of(session_id)
    if actual is None:
        raise missing_session(session_id)
    return actual


def check_drops_unreferenced(plan: RotationPlan, points_at: Callable[[str], bool]) -> None:
    """Refuse ``plan.drop`` sessions a key points at once the plan's entries are written.

    Called in the plan's transaction after steps 3-5 (or against the planned index): a key
    that moved onto a session since it was chosen keeps it (``ConflictError``).
    """
    for session_id, _ in plan.drop:
        if points_at(session_id):
            raise ConflictError(session_id=session_id)


def first_messages(plan: RotationPlan, copied: Sequence[Message]) -> list[Message]:
    """The first messages of ``plan.create``: ``copied``, then ``plan.messages``.

    ``copied`` is ``copy_messages_from``'s transcript, read in the plan's transaction; the copies
    lose their ids (the new session numbers them).
    """
    return [attrs.evolve(m, id=None, session_id=None) for m in copied] + list(plan.messages)


def check_title_free(record: SessionRecord, others: Iterable[SessionRecord]) -> None:
    """Raise ``TitleConflictError`` if another of ``others`` holds ``record``'s title.

    Called in the write that stores ``record``, under the backend's write lock.
    """
    holder = title_holder(record, others)
    if holder is not None and record.title is not None:
        raise TitleConflictError(record.title, holder)


def lease_is_free(current: tuple[str, datetime] | None, holder: str, now: datetime) -> bool:
    """Whether ``holder`` may take a lease currently held as ``current`` (holder, until)."""
    return current is None or current[0] == holder or current[1] <= now


# -- the turn ledger (SupportsLedger) --------------------------------------------------------------


def check_ledger_write(session_id: str, rows: Sequence[LedgerRow], message_count: int) -> None:
    """Refuse a ledger write whose rows name another session, repeat, or bind no message."""
    seen: set[tuple[str, str]] = set()
    for row in rows:
        if row.session_id != session_id:
            raise InvalidArgumentError(
                f"ledger row {row.id!r} belongs to session {row.session_id!r}, not {session_id!r}"
            )
        if (row.kind, row.id) in seen:
            raise InvalidArgumentError(f"ledger row {row.id!r} is written twice in one write")
        seen.add((row.kind, row.id))
        index = row.message_index
        if index is not None and not 0 <= index < message_count:
            raise InvalidArgumentError(
                f"ledger row {row.id!r} binds message {index} of a write of {message_count}"
            )


def check_ledger_versions(rows: Sequence[LedgerRow], stored: Mapping[tuple[Any, str], int]) -> None:
    """Raise ``LedgerConflictError`` if a row's version is not the stored one (0: absent)."""
    for row in rows:
        actual = stored.get((row.kind, row.id), 0)
        if actual != row.version:
            raise LedgerConflictError(
                row.kind, row.id, expected_version=row.version, actual_version=actual
            )


def written_ledger_rows(rows: Sequence[LedgerRow], result: AppendResult) -> list[LedgerRow]:
    """The rows as a write stores them (next version, bound message ids)."""
    return [
        row.written(None if row.message_index is None else result[row.message_index].id)
        for row in rows
    ]


def ledger_row_matches(
    row: LedgerRow,
    kind: str,
    ids: Collection[str] | None,
    status: str | None,
    session_key: str | None,
) -> bool:
    """Whether ``row`` passes the filters of ``ledger_rows``."""
    return (
        row.kind == kind
        and (ids is None or row.id in ids)
        and (status is None or row.status == status)
        and (session_key is None or row.session_key == session_key)
    )


def ledger_order(rows: Iterable[LedgerRow]) -> list[LedgerRow]:
    """Rows in the order ``ledger_rows`` returns them: by ``(updated_at, id)``."""
    return sorted(rows, key=lambda row: (row.updated_at, row.id))
