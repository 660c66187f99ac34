"""LLM tools: JSON schemas in the OpenAI function-tool format, and handlers returning JSON dicts.

Each tool is a schema constant (``{"type": "function", "function": {"name", "description",
"parameters"}}``; the parameters are a plain JSON Schema object, without a top-level ``anyOf`` /
``oneOf``, which several providers reject) and a ``handle_<name>(context, arguments)`` function.

Handlers take the arguments as the model sent them (a mapping, or the raw JSON string of a tool
call) and always return a JSON-serialisable dict: ``{"success": True, ...}`` or ``{"success":
False, "error": "<what went wrong and what to do>", "code": "<machine-readable reason>", ...}``.
They never raise for bad arguments or for anything hermes-sessions refuses on purpose; a model
reads the error and tries again.

Each handler first checks the arguments against the schema it advertises
(``hermes_sessions._tool_schema.check_arguments``): what the schema forbids (an unknown
argument, a wrong type, a value outside an enum or below a minimum) is refused with
``code="invalid_arguments"``. The leniency models need is part of the schema itself: a count
may be sent as text (``"5"``), ``null`` means "not given", and a count above the largest one
used is read as that largest (the description says so). ``*_RESULT_SCHEMA`` describe the
results (MCP's ``outputSchema``).

The argument helpers (``string_argument``, ``int_argument``, ...) live in ``_tool_schema`` beside
the schema check and are shared by every tool, so each new tool validates its arguments the same
way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import _tool_schema
from hermes_sessions._tool_schema import HOSTILE as _HOSTILE
from hermes_sessions._tool_schema import ArgumentError as _ArgumentError
from hermes_sessions._tool_schema import argument_error as _argument_error
from hermes_sessions._tool_schema import check_arguments
from hermes_sessions._tool_schema import choice_argument as _choice_argument
from hermes_sessions._tool_schema import count_property as _count_property
from hermes_sessions._tool_schema import hostile_error as _hostile_error
from hermes_sessions._tool_schema import int_argument as _int_argument
from hermes_sessions._tool_schema import optional_string_argument as _optional_string_argument
from hermes_sessions._tool_schema import parse_arguments as _parse_arguments
from hermes_sessions._tool_schema import string_argument as _string_argument
from hermes_sessions._tool_schema import tool_error as _tool_error
from hermes_sessions._tool_views import message_view as _message_view
from hermes_sessions._tool_views import session_view as _session_view
from hermes_sessions.exceptions import (
    HermesSessionsError,
    IncognitoMemoryError,
    InvalidArgumentError,
    LockTimeoutError,
    MemoryRefusedError,
    MemoryScopeError,
)
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import SessionSource
from hermes_sessions.queries import SearchQuery, Visibility
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Mapping

    from hermes_sessions.memory import MemoryContext, MemoryResult, MemoryStore, ScopedMemory
    from hermes_sessions.models import SessionRecord

__all__ = [
    "MEMORY_RESULT_SCHEMA",
    "MEMORY_TOOL_SCHEMA",
    "SESSION_SEARCH_RESULT_SCHEMA",
    "SESSION_SEARCH_TOOL_SCHEMA",
    "SearchToolContext",
    "handle_memory",
    "handle_session_search",
]


# -- memory ----------------------------------------------------------------------------------------

_MEMORY_ACTIONS: Final = ("add", "replace", "remove")
_MEMORY_TARGETS: Final = ("memory", "user")
_MEMORY_SCOPES: Final = ("lane", "app")

MEMORY_TOOL_SCHEMA: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "memory",
        "description": (
            "Save durable facts to your long-term memory, shown at the start of future "
            "conversations. Two targets: 'memory' for your own notes (environment, project "
            "facts, conventions, lessons learned) and 'user' for what you know about the user "
            "you are talking to (name, role, preferences, how they like answers). Each entry "
            "has a scope, named in every result: 'user' entries go to that user's profile "
            "(what they tell you in a private chat is not shown in groups); 'memory' notes go "
            "to scope 'lane' (this conversation only) unless you ask for scope 'app' (every "
            "conversation and user), which only some hosts allow. Save what "
            "will still matter next week; skip one-off task details, anything you can look up "
            "again, and secrets. Entries are short plain statements; each store has a character "
            "limit, and every result shows current usage. When a store is full, merge related "
            "entries with 'replace' or drop stale ones with 'remove' before adding. 'replace' "
            "and 'remove' find the entry by 'old_text', a short exact substring of it. Changes "
            "take effect in the next conversation (the current one keeps its start-up copy). "
            "Content that reads like instructions to an AI, hidden text, or secrets is refused."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": list(_MEMORY_ACTIONS),
                    "description": (
                        "'add' a new entry, 'replace' the entry containing old_text with "
                        "content, or 'remove' the entry containing old_text."
                    ),
                },
                "target": {
                    "type": "string",
                    "enum": list(_MEMORY_TARGETS),
                    "description": "'memory' for your own notes, 'user' for the user profile.",
                },
                "scope": {
                    "type": ["string", "null"],
                    "enum": [*_MEMORY_SCOPES, None],
                    "description": (
                        "For target 'memory': 'lane' (default: this conversation only) or "
                        "'app' (every conversation; refused unless the host allows it, and "
                        "never for a fact from a private chat)."
                    ),
                },
                "content": {
                    "type": ["string", "null"],
                    "description": (
                        "The entry text for 'add', or the new text for 'replace'. One fact or "
                        "a few closely related ones, in plain words."
                    ),
                },
                "old_text": {
                    "type": ["string", "null"],
                    "description": (
                        "For 'replace' and 'remove': a short, exact (case-sensitive) substring "
                        "of the one entry to change."
                    ),
                },
            },
            "required": ["action", "target"],
            "additionalProperties": False,
        },
    },
}
"""The ``memory`` tool in the OpenAI function-tool format (treat it as read-only; deep-copy it to
edit the description).

