"""Message converters between :class:`~hermes_sessions.models.Message` and model APIs.

The wire formats are plain dicts; no vendor SDK is needed.

* :mod:`hermes_sessions.formats.openai_chat` — Chat Completions ``messages``.
* :mod:`hermes_sessions.formats.openai_responses` — Responses ``input`` items.
* :mod:`hermes_sessions.formats.anthropic` — Anthropic Messages ``system`` + ``messages``.

Each module has ``from_*``, ``to_*`` and ``unexpressed``: vendor → Message → vendor is exact
(what a Message has no field for is kept in ``Message.extra``), Message → vendor emits only the
keys the vendor's schema accepts, and ``unexpressed(message)`` names what a conversion leaves
out. See ``docs/host-helpers.md``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from hermes_sessions.formats.anthropic import from_anthropic, to_anthropic
from hermes_sessions.formats.openai_chat import from_openai_chat, to_openai_chat
from hermes_sessions.formats.openai_responses import from_openai_responses, to_openai_responses

__all__ = [
    "from_anthropic",
    "from_openai_chat",
    "from_openai_responses",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
]
