"""What an import did: the reports returned by the Hermes importer and the bundle reader."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["BundleReport", "HermesImportReport", "ImportProblem"]


@attrs.frozen(kw_only=True)
class ImportProblem:
    """Something an import could not take over as it was, and what it did instead.

    ``kind`` is one of ``truncated_line`` (a torn last line, skipped), ``bad_line`` (a line that is
    not a JSON object, skipped), ``surrogates`` (lone surrogates replaced by U+FFFD),
    ``oversize`` (a message longer than the limit, imported whole), ``too_large`` (a message
    the target backend refuses as larger than its ``max_message_bytes``, left out),
    ``jsonl_preferred`` (the
    legacy transcript held more messages than the database), ``conflict`` (the target already
    holds something else under that id or key; nothing was overwritten), ``bad_record`` (a row or
    entry that does not make a valid record, skipped), ``memory_refused`` (the memory store refused
    an entry), ``unknown_record`` (a bundle line of a type this version does not know),
    ``rekeyed`` (a Hermes thread key, ``<chat>:<thread>``, written in this library's thread form
    ``<chat>:thread:<thread>``), ``outside_profile`` (a Hermes file that is a link out of the
    profile, not read), ``not_a_file`` (a Hermes file that is a FIFO, device or directory, not
    read) and ``unreadable`` (a Hermes file that cannot be opened).

    .. versionadded:: 0.1.0
    """

    kind: str
    where: str
    """The file, session id, key or memory target concerned (with a line number when known)."""
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """The problem as a JSON object."""
        return {"kind": self.kind, "where": self.where, "detail": self.detail}


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class HermesImportReport:
    """What :func:`~hermes_sessions.interop.import_hermes` did.

    A second import of the same profile imports nothing and lists everything as ``skipped``.

    .. versionadded:: 0.1.0
    """

    sessions: tuple[str, ...] = attrs.field(converter=_tuple)
    """Sessions created, in the order they were imported."""
    skipped_sessions: tuple[str, ...] = attrs.field(converter=_tuple)
    """Sessions already in the target (from an earlier import) and left alone."""
    messages: int
    """Messages written (active and soft-deleted)."""
    entries: tuple[str, ...] = attrs.field(converter=_tuple)
    """Routing keys created."""
    skipped_entries: tuple[str, ...] = attrs.field(converter=_tuple)
    """Routing keys already pointing at the same session."""
    memory_entries: int
    """Memory entries added (exact duplicates of existing entries are not counted)."""
    memory_mapping: dict[str, str] = attrs.field(factory=dict)
    """Where each memory file went: ``{"MEMORY.md": "app", "USER.md": "user:telegram:42"}``."""
    jsonl_preferred: tuple[str, ...] = attrs.field(converter=_tuple)
    """Sessions whose legacy JSONL transcript held more messages than the database, and won."""
    problems: tuple[ImportProblem, ...] = attrs.field(converter=_tuple)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON object (the shape of ``import-hermes --json``)."""
        return {
            "sessions": list(self.sessions),
            "skipped_sessions": list(self.skipped_sessions),
            "messages": self.messages,
            "entries": list(self.entries),
            "skipped_entries": list(self.skipped_entries),
            "memory_entries": self.memory_entries,
            "memory_mapping": dict(self.memory_mapping),
            "jsonl_preferred": list(self.jsonl_preferred),
            "problems": [problem.to_dict() for problem in self.problems],
        }


@attrs.frozen(kw_only=True)
class BundleReport:
    """What :func:`~hermes_sessions.interop.import_bundle` or ``export_bundle`` did.

    .. versionadded:: 0.1.0
    """

    sessions: tuple[str, ...] = attrs.field(converter=_tuple)
    """Sessions written (import) or read into the bundle (export)."""
    unchanged: tuple[str, ...] = attrs.field(converter=_tuple)
    """Sessions the target already held exactly as in the bundle."""
    messages: int
    entries: tuple[str, ...] = attrs.field(converter=_tuple)
    memory_entries: int
    problems: tuple[ImportProblem, ...] = attrs.field(converter=_tuple)
    """Conflicts (kept as they were in the target) and skipped lines."""

    @property
    def conflicts(self) -> tuple[ImportProblem, ...]:
        """The problems of kind ``conflict``."""
        return tuple(p for p in self.problems if p.kind == "conflict")

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON object (the shape of ``export --json`` and ``import --json``)."""
        return {
            "sessions": list(self.sessions),
            "unchanged": list(self.unchanged),
            "messages": self.messages,
            "entries": list(self.entries),
            "memory_entries": self.memory_entries,
            "problems": [problem.to_dict() for problem in self.problems],
        }
