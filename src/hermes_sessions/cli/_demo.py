"""The ``hermes-sessions demo`` walkthrough: a scripted conversation, printed step by step."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import attrs

from hermes_sessions.clock import FrozenClock
from hermes_sessions.models import Message, SessionSource
from hermes_sessions.policy import ResetPolicies, ResetPolicy
from hermes_sessions.store import SessionStore

if TYPE_CHECKING:
    from pathlib import Path
    from typing import TextIO

    from hermes_sessions.store import SessionLookup

__all__ = ["run_demo"]

LIN_DM = SessionSource(
    platform="feishu", chat_id="ou_lin", user_id="ou_lin", user_name="林晓 (Lin)"
)
ALICE = SessionSource(
    platform="feishu",
    chat_type="group",
    chat_id="oc_team",
    user_id="ou_alice",
    user_name="Alice",
    chat_name="运维群",
)
BOB = attrs.evolve(ALICE, user_id="ou_bob", user_name="Bob")
ALICE_THREAD = attrs.evolve(ALICE, chat_type="thread", thread_id="t_incident")
BOB_THREAD = attrs.evolve(BOB, chat_type="thread", thread_id="t_incident")


class _Demo:
    def __init__(self, store: SessionStore, clock: FrozenClock, out: TextIO) -> None:
        self.store = store
        self.clock = clock
        self.out = out
        self.counter = 0

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def step(self, title: str) -> None:
        self.say()
        self.say(f"── {title} " + "─" * max(0, 72 - len(title)))

    def turn(self, source: SessionSource, text: str, answer: str) -> SessionLookup:
        lookup = self.store.get_or_create(source)
        self.counter += 1
        self.store.append(
            lookup.session_id,
            Message(
                role="user",
                content=text,
                platform_message_id=f"om_{self.counter}",
                sender_id=source.user_id,
                sender_name=source.user_name,
            ),
            Message(role="assistant", content=answer),
        )
        status = "new session" if lookup.created else "same session"
        if lookup.reset is not None:
            status = f"new session (previous one ended: {lookup.reset.reason})"
        self.say(f"  {source.user_name}: {text}")
        self.say(f"  bot: {answer}")
        self.say(f"      key {lookup.entry.session_key}")
        self.say(f"      → {lookup.session_id}  [{status}]")
        return lookup

    def search(self, query: str) -> None:
        hits = self.store.search(query, limit=3)
        self.say(f"  search {query!r}: {len(hits)} hit(s)")
        for hit in hits:
            title = f" «{hit.session.title}»" if hit.session.title else ""
            self.say(f"    {hit.session.id}{title}: {hit.snippet}")

    def run(self) -> None:
        self.step("1. A Feishu DM: every message of one chat lands in one session")
        first = self.turn(
            LIN_DM, "帮我看看 staging 的 docker compose 配置", "好的，端口 8443 被占用了。"
        )
        self.clock.advance(minutes=5)
        self.turn(LIN_DM, "怎么释放端口？", "先停掉旧的 youer 容器，再重新部署。")
        self.store.set_title(first.session_id, "staging 排查")
        self.say("  /title staging 排查")

        self.step("2. A group: each member gets their own conversation")
        self.turn(ALICE, "今天谁值班？", "表上是 Bob。")
        self.turn(BOB, "我来看 CI 的失败", "好的，我先拉取最新日志。")

        self.step("3. A thread: its members share one conversation")
        self.turn(ALICE_THREAD, "数据库连接池满了", "先看看慢查询。")
        self.turn(BOB_THREAD, "慢查询已经修复", "那就观察十分钟。")

        self.step("4. Two hours of silence: the idle policy (60 min) starts a new session")
        self.clock.advance(hours=2)
        self.turn(LIN_DM, "新问题：周报模板在哪？", "在 wiki 的 templates 页面。")

        self.step("5. /new starts a fresh session on demand; the old one is kept")
        key = self.store.key_for(LIN_DM)
        new = self.store.reset(key, title="kubernetes 升级")
        self.say(f"  /new kubernetes 升级 → {new.session_id}")
        self.turn(LIN_DM, "kubernetes 升级要注意什么？", "先升级控制平面，再升级节点。")

        self.step("6. /resume by title goes back to the earlier conversation")
        resumed = self.store.resume(key, "staging 排查")
        self.say(f"  /resume staging 排查 → {resumed.session_id}")
        self.turn(LIN_DM, "端口释放了吗？", "已经释放，可以重新部署。")

        self.step("7. /undo takes back the last exchange (soft delete, restorable)")
        removed = self.store.undo(resumed.session_id)
        self.say(f"  /undo removed {len(removed)} message(s): {removed[0].content!r} …")
        kept = [str(m.content) for m in self.store.tail(resumed.session_id, 10)]
        self.say(f"  the session now holds {len(kept)} messages")

        self.step("8. Search across every session (English, and Chinese of any length)")
        for query in ("docker compose", "kubernetes", "端", "端口", "慢查询", "youer"):
            self.search(query)

        self.step("9. All conversations, most recent first")
        for item in self.store.list_sessions().items:
            record = item.record
            state = record.end_reason or "open"
            title = record.title or item.preview or ""
            self.say(f"  {record.id}  {record.message_count:>2} msgs  {state:<15} {title}")


def run_demo(
    home: Path,
    out: TextIO,
    *,
    backend: Literal["sqlite", "jsonl", "memory"] = "sqlite",
    program: str = "hermes-sessions",
) -> None:
    """Play the scripted conversation on a store under ``home``, writing the story to ``out``.

    ``program`` is how the closing hints invoke the command line (see
    :func:`~hermes_sessions.cli.invocation`), so they can be pasted as they are.
    """
    clock = FrozenClock(datetime(2026, 5, 12, 1, 0, tzinfo=UTC))
    resets = ResetPolicies(
        ResetPolicy(mode="both", idle_minutes=60, at_hour=4, timezone="Asia/Shanghai")
    )
    with SessionStore.open(home, backend=backend, clock=clock, resets=resets) as store:
        out.write(f"hermes-sessions demo — {backend} store in {home}\n")
        out.write("(a simulated clock starts at 2026-05-12 09:00 Shanghai time)\n")
        _Demo(store, clock, out).run()
    if backend == "memory":
        out.write("\nNothing was kept: the in-memory backend forgets everything on close.\n")
        return
    files = sorted(str(path.relative_to(home)) for path in home.rglob("*") if path.is_file())
    out.write(f"\nThe data is in {home} ({', '.join(files)}).\n")
    if backend == "sqlite":
        advice = "'SELECT id, title, end_reason FROM sessions'"
        out.write(f"Look inside with: sqlite3 {shlex.quote(str(home / 'state.db'))} {advice}\n")
    out.write("\nTry the command line on it:\n")
    commands = ("list --all", "show " + _first_id(home, backend), "search 部署")
    prefix = f"{program} --home {shlex.quote(str(home))}"
    out.writelines(f"  {prefix} {command}\n" for command in commands)


def _first_id(home: Path, backend: Literal["sqlite", "jsonl"]) -> str:
    """The id of the most recently active session of the demo store (for ``show``)."""
    with SessionStore.open(home, backend=backend) as store:
        return store.list_sessions(limit=1).items[0].record.id
