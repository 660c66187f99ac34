"""Session state: JSON key-value state in four scopes, changed in the same commit as a turn.

A host keeps small facts beside its conversations — the model a user chose, their language, a
feature flag for the whole app, a framework's per-session variables. Each lives in one scope:

* :meth:`StateScope.app` — everything an app (by default the store's key namespace) shares;
* :meth:`StateScope.user` — one user of one platform in that app;
* :meth:`StateScope.lane` — one conversation lane (a session key): it survives ``/new``, resets
  and compression, like the lane itself;
* :meth:`StateScope.session` — one session: compression and branch copy it to the new session,
  a reset or ``/new`` starts empty.

A scope's value is a JSON object. A *delta* ``{scope: {key: value}}`` sets top-level keys;
:data:`DELETE` as a value removes one. ``SessionStore.append(..., state_delta=)`` applies it in
the transaction that stores the messages; ``SessionStore.update_state`` applies one alone. Every
change of a session's transcript or state bumps its ``SessionRecord.revision``, and
``if_revision=`` refuses a stale write with :class:`~hermes_sessions.exceptions.ConflictError`.
A scope holds at most :data:`MAX_STATE_BYTES` (its JSON form); a larger result is refused with
:class:`~hermes_sessions.exceptions.StateTooLargeError` and nothing is written.

Backends see scopes as opaque strings (:attr:`StateScope.id`) and merge with
:func:`merge_state`, the one rule every backend shares.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias, final

import attrs

from hermes_sessions.cipher import ENVELOPE_PREFIX, envelope_plaintext_size
from hermes_sessions.exceptions import InvalidArgumentError, StateTooLargeError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import JSONObject, check_json

__all__ = [
    "DELETE",
    "MAX_STATE_BYTES",
    "SessionState",
    "StateDelta",
    "StateScope",
    "merge_state",
    "normalize_delta",
    "state_size",
]

MAX_STATE_BYTES: Final = 64 * 1024
"""The largest value one scope may hold: its compact JSON form, in UTF-8 bytes (64 KiB).

.. versionadded:: 0.1.0
"""


@final
class _Delete:
    """The type of :data:`DELETE` (one instance)."""

    _instance: _Delete | None = None

    def __new__(cls) -> _Delete:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DELETE"

    def __reduce__(self) -> str:
        return "DELETE"


DELETE: Final = _Delete()
"""A delta value that removes its key from the scope (``{"model": DELETE}``).

.. versionadded:: 0.1.0
"""

ScopeKind: TypeAlias = Literal["app", "user", "lane", "session"]


def _part(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(
            f"a state scope's {name} must be a non-empty string, got {value!r}"
        )
    return value


def _encode(part: str) -> str:
    return part.replace("%", "%25").replace("|", "%7C")


def scope_id(kind: ScopeKind, *parts: str) -> str:
    """The stored id of a scope whose parts are known to be valid (``StateScope(...).id``).

    For library internals on the path of every lookup, which build the ids of a session's
    four scopes from values the store checked already.
    """
    return "|".join((kind, *map(_encode, parts)))


@attrs.frozen
class StateScope:
    """Where a piece of state lives; build one with the class methods.

    .. versionadded:: 0.1.0
    """

    kind: ScopeKind
    parts: tuple[str, ...]

    @classmethod
    def app(cls, app_id: str) -> StateScope:
        """State every conversation of ``app_id`` shares (feature flags, app settings)."""
        return cls("app", (_part(app_id, "app_id"),))

    @classmethod
    def user(cls, app_id: str, platform: str, user_id: str) -> StateScope:
        """State of one user of ``platform`` in ``app_id`` (their preferences)."""
        parts = (_part(app_id, "app_id"), _part(platform, "platform"), _part(user_id, "user_id"))
        return cls("user", parts)

    @classmethod
    def lane(cls, session_key: str) -> StateScope:
        """State of one conversation lane: survives ``/new``, resets and compression."""
        return cls("lane", (_part(session_key, "session_key"),))

    @classmethod
    def session(cls, session_id: str) -> StateScope:
        """State of one session: copied by compression and branch, not by a reset."""
        validate_session_id(session_id)
        return cls("session", (session_id,))

    @property
    def id(self) -> str:
        """The scope as backends store it: ``kind|part|...`` (``%`` and ``|`` encoded)."""
        return scope_id(self.kind, *self.parts)


StateDelta: TypeAlias = Mapping[StateScope, Mapping[str, Any]]
"""``{scope: {key: value or DELETE}}``: what a change sets and removes.

.. versionadded:: 0.1.0
"""


@attrs.frozen
class SessionState:
    """The state a turn sees: its app's, its user's, its lane's and its session's.

    Each is a JSON object (empty when nothing was set; ``user`` is empty when the session has
    no user).

    .. versionadded:: 0.1.0
    """

    app: JSONObject = attrs.field(factory=dict)
    user: JSONObject = attrs.field(factory=dict)
    lane: JSONObject = attrs.field(factory=dict)
    session: JSONObject = attrs.field(factory=dict)


def normalize_delta(delta: StateDelta) -> dict[str, dict[str, Any]]:
    """Check a delta and key it by scope id (what backends receive); raise ``ValueError``.

    Keys are strings; values are JSON (the rule of ``Message.extra``) or :data:`DELETE`.

    .. versionadded:: 0.1.0
    """
    if not isinstance(delta, Mapping):
        raise TypeError(f"state_delta must be a mapping of StateScope to dict, got {delta!r}")
    out: dict[str, dict[str, Any]] = {}
    for scope, changes in delta.items():
        if not isinstance(scope, StateScope):
            raise TypeError(
                f"state_delta keys are StateScope values (StateScope.lane(key), ...), got {scope!r}"
            )
        if not isinstance(changes, Mapping):
            raise TypeError(f"the changes of {scope.id} must be a dict, got {changes!r}")
        checked: dict[str, Any] = out.setdefault(scope.id, {})
        for key, value in changes.items():
            name: object = key
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError(
                    f"state keys are non-empty strings, got {key!r} in {scope.id}"
                )
            if value is not DELETE:
                check_json(value, f"state[{scope.id!r}][{key!r}]")
            checked[key] = value
    return {scope_id: changes for scope_id, changes in out.items() if changes}


def state_size(value: JSONObject) -> int:
    """The size a scope's value counts against :data:`MAX_STATE_BYTES`.

    A value that is a :mod:`~hermes_sessions.cipher` envelope counts as the JSON it holds.

    .. versionadded:: 0.1.0
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    size = len(text.encode())
    for item in value.values():
        if isinstance(item, str) and item.startswith(ENVELOPE_PREFIX):
            # An encrypted store keeps each value as an envelope of its JSON: count that JSON,
            # so a scope holds as much encrypted as plain (docs/privacy.md).
            held = envelope_plaintext_size(item)
            if held is not None:
                size += held - len(item) - 2
    return size


def merge_state(
    scope_id: str, current: JSONObject | None, changes: Mapping[str, Any]
) -> JSONObject:
    """The scope's value after ``changes`` (sets, and removals for :data:`DELETE`).

    Raises :class:`~hermes_sessions.exceptions.StateTooLargeError` when the result exceeds
    :data:`MAX_STATE_BYTES`. An empty result means the scope holds nothing (backends may drop
    its row).

    .. versionadded:: 0.1.0
    """
    merged = dict(current or {})
    for key, value in changes.items():
        if value is DELETE:
            merged.pop(key, None)
        else:
            merged[key] = value
    size = state_size(merged)
    if size > MAX_STATE_BYTES:
        raise StateTooLargeError(scope_id, size, MAX_STATE_BYTES)
    return merged
