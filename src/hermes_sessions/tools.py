"""LLM tools: JSON schemas in the OpenAI function-tool format, and handlers returning JSON dicts.

Each tool is a schema constant (``{"type": "function", "function": {"name", "description",
"parameters"}}``; the parameters are a plain JSON Schema object, without a top-level ``anyOf`` /
``oneOf``, which several providers reject) and a ``handle_<name>(context, arguments)`` function.

Handlers take the arguments as the model sent them (a mapping, or the raw JSON string of a tool
call) and always return a JSON-serialisable dict: ``{"success": True, ...}`` or ``{"success":
False, "error": "<what went wrong and what to do>", "code": "<machine-readable reason>", ...}``.
They never raise for bad arguments or for anything hermes-sessions refuses on purpose; a model
reads the error and tries again.

The private argument helpers (``_string_argument``, ``_int_argument``, ...) are shared by every
tool of this module, so each new tool validates its arguments the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.exceptions import (
    HermesSessionsError,
    LockTimeoutError,
    MemoryRefusedError,
)

if TYPE_CHECKING:
    from hermes_sessions.memory import MemoryResult, MemoryStore

__all__ = ["MEMORY_TOOL_SCHEMA", "handle_memory"]


# -- shared argument handling ----------------------------------------------------------------------

_INTEGER_TEXT: Final = re.compile(r"[+-]?[0-9]{1,18}")


class _ArgumentError(Exception):
    """A tool argument is missing or malformed (internal: handlers turn it into an error dict)."""

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        self.argument = argument
        super().__init__(message)


def _tool_error(message: str, *, code: str, **details: Any) -> dict[str, Any]:
    """Return the error result every handler uses."""
    return {"success": False, "error": message, "code": code, **details}


def _argument_error(error: _ArgumentError) -> dict[str, Any]:
    details = {} if error.argument is None else {"argument": error.argument}
    return _tool_error(str(error), code="invalid_arguments", **details)


def _parse_arguments(arguments: object) -> Mapping[str, Any]:
    """Accept a mapping or the JSON text of a tool call's arguments."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError as error:
            message = f"the arguments are not valid JSON ({error}); send an object"
            raise _ArgumentError(message) from None
    if not isinstance(arguments, Mapping):
        raise _ArgumentError(f"the arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


def _optional_string_argument(arguments: Mapping[str, Any], name: str) -> str | None:
    """Return a string argument, or ``None`` when it is missing or ``null``."""
    value = arguments.get(name)
    if value is not None and not isinstance(value, str):
        raise _ArgumentError(
            f"'{name}' must be a string, got {type(value).__name__}", argument=name
        )
    return value


def _string_argument(arguments: Mapping[str, Any], name: str, *, why: str = "") -> str:
    """Return a required string argument."""
    value = _optional_string_argument(arguments, name)
    if value is None:
        raise _ArgumentError(f"'{name}' is required{why}", argument=name)
    return value


def _choice_argument(arguments: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str:
    """Return a required string argument that must be one of ``choices``."""
    value = _string_argument(arguments, name, why=f": one of {', '.join(choices)}")
    if value not in choices:
        raise _ArgumentError(
            f"unknown {name} {value!r}; use one of {', '.join(choices)}", argument=name
        )
    return value


def _int_argument(
    arguments: Mapping[str, Any], name: str, *, default: int, minimum: int, maximum: int
) -> int:
    """Return an integer argument clamped to ``[minimum, maximum]``.

    Models often send numbers as strings or floats: ``"5"`` and ``5.0`` are read as 5; anything
    that is not an integer (missing, ``null``, ``"five"``, ``2.5``, ``true``) falls back to
    ``default``. Out-of-range values are clamped rather than refused.
    """
    value = arguments.get(name)
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()):
        number = int(value.strip())
    if number is None:
        number = default
    return max(minimum, min(maximum, number))


# -- memory ----------------------------------------------------------------------------------------

_MEMORY_ACTIONS: Final = ("add", "replace", "remove")
_MEMORY_TARGETS: Final = ("memory", "user")

MEMORY_TOOL_SCHEMA: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "memory",
        "description": (
            "Save durable facts to your long-term memory, shared by all future conversations "
            "and shown at the start of each one. Two stores: 'memory' for your own notes "
            "(environment, project facts, conventions, lessons learned) and 'user' for what you "
            "know about the user (name, role, preferences, how they like answers). Save what "
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
                "content": {
                    "type": "string",
                    "description": (
                        "The entry text for 'add', or the new text for 'replace'. One fact or "
                        "a few closely related ones, in plain words."
                    ),
                },
                "old_text": {
                    "type": "string",
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
edit the description)."""


def handle_memory(store: MemoryStore, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """Run one ``memory`` tool call against ``store`` and return its JSON-serialisable result.

    ``arguments`` is the call's argument object (or its JSON text): ``action`` (``add``,
    ``replace``, ``remove``), ``target`` (``memory``, ``user``), ``content`` (``add``,
    ``replace``) and ``old_text`` (``replace``, ``remove``). Arguments that an action does not
    use are ignored. Success is :meth:`MemoryResult.to_dict
    <hermes_sessions.memory.MemoryResult.to_dict>`; a refusal is the refusal's
    :meth:`~hermes_sessions.exceptions.MemoryRefusedError.to_dict`; bad arguments give
    ``code="invalid_arguments"``, a held lock ``code="lock_timeout"`` (with ``retryable: true``)
    and other library errors ``code="error"``. Nothing hermes-sessions raises on purpose escapes.
    """
    try:
        return _run_memory(store, _parse_arguments(arguments)).to_dict()
    except _ArgumentError as error:
        return _argument_error(error)
    except MemoryRefusedError as error:
        return error.to_dict()
    except LockTimeoutError as error:
        return _tool_error(str(error), code="lock_timeout", retryable=True)
    except HermesSessionsError as error:
        return _tool_error(str(error), code="error")


def _run_memory(store: MemoryStore, arguments: Mapping[str, Any]) -> MemoryResult:
    action = _choice_argument(arguments, "action", _MEMORY_ACTIONS)
    target = _choice_argument(arguments, "target", _MEMORY_TARGETS)
    if action == "add":
        return store.add(target, _string_argument(arguments, "content", why=" for 'add'"))
    old_text = _string_argument(arguments, "old_text", why=f" for '{action}'")
    if action == "replace":
        content = _string_argument(arguments, "content", why=" for 'replace' (the new text)")
        return store.replace(target, old_text, content)
    return store.remove(target, old_text)
