"""Google ADK sessions kept in a hermes-sessions store.

:class:`HermesSessionService` is a ``google.adk.sessions.BaseSessionService`` on a
:class:`~hermes_sessions.store.SessionStore` or an :class:`~hermes_sessions.aio.AsyncSessionStore`,
so an ADK ``Runner`` keeps its sessions, events and state where the host's other conversations
live::

    service = HermesSessionService(store)
    runner = Runner(app_name="helpdesk", agent=agent, session_service=service)

An ADK session is a conversation *lane* of platform ``adk`` (its app, user and session id make
the key); its events are messages whose text is searchable and which come back equal to the
events appended; its ``app:``, ``user:`` and plain state keys live in the store's app, user and
session state scopes and change in the same commit as the event. ADK is imported when
``HermesSessionService`` is first used, not when this module is.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.exceptions import MissingDependencyError

if TYPE_CHECKING:
    from hermes_sessions.integrations._adk_service import HermesSessionService

__all__ = ["PLATFORM", "HermesSessionService"]

PLATFORM: Final = "adk"
"""The platform of the lanes that hold ADK sessions.

.. versionadded:: 0.1.0
"""


def __getattr__(name: str) -> Any:
    """Load the service (and ADK with it) on first use; name the extra when ADK is missing."""
    if name != "HermesSessionService":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from hermes_sessions.integrations import _adk_service  # noqa: PLC0415  # ADK loads here
    except ImportError as error:
        if error.name is not None and not error.name.startswith("google"):
            raise
        raise MissingDependencyError(
            "google-adk", extra="adk", feature="HermesSessionService"
        ) from error
    return _adk_service.HermesSessionService
