"""What ``check()`` reports, and the library's invariants it verifies on every backend.

A backend's :meth:`~hermes_sessions.protocols.SupportsCheck.check` adds what only it can see
(SQLite's ``PRAGMA integrity_check``, the checksums of JSONL lines) to
:func:`invariant_problems`, which reads the store through the :class:`~.protocols.Backend`
protocol and so is written once for all backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs

from hermes_sessions.exceptions import CorruptRecordError, StorageError
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hermes_sessions.protocols import Backend

__all__ = [
    "CheckProblem",
    "CheckReport",
    "ProblemKind",
    "corrupt_problem",
    "invariant_problems",
    "make_report",
]

ProblemKind = Literal[
    "storage", "corrupt", "index", "dangling_key", "live_sessions", "counters", "encryption"
]
"""What a :class:`CheckProblem` is about.

``storage``: the medium's own check failed (a damaged page, a line whose checksum is wrong, a
file the index does not account for); ``corrupt``: a record could not be read back; ``index``:
a search index disagrees with the messages; ``dangling_key``: a routing key points at a missing
session; ``live_sessions``: a session not ended was left behind by its key; ``counters``: a
session's counters disagree with its transcript; ``encryption`` (encrypted stores): a value
stored in the clear, sealed under a key other than the current one, or that does not open
where it is (damaged, or copied from another place).
"""


@attrs.frozen
class CheckProblem:
    """One thing ``check()`` found wrong.

    Attributes:
        kind: What it is about (see :data:`ProblemKind`).
        where: The place: a file and line, a table and row, a session id or a routing key.
        detail: What is wrong, and where it helps, what to do.

    .. versionadded:: 0.1.0
    """

    kind: ProblemKind
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.where}: {self.detail}" if self.where else self.detail


def _problem_tuple(problems: Iterable[CheckProblem]) -> tuple[CheckProblem, ...]:
    return tuple(problems)


@attrs.frozen
class CheckReport:
    """What ``check()`` found: every problem (none when healthy) and how much it read.

    .. versionadded:: 0.1.0
    """

    problems: tuple[CheckProblem, ...] = attrs.field(converter=_problem_tuple)
    sessions: int = attrs.field(default=0, kw_only=True)
    """How many sessions the invariants were checked on."""

    @property
    def ok(self) -> bool:
        """Whether nothing is wrong."""
        return not self.problems


def corrupt_problem(error: CorruptRecordError, kind: ProblemKind = "corrupt") -> CheckProblem:
    """The problem of a record that cannot be read: ``where`` is its file, line, table, row."""
    places = [] if error.path is None else [str(error.path)]
    if error.line is not None:
        places.append(f"line {error.line}")
    if error.table is not None:
        places.append(error.table)
    if error.row is not None:
        places.append(f"row {error.row!r}")
    return CheckProblem(kind, " ".join(places), error.reason)


def _unreadable(error: CorruptRecordError | StorageError) -> CheckProblem:
    if isinstance(error, CorruptRecordError):
        return corrupt_problem(error)
    return CheckProblem("storage", "", str(error))


def invariant_problems(backend: Backend) -> tuple[list[CheckProblem], int]:
    """The library's invariants on ``backend``: the problems found and the sessions read.

    Every routing key points at an existing session; a key has one live session (a session
    not ended whose key points elsewhere, and no key at it, was left behind by a rotation that
    did not end it); every session's ``message_count`` and ``tool_call_count`` match its
    transcript. A record that cannot be read is reported (``corrupt``), never raised.
    """
    try:
        records = [s.record for s in backend.list_sessions(SessionQuery(limit=None)).items]
        entries = backend.entries()
    except (CorruptRecordError, StorageError) as error:
        return [_unreadable(error)], 0
    problems: list[CheckProblem] = []
    known = {record.id for record in records}
    problems.extend(
        CheckProblem(
            "dangling_key",
            entry.session_key,
            f"points at missing session {entry.session_id}; the next message to the key will "
            "fail until the key is reset (SessionStore.reset) or, on JSONL, repair() drops it",
        )
        for entry in entries
        if entry.session_id not in known and backend.get_session(entry.session_id) is None
    )
    current = {entry.session_key: entry.session_id for entry in entries}
    referenced = set(current.values())
    problems.extend(
        CheckProblem(
            "live_sessions",
            record.session_key,
            f"session {record.id} is not ended, but the key points at {current[record.session_key]}"
            " and no key at it; end it (backend.end_session) or delete it "
            "(`hermes-sessions delete`)",
        )
        for record in sorted(records, key=lambda r: r.id)
        if record.ended_at is None and record.session_key in current and record.id not in referenced
    )
    for record in sorted(records, key=lambda r: r.id):
        try:
            messages = backend.get_messages(record.id)
        except (CorruptRecordError, StorageError) as error:
            problems.append(_unreadable(error))
            continue
        calls = sum(len(m.tool_calls) if m.tool_calls else 0 for m in messages)
        if (record.message_count, record.tool_call_count) != (len(messages), calls):
            problems.append(
                CheckProblem(
                    "counters",
                    record.id,
                    f"the record counts {record.message_count} messages and "
                    f"{record.tool_call_count} tool calls, the transcript has {len(messages)} "
                    f"and {calls}",
                )
            )
    return problems, len(records)


def make_report(backend: Backend, storage: Iterable[CheckProblem] = ()) -> CheckReport:
    """The report of ``backend``: its own ``storage`` problems, then the invariants."""
    problems = list(storage)
    found, sessions = invariant_problems(backend)
    return CheckReport([*problems, *found], sessions=sessions)
