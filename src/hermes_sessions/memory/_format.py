r"""The memory-file format, its value types and the planning of a change: pure code, no I/O.

:mod:`hermes_sessions.memory` re-exports the public names. This module holds what can be tested
without a file system: splitting and joining entries, deciding whether a file has drifted, the
result and snapshot types, rendering the system-prompt block, and computing what ``add`` /
``replace`` / ``remove`` do to a list of entries (or which refusal they raise).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.exceptions import (
    AmbiguousMemoryMatchError,
    InvalidMemoryContentError,
    MemoryContentBlockedError,
    MemoryEntryNotFoundError,
    MemoryLimitError,
    UnknownMemoryTargetError,
)
from hermes_sessions.threats import SCOPE_MEMORY

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from hermes_sessions.threats import ThreatScanner

__all__ = [
    "ENTRY_DELIMITER",
    "FILE_NAMES",
    "MEMORY_TARGETS",
    "BlockedEntry",
    "MemoryResult",
    "MemorySnapshot",
    "Outcome",
    "TargetSnapshot",
    "check_content",
    "check_old_text",
    "drift_reason",
    "entries_usage",
    "find_entry",
    "normalise_text",
    "parse_entries",
    "plan_add",
    "plan_remove",
    "plan_replace",
    "render_entries",
    "snapshot_target",
]

ENTRY_DELIMITER: Final = "\n§\n"
"""What separates two entries in a memory file: a line holding only ``§``.

.. versionadded:: 0.1.0
"""

MEMORY_TARGETS: Final = ("memory", "user")
"""The two targets: ``"memory"`` (``MEMORY.md``) and ``"user"`` (``USER.md``).

.. versionadded:: 0.1.0
"""

FILE_NAMES: Final = {"memory": "MEMORY.md", "user": "USER.md"}
_TITLES: Final = {
    "memory": "MEMORY (your personal notes)",
    "user": "USER PROFILE (who the user is)",
}
_RULE: Final = "═" * 46

_PREVIEW_LENGTH: Final = 80


# -- the file format (pure functions) --------------------------------------------------------------


def normalise_text(text: str) -> str:
    """Drop what editors add without meaning: a byte-order mark and CR line endings."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def parse_entries(text: str) -> tuple[str, ...]:
    r"""Split a memory file into entries: stripped, empty ones dropped, duplicates dropped.

    >>> parse_entries("first\n§\nsecond § with a section sign\n§\n\n§\nfirst")
    ('first', 'second § with a section sign')

    .. versionadded:: 0.1.0
    """
    seen: set[str] = set()
    entries: list[str] = []
    for piece in normalise_text(text).split(ENTRY_DELIMITER):
        entry = piece.strip()
        if entry and entry not in seen:
            seen.add(entry)
            entries.append(entry)
    return tuple(entries)


def render_entries(entries: Iterable[str]) -> str:
    """Join entries into the text of a memory file (no trailing newline, like Hermes).

    .. versionadded:: 0.1.0
    """
    return ENTRY_DELIMITER.join(entries)


def entries_usage(entries: Iterable[str]) -> int:
    """Characters the entries use against the limit: their length joined by the delimiter.

    .. versionadded:: 0.1.0
    """
    return len(render_entries(entries))


def drift_reason(raw: bytes, limit: int) -> str | None:
    """Why ``raw`` is not a file this store would write (``None``: it is one)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"it is not valid UTF-8 (at byte {error.start})"
    entries = parse_entries(text)
    if render_entries(entries) != normalise_text(text).strip():
        return (
            "it does not read back as it is: entries are separated by a line holding only '§', "
            "with no empty, duplicate or space-padded entries"
        )
    for number, entry in enumerate(entries, 1):
        if len(entry) > limit:
            return (
                f"entry {number} is {len(entry):,} characters long, more than the whole "
                f"{limit:,}-character limit"
            )
    return None


def _preview(entry: str) -> str:
    flat = " ".join(entry.split())
    return flat if len(flat) <= _PREVIEW_LENGTH else flat[: _PREVIEW_LENGTH - 3] + "..."


def _percent(usage: int, limit: int) -> int:
    return usage * 100 // limit


# -- results and snapshots -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemoryResult:
    """The outcome of a change that was accepted (refusals raise ``MemoryRefusedError``).

    Attributes:
        target: ``"memory"`` or ``"user"``.
        action: ``"add"``, ``"replace"``, ``"remove"`` or ``"repair"``.
        message: What happened, in one sentence for the model.
        changed: Whether the file was written (``False`` for an exact duplicate, for example).
        entries: The entries of the file after the change.
        usage: Characters used after the change.
        limit: The file's character limit.
        backup_path: The copy kept by :meth:`MemoryStore.repair`, otherwise ``None``.
        scope: The memory scope written (``"app"``, ``"user"`` or ``"lane"``); ``None`` for a
            :class:`MemoryStore` call made without the tool.

    .. versionadded:: 0.1.0
    """

    target: str
    action: str
    message: str
    changed: bool
    entries: tuple[str, ...]
    usage: int
    limit: int
    backup_path: Path | None = None
    scope: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-serialisable tool result: ``{"success": True, ...}``."""
        result: dict[str, Any] = {
            "success": True,
            "target": self.target,
            "action": self.action,
            "message": self.message,
            "changed": self.changed,
            "entries": list(self.entries),
            "entry_count": len(self.entries),
            "usage": self.usage,
            "limit": self.limit,
            "usage_percent": _percent(self.usage, self.limit),
        }
        if self.backup_path is not None:
            result["backup_path"] = str(self.backup_path)
        if self.scope is not None:
            result["scope"] = self.scope
        return result


