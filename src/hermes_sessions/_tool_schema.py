"""Tool arguments checked against the JSON Schema the tool advertises, and the result schemas.

A tool's handler runs :func:`check_arguments` with the very ``parameters`` object a model is
shown, so the two cannot disagree: what the schema forbids is refused, and what a handler
accepts beyond the bare types (``"5"`` for a count, a count above the maximum it uses) is
written into the schema. The checker knows the keywords the library's schemas use
(:data:`KEYWORDS`); ``tests/test_tool_schema.py`` holds it to the ``jsonschema`` package.

:data:`SESSION_SEARCH_RESULT` and :data:`MEMORY_RESULT` describe the structured results
(MCP's ``outputSchema``): success and error shapes alike, as one object schema whose fields are
listed and typed; fields a later version adds are allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "COUNT_PATTERN",
    "HOSTILE",
    "KEYWORDS",
    "MEMORY_RESULT",
    "SESSION_SEARCH_RESULT",
    "ArgumentError",
    "argument_error",
    "check_arguments",
    "choice_argument",
    "count",
    "count_property",
    "hostile_error",
    "int_argument",
    "optional_string_argument",
    "parse_arguments",
    "string_argument",
    "tool_error",
]

KEYWORDS: Final = frozenset(
    {"type", "enum", "minimum", "pattern", "description", "properties", "additionalProperties"}
    | {"required"}
)
"""The JSON Schema keywords :func:`check_arguments` applies (``description`` only documents)."""

COUNT_PATTERN: Final = "^ *[1-9][0-9]{0,8} *$"
"""A positive whole number written as text (``"5"``): models often send numbers as strings."""

_JSON_TYPES: Final = {
    "null": "null",
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "an object",
}


_PYTHON_TYPES: Final = (
    ("null", type(None)),
    ("boolean", bool),  # before integer: a bool is an int in Python, not in JSON
    ("integer", int),
    ("string", str),
    ("array", list | tuple),
    ("object", Mapping),
)


class ArgumentError(Exception):
    """A tool argument is missing or malformed (handlers turn it into an error result)."""

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        self.argument = argument
        super().__init__(message)


def _json_type(value: object) -> str:
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    for kind, classes in _PYTHON_TYPES:
        if isinstance(value, classes):
            return kind
    return type(value).__name__


def _shown(value: object) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:39] + "…")  # noqa: PLR2004
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:39] + "…"  # noqa: PLR2004  # a short quote


def _check_value(name: str, value: object, schema: Mapping[str, Any]) -> None:
    kinds = schema.get("type")
    allowed = [kinds] if isinstance(kinds, str) else list(kinds or ())
    kind = _json_type(value)
    fits = kind in allowed or (kind == "integer" and "number" in allowed)
    if allowed and not fits:
        wanted = " or ".join(_JSON_TYPES.get(k, k) for k in allowed if k != "null")
        if "integer" in allowed and "string" in allowed:
            wanted = 'a whole number (5, or "5")'
        raise ArgumentError(f"'{name}' must be {wanted}, got {_shown(value)}", argument=name)
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(str(choice) for choice in schema["enum"])
        raise ArgumentError(f"unknown {name} {_shown(value)}; use one of {choices}", argument=name)
    minimum = schema.get("minimum")
    if isinstance(value, int | float) and minimum is not None and value < minimum:
        raise ArgumentError(
            f"'{name}' must be at least {minimum}, got {_shown(value)}", argument=name
        )
    pattern = schema.get("pattern")
    if isinstance(value, str) and pattern is not None and not re.search(pattern, value):
        if "integer" in allowed:
            message = f"'{name}' must be a whole number of at least 1 (5, or \"5\")"
        else:
            message = f"'{name}' must match {pattern}"
        raise ArgumentError(f"{message}, got {_shown(value)}", argument=name)


def check_arguments(arguments: Mapping[str, Any], parameters: Mapping[str, Any]) -> None:
    """Refuse what ``parameters`` (a tool's JSON Schema object) forbids in ``arguments``.

    Raises:
        ArgumentError: an unknown argument (with ``additionalProperties: false``), a missing
            required one, or a value of the wrong type, outside the ``enum``, below the
            ``minimum`` or not matching the ``pattern``.
    """
    properties: Mapping[str, Any] = parameters.get("properties", {})
    if parameters.get("additionalProperties") is False:
        unknown = sorted(str(name) for name in arguments if name not in properties)
        if unknown:
            raise ArgumentError(
                f"unknown argument{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; this tool takes {', '.join(properties)}",
                argument=unknown[0],
            )
    for name in parameters.get("required", ()):
        if name not in arguments:
            raise ArgumentError(f"'{name}' is required", argument=name)
    for name, value in arguments.items():
        if name in properties:
            _check_value(name, value, properties[name])


def count(value: object, *, default: int, maximum: int) -> int:
    """A count that :func:`check_arguments` let through, as an int at most ``maximum``.

    ``None`` (or a missing argument) is ``default``; ``"5"`` and ``5.0`` are 5; a count above
    ``maximum`` is read as ``maximum`` (the schema's description says so).
    """
    if value is None:
        return default
    if isinstance(value, str):
        value = value.strip()
    if not isinstance(value, str | int | float):
        raise ArgumentError(f"expected a count, got {_shown(value)}")
    return min(int(value), maximum)


# -- the results -----------------------------------------------------------------------------------

_TEXT: Final = {"type": "string"}
_NULLABLE_TEXT: Final = {"type": ["string", "null"]}
_WHOLE: Final = {"type": "integer"}
_FLAG: Final = {"type": "boolean"}
_TEXTS: Final = {"type": "array", "items": _TEXT}

_ERROR_FIELDS: Final = {
    "success": {"type": "boolean", "description": "false when the call was refused"},
    "error": {"type": "string", "description": "what went wrong and what to do instead"},
    "code": {
        "type": "string",
        "description": "machine-readable reason: invalid_arguments, error, lock_timeout, ...",
    },
    "argument": {"type": "string", "description": "the argument at fault, when one is"},
    "retryable": {"type": "boolean", "description": "true when the same call may succeed later"},
}

_MESSAGE: Final = {
    "type": "object",
    "properties": {
        "message_id": {"type": ["integer", "null"]},
        "role": _TEXT,
        "content": _TEXT,
        "timestamp": _TEXT,
        "sender": _TEXT,
        "tool_calls": _TEXTS,
        "tool_name": _TEXT,
    },
    "required": ["message_id", "role", "content"],
}
_SESSION_FIELDS: Final = {
    "session_id": _TEXT,
    "title": _NULLABLE_TEXT,
    "source": _TEXT,
    "started_at": _TEXT,
    "last_active": _TEXT,
    "message_count": _WHOLE,
    "ended": _NULLABLE_TEXT,
    "preview": _NULLABLE_TEXT,
}
_SESSION_REQUIRED: Final = ["session_id", "source", "started_at", "last_active", "message_count"]
_SESSION: Final = {"type": "object", "properties": _SESSION_FIELDS, "required": _SESSION_REQUIRED}
_MESSAGES: Final = {"type": "array", "items": _MESSAGE}
_HIT: Final = {
    "type": "object",
    "properties": {
        **_SESSION_FIELDS,
        "score": {"type": "number"},
        "snippet": _TEXT,
        "message_id": {"type": ["integer", "null"]},
        "start": _MESSAGES,
        "context": _MESSAGES,
        "end": _MESSAGES,
        "matched": {
            "type": "string",
            "description": "natural: exact, all words (of the question) or partial",
        },
        "confident": {
            "type": "boolean",
            "description": "natural: false for a weak candidate that may be unrelated",
        },
        "coverage": {
            "type": "number",
            "description": "natural: the weighted share of the question's terms held, 0 to 1",
        },
        "terms": {**_TEXTS, "description": "natural: the question's terms it holds"},
        "missing": {**_TEXTS, "description": "natural: the question's terms it lacks"},
        "snippets": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "message_id": {"type": ["integer", "null"]},
                    "snippet": _TEXT,
                    "terms": _TEXTS,
                },
                "required": ["message_id", "snippet"],
            },
            "description": "natural: the best messages, each with the terms it holds",
        },
    },
    "required": [*_SESSION_REQUIRED, "snippet", "context"],
}

SESSION_SEARCH_RESULT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        **_ERROR_FIELDS,
        "mode": {
            "type": "string",
            "description": "the shape answered: browse, discover, read or scroll",
        },
        "sessions": {"type": "array", "items": _SESSION, "description": "browse: the list"},
        "query": {"type": "string", "description": "discover: the query as given"},
        "search": {
            "type": "string",
            "description": "discover: how the query was read, natural or exact",
        },
        "note": {
            "type": "string",
            "description": "discover: why nothing, or nothing confident, was found",
        },
        "results": {"type": "array", "items": _HIT, "description": "discover: best first"},
        "session": {**_SESSION, "description": "read, scroll: the conversation"},
        "messages": {**_MESSAGES, "description": "read, scroll: the messages shown"},
        "omitted_messages": {**_WHOLE, "description": "read: messages left out of the middle"},
        "message_id": {**_WHOLE, "description": "scroll: the message read around"},
        "more_before": {**_FLAG, "description": "scroll: earlier messages exist"},
        "more_after": {**_FLAG, "description": "scroll: later messages exist"},
    },
    "required": ["success"],
}
"""The structured result of ``session_search`` (MCP's ``outputSchema``)."""

MEMORY_RESULT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        **_ERROR_FIELDS,
        "target": {"type": "string", "description": "memory or user"},
        "action": {"type": "string", "description": "add, replace or remove"},
        "message": {"type": "string", "description": "what happened, in words"},
        "changed": {"type": "boolean", "description": "false when nothing had to change"},
        "entries": {**_TEXTS, "description": "the target's entries after the call"},
        "entry_count": _WHOLE,
        "usage": {**_WHOLE, "description": "characters used"},
        "limit": {**_WHOLE, "description": "characters allowed"},
        "usage_percent": {"type": "number"},
        "backup_path": {"type": "string"},
        "scope": {
            "type": "string",
            "description": "where the entry lives: app, user (a profile) or lane (notes); "
            "on a scope refusal, the scope refused",
        },
    },
    "required": ["success"],
}
"""The structured result of ``memory`` (MCP's ``outputSchema``), success and refusals alike."""


# -- argument helpers shared by the tool handlers (hermes_sessions.tools) ----------------------


def tool_error(message: str, *, code: str, **details: Any) -> dict[str, Any]:
    """Return the error result every handler uses."""
    return {"success": False, "error": message, "code": code, **details}


def argument_error(error: ArgumentError) -> dict[str, Any]:
    """The error result of arguments the schema refuses."""
    details = {} if error.argument is None else {"argument": error.argument}
    return tool_error(str(error), code="invalid_arguments", **details)


# What odd values (deep nesting, huge numbers, NaN, stray types) can raise past the checks above.
HOSTILE: Final = (ValueError, TypeError, OverflowError, RecursionError)


def hostile_error(error: BaseException) -> dict[str, Any]:
    """The error result of odd values that slipped past the schema check."""
    detail = " ".join(str(error).split())[:200] or type(error).__name__
    return tool_error(
        f"the arguments could not be used ({detail}); send the documented fields as plain "
        "strings and numbers",
        code="invalid_arguments",
    )


def parse_arguments(arguments: object) -> Mapping[str, Any]:
    """Accept a mapping or the JSON text of a tool call's arguments."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError as error:  # also bytes that are not UTF-8, and over-long integers
            message = f"the arguments are not valid JSON ({error}); send an object"
            raise ArgumentError(message) from None
        except RecursionError:  # nesting deeper than the interpreter's recursion limit
            raise ArgumentError("the arguments are nested too deeply; send a flat object") from None
    if not isinstance(arguments, Mapping):
        raise ArgumentError(f"the arguments must be a JSON object, got {type(arguments).__name__}")
    return arguments


def optional_string_argument(arguments: Mapping[str, Any], name: str) -> str | None:
    """Return a string argument, or ``None`` when it is missing or ``null``."""
    value = arguments.get(name)
    if value is not None and not isinstance(value, str):
        raise ArgumentError(f"'{name}' must be a string, got {type(value).__name__}", argument=name)
    return value


def string_argument(arguments: Mapping[str, Any], name: str, *, why: str = "") -> str:
    """Return a required string argument."""
    value = optional_string_argument(arguments, name)
    if value is None:
        raise ArgumentError(f"'{name}' is required{why}", argument=name)
    return value


def choice_argument(arguments: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str:
    """Return a required string argument that must be one of ``choices``."""
    value = string_argument(arguments, name, why=f": one of {', '.join(choices)}")
    if value not in choices:
        raise ArgumentError(
            f"unknown {name} {value!r}; use one of {', '.join(choices)}", argument=name
        )
    return value


def int_argument(
    arguments: Mapping[str, Any], name: str, *, default: int, minimum: int, maximum: int
) -> int:
    """Return a count argument that ``check_arguments`` let through, within ``[minimum, maximum]``.

    Missing or ``null`` is ``default``; ``"5"`` and ``5.0`` are 5; above ``maximum`` is read as
    ``maximum``, as the schema's description says.
    """
    return max(minimum, count(arguments.get(name), default=default, maximum=maximum))


def count_property(description: str) -> dict[str, Any]:
    """A count argument's schema: a positive whole number, or its digits as text, or null."""
    return {
        "type": ["integer", "string", "null"],
        "minimum": 1,
        "pattern": COUNT_PATTERN,
        "description": description + ' A whole number; "5" is read as 5.',
    }
