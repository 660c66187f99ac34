"""Everything a backend author imports, in one module.

A backend is a class with the methods of :class:`Backend` (there is nothing to inherit); this
module gathers what writing one takes, so that a backend's imports are one line:

* **the protocols** — :class:`Backend` and its layers, the optional abilities (``Supports*``,
  checked with ``isinstance``), :class:`RotationPlan` and the values they exchange;
* **the models and errors** a backend reads, returns and raises;
* **the rules**, written once, that every backend applies the same way
  (:mod:`hermes_sessions.backends.rules`: the redelivery rule, revision checks, a plan's
  preconditions, title uniqueness, leases, update fields, size limits);
* **building blocks** for a backend that holds a session in memory while it works on it
  (:mod:`hermes_sessions.backends.memtables`: :class:`Transcript`, :class:`EntryTable`,
  :func:`resolve_plan`, :func:`session_page`, :class:`MessageIndex`);
* **shared helpers** — the JSON converter (:func:`structure`, :func:`unstructure`), private
  files written atomically, id validation, the check report, the re-index loop, the retry
  pause (:mod:`hermes_sessions.backoff`), and for a SQL database the rows, filters and
  listings of :mod:`hermes_sessions.backends.sqlrows` (:class:`SQLDialect`);
* **the forwarding base** for a wrapper, :class:`ForwardingBackend` (and one mixin per
  optional ability, ``Forwards*``): subclass it and override only what the wrapper changes;
* **the conformance suite**, :class:`BackendContract`: subclass it in a test module and
  implement ``make_backend(directory)``. It needs pytest (``pip install
  'hermes-sessions[testing]'``) and is imported only when this name is first used, so importing
  this module never imports pytest.

``examples/custom_backend.py`` is a complete backend written against this module alone, and
``docs/backends.md`` walks through it.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_sessions import backoff, text
from hermes_sessions.backends.memtables import (
    EntryTable,
    MessageIndex,
    ResolvedPlan,
    Transcript,
    resolve_plan,
    session_page,
)
from hermes_sessions.backends.reindexing import check_batch_size, run_reindex
from hermes_sessions.backends.rules import (
    DECODING_ERRORS,
    INCREMENTABLE_FIELDS,
    SETTABLE_FIELDS,
    AppendPlan,
    apply_update,
    check_drop_revisions,
    check_drops_unreferenced,
    check_ledger_versions,
    check_ledger_write,
    check_message_sizes,
    check_plan,
    check_revision,
    check_session_revision,
    check_state_target,
    check_title_free,
    check_update,
    decodes,
    first_messages,
    fresh_record,
    lease_is_free,
    ledger_order,
    ledger_row_matches,
    make_hit,
    merged_states,
    message_size,
    missing_session,
    plan_append,
    rank_hits,
    revision_step,
    row_key,
    session_scope,
    tool_call_count,
    touched_entry,
    written_ledger_rows,
)
from hermes_sessions.backends.sqlrows import SQLDialect
from hermes_sessions.checks import CheckProblem, CheckReport, corrupt_problem, make_report
from hermes_sessions.closing import ClosesOnExit
from hermes_sessions.exceptions import (
    BackendClosedError,
    ConflictError,
    CorruptRecordError,
    IncompatibleStoreError,
    InvalidArgumentError,
    InvalidIdError,
    LedgerConflictError,
    MessageTooLargeError,
    SessionNotFoundError,
    StateTooLargeError,
    StorageError,
    TitleConflictError,
)
from hermes_sessions.files import create_file, make_private_dir, replace_file, write_file
from hermes_sessions.forwarding import (
    ForwardingBackend,
    ForwardsCheck,
    ForwardsLedger,
    ForwardsReindex,
    ForwardsScrub,
    ForwardsSearch,
    ForwardsStateScopes,
    ForwardsUserKeys,
    ForwardsWriteBatches,
)
from hermes_sessions.ids import validate_session_id
from hermes_sessions.ledger import LedgerKind, LedgerRow
from hermes_sessions.models import EndReason, Message, SessionEntry, SessionRecord
from hermes_sessions.options import DEFAULT_MAX_MESSAGE_BYTES
from hermes_sessions.protocols import (
    Backend,
    Capabilities,
    Clock,
    EntryWrite,
    ReindexProgress,
    RotationPlan,
    RoutingIndex,
    SearchableBackend,
    StateStore,
    SupportsCheck,
    SupportsLedger,
    SupportsReindex,
    SupportsScrub,
    SupportsSearch,
    SupportsStateScopes,
    SupportsUserKeys,
    SupportsWriteBatches,
    TranscriptStore,
)
from hermes_sessions.queries import (
    SearchHit,
    SearchQuery,
    SessionPage,
    SessionQuery,
    SessionSummary,
    encode_cursor,
    make_preview,
)
from hermes_sessions.results import AppendResult
from hermes_sessions.serde import compact_json, structure, unstructure
from hermes_sessions.state import MAX_STATE_BYTES, StateScope, merge_state
from hermes_sessions.usage import Usage

if TYPE_CHECKING:
    from hermes_sessions.testing import BackendContract

__all__ = [
    "DECODING_ERRORS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "INCREMENTABLE_FIELDS",
    "MAX_STATE_BYTES",
    "SETTABLE_FIELDS",
    "AppendPlan",
    "AppendResult",
    "Backend",
    "BackendClosedError",
    "BackendContract",
    "Capabilities",
    "CheckProblem",
    "CheckReport",
    "Clock",
    "ClosesOnExit",
    "ConflictError",
    "CorruptRecordError",
    "EndReason",
    "EntryTable",
    "EntryWrite",
    "ForwardingBackend",
    "ForwardsCheck",
    "ForwardsLedger",
    "ForwardsReindex",
    "ForwardsScrub",
    "ForwardsSearch",
    "ForwardsStateScopes",
    "ForwardsUserKeys",
    "ForwardsWriteBatches",
    "IncompatibleStoreError",
    "InvalidArgumentError",
    "InvalidIdError",
    "LedgerConflictError",
    "LedgerKind",
    "LedgerRow",
    "Message",
    "MessageIndex",
    "MessageTooLargeError",
    "ReindexProgress",
    "ResolvedPlan",
    "RotationPlan",
    "RoutingIndex",
    "SQLDialect",
    "SearchHit",
    "SearchQuery",
    "SearchableBackend",
    "SessionEntry",
    "SessionNotFoundError",
    "SessionPage",
    "SessionQuery",
    "SessionRecord",
    "SessionSummary",
    "StateScope",
    "StateStore",
    "StateTooLargeError",
    "StorageError",
    "SupportsCheck",
    "SupportsLedger",
    "SupportsReindex",
    "SupportsScrub",
    "SupportsSearch",
    "SupportsStateScopes",
    "SupportsUserKeys",
    "SupportsWriteBatches",
    "TitleConflictError",
    "Transcript",
    "TranscriptStore",
    "Usage",
    "apply_update",
    "backoff",
    "check_batch_size",
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
    "compact_json",
    "corrupt_problem",
    "create_file",
    "decodes",
    "encode_cursor",
    "first_messages",
    "fresh_record",
    "lease_is_free",
    "ledger_order",
    "ledger_row_matches",
    "make_hit",
    "make_preview",
    "make_private_dir",
    "make_report",
    "merge_state",
    "merged_states",
    "message_size",
    "missing_session",
    "plan_append",
    "rank_hits",
    "replace_file",
    "resolve_plan",
    "revision_step",
    "row_key",
    "run_reindex",
    "session_page",
    "session_scope",
    "structure",
    "text",
    "tool_call_count",
    "touched_entry",
    "unstructure",
    "validate_session_id",
    "write_file",
    "written_ledger_rows",
]


def __getattr__(name: str) -> Any:
    """Import the conformance suite (and pytest) only when ``BackendContract`` is used."""
    if name == "BackendContract":
        from hermes_sessions.testing import BackendContract  # noqa: PLC0415  # needs pytest

        return BackendContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
