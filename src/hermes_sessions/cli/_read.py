"""The read-only commands: list, show, search, stats, check."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from hermes_sessions import serde
from hermes_sessions.checks import CheckReport, corrupt_problem, make_report
from hermes_sessions.cli._output import (
    UsageError,
    display_width,
    fit,
    parse_moment,
    parse_zone,
    table,
    zone_label,
)
from hermes_sessions.exceptions import AmbiguousSessionError
from hermes_sessions.protocols import SupportsCheck
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    import argparse
    from datetime import datetime, tzinfo
    from typing import TextIO

    from hermes_sessions.exceptions import CorruptRecordError
    from hermes_sessions.models import Message, SessionRecord
    from hermes_sessions.store import SessionStore

__all__ = ["cmd_check", "cmd_list", "cmd_search", "cmd_show", "cmd_stats", "emit", "resolve"]


def emit(out: TextIO, value: Any) -> None:
    """Write one JSON document."""
    out.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


_TITLE_WIDTH = 30
"""Columns a title takes at most in the search table."""


def _when(moment: datetime | None, zone: tzinfo) -> str:
    return "" if moment is None else moment.astimezone(zone).strftime("%Y-%m-%d %H:%M")


def _zone_name(zone: tzinfo, moment: datetime) -> str:
    return zone_label(zone, moment).split(" (")[0]


def resolve(store: SessionStore, target: str) -> SessionRecord:
    """The session named by an exact id or a unique id prefix."""
    record = store.backend.get_session(target) if _safe(target) else None
    if record is not None:
        return record
    page = store.backend.list_sessions(SessionQuery(id_prefix=target, limit=None))
    found = [item.record for item in page.items]
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(f"no session {target!r}; `hermes-sessions list --all` shows the ids")
    raise AmbiguousSessionError(target, [r.id for r in found])


def _safe(target: str) -> bool:
    from hermes_sessions.exceptions import InvalidIdError  # noqa: PLC0415
    from hermes_sessions.ids import validate_session_id  # noqa: PLC0415

    try:
        validate_session_id(target)
    except InvalidIdError:
        return False
    return True


def _filters(args: argparse.Namespace, store: SessionStore) -> dict[str, Any]:
    now = store.clock.now()
    filters: dict[str, Any] = {}
    if args.source:
        filters["sources"] = tuple(args.source)
    if args.user:
        filters["user_id"] = args.user
    if args.key:
        filters["session_key"] = args.key
    return filters | {
        "since": parse_moment(args.since, now) if args.since else None,
        "until": parse_moment(args.until, now) if args.until else None,
    }


def cmd_list(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """List sessions, most recently active first."""
    filters = _filters(args, store)
    since, until = filters.pop("since"), filters.pop("until")
    query = SessionQuery(
        **filters,
        archived=None if args.all else False,
        ended=None if args.all else False,
        active_after=since,
        active_before=until,
        limit=args.limit,
    )
    items = store.list_sessions(query, include_compressed=args.all).items
    zone = parse_zone(args.tz)
    if args.json:
        emit(
            out,
            [
                {**serde.unstructure(i.record), "preview": i.preview, "state": i.state}
                for i in items
            ],
        )
        return 0
    if not items:
        out.write("no sessions match (`--all` includes ended and archived ones)\n")
        return 0
    rows = [
        [
            i.record.id,
            i.record.source,
            str(i.record.message_count),
            _when(i.record.last_active, zone),
            i.state,
            _title_cell(i.record.title, i.preview),
        ]
        for i in items
    ]
    active = f"LAST ACTIVE ({_zone_name(zone, store.clock.now())})"
    out.write(table(["ID", "SOURCE", "MSGS", active, "STATE", "TITLE"], rows) + "\n")
    return 0


def _title_cell(title: str | None, preview: str | None) -> str:
    """The title; for an untitled session its first message, quoted and marked as not a title."""
    if title:
        return title
    return f'(untitled) "{preview}"' if preview else "(untitled)"


def _content_text(message: Message) -> str:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        else:
            parts.append(f"[{part.get('type', 'part')}]")
    return " ".join(parts)


def _call_text(call: dict[str, Any]) -> str:
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name = function.get("name", "?") if isinstance(function, dict) else "?"
    arguments = function.get("arguments", "") if isinstance(function, dict) else ""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return f"→ {name}({arguments})"


def _label(message: Message) -> str:
    """Who speaks: the sender's name (or id) for a user message that has one, else the role."""
    label = message.role
    if message.role == "user" and (message.sender_name or message.sender_id):
        label = str(message.sender_name or message.sender_id)
    elif message.role == "tool" and message.tool_name:
        label = f"tool {message.tool_name}"
    return label if message.active else f"{label} (deleted)"