.. versionadded:: 0.1.0
"""

MEMORY_RESULT_SCHEMA: Final[dict[str, Any]] = _tool_schema.MEMORY_RESULT
"""The JSON Schema of :func:`handle_memory`'s results, success and refusal alike (MCP's
``outputSchema``; treat it as read-only).

.. versionadded:: 0.1.0
"""


def handle_memory(
    store: MemoryStore | ScopedMemory,
    arguments: Mapping[str, Any] | str,
    *,
    sessions: SessionStore | None = None,
    current_key: str | None = None,
    context: MemoryContext | None = None,
) -> dict[str, Any]:
    """Run one ``memory`` tool call against ``store`` and return its JSON-serialisable result.

    ``arguments`` is the call's argument object (or its JSON text): ``action`` (``add``,
    ``replace``, ``remove``), ``target`` (``memory``, ``user``), ``content`` (``add``,
    ``replace``) and ``old_text`` (``replace``, ``remove``). Arguments the schema does not
    know are refused; known ones an action does not use are ignored. Success is
    :meth:`MemoryResult.to_dict <hermes_sessions.memory.MemoryResult.to_dict>`; a refusal is
    the refusal's :meth:`~hermes_sessions.exceptions.MemoryRefusedError.to_dict`; bad arguments give
    ``code="invalid_arguments"``, a held lock ``code="lock_timeout"`` (with ``retryable: true``)
    and other library errors ``code="error"``. Nothing hermes-sessions raises on purpose escapes.

    Pass the session store and the key (or session id) the call comes from: a call from an
    incognito lane (:meth:`SessionStore.is_incognito`) writes nothing and returns the
    :class:`~hermes_sessions.exceptions.IncognitoMemoryError` refusal (``code="incognito"``).

    With a :class:`~hermes_sessions.memory.ScopedMemory`, ``context`` (a
    :class:`~hermes_sessions.memory.MemoryContext`: the lane and the speaking user) is required:
    ``user`` writes that user's profile, ``memory`` the lane's notes, or app memory with
    ``scope="app"`` when the store allows it (``code="scope_refused"`` otherwise). Every success
    names its ``scope`` (``app``, ``user``, ``lane``); a plain :class:`MemoryStore` is one memory
    for every conversation, so its ``memory`` is ``app`` and a ``lane`` scope is refused.

    .. versionadded:: 0.1.0
    """
    try:
        parsed = _parse_arguments(arguments)
        check_arguments(parsed, MEMORY_TOOL_SCHEMA["function"]["parameters"])
        lane = current_key if current_key is not None else getattr(context, "session_key", None)
        if sessions is not None and lane is not None and sessions.is_incognito(lane):
            action = _choice_argument(parsed, "action", _MEMORY_ACTIONS)
            target = _choice_argument(parsed, "target", _MEMORY_TARGETS)
            raise IncognitoMemoryError(lane, target=target, action=action)
        return _run_memory(store, parsed, context).to_dict()
    except _ArgumentError as error:
        return _argument_error(error)
    except MemoryRefusedError as error:
        return error.to_dict()
    except LockTimeoutError as error:
        return _tool_error(str(error), code="lock_timeout", retryable=True)
    except HermesSessionsError as error:
        return _tool_error(str(error), code="error")
    except _HOSTILE as error:
        return _hostile_error(error)


def _run_memory(
    store: MemoryStore | ScopedMemory, arguments: Mapping[str, Any], context: MemoryContext | None
) -> MemoryResult:
    from hermes_sessions.memory import ScopedMemory  # noqa: PLC0415  # keeps the import light

    action = _choice_argument(arguments, "action", _MEMORY_ACTIONS)
    target = _choice_argument(arguments, "target", _MEMORY_TARGETS)
    wanted = _optional_string_argument(arguments, "scope")
    content = old_text = ""
    if action == "add":
        content = _string_argument(arguments, "content", why=" for 'add'")
    else:
        old_text = _string_argument(arguments, "old_text", why=f" for '{action}'")
    if action == "replace":
        content = _string_argument(arguments, "content", why=" for 'replace' (the new text)")
    if isinstance(store, ScopedMemory):
        return _run_scoped(store, context, action, target, wanted, content, old_text)
    if target == "memory" and wanted == "lane":
        raise MemoryScopeError(
            "this host keeps one memory for every conversation; leave 'scope' out",
            scope="lane",
            target=target,
            action=action,
        )
    if action == "add":
        result = store.add(target, content)
    elif action == "replace":
        result = store.replace(target, old_text, content)
    else:
        result = store.remove(target, old_text)
    return attrs.evolve(result, scope="app" if target == "memory" else "user")


def _run_scoped(  # noqa: PLR0917  # one call's parts, from _run_memory only
    store: ScopedMemory,
    context: MemoryContext | None,
    action: str,
    target: str,
    wanted: str | None,
    content: str,
    old_text: str,
) -> MemoryResult:
    """One call on scoped memory: the scope from the target, the lane and the speaking user."""
    from hermes_sessions.memory import MemoryScope  # noqa: PLC0415  # keeps the import light

    if context is None:
        raise InvalidArgumentError(
            "handle_memory on a ScopedMemory needs context=MemoryContext(session_key=..., "
            "platform=..., user_id=...): the lane and the user the call comes from"
        )
    if target == "user":
        scope = context.user_scope
        if scope is None:
            raise MemoryScopeError(
                "no user is known in this conversation, so there is no profile to write; keep "
                "the fact as a 'memory' note",
                scope="user",
                target=target,
                action=action,
            )
    else:
        scope = MemoryScope.app() if wanted == "app" else context.lane_scope
    if action == "add":
        return store.add(scope, content, context=context)
    if action == "replace":
        return store.replace(scope, old_text, content, context=context)
    return store.remove(scope, old_text, context=context)


# -- session_search --------------------------------------------------------------------------------

_READ_HEAD: Final = 20
_READ_TAIL: Final = 10

SESSION_SEARCH_TOOL_SCHEMA: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "session_search",
        "description": (
            "Look through the user's earlier conversations with you. Four ways to call it: "
            "(1) no arguments: list recent (non-empty) conversations; (2) 'query': find the "
            "conversations that mention something, best match first, each with the surrounding "
            "messages; "
            "(3) 'session_id': read one conversation (long ones as their first 20 and last 10 "
            "messages); (4) 'session_id' and 'message_id': read the messages around one "
            "message, to scroll through a long conversation. Ask in plain words, in any "
            "language ('why did the docker deployment fail', '上周部署失败怎么办'): conversations "
            "are ranked by how much of the question they hold (other word forms count; words may "
            "be spread over several messages), and none is returned when none holds enough of it. "
            "With mode 'exact', or when the query uses operators (OR between alternatives, "
            '-word to exclude, "quotes" for an exact phrase, word* for a prefix), every word '
            "must appear in one message, as written. Only conversations this user may see are "
            "searched; the current one is left out."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": ["string", "null"],
                    "description": (
                        "A question or words to look for, e.g. 'how did we fix the docker OOM', "
                        "'docker 部署' or '\"staging db\" OR prod'."
                    ),
                },
                "mode": {
                    "type": ["string", "null"],
                    "enum": ["natural", "exact", None],
                    "description": (
                        "With query: 'natural' (the default) reads it as a question, 'exact' "
                        "as the exact query language."
                    ),
                },
                "session_id": {
                    "type": ["string", "null"],
                    "description": "A conversation id from an earlier result, to read it.",
                },
                "message_id": _count_property("Only with session_id: the message to read around."),
                "limit": _count_property(
                    "How many conversations to return, 1 to 10 (default 3; 10 when listing); "
                    "more is read as 10."
                ),
                "window": _count_property(
                    "With message_id: messages on each side to show, 1 to 20 (default 5); "
                    "more is read as 20."
                ),
            },
            "additionalProperties": False,
        },
    },
}
"""The ``session_search`` tool in the OpenAI function-tool format (treat it as read-only).