@attrs.frozen(kw_only=True)
class BlockedEntry:
    """An entry of the file that the snapshot shows as ``[BLOCKED: <pattern ids>]``.

    Attributes:
        index: Its 0-based position among the file's entries.
        pattern_ids: The threat patterns it matched.

    .. versionadded:: 0.1.0
    """

    index: int
    pattern_ids: tuple[str, ...]

    @property
    def placeholder(self) -> str:
        """The text shown in the prompt instead of the entry."""
        return f"[BLOCKED: {', '.join(self.pattern_ids)}]"


@attrs.frozen(kw_only=True)
class TargetSnapshot:
    """One file as loaded into a snapshot.

    Attributes:
        target: ``"memory"`` or ``"user"``.
        entries: The entries as the prompt shows them (blocked ones replaced by placeholders,
            entries past the limit left out).
        blocked: The entries replaced by placeholders.
        omitted: How many entries were left out because the file is over its limit.
        usage: Characters the file used when loaded (its real entries, placeholders aside).
        limit: The file's character limit.
        text: The rendered section of the prompt block (``""`` for an empty file).

    .. versionadded:: 0.1.0
    """

    target: str
    entries: tuple[str, ...]
    blocked: tuple[BlockedEntry, ...]
    omitted: int
    usage: int
    limit: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        return {
            "target": self.target,
            "entries": list(self.entries),
            "blocked": [
                {"index": blocked.index, "pattern_ids": list(blocked.pattern_ids)}
                for blocked in self.blocked
            ],
            "omitted": self.omitted,
            "usage": self.usage,
            "limit": self.limit,
        }


@attrs.frozen(kw_only=True)
class MemorySnapshot:
    """Both files as they were when the store loaded them, and the system-prompt block.

    ``prompt_block`` (also ``str(snapshot)``) is ready to append to a system prompt; it is ``""``
    when both files are empty. It never changes: writes made later show up in the next snapshot.

    .. versionadded:: 0.1.0
    """

    memory: TargetSnapshot
    user: TargetSnapshot
    prompt_block: str
    lane: TargetSnapshot | None = None
    """The lane's notes (:class:`~hermes_sessions.memory.ScopedMemory`; ``None`` otherwise)."""

    def __str__(self) -> str:
        return self.prompt_block

    def target(self, target: str) -> TargetSnapshot:
        """The snapshot of one target (``"memory"`` or ``"user"``)."""
        if target == "memory":
            return self.memory
        if target == "user":
            return self.user
        raise UnknownMemoryTargetError(target, MEMORY_TARGETS)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        result = {
            "memory": self.memory.to_dict(),
            "user": self.user.to_dict(),
            "prompt_block": self.prompt_block,
        }
        if self.lane is not None:
            result["lane"] = self.lane.to_dict()
        return result


def snapshot_target(
    target: str,
    entries: Sequence[str],
    limit: int,
    scanner: ThreatScanner | None,
    *,
    title: str | None = None,
    file_name: str | None = None,
) -> TargetSnapshot:
    """Freeze one file's entries: blocked ones as placeholders, the prompt bounded by ``limit``.

    ``title`` and ``file_name`` name the section and its file (default: the target's).
    """
    shown: list[str] = []
    blocked: list[BlockedEntry] = []
    for index, entry in enumerate(entries):
        findings = () if scanner is None else scanner.scan(entry, scope=SCOPE_MEMORY)
        if findings:
            flagged = BlockedEntry(
                index=index, pattern_ids=tuple(sorted({f.pattern_id for f in findings}))
            )
            blocked.append(flagged)
            shown.append(flagged.placeholder)
        else:
            shown.append(entry)
    # The limit also bounds the prompt: a file edited past it shows what fits, then a note.
    kept = 0
    while kept < len(shown) and entries_usage(shown[: kept + 1]) <= limit:
        kept += 1
    omitted = len(shown) - kept
    lines = shown[:kept]
    if omitted:
        lines.append(
            f"[OMITTED: {omitted} more {'entry' if omitted == 1 else 'entries'} past the "
            f"{limit:,}-character limit, kept in {file_name or FILE_NAMES[target]}]"
        )
    usage = entries_usage(entries)
    text = ""
    if entries:
        heading = title or _TITLES[target]
        header = f"{heading} [{_percent(usage, limit)}% — {usage:,}/{limit:,} chars]"
        text = f"{_RULE}\n{header}\n{_RULE}\n{render_entries(lines)}"
    return TargetSnapshot(
        target=target,
        entries=tuple(shown[:kept]),
        blocked=tuple(blocked),
        omitted=omitted,
        usage=usage,
        limit=limit,
        text=text,
    )


