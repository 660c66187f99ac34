"""The commands that change a store or the memory files.

rename, archive, delete, prune, erase-user, export, import, import-hermes, optimize, reindex,
memory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_sessions.cli._output import UsageError, parse_duration, parse_size, progress_printer
from hermes_sessions.cli._read import emit, resolve
from hermes_sessions.exceptions import SessionInUseError
from hermes_sessions.store import RetentionPolicy

if TYPE_CHECKING:
    import argparse
    from typing import IO, TextIO

    from hermes_sessions.memory import MemoryStore, ScopedMemory
    from hermes_sessions.store import SessionStore

__all__ = [
    "cmd_archive",
    "cmd_delete",
    "cmd_erase_user",
    "cmd_export",
    "cmd_import",
    "cmd_import_hermes",
    "cmd_memory",
    "cmd_optimize",
    "cmd_prune",
    "cmd_reindex",
    "cmd_rename",
    "memory_store",
    "scoped_memory",
]


def memory_store(home: Path) -> MemoryStore:
    """The memory files of ``home`` (``<home>/memories``)."""
    from hermes_sessions.memory import MemoryStore  # noqa: PLC0415  # loads the threat scanner

    return MemoryStore(home / "memories")


def scoped_memory(home: Path) -> ScopedMemory:
    """The scoped memory of ``home`` (``<home>/memories``: app, users/, lanes/)."""
    from hermes_sessions.memory import ScopedMemory  # noqa: PLC0415  # loads the threat scanner

    return ScopedMemory(home / "memories")


def _done(args: argparse.Namespace, out: TextIO, value: dict[str, Any], text: str) -> int:
    if args.json:
        emit(out, value)
    else:
        out.write(text + "\n")
    return 0


def cmd_rename(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Set a session's title (sanitised; unique per owner)."""
    record = store.set_title(resolve(store, args.id).id, args.title or None)
    return _done(
        args, out, {"id": record.id, "title": record.title}, f"{record.id}: {record.title}"
    )


