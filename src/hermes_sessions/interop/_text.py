"""Text repair shared by the importers: lone surrogates, undecodable bytes, JSON text columns."""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = [
    "MAX_JSON_DEPTH",
    "REPLACEMENT",
    "JSONTooDeepError",
    "clean",
    "decode_bytes",
    "load_json",
    "load_json_text",
]

MAX_JSON_DEPTH: Final = 100
"""The deepest nesting of arrays and objects an importer accepts in one JSON value.

Deeper values are refused when read: they would exhaust the interpreter's recursion on the way
into a store (every JSON encoder and cleaner recurses), and no conversation needs them.
"""
REPLACEMENT: Final = "\ufffd"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def decode_bytes(raw: bytes) -> str:
    """Decode UTF-8 leniently: encoded surrogates survive (to be replaced), bad bytes → U+FFFD."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace")


class Cleaner:
    """Replaces lone surrogates by U+FFFD in any JSON-shaped value and counts the replacements."""

    def __init__(self) -> None:
        self.replaced = 0

    def text(self, value: str) -> str:
        """``value`` with every lone surrogate replaced."""
        fixed, count = _SURROGATE.subn(REPLACEMENT, value)
        self.replaced += count
        return fixed

    def value(self, value: Any) -> Any:
        """``value`` (str, list, dict or scalar) with every string cleaned, keys included."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes):  # a BLOB where Hermes meant TEXT
            return self.text(decode_bytes(value))
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        return value


def clean(value: Any) -> tuple[Any, int]:
    """``value`` with lone surrogates replaced, and how many were replaced."""
    cleaner = Cleaner()
    return cleaner.value(value), cleaner.replaced


class JSONTooDeepError(ValueError):
    """A JSON value nested deeper than :data:`MAX_JSON_DEPTH`."""


def _depth(value: Any) -> int:
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth + 1)
            if deepest > MAX_JSON_DEPTH:
                break
            stack.extend((inner, depth + 1) for inner in item)
    return deepest


def load_json(text: str | bytes) -> Any:
    """``json.loads(text)``, refusing values nested deeper than :data:`MAX_JSON_DEPTH`.

    Raises:
        JSONTooDeepError: the value is nested too deeply (a ``ValueError``).
        ValueError: the text is not JSON.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        deep = True
    else:
        deep = _depth(value) > MAX_JSON_DEPTH
    if deep:
        raise JSONTooDeepError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def load_json_text(text: str | None) -> Any:
    """Parse a JSON text column; ``None`` and the empty string are ``None``; bad JSON stays text.

    JSON nested deeper than :data:`MAX_JSON_DEPTH` counts as bad JSON: it stays text.
    """
    if text is None or text == "":
        return None
    try:
        return load_json(text)
    except ValueError:
        return text