# -- planning a change (pure) ----------------------------------------------------------------------
def check_content(
    content: object, *, target: str, action: str, limit: int, scanner: ThreatScanner | None
) -> str:
    """The new entry ``content`` normalised and stripped, or the refusal it deserves.

    Raises:
        TypeError: ``content`` is not a str.
        InvalidMemoryContentError: it is empty or holds a line of only ``§``.
        MemoryContentBlockedError: ``scanner`` flagged it.
    """
    if not isinstance(content, str):
        raise TypeError(f"content must be a str, got {type(content).__name__}")
    cleaned = normalise_text(content).strip()
    if not cleaned:
        raise InvalidMemoryContentError(
            "the content is empty" + ("; to delete an entry use remove" * (action != "add")),
            target=target,
            action=action,
        )
    if "§" in cleaned.split("\n"):
        raise InvalidMemoryContentError(
            "a line holding only '§' separates entries, so an entry cannot contain one; "
            "store the parts as separate entries",
            target=target,
            action=action,
        )
    # Content longer than the whole limit is refused as over the limit whatever it says, so
    # it is not scanned: a model sending megabytes costs nothing.
    if (
        scanner is not None
        and len(cleaned) <= limit
        and (findings := scanner.scan(cleaned, scope=SCOPE_MEMORY))
    ):
        raise MemoryContentBlockedError(
            target=target,
            action=action,
            pattern_ids=[finding.pattern_id for finding in findings],
            excerpts=[finding.excerpt for finding in findings],
        )
    return cleaned


def check_old_text(old_text: object, *, target: str, action: str) -> str:
    """The ``old_text`` of a replace or remove normalised and stripped, or its refusal.

    Raises:
        TypeError: ``old_text`` is not a str.
        InvalidMemoryContentError: it is empty.
    """
    if not isinstance(old_text, str):
        raise TypeError(f"old_text must be a str, got {type(old_text).__name__}")
    cleaned = normalise_text(old_text).strip()
    if not cleaned:
        raise InvalidMemoryContentError(
            "old_text is empty; give a short, distinctive part of the entry to change",
            target=target,
            action=action,
        )
    return cleaned


@attrs.frozen
class Outcome:
    """What a change does: the new entries, whether anything changed, and a message."""

    entries: tuple[str, ...]
    changed: bool
    message: str


def _dedupe(entries: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(entries))


def find_entry(entries: Sequence[str], old_text: str, target: str, action: str) -> int:
    """The index of the one entry containing ``old_text``, or the refusal (none, several)."""
    matches = [index for index, entry in enumerate(entries) if old_text in entry]
    if not matches:
        raise MemoryEntryNotFoundError(old_text, target=target, action=action)
    distinct = _dedupe(entries[index] for index in matches)
    if len(distinct) > 1:
        raise AmbiguousMemoryMatchError(
            old_text, [_preview(entry) for entry in distinct], target=target, action=action
        )
    return matches[0]


def plan_add(entries: tuple[str, ...], content: str, *, target: str, limit: int) -> Outcome:
    if content in entries:
        return Outcome(entries, changed=False, message="Entry already exists; nothing changed.")
    new = (*entries, content)
    if (needed := entries_usage(new)) > limit:
        raise MemoryLimitError(
            target=target,
            action="add",
            entries=entries,
            usage=entries_usage(entries),
            limit=limit,
            requested_usage=needed,
        )
    return Outcome(new, changed=True, message="Entry added.")


def plan_replace(
    entries: tuple[str, ...], old_text: str, content: str, *, target: str, limit: int
) -> Outcome:
    index = find_entry(entries, old_text, target, "replace")
    if entries[index] == content:
        return Outcome(entries, changed=False, message="Entry already reads so; nothing changed.")
    new = _dedupe((*entries[:index], content, *entries[index + 1 :]))
    usage = entries_usage(entries)
    # Over the limit is refused unless the change shrinks the file: a file that is already over
    # (the limit was lowered, or it was edited by hand) must stay fixable by shortening entries.
    if (needed := entries_usage(new)) > limit and needed > usage:
        raise MemoryLimitError(
            target=target,
            action="replace",
            entries=entries,
            usage=usage,
            limit=limit,
            requested_usage=needed,
        )
    message = "Entry replaced."
    if len(new) < len(entries):
        message = "Entry replaced; it now equals another entry, so the two were merged."
    return Outcome(new, changed=True, message=message)


def plan_remove(entries: tuple[str, ...], old_text: str, *, target: str) -> Outcome:
    index = find_entry(entries, old_text, target, "remove")
    return Outcome(
        (*entries[:index], *entries[index + 1 :]), changed=True, message="Entry removed."
    )
