"""``migrate-keys``: move a store's keys to a changed key policy (a dry run unless ``--yes``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.cli._output import UsageError
from hermes_sessions.cli._read import emit
from hermes_sessions.exceptions import InvalidKeyError
from hermes_sessions.keys import KeyPolicy

if TYPE_CHECKING:
    import argparse
    from typing import TextIO

    from hermes_sessions.store import SessionStore

__all__ = ["cmd_migrate_keys", "parse_policy"]

_SWITCHES: Final = {
    "on": True,
    "true": True,
    "yes": True,
    "off": False,
    "false": False,
    "no": False,
}
_NAMES: Final = ("namespace", "group", "thread", "whatsapp")


def parse_policy(spec: str) -> KeyPolicy:
    """``namespace=work,group=off,thread=on,whatsapp=off`` as a :class:`KeyPolicy`.

    Omitted settings keep the defaults (``main``, members isolated, threads shared, WhatsApp's
    canonicaliser on); an empty spec is the default policy.
    """
    settings: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in _NAMES or name in settings:
            raise UsageError(
                f"bad policy setting {item!r}: use {', '.join(n + '=...' for n in _NAMES)}, "
                "each at most once"
            )
        settings[name] = value.strip()
    switches: dict[str, bool] = {}
    for name in ("group", "thread", "whatsapp"):
        if name in settings:
            if settings[name].lower() not in _SWITCHES:
                raise UsageError(f"{name}={settings[name]!r}: use on or off")
            switches[name] = _SWITCHES[settings[name].lower()]
    try:
        return KeyPolicy(
            namespace=settings.get("namespace", "main"),
            group_sessions_per_user=switches.get("group", True),
            thread_sessions_per_user=switches.get("thread", False),
            canonicalizers={} if switches.get("whatsapp", True) else {"whatsapp": None},
        )
    except InvalidKeyError as error:
        raise UsageError(str(error)) from error


def cmd_migrate_keys(store: SessionStore, args: argparse.Namespace, out: TextIO) -> int:
    """Move every key the ``--from`` policy built to the ``--to`` policy's (``migrate_keys``)."""
    report = store.migrate_keys(
        parse_policy(args.old),
        parse_policy(args.new),
        dry_run=not args.yes,
        collisions="refuse" if args.refuse_collisions else "merge",
    )
    if args.json:
        value: dict[str, Any] = {
            "dry_run": report.dry_run,
            "moved": [
                {"from": m.old_key, "to": m.new_key, "session": m.session_id, "via": m.via}
                for m in report.moved
            ],
            "merged": [
                {"key": m.new_key, "live": m.session_id, "history": [sid for _, sid in m.merged]}
                for m in report.merged
            ],
            "rekeyed": len(report.rekeyed),
            "skipped": [
                {"key": s.key, "session": s.session_id, "reason": s.reason, "detail": s.detail}
                for s in report.skipped
            ],
            "unchanged": report.unchanged,
        }
        emit(out, value)
        return 0
    out.writelines(line + "\n" for line in report.lines())
    verb = "would move" if report.dry_run else "moved"
    summary = (
        f"{verb} {len(report.moved)} key(s) and {len(report.rekeyed)} record(s); "
        f"{len(report.merged)} merge(s), {len(report.skipped)} skipped, "
        f"{report.unchanged} unchanged"
    )
    if report.dry_run and report.changed:
        summary += "; run again with --yes to move them"
    out.write(summary + "\n")
    return 0