.. versionadded:: 0.1.0
"""

SESSION_SEARCH_RESULT_SCHEMA: Final[dict[str, Any]] = _tool_schema.SESSION_SEARCH_RESULT
"""The JSON Schema of :func:`handle_session_search`'s results, every shape and errors alike
(MCP's ``outputSchema``; treat it as read-only).

.. versionadded:: 0.1.0
"""


@attrs.frozen(kw_only=True)
class SearchToolContext:
    """Who is calling ``session_search`` and from where.

    Every shape of the tool applies the resume access rule to ``requester`` asking from
    ``current_key``: sessions created under that key, and sessions of the same platform and
    user. A model cannot read another user's conversation, not even by naming its id.

    .. versionadded:: 0.1.0
    """

    store: SessionStore
    requester: SessionSource
    current_key: str | None = None


def handle_session_search(
    context: SearchToolContext, arguments: Mapping[str, Any] | str
) -> dict[str, Any]:
    """Run one ``session_search`` tool call and return its JSON-serialisable result.

    The shape follows the arguments: nothing → ``browse``; ``query`` → ``discover``;
    ``session_id`` → ``read``; ``session_id`` and ``message_id`` → ``scroll`` (``message_id``
    without ``session_id`` is refused). A session the requester may not see is reported
    exactly like one that does not exist.

    .. versionadded:: 0.1.0
    """
    try:
        return _search_shape(context, _parse_arguments(arguments))
    except _ArgumentError as error:
        return _argument_error(error)
    except HermesSessionsError as error:
        return _tool_error(str(error), code="error")
    except _HOSTILE as error:
        return _hostile_error(error)


def _search_shape(context: SearchToolContext, parsed: Mapping[str, Any]) -> dict[str, Any]:
    check_arguments(parsed, SESSION_SEARCH_TOOL_SCHEMA["function"]["parameters"])
    session_id = _optional_string_argument(parsed, "session_id")
    query = _optional_string_argument(parsed, "query")
    if session_id is None and parsed.get("message_id") is not None:
        raise _ArgumentError(
            "'message_id' needs 'session_id': give the conversation the message is in",
            argument="message_id",
        )
    if session_id is not None and parsed.get("message_id") is not None:
        return _scroll(context, session_id, parsed)
    if session_id is not None:
        return _read(context, session_id)
    if query is not None and query.strip():
        return _discover(context, query, parsed)
    return _browse(context, parsed)


def _visibility(context: SearchToolContext) -> Visibility:
    return Visibility.for_requester(context.current_key, context.requester, keys=context.store.keys)


def _current_conversation(context: SearchToolContext) -> tuple[str, ...]:
    """The current session and its ancestors: the conversation the model is already in."""
    if context.current_key is None:
        return ()
    entry = context.store.backend.get_entry(context.current_key)
    if entry is None:
        return ()
    ids = [entry.session_id]
    record = context.store.backend.get_session(entry.session_id)
    while record is not None and record.parent_session_id is not None and len(ids) < 64:  # noqa: PLR2004
        ids.append(record.parent_session_id)
        record = context.store.backend.get_session(record.parent_session_id)
    return tuple(ids)


def _visible_session(context: SearchToolContext, session_id: str) -> SessionRecord:
    """The record, if the requester may see it; otherwise the same error as a missing one."""
    record = None
    try:
        validate_session_id(session_id)
    except HermesSessionsError:
        pass
    else:
        record = context.store.backend.get_session(session_id)
    if record is not None and context.store.is_incognito(record.id):
        record = record if record.session_key == context.current_key else None  # its lane only
    if record is None or not _visibility(context).allows(record):
        raise _ArgumentError(
            f"no conversation you may read has the id {session_id!r}; "
            "call session_search without arguments to list them",
            argument="session_id",
        )
    return record


def _browse(context: SearchToolContext, arguments: Mapping[str, Any]) -> dict[str, Any]:
    limit = _int_argument(arguments, "limit", default=10, minimum=1, maximum=10)
    current = set(_current_conversation(context))
    page = context.store.list_sessions(
        visible_to=_visibility(context), min_messages=1, limit=limit + len(current)
    )
    sessions = [
        _session_view(item.record, item.preview)
        for item in page.items
        if item.record.id not in current
    ][:limit]
    return {"success": True, "mode": "browse", "sessions": sessions}


_OPERATORS: Final = re.compile(
    r'["\uff02]|(?:^|\s)(?:OR|AND|NOT)(?:\s|$)|(?:^|\s)[-\uff0d]\w|\w[*\uff0a]'
)
"""What marks a query as written in the exact language (read exactly even in natural mode)."""


def _discover(
    context: SearchToolContext, query: str, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    limit = _int_argument(arguments, "limit", default=3, minimum=1, maximum=10)
    mode = _optional_string_argument(arguments, "mode") or "natural"
    search = SearchQuery(
        text=query,
        visible_to=_visibility(context),
        exclude_session_ids=_current_conversation(context),
        limit=limit,
    )
    if mode == "natural" and not _OPERATORS.search(query):
        return _discover_natural(context, search)
    results = [
        {
            **_session_view(hit.session),
            "score": round(hit.score, 4),
            "snippet": hit.snippet,
            "message_id": hit.message.id,
            **_around(context, hit.session.id, hit.message.id or 0),
        }
        for hit in context.store.search(search, group="lineage")
    ]
    return {
        "success": True,
        "mode": "discover",
        "search": "exact",
        "query": query,
        "results": results,
    }


def _around(context: SearchToolContext, session_id: str, message_id: int) -> dict[str, Any]:
    view = context.store.anchored_view(session_id, message_id, window=3, head=1, tail=1)
    return {
        "start": [_message_view(m) for m in view.head],
        "context": [_message_view(m) for m in (*view.before, view.anchor, *view.after)],
        "end": [_message_view(m) for m in view.tail],
    }


def _discover_natural(context: SearchToolContext, search: SearchQuery) -> dict[str, Any]:
    matches = context.store.search(search, group="lineage", mode="natural")
    results = []
    for match in matches:
        best = match.messages[0]
        results.append(
            {
                **_session_view(match.session),
                "score": round(match.score, 4),
                "matched": match.matched,
                "confident": match.confident,
                "coverage": round(match.coverage, 3),
                "terms": list(match.terms),
                "missing": list(match.missing),
                "snippet": best.snippet,
                "message_id": best.message.id,
                "snippets": [
                    {"message_id": m.message.id, "snippet": m.snippet, "terms": list(m.terms)}
                    for m in match.messages
                ],
                **_around(context, match.session.id, best.message.id or 0),
            }
        )
    result: dict[str, Any] = {
        "success": True,
        "mode": "discover",
        "search": "natural",
        "query": search.text,
        "results": results,
    }
    if not results:
        result["note"] = (
            "no conversation holds enough of this question; ask with other words, or list "
            "conversations by calling without a query"
        )
    elif not results[0]["confident"]:
        result["note"] = (
            "no conversation holds enough of this question to be a match: these are weak "
            "candidates (confident: false), which may well be unrelated"
        )
    return result


def _read(context: SearchToolContext, session_id: str) -> dict[str, Any]:
    record = _visible_session(context, session_id)
    store = context.store
    head = store.messages(record.id, limit=_READ_HEAD + _READ_TAIL + 1)
    if len(head) <= _READ_HEAD + _READ_TAIL:
        shown, omitted = head, 0
    else:
        tail = store.tail(record.id, _READ_TAIL)
        shown = head[:_READ_HEAD] + tail
        omitted = max(0, record.message_count - len(shown))
    return {
        "success": True,
        "mode": "read",
        "session": _session_view(record),
        "messages": [_message_view(m) for m in shown],
        "omitted_messages": omitted,
    }


def _scroll(
    context: SearchToolContext, session_id: str, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    record = _visible_session(context, session_id)
    message_id = _int_argument(arguments, "message_id", default=1, minimum=1, maximum=2**62)
    window = _int_argument(arguments, "window", default=5, minimum=1, maximum=20)
    anchor = context.store.backend.get_message(record.id, message_id)
    if anchor is None or not anchor.active:  # a retracted or undone message is not shown
        raise _ArgumentError(
            f"conversation {record.id} has no message {message_id}", argument="message_id"
        )
    around = context.store.messages_around(record.id, message_id, window)
    first, last = around[0].id or 0, around[-1].id or 0
    backend = context.store.backend
    return {
        "success": True,
        "mode": "scroll",
        "session": _session_view(record),
        "message_id": message_id,
        "messages": [_message_view(m) for m in around],
        "more_before": bool(backend.get_messages(record.id, before_id=first, limit=1)),
        "more_after": bool(backend.get_messages(record.id, after_id=last, limit=1)),
    }
