"""Adapters from the bot frameworks people already use to the store.

One small module per platform — :mod:`~hermes_sessions.adapters.feishu`,
:mod:`~hermes_sessions.adapters.telegram`, :mod:`~hermes_sessions.adapters.discord`,
:mod:`~hermes_sessions.adapters.slack`, :mod:`~hermes_sessions.adapters.dingtalk` — each with a
pure ``convert(event)`` from the framework's inbound event (its object, or the plain dict
payload) to a :class:`NewMessage`, :class:`Edit` or :class:`Retract`, and ``None`` for events
that do not concern the transcript. :func:`apply` performs the result on a store, and
:func:`aapply` on an :class:`~hermes_sessions.aio.AsyncSessionStore`. No framework
is imported, here or in the platform modules: they read the objects they are given.
"""

from __future__ import annotations

from hermes_sessions.adapters._events import (
    Applied,
    Edit,
    InboundEvent,
    NewMessage,
    React,
    Retract,
    aapply,
    apply,
)

__all__ = [
    "Applied",
    "Edit",
    "InboundEvent",
    "NewMessage",
    "React",
    "Retract",
    "aapply",
    "apply",
]
