"""Session state as the store reads and changes it: the four scopes of a turn, in one read.

The app scope is the store's key namespace (``agent:<namespace>:...``, ``main`` by default); the
user scope is the session's platform and user; the lane scope its key; the session scope its
id. See :mod:`hermes_sessions.state` for the rules and ``docs/concepts.md`` for when to use which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.state import SessionState, normalize_delta, scope_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from hermes_sessions.models import SessionEntry, SessionRecord
    from hermes_sessions.protocols import Backend
    from hermes_sessions.state import StateDelta

__all__ = ["as_changes", "changes_of", "lookup", "read", "read_for_record"]


def read(
    backend: Backend,
    app_id: str,
    *,
    session_key: str | None,
    session_id: str,
    platform: str | None,
    user_id: str | None,
) -> SessionState:
    """The four scopes of one session, in one backend read."""
    app, user, lane = _shared_scopes(app_id, session_key, platform, user_id)
    session = scope_id("session", session_id)
    wanted = [scope for scope in (app, user, lane, session) if scope is not None]
    return _state_of(backend.get_state(wanted), app, user, lane, session)


def _shared_scopes(
    app_id: str, session_key: str | None, platform: str | None, user_id: str | None
) -> tuple[str, str | None, str | None]:
    """The ids of the app, user and lane scopes (``None``: the session has no such scope)."""
    # The parts come from the store's namespace and a source, entry or record: valid already.
    app = scope_id("app", app_id)
    user = scope_id("user", app_id, platform, user_id) if platform and user_id else None
    lane = scope_id("lane", session_key) if session_key else None
    return app, user, lane


def _state_of(
    found: Mapping[str, dict[str, Any]], app: str, user: str | None, lane: str | None, session: str
) -> SessionState:
    if not found:  # the usual case: nothing set in any scope
        return SessionState()
    return SessionState(
        app=found.get(app, {}),
        user=found.get(user, {}) if user else {},
        lane=found.get(lane, {}) if lane else {},
        session=found.get(session, {}),
    )


def lookup(
    backend: Backend, app_id: str, key: str, platform: str | None, user_id: str | None
) -> tuple[SessionEntry | None, SessionState | None]:
    """``key``'s entry and, when the backend reads both at once, the state its turn sees.

    The state is ``None`` when the backend cannot (then :func:`read` gets it once the session
    is known) and when ``key`` has no entry. Only the SQLite backend reads both at once
    (``entry_with_state``); a router or a wrapper in front of it reads them one by one. The
    method is looked up on the class: the incognito router hands its backend's extras on
    through ``__getattr__``, and this read must not bypass its routing.
    """
    both = getattr(type(backend), "entry_with_state", None)
    if both is None:
        return backend.get_entry(key), None
    app, user, lane = _shared_scopes(app_id, key, platform, user_id)
    wanted = [scope for scope in (app, user, lane) if scope is not None]
    entry, found = both(backend, key, wanted)
    if entry is None:
        return None, None
    return entry, _state_of(found, app, user, lane, scope_id("session", entry.session_id))


def read_for_record(backend: Backend, app_id: str, record: SessionRecord) -> SessionState:
    """The state a turn of ``record``'s session sees (its key, platform and user)."""
    return read(
        backend,
        app_id,
        session_key=record.session_key,
        session_id=record.id,
        platform=record.source,
        user_id=record.user_id,
    )


def changes_of(
    delta: StateDelta, session_id: str | None
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The delta as backends take it, and the session the change is made through.

    Without ``session_id``, a delta that changes exactly one session scope is made through that
    session (its revision moves); one that changes several must name the session.
    """
    changes = normalize_delta(delta)
    if session_id is None:
        sessions = {scope.parts[0] for scope in delta if scope.kind == "session"}
        if len(sessions) > 1:
            raise InvalidArgumentError(
                "this delta changes the state of several sessions; pass session_id= to say "
                "which one the change is made through (its revision moves)"
            )
        session_id = next(iter(sessions), None)
    return changes, session_id


def as_changes(delta: Mapping[Any, Any] | None) -> dict[str, dict[str, Any]] | None:
    """``append``'s ``state_delta`` as backends take it (``None`` stays ``None``)."""
    return None if delta is None else normalize_delta(delta)
