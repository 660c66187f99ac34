"""Integrations with agent frameworks and protocols, one module per framework.

* :mod:`hermes_sessions.integrations.openai_agents` — :class:`~.openai_agents.AgentsSession`, a
  session of the OpenAI Agents SDK kept in a hermes-sessions store (extra ``openai-agents``).
* :mod:`hermes_sessions.integrations.adk` — :class:`~.adk.HermesSessionService`, a Google ADK
  session service on a hermes-sessions store (extra ``adk``).
* :mod:`hermes_sessions.integrations.mcp` — the ``session_search`` and ``memory`` tools and the
  transcripts as an MCP server (extra ``mcp``; ``hermes-sessions mcp`` runs it over stdio).

Each module imports its framework only when it is used, so importing it (or
``hermes_sessions``) costs nothing when the framework is not installed. See
``docs/integrations.md``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__: list[str] = []
