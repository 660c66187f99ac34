"""Text repair shared by the importers: lone surrogates, undecodable bytes, JSON text columns."""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["REPLACEMENT", "clean", "decode_bytes", "load_json_text"]

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


def load_json_text(text: str | None) -> Any:
    """Parse a JSON text column; ``None`` and the empty string are ``None``; bad JSON stays text."""
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