def cmd_archive(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Archive a session (or bring it back with ``--undo``)."""
    record = resolve(store, args.id)
    updated = store.unarchive(record.id) if args.undo else store.archive(record.id)
    state = "archived" if updated.archived else "unarchived"
    return _done(args, out, {"id": record.id, "archived": updated.archived}, f"{record.id} {state}")


def cmd_delete(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Delete a session no key points to (its children are orphaned, not deleted)."""
    record = resolve(store, args.id)
    try:
        store.delete(record.id)
    except SessionInUseError as error:
        raise UsageError(
            f"{record.id} is the current session of {', '.join(error.keys)}; end it first "
            "(a new message or /new moves the key on) or archive it instead"
        ) from error
    return _done(args, out, {"deleted": record.id}, f"{record.id} deleted")


def cmd_prune(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Apply the retention rules given (a dry run unless ``--yes``): ``store.maintain``."""
    if args.older_than is None and args.max_per_key is None and args.max_size is None:
        raise UsageError("prune needs a rule: --older-than, --max-per-key and/or --max-size")
    policy = RetentionPolicy(
        max_age=None if args.older_than is None else parse_duration(args.older_than),
        max_sessions_per_key=args.max_per_key,
        max_store_bytes=None if args.max_size is None else parse_size(args.max_size),
        sources=args.source or None,
    )
    report = store.maintain(policy, dry_run=not args.yes)
    verb = "would delete" if report.dry_run else "deleted"
    text = f"{verb} {len(report.session_ids)} session(s), {report.messages} message(s)"
    if report.spared:
        text += f"; kept {len(report.spared)} protected session(s)"
    if report.dry_run and report.session_ids:
        text += "; run again with --yes to delete them"
    value = {
        "dry_run": report.dry_run,
        "sessions": list(report.session_ids),
        "messages": report.messages,
        "bytes": report.bytes,
        "removed": [{"session": r.session_id, "rule": r.rule} for r in report.removed],
        "spared": list(report.spared),
    }
    return _done(args, out, value, text)


def cmd_erase_user(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Erase one user's data on one platform (a dry run unless ``--yes``)."""
    memory = scoped_memory(args.home) if (args.home / "memories").is_dir() else None
    report = store.erase_user(args.platform, *args.user, dry_run=not args.yes, memory=memory)
    verb = "would erase" if report.dry_run else "erased"
    text = (
        f"{verb} {len(report.sessions)} session(s), {report.messages} message(s) in shared "
        f"sessions and {len(report.entries)} routing key(s) of {args.platform} user "
        f"{', '.join(args.user)}"
    )
    if report.unmatched:
        text += f"; no data for {', '.join(report.unmatched)}"
    if report.keys_destroyed:
        text += f"; destroyed {report.keys_destroyed} per-user key(s)"
    if report.memory_files:
        text += (
            f"; memory: {len(report.memory_profiles)} profile(s), "
            f"{report.memory_entries} entr(ies), {len(report.memory_files)} file(s)"
        )
    if report.dry_run:
        text += "; run again with --yes to erase"
    elif not report.scrubbed:
        text += f"; not scrubbed yet: {report.scrub_hint}"
    value = {
        "dry_run": report.dry_run,
        "platform": args.platform,
        "user": list(args.user),
        "sessions": list(report.sessions),
        "messages": report.messages,
        "keys": list(report.entries),
        "cleared": list(report.cleared),
        "unmatched": list(report.unmatched),
        "scrubbed": report.scrubbed,
        "keys_destroyed": report.keys_destroyed,
        "memory_profiles": list(report.memory_profiles),
        "memory_entries": report.memory_entries,
        "memory_files": list(report.memory_files),
    }
    return _done(args, out, value, text)


def cmd_export(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Write a bundle to FILE or ``-`` (standard output)."""
    from hermes_sessions.interop import export_bundle  # noqa: PLC0415

    ids = [resolve(store, target).id for target in args.session] if args.session else None
    memory = memory_store(args.home) if args.memory else None
    progress = progress_printer("exporting")
    target: Path | IO[str] = sys.stdout if args.file == "-" else Path(args.file)
    report = export_bundle(store, target, session_ids=ids, memory=memory, progress=progress)
    if args.file == "-":
        return 0
    text = (
        f"exported {len(report.sessions)} session(s), {report.messages} message(s) to {args.file}"
    )
    return _done(args, out, report.to_dict(), text)


def _problems_text(problems: list[dict[str, Any]]) -> str:
    return "".join(f"\n  {p['kind']}: {p['where']}: {p['detail']}" for p in problems)


def cmd_import(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Read a bundle from FILE or ``-`` (standard input), merging by id."""
    from hermes_sessions.interop import import_bundle  # noqa: PLC0415

    # bytes from standard input: the importer decodes each line, naming one that is not UTF-8
    source: Path | IO[bytes] = sys.stdin.buffer if args.file == "-" else Path(args.file)
    if isinstance(source, Path) and not source.is_file():
        raise UsageError(f"cannot read {source}: no such file")
    memory = memory_store(args.home) if args.memory else None
    report = import_bundle(store, source, memory=memory)
    value = report.to_dict()
    text = (
        f"imported {len(report.sessions)} session(s), {report.messages} message(s), "
        f"{len(report.entries)} key(s); {len(report.unchanged)} already present"
        + _problems_text(value["problems"])
    )
    return _done(args, out, value, text)


def cmd_import_hermes(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Import a Hermes profile (read-only on it)."""
    from hermes_sessions.interop import import_hermes  # noqa: PLC0415

    report = import_hermes(
        args.hermes_home,
        store,
        timezone=args.timezone,
        memory=scoped_memory(args.home),
        user=args.user,
        progress=progress_printer("importing"),
    )
    value = report.to_dict()
    mapping = ", ".join(f"{name} -> {scope}" for name, scope in report.memory_mapping.items())
    text = (
        f"imported {len(report.sessions)} session(s), {report.messages} message(s), "
        f"{len(report.entries)} key(s), {report.memory_entries} memory entr(ies) "
        f"({mapping}); {len(report.skipped_sessions)} session(s) already present"
        + _problems_text(value["problems"])
    )
    return _done(args, out, value, text)


def cmd_optimize(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Run the backend's maintenance (SQLite: optimize + checkpoint; JSONL: compact)."""
    done = []
    names = ("optimize", "checkpoint", "compact", *(("scrub",) if args.scrub else ()))
    for name in names:
        method = getattr(store.backend, name, None)
        if callable(method):
            method()
            done.append(name)
    text = f"done: {', '.join(done)}" if done else "this backend needs no maintenance"
    return _done(args, out, {"ran": done}, text)


def cmd_reindex(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Rewrite a search index an older version wrote (resumable: run it again after a stop)."""
    from hermes_sessions.protocols import ReindexProgress, SupportsReindex  # noqa: PLC0415

    backend = store.backend
    if not isinstance(backend, SupportsReindex):
        text = "this backend builds its search index in memory when it opens: nothing to re-index"
        return _done(args, out, {"reindexed": 0, "needed": False}, text)
    needed = backend.reindex_needed()
    printer = progress_printer("re-indexing")

    def progress(step: ReindexProgress) -> None:
        if printer is not None:
            printer(step.done, step.total)

    count = backend.reindex(progress=progress, batch_size=args.batch_size)
    text = (
        f"re-indexed {count} message(s); the search index is current"
        if needed
        else "the search index is current: nothing to re-index"
    )
    return _done(args, out, {"reindexed": count, "needed": needed}, text)


def cmd_memory(args: argparse.Namespace, out: TextIO) -> int:
    """Show, add or remove memory entries."""
    memory = memory_store(args.home)
    if args.action == "show":
        targets = [args.target] if args.target else ["memory", "user"]
        value = {t: list(memory.entries(t)) for t in targets}
        if args.json:
            emit(out, value)
            return 0
        for target, entries in value.items():
            out.write(f"{target} ({memory.path(target).name}, {len(entries)} entries)\n")
            out.writelines(f"  § {entry}\n" for entry in entries)
        return 0
    if args.action == "add":
        result = memory.add(args.target, args.text)
    else:
        result = memory.remove(args.target, args.text)
    return _done(args, out, result.to_dict(), result.message)
