"""A generated multilingual corpus for the encrypted-store tests, with unique markers.

English, Chinese, Japanese and Korean messages from fixed seeds; every session, message and
state value carries *markers* (random strings of at least 8 characters, ASCII and CJK) in each
field that is encrypted, so a byte search of the stored files can prove none leaks.
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.cipher import Cipher, StaticKeys
from hermes_sessions.models import Message, SessionEntry, SessionRecord, SessionSource
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.state import StateScope
from pg_support import open_pg, requires_pg, schema_dump

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.protocols import Backend, SearchableBackend

TOKEN_KEY = hashlib.sha256(b"token key of test_encrypted").digest()
KEY_1 = hashlib.sha256(b"data key 1").digest()
KEY_2 = hashlib.sha256(b"data key 2").digest()
KINDS = [
    "sqlite",
    "jsonl",
    pytest.param("postgres", marks=requires_pg),
]
"""Each built-in persistent backend (PostgreSQL when the test server is configured)."""


def cipher(keys: dict[str, bytes] | None = None, token_key: bytes = TOKEN_KEY) -> Cipher:
    """A cipher over ``keys`` (by default ``k1``) with the test token key."""
    return Cipher(StaticKeys(keys or {"k1": KEY_1}), token_key=token_key)


def plain_backend(kind: str, directory: Path) -> SearchableBackend:
    """A plain backend of ``kind`` on ``directory``."""
    if kind == "sqlite":
        directory.mkdir(parents=True, exist_ok=True)
        return SQLiteBackend(directory / "state.db")
    if kind == "jsonl":
        return JSONLBackend(directory)
    return open_pg(directory)


def stored_bytes(kind: str, directory: Path) -> bytes:
    """Every byte the backend of ``kind`` keeps for ``directory`` (files, or PG rows as text)."""
    if kind == "postgres":
        return schema_dump(directory)
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


T0 = datetime(2026, 3, 1, tzinfo=UTC)
WORDS = [
    *("deploy", "docker", "compose", "staging", "binary", "helm", "release", "window"),
    *("cluster", "token", "budget", "agent", "review", "merge", "branch", "rollback"),
    *("alert", "metric", "latency", "cache", "index", "replica", "backup", "restore"),
]
HAN = "部署飞书机器人服务端修改配置发布回滚监控告警缓存索引备份恢复数据库集群"
KANA = "デプロイサーバーせっていをかくにんしてくださいキャッシュインデックス"
HANGUL = "배포서버설정확인하세요캐시인덱스백업복구데이터베이스"


def _cjk(rng: random.Random, alphabet: str, length: int) -> str:
    start = rng.randrange(len(alphabet) - length)
    return alphabet[start : start + length]


def _english(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))


def _text(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return _english(rng)
    alphabet = (HAN, KANA, HANGUL)[kind - 1]
    return f"{rng.choice(WORDS)} {_cjk(rng, alphabet, rng.randint(3, 9))} {rng.choice(WORDS)}"


class Markers:
    """Unique strings, remembered so a test can look for each one in the stored bytes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.all: list[str] = []

    def ascii(self) -> str:
        """A fresh lower-case marker of 12 letters."""
        marker = "mk" + "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))
        self.all.append(marker)
        return marker

    def cjk(self) -> str:
        """A fresh marker of 8 Han characters from outside the corpus alphabet."""
        marker = "".join(chr(self.rng.randrange(0x5000, 0x6000)) for _ in range(8))
        self.all.append(marker)
        return marker


def fill(backend: Backend, *, sessions: int = 12, per_session: int = 10, seed: int = 7) -> Markers:
    """Write the corpus into ``backend``; return its markers (the same for the same seed)."""
    rng = random.Random(seed)  # noqa: S311  # a reproducible corpus, not secrets
    markers = Markers(rng)
    for number in range(sessions):
        session_id = f"20260301_000000_{number:08x}"
        key = f"agent:main:telegram:dm:{number}"
        record = SessionRecord(
            id=session_id,
            source="telegram",
            started_at=T0,
            session_key=key,
            title=f"{markers.ascii()} {markers.cjk()}",
            system_prompt=f"you are {markers.ascii()}",
            metadata={"note": markers.ascii(), "cjk": markers.cjk()},
            model_config={"persona": markers.ascii()},
        )
        origin = SessionSource(
            platform="telegram",
            chat_id=markers.ascii(),
            user_id=markers.ascii(),
            chat_name=markers.cjk(),
            user_name=markers.ascii(),
        )
        entry = SessionEntry(
            session_key=key,
            session_id=session_id,
            created_at=T0,
            updated_at=T0,
            origin=origin,
            display_name=markers.ascii(),
        )
        backend.apply(
            RotationPlan(
                at=T0, create=record, entries=[EntryWrite(entry=entry, expected_revision=None)]
            )
        )
        messages = []
        for index in range(per_session):
            body = _text(rng)
            if index % 3 == 0:
                body += f" {markers.ascii()}"
            if index % 4 == 1:
                body += f" {markers.cjk()}"
            messages.append(
                Message(
                    role=("user", "assistant", "tool")[index % 3],
                    content=body,
                    timestamp=T0 + timedelta(minutes=number * per_session + index),
                    reasoning=f"think {markers.ascii()}" if index % 5 == 0 else None,
                    tool_calls=[{"name": "run", "arguments": {"cmd": f"deploy {markers.ascii()}"}}]
                    if index % 3 == 1
                    else None,
                    platform_message_id=f"pm-{markers.ascii()}",
                    sender_name=markers.ascii(),
                    extra={"custom": markers.cjk()},
                )
            )
        backend.append_messages(
            session_id,
            messages,
            state={StateScope.session(session_id).id: {"memo": markers.ascii()}},
        )
    return markers


def queries(seed: int = 11) -> list[str]:
    """Search queries over the corpus: words, phrases, CJK substrings, OR, NOT and prefixes."""
    rng = random.Random(seed)  # noqa: S311  # a reproducible corpus, not secrets
    found = [
        "deploy",
        "docker compose",
        '"release window"',
        "helm OR rollback",
        "deploy -staging",
        "dock*",
        "re*",
        "部署",
        "飞书机器人",
        "デプロイ",
        "서버설정",
        "部",
        "キ",
        "deploy re*",
        "helm OR rollback dock* -cache",
        "部署 キ",
    ]
    for alphabet in (HAN, KANA, HANGUL):
        found.extend(_cjk(rng, alphabet, rng.randint(2, 4)) for _ in range(3))
    found.extend(f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(4))
    found.extend(f"{rng.choice(WORDS)[:3]}*" for _ in range(3))
    return found
