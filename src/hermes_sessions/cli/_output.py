"""Terminal output: display width (CJK counts double), tables that fit, progress, durations."""

from __future__ import annotations

import re
import shutil
import sys
import unicodedata
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TextIO

__all__ = [
    "UsageError",
    "display_width",
    "fit",
    "parse_duration",
    "parse_moment",
    "parse_size",
    "parse_zone",
    "progress_printer",
    "table",
    "zone_label",
]

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION: Final = re.compile(r"(\d+)([smhdw])")
_MIN_COLUMN: Final = 8


class UsageError(Exception):
    """A mistake of the user's: printed as one line, exit status 2."""


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in {"Cc", "Cf", "Mn"}:
        return 0
    return 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal (wide and full-width characters count two)."""
    return sum(_char_width(char) for char in text)


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns (with ``…``), then padded with spaces to ``width``."""
    text = " ".join(text.split())
    if display_width(text) > width:
        out, used = [], 0
        for char in text:
            size = _char_width(char)
            if used + size > width - 1:
                break
            out.append(char)
            used += size
        text = "".join(out) + "…"
    return text + " " * (width - display_width(text))


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None = None
) -> str:
    """Aligned columns fitting ``width`` (default: the terminal's); the last column gives way."""
    total = width if width is not None else shutil.get_terminal_size((100, 24)).columns
    widths = [
        max([display_width(h), *(display_width(" ".join(r[i].split())) for r in rows)])
        for i, h in enumerate(headers)
    ]
    spare = total - (sum(widths[:-1]) + 2 * (len(widths) - 1))
    widths[-1] = max(min(widths[-1], spare), _MIN_COLUMN)
    lines = ["  ".join(fit(h, w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(fit(c, w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``1w2d``, ``30m`` or ``45s`` as a timedelta."""
    compact = text.strip().lower()
    pieces = _DURATION.findall(compact)
    if not pieces or "".join(n + u for n, u in pieces) != compact:
        raise UsageError(
            f"bad duration {text!r}; write a number and a unit: 90d, 12h, 2w, 30m or 45s"
        )
    return timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in pieces))


_SIZE = re.compile(r"(\d+)\s*([kmgt]?)i?b?")
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """``500MB``, ``2G``, ``64k`` or a plain number of bytes (units are powers of 1024)."""
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None:
        raise UsageError(f"bad size {text!r}; write a number and a unit: 500MB, 2G, 64k or 1000")
    return int(match[1]) * _SIZE_UNITS[match[2]]


def parse_moment(text: str, now: datetime) -> datetime:
    """An ISO date or datetime (naive means the host's zone), or a duration ago (``7d``)."""
    try:
        return now - parse_duration(text)
    except UsageError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"bad time {text!r}; give an ISO date (2026-05-12), a datetime "
            "(2026-05-12T09:30+08:00) or an age (7d)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.astimezone(UTC)


def parse_zone(name: str | None) -> tzinfo:
    """The IANA zone ``name`` (``--tz``), or the host's zone for ``None``."""
    if name is None:
        from hermes_sessions.policy import host_timezone  # noqa: PLC0415  # reads /etc once

        return host_timezone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"unknown time zone {name!r}; give an IANA name such as Asia/Shanghai or UTC"
        ) from None


def zone_label(zone: tzinfo, moment: datetime) -> str:
    """``Asia/Shanghai (UTC+08:00)``: the zone's name and its offset at ``moment``."""
    offset = moment.astimezone(zone).strftime("%z") or "+0000"
    name = getattr(zone, "key", None) or moment.astimezone(zone).tzname() or "local"
    return f"{name} (UTC{offset[:3]}:{offset[3:]})"


def progress_printer(what: str, stream: TextIO | None = None) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` writing to stderr when it is a terminal; else ``None``."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        return None

    def report(done: int, total: int) -> None:
        out.write(f"\r{what} {done}/{total}")
        if done >= total:
            out.write("\n")
        out.flush()

    return report
