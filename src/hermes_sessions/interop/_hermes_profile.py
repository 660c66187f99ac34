r"""Reading a Hermes profile directory (``~/.hermes``) into hermes-sessions models.

Nothing here writes to the profile. The database is copied (with its write-ahead log) into a
temporary directory and read there: it is in WAL mode, and even a read-only open of a WAL
database may need to create files beside it. Schema facts are those of DESIGN §9: tables
``sessions`` and ``messages`` (the FTS tables are ignored), multimodal content stored as
``"\\x00json:"`` + JSON, JSON text in ``tool_calls`` and the reasoning detail columns, epoch
seconds, an ``active`` flag; ``sessions/sessions.json`` maps keys to entries with naive local
times; legacy ``sessions/<id>.jsonl`` transcripts hold one message dict per line.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, Final

import attrs

from hermes_sessions.exceptions import HermesSessionsError, InvalidSourceError
from hermes_sessions.interop._report import ImportProblem
from hermes_sessions.interop._text import Cleaner, decode_bytes, load_json_text
from hermes_sessions.legacy_keys import marked_thread_key
from hermes_sessions.models import Message, SessionEntry, SessionRecord, SessionSource

__all__ = ["HermesProfile", "HermesSession", "read_profile"]

MULTIMODAL_PREFIX: Final = "\x00json:"
"""How Hermes stores a list of content parts in the ``content`` column."""

_JSON_EXTRA_COLUMNS: Final = ("reasoning_details", "codex_reasoning_items", "codex_message_items")
_SESSION_EXTRA_COLUMNS: Final = (
    "cwd",
    "billing_provider",
    "billing_base_url",
    "billing_mode",
    "actual_cost_usd",
    "cost_status",
    "cost_source",
    "pricing_version",
    "api_call_count",
    "handoff_state",
    "handoff_platform",
    "handoff_error",
    "rewind_count",
)
_TOKEN_COLUMNS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
_JSONL_FIELDS: Final = {
    "role": "role",
    "content": "content",
    "tool_calls": "tool_calls",
    "tool_call_id": "tool_call_id",
    "tool_name": "tool_name",
    "finish_reason": "finish_reason",
    "reasoning": "reasoning",
    "message_id": "platform_message_id",
}


@attrs.frozen(kw_only=True)
class HermesSession:
    """One Hermes session: its record and its whole transcript (soft-deleted messages included)."""

    record: SessionRecord
    messages: tuple[Message, ...]


@attrs.frozen(kw_only=True)
class HermesProfile:
    """Everything read from a profile, ready to write into a store."""

    sessions: tuple[HermesSession, ...]
    """Parents before children."""
    entries: tuple[SessionEntry, ...]
    memory: dict[str, tuple[str, ...]]
    """``memory`` / ``user`` → entries."""
    jsonl_preferred: tuple[str, ...]
    problems: tuple[ImportProblem, ...]


@attrs.define
class _Reader:
    home: Path
    zone: tzinfo
    max_message_chars: int
    problems: list[ImportProblem] = attrs.Factory(list)

    def problem(self, kind: str, where: str, detail: str) -> None:
        self.problems.append(ImportProblem(kind=kind, where=where, detail=detail))

    # -- times -------------------------------------------------------------------------------------

    def local(self, value: object) -> datetime | None:
        """A Hermes datetime string (naive local time, or with an offset) made aware."""
        if not isinstance(value, str) or not value:
            return None
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=self.zone)
        return parsed.astimezone(UTC)

    # -- state.db ----------------------------------------------------------------------------------

    def database(self) -> tuple[list[SessionRecord], dict[str, list[Message]]]:
        source = self.home / "state.db"
        if not source.is_file():
            return [], {}
        with tempfile.TemporaryDirectory(prefix="hermes-import-") as scratch:
            copy = Path(scratch) / "state.db"
            shutil.copyfile(source, copy)
            wal = source.with_name("state.db-wal")
            if wal.is_file():
                shutil.copyfile(wal, copy.with_name("state.db-wal"))
            connection = sqlite3.connect(copy)
            try:
                connection.text_factory = decode_bytes
                connection.row_factory = sqlite3.Row
                return self._read_database(connection)
            except sqlite3.DatabaseError as error:
                raise InvalidSourceError(
                    f"{source} is not a readable Hermes database ({error}); check that it is the "
                    "state.db of a Hermes profile",
                    path=source,
                ) from error
            finally:
                connection.close()

    def _read_database(
        self, connection: sqlite3.Connection
    ) -> tuple[list[SessionRecord], dict[str, list[Message]]]:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if not {"sessions", "messages"} <= tables:
            raise sqlite3.DatabaseError("it has no sessions and messages tables")
        records: list[SessionRecord] = []
        for row in connection.execute("SELECT * FROM sessions ORDER BY started_at, id"):
            record = self._record(dict(row))
            if record is not None:
                records.append(record)
        known = {record.id for record in records}
        transcripts: dict[str, list[Message]] = {record.id: [] for record in records}
        for row in connection.execute("SELECT * FROM messages ORDER BY id"):
            values = dict(row)
            if values["session_id"] in known:
                message = self._db_message(values)
                if message is not None:
                    transcripts[values["session_id"]].append(message)
        return records, transcripts

    def _record(self, row: dict[str, Any]) -> SessionRecord | None:
        cleaner = Cleaner()
        row = cleaner.value(row)
        where = str(row.get("id"))
        hermes = {name: row[name] for name in _SESSION_EXTRA_COLUMNS if row.get(name) is not None}
        model_config = load_json_text(row.get("model_config"))
        if model_config is not None and not isinstance(model_config, dict):
            hermes["model_config"] = model_config
            model_config = None
        tokens: dict[str, Any] = {name: max(int(row.get(name) or 0), 0) for name in _TOKEN_COLUMNS}
        try:
            record = SessionRecord(
                id=row["id"],
                source=str(row["source"]).lower(),
                started_at=datetime.fromtimestamp(row["started_at"], UTC),
                user_id=row.get("user_id"),
                title=row.get("title"),
                parent_session_id=row.get("parent_session_id"),
                ended_at=None
                if row.get("ended_at") is None
                else datetime.fromtimestamp(row["ended_at"], UTC),
                end_reason=row.get("end_reason"),
                estimated_cost_usd=row.get("estimated_cost_usd"),
                model=row.get("model"),
                model_config=model_config or {},
                system_prompt=row.get("system_prompt"),
                archived=bool(row.get("archived")),
                metadata={"hermes": hermes} if hermes else {},
                **tokens,
            )
        except (HermesSessionsError, TypeError, ValueError, KeyError, OverflowError) as error:
            self.problem("bad_record", f"state.db session {where}", str(error))
            return None
        if cleaner.replaced:
            self.problem("surrogates", where, f"{cleaner.replaced} lone surrogate(s) replaced")
        return record

    def _db_message(self, row: dict[str, Any]) -> Message | None:
        cleaner = Cleaner()
        row = cleaner.value(row)
        where = f"{row['session_id']} message {row['id']}"
        extra: dict[str, Any] = {"hermes_id": row["id"]}
        if row.get("reasoning_content") is not None:
            extra["reasoning_content"] = row["reasoning_content"]
        for name in _JSON_EXTRA_COLUMNS:
            value = load_json_text(row.get(name))
            if value is not None:
                extra[name] = value
        if row.get("observed"):
            extra["observed"] = row["observed"]
        content: Any = row.get("content")
        if isinstance(content, str) and content.startswith(MULTIMODAL_PREFIX):
            parts = load_json_text(content[len(MULTIMODAL_PREFIX) :])
            if isinstance(parts, list) and all(isinstance(part, dict) for part in parts):
                content = parts
        tool_calls = load_json_text(row.get("tool_calls"))
        if tool_calls is not None and not (
            isinstance(tool_calls, list) and all(isinstance(c, dict) for c in tool_calls)
        ):
            extra["tool_calls_raw"] = tool_calls
            tool_calls = None
        token_count = row.get("token_count")
        try:
            message = Message(
                role=row["role"],
                content=content,
                tool_calls=tool_calls,
                tool_call_id=row.get("tool_call_id"),
                tool_name=row.get("tool_name"),
                timestamp=datetime.fromtimestamp(row["timestamp"], UTC),
                token_count=token_count
                if isinstance(token_count, int) and token_count >= 0
                else None,
                finish_reason=row.get("finish_reason"),
                reasoning=row.get("reasoning"),
                platform_message_id=row.get("platform_message_id"),
                active=bool(row.get("active", 1)),
                extra=extra,
            )
        except (HermesSessionsError, TypeError, ValueError, OverflowError) as error:
            self.problem("bad_record", f"state.db {where}", str(error))
            return None
        self._check(message, where, cleaner)
        return message

    def _check(self, message: Message, where: str, cleaner: Cleaner) -> None:
        if cleaner.replaced:
            self.problem("surrogates", where, f"{cleaner.replaced} lone surrogate(s) replaced")
        size = len(json.dumps(message.content, ensure_ascii=False))
        if size > self.max_message_chars:
            self.problem(
                "oversize",
                where,
                f"content of {size} characters (limit {self.max_message_chars}); imported whole",
            )

    # -- legacy JSONL ------------------------------------------------------------------------------

    def jsonl(self, path: Path) -> tuple[dict[str, Any], list[Message]]:
        """The ``session_meta`` header (or ``{}``) and the messages of a legacy transcript."""
        lines = path.read_bytes().split(b"\n")
        meta: dict[str, Any] = {}
        messages: list[Message] = []
        last = len(lines)
        while last > 0 and not lines[last - 1].strip():
            last -= 1
        for number, raw in enumerate(lines[:last], start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                data = json.loads(decode_bytes(raw))
            except ValueError:
                kind = "truncated_line" if number == last else "bad_line"
                self.problem(kind, where, "not a complete JSON line; skipped")
                continue
            if not isinstance(data, dict):
                self.problem("bad_line", where, "not a JSON object; skipped")
                continue
            if data.get("role") == "session_meta":
                meta = data
                continue
            message = self._jsonl_message(data, where, messages)
            if message is not None:
                messages.append(message)
        return meta, messages

    def _jsonl_message(
        self, data: dict[str, Any], where: str, earlier: list[Message]
    ) -> Message | None:
        cleaner = Cleaner()
        data = cleaner.value(data)
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for name, value in data.items():
            if name in _JSONL_FIELDS:
                known[_JSONL_FIELDS[name]] = value
            elif name != "timestamp":
                extra[name] = value
        stamp = self.local(data.get("timestamp"))
        if stamp is None and earlier:
            stamp = earlier[-1].timestamp
        content = known.get("content")
        if isinstance(content, str) and content.startswith(MULTIMODAL_PREFIX):
            parts = load_json_text(content[len(MULTIMODAL_PREFIX) :])
            if isinstance(parts, list):
                known["content"] = parts
        try:
            message = Message(**known, timestamp=stamp, extra=extra)
        except (HermesSessionsError, TypeError, ValueError) as error:
            self.problem("bad_line", where, f"not a message ({error}); skipped")
            return None
        self._check(message, where, cleaner)
        return message

    # -- sessions.json -----------------------------------------------------------------------------

    def routing(self) -> list[tuple[str, dict[str, Any]]]:
        path = self.home / "sessions" / "sessions.json"
        if not path.is_file():
            return []
        try:
            data = json.loads(decode_bytes(path.read_bytes()))
        except ValueError as error:
            self.problem("bad_line", str(path), f"not valid JSON ({error}); routing not imported")
            return []
        if not isinstance(data, dict):
            self.problem("bad_line", str(path), "not a JSON object; routing not imported")
            return []
        cleaned, replaced = Cleaner(), 0
        data = cleaned.value(data)
        replaced = cleaned.replaced
        if replaced:
            self.problem("surrogates", str(path), f"{replaced} lone surrogate(s) replaced")
        return [(str(key), value) for key, value in data.items() if isinstance(value, dict)]

    def entry(self, key: str, data: dict[str, Any]) -> SessionEntry | None:
        origin_data = data.get("origin")
        origin = None
        if isinstance(origin_data, dict):
            try:
                origin = SessionSource(
                    platform=str(origin_data.get("platform") or data.get("platform")).lower(),
                    chat_id=origin_data.get("chat_id"),
                    chat_type=str(origin_data.get("chat_type") or "dm").lower(),
                    user_id=origin_data.get("user_id"),
                    user_id_alt=origin_data.get("user_id_alt"),
                    thread_id=origin_data.get("thread_id"),
                    chat_name=origin_data.get("chat_name"),
                    user_name=origin_data.get("user_name"),
                    chat_topic=origin_data.get("chat_topic"),
                    scope_id=origin_data.get("guild_id") or origin_data.get("scope_id"),
                )
            except (HermesSessionsError, TypeError, ValueError) as error:
                self.problem("bad_record", f"sessions.json {key}", f"origin dropped: {error}")
        created: Any = self.local(data.get("created_at"))
        updated: Any = self.local(data.get("updated_at")) or created
        tokens = data.get("last_prompt_tokens")
        session_id: Any = data.get("session_id")
        try:
            return SessionEntry(
                session_key=key,
                session_id=session_id,
                created_at=created,
                updated_at=updated,
                origin=origin,
                display_name=data.get("display_name"),
                platform=data.get("platform"),
                chat_type=data.get("chat_type"),
                suspended=bool(data.get("suspended")),
                resume_pending=bool(data.get("resume_pending")),
                resume_reason=data.get("resume_reason"),
                last_prompt_tokens=tokens if isinstance(tokens, int) and tokens >= 0 else None,
            )
        except (HermesSessionsError, TypeError, ValueError) as error:
            self.problem("bad_record", f"sessions.json {key}", f"entry skipped: {error}")
            return None

    # -- memories ----------------------------------------------------------------------------------

    def memory(self) -> dict[str, tuple[str, ...]]:
        from hermes_sessions.memory import parse_entries  # noqa: PLC0415  # only when importing

        found: dict[str, tuple[str, ...]] = {}
        for target, name in (("memory", "MEMORY.md"), ("user", "USER.md")):
            path = self.home / "memories" / name
            if path.is_file():
                text, replaced = Cleaner(), 0
                entries = text.value(list(parse_entries(decode_bytes(path.read_bytes()))))
                replaced = text.replaced
                if replaced:
                    self.problem("surrogates", str(path), f"{replaced} lone surrogate(s) replaced")
                found[target] = tuple(entries)
        return found


def _same_turns(database: list[Message], legacy: list[Message]) -> bool:
    return all(
        (a.role, a.content) == (b.role, b.content) for a, b in zip(database, legacy, strict=False)
    )


def _looks_like_profile(home: Path) -> bool:
    return (home / "state.db").is_file() or (home / "sessions" / "sessions.json").is_file()


def read_profile(home: Path, *, zone: tzinfo, max_message_chars: int) -> HermesProfile:
    """Read everything from the Hermes profile at ``home`` (never writing to it)."""
    if not home.is_dir():
        raise InvalidSourceError(
            f"{home} is not a directory; pass the Hermes home (usually ~/.hermes)", path=home
        )
    if not _looks_like_profile(home):
        raise InvalidSourceError(
            f"{home} is not a Hermes home: it has neither state.db nor sessions/sessions.json; "
            "pass the directory Hermes keeps its data in (usually ~/.hermes)",
            path=home,
        )
    reader = _Reader(home=home, zone=zone, max_message_chars=max_message_chars)
    records, transcripts = reader.database()
    by_id = {record.id: record for record in records}
    preferred = _merge_legacy(home, reader, records, by_id, transcripts)
    routing = reader.routing()
    keys: dict[str, str] = {}
    entries: list[SessionEntry] = []
    for key, data in routing:
        entry = reader.entry(key, data)
        if entry is None:
            continue
        marked = None if entry.origin is None else marked_thread_key(key, entry.origin)
        if marked is not None:
            reader.problem("rekeyed", f"sessions.json {key}", f"thread key written as {marked}")
            entry = attrs.evolve(entry, session_key=marked)
        if entry.session_id not in by_id:
            reader.problem(
                "bad_record",
                f"sessions.json {key}",
                f"points at unknown session {entry.session_id}",
            )
            continue
        entries.append(entry)
        keys.setdefault(entry.session_id, entry.session_key)
    sessions = [
        HermesSession(
            record=attrs.evolve(record, session_key=keys.get(record.id, record.session_key)),
            messages=tuple(transcripts.get(record.id, ())),
        )
        for record in _parents_first(records)
    ]
    return HermesProfile(
        sessions=tuple(sessions),
        entries=tuple(entries),
        memory=reader.memory(),
        jsonl_preferred=tuple(preferred),
        problems=tuple(reader.problems),
    )


def _merge_legacy(
    home: Path,
    reader: _Reader,
    records: list[SessionRecord],
    by_id: dict[str, SessionRecord],
    transcripts: dict[str, list[Message]],
) -> list[str]:
    """Fold the legacy JSONL transcripts in; return the sessions where the JSONL won."""
    preferred: list[str] = []
    legacy_dir = home / "sessions"
    for path in sorted(legacy_dir.glob("*.jsonl")) if legacy_dir.is_dir() else []:
        session_id = path.stem
        meta, legacy = reader.jsonl(path)
        if session_id not in by_id:
            record = _record_from_jsonl(session_id, meta, legacy, reader)
            if record is None:
                continue
            records.append(record)
            by_id[session_id] = record
            transcripts[session_id] = legacy
            continue
        database = transcripts[session_id]
        if len(legacy) > len(database):
            if _same_turns(database, legacy):
                transcripts[session_id] = database + legacy[len(database) :]
                how = f"{len(legacy) - len(database)} message(s) only in the JSONL were appended"
            else:
                transcripts[session_id] = legacy
                how = "the transcripts differ; the JSONL copy was imported instead"
            preferred.append(session_id)
            reader.problem(
                "jsonl_preferred",
                session_id,
                f"{path.name} holds {len(legacy)} messages, state.db {len(database)}: {how}",
            )
    return preferred


def _record_from_jsonl(
    session_id: str, meta: dict[str, Any], messages: list[Message], reader: _Reader
) -> SessionRecord | None:
    started = messages[0].timestamp if messages else reader.local(meta.get("timestamp"))
    try:
        return SessionRecord(
            id=session_id,
            source=str(meta.get("platform") or "cli").lower(),
            started_at=started or datetime.fromtimestamp(0, UTC),
            model=meta.get("model"),
        )
    except (HermesSessionsError, TypeError, ValueError) as error:
        reader.problem("bad_record", session_id, f"legacy transcript skipped: {error}")
        return None


def _parents_first(records: list[SessionRecord]) -> list[SessionRecord]:
    ordered = sorted(records, key=lambda r: (r.started_at, r.id))
    ids = {record.id for record in ordered}
    placed: set[str] = set()
    result: list[SessionRecord] = []
    pending = ordered
    while pending:
        waiting = []
        for record in pending:
            parent = record.parent_session_id
            if parent is None or parent not in ids or parent in placed:
                result.append(record)
                placed.add(record.id)
            else:
                waiting.append(record)
        if len(waiting) == len(pending):  # a cycle: place the rest as they are
            result.extend(waiting)
            break
        pending = waiting
    return result