def cmd_show(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Print one session's transcript (senders named, tool calls and results readable)."""
    record = resolve(store, args.id)
    messages = store.transcript(record.id, include_inactive=args.inactive)
    if args.json:
        emit(
            out,
            {
                "session": serde.unstructure(record),
                "messages": [serde.unstructure(m) for m in messages],
            },
        )
        return 0
    zone = parse_zone(args.tz)
    out.write(f"{record.id}  {record.title or '(untitled)'}\n")
    state = record.end_reason or "open"
    out.write(
        f"source {record.source} · {record.message_count} messages · {state} · "
        f"started {_when(record.started_at, zone)} · "
        f"times in {zone_label(zone, record.started_at)}\n"
    )
    day = None
    for message in messages:
        stamp = "     "
        if message.timestamp is not None:
            local = message.timestamp.astimezone(zone)
            if local.date() != day:
                day = local.date()
                out.write(f"\n── {day:%Y-%m-%d %a} ──\n")
            stamp = f"{local:%H:%M}"
        label = _label(message)
        text = _content_text(message)
        if text:
            out.write(f"[{stamp}] {label}: {text}\n")
        out.writelines(f"[{stamp}] {label}: {_call_text(c)}\n" for c in message.tool_calls or [])
    return 0


def _roles(args: argparse.Namespace) -> dict[str, Any]:
    """``roles`` for the search: every role for ``--role all``, the ones named, or the default."""
    if not args.role:
        return {}
    return {"roles": None} if "all" in args.role else {"roles": tuple(args.role)}


def cmd_search(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Search messages across sessions: each hit's date, session, source, role and title.

    Each hit's snippet follows on a line of its own, so no column narrows it.
    """
    filters = _filters(args, store)
    hits = store.search(args.query, limit=args.limit, **filters, **_roles(args))
    if args.json:
        emit(
            out,
            [
                {
                    "session_id": hit.session.id,
                    "message_id": hit.message.id,
                    "role": hit.message.role,
                    "timestamp": None
                    if hit.message.timestamp is None
                    else serde.dump_datetime(hit.message.timestamp),
                    "source": hit.session.source,
                    "title": hit.session.title,
                    "score": hit.score,
                    "snippet": hit.snippet,
                }
                for hit in hits
            ],
        )
        return 0
    if not hits:
        out.write(f"no messages match {args.query!r}\n")
        return 0
    zone = parse_zone(args.tz)
    rows = [
        [
            _when(hit.message.timestamp, zone),
            hit.session.id,
            hit.session.source,
            _label(hit.message),
            fit(hit.session.title or "", _TITLE_WIDTH).rstrip(),
        ]
        for hit in hits
    ]
    date = f"DATE ({_zone_name(zone, store.clock.now())})"
    header, *lines = table([date, "SESSION", "SOURCE", "ROLE", "TITLE"], rows).splitlines()
    out.write(header + "\n")
    out.writelines(
        f"{line}\n    {' '.join(hit.snippet.split())}\n"
        for line, hit in zip(lines, hits, strict=True)
    )
    return 0


def cmd_stats(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Counts: sessions (by source and state), messages, routing keys."""
    records = [i.record for i in store.backend.list_sessions(SessionQuery(limit=None)).items]
    by_source: dict[str, int] = {}
    for record in records:
        by_source[record.source] = by_source.get(record.source, 0) + 1
    stats = {
        "backend": type(store.backend).__name__,
        "sessions": len(records),
        "open": sum(not r.is_ended for r in records),
        "archived": sum(r.archived for r in records),
        "messages": sum(r.message_count for r in records),
        "tool_calls": sum(r.tool_call_count for r in records),
        "input_tokens": sum(r.input_tokens for r in records),
        "output_tokens": sum(r.output_tokens for r in records),
        "routing_keys": len(store.backend.entries()),
        "sessions_by_source": dict(sorted(by_source.items())),
    }
    if args.json:
        emit(out, stats)
        return 0
    for name, raw in stats.items():
        value = ", ".join(f"{k} {v}" for k, v in raw.items()) if isinstance(raw, dict) else raw
        out.write(f"{name.replace('_', ' '):<{display_width('sessions by source')}}  {value}\n")
    return 0


def cmd_check(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """The backend's ``check()`` (storage and the library's invariants); exit 1 on a problem."""
    backend = store.backend
    report = backend.check() if isinstance(backend, SupportsCheck) else make_report(backend)
    return print_report(report, args, out)


def print_report(report: CheckReport, args: argparse.Namespace, out: TextIO) -> int:
    """Write ``report`` (one line per problem, or JSON); return the exit status."""
    if args.json:
        emit(
            out,
            {
                "ok": report.ok,
                "sessions": report.sessions,
                "problems": [str(p) for p in report.problems],
                "details": [
                    {"kind": p.kind, "where": p.where, "detail": p.detail} for p in report.problems
                ],
            },
        )
    elif report.problems:
        out.write("\n".join(str(p) for p in report.problems) + "\n")
    else:
        out.write(f"ok: {report.sessions} sessions, every key and counter consistent\n")
    return 0 if report.ok else 1


def report_unopenable(error: CorruptRecordError, args: argparse.Namespace, out: TextIO) -> int:
    """``check`` on a store too damaged to open: the error is the one problem; exit 1."""
    problem = corrupt_problem(error, "storage")
    problem = attrs.evolve(problem, detail=" ".join(str(error).split()))
    return print_report(CheckReport([problem]), args, out)
