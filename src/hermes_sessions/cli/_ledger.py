"""``hermes-sessions ledger pending|unknown``: what a restarted gateway has left to do.

``pending`` lists accepted messages not answered or failed yet, with their age and holder (and
whether the holder's lease still runs); ``unknown`` lists replies left between the platform
call and the mark (pending send intents whose holder's lease ran out). Both read only.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hermes_sessions.cli._output import table
from hermes_sessions.serde import dump_datetime
from hermes_sessions.store import Ledger

if TYPE_CHECKING:
    import argparse
    from typing import TextIO

    from hermes_sessions.store import SessionStore

__all__ = ["cmd_ledger"]


def _age(delta: timedelta) -> str:
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 120:  # noqa: PLR2004  # two minutes in seconds
        return f"{seconds}s"
    if seconds < 7200:  # noqa: PLR2004  # two hours
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h" if seconds < 172_800 else f"{seconds // 86_400}d"  # noqa: PLR2004


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else dump_datetime(moment)


def cmd_ledger(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """List the turn ledger's pending messages or unknown sends (``args.listing``)."""
    ledger = Ledger(store)
    now = datetime.now(UTC)
    rows: list[list[str]]
    items: list[dict[str, Any]]
    if args.listing == "pending":
        found = ledger.pending(key=args.key)
        items = [
            {
                "session_key": i.session_key,
                "platform_message_id": i.platform_message_id,
                "session_id": i.session_id,
                "accepted_at": _time(i.accepted_at),
                "age_seconds": int(i.age(now).total_seconds()),
                "holder": i.holder,
                "lease_until": _time(i.lease_until),
                "held": i.held(now),
            }
            for i in found
        ]
        headers = ["KEY", "MESSAGE", "AGE", "HOLDER", "LEASE", "SESSION"]
        rows = [
            [
                i.session_key,
                i.platform_message_id,
                _age(i.age(now)),
                i.holder or "",
                "running" if i.held(now) else "run out",
                i.session_id,
            ]
            for i in found
        ]
    else:
        unknown = ledger.unknown(key=args.key)
        items = [
            {
                "idempotency_key": i.idempotency_key,
                "session_key": i.session_key,
                "inbound": i.inbound,
                "session_id": i.session_id,
                "message_id": i.message_id,
                "created_at": _time(i.created_at),
                "holder": i.holder,
                "attempts": i.attempts,
            }
            for i in unknown
        ]
        headers = ["IDEMPOTENCY KEY", "KEY", "ANSWERS", "AGE", "HOLDER", "TRIES", "SESSION"]
        rows = [
            [
                i.idempotency_key,
                i.session_key,
                i.inbound or "",
                _age(now - i.created_at),
                i.holder or "",
                str(i.attempts),
                f"{i.session_id}#{i.message_id}",
            ]
            for i in unknown
        ]
    if args.json:
        out.write(json.dumps(items, ensure_ascii=False, indent=2) + "\n")
    elif not rows:
        what = "accepted messages waiting" if args.listing == "pending" else "unknown sends"
        out.write(f"no {what}\n")
    else:
        out.write(table(headers, rows) + "\n")
    return 0
