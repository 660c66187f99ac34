"""Contract: session records (create, update, end, reopen, delete) and listings."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from hermes_sessions.exceptions import InvalidCursorError, SessionNotFoundError
from hermes_sessions.queries import SessionQuery, Visibility
from hermes_sessions.testing._support import (
    T0,
    ContractBase,
    evolve,
    minutes,
    record,
    say,
    seed,
)

if TYPE_CHECKING:
    from hermes_sessions.protocols import Backend


class SessionContract(ContractBase):
    """Session records: creation, updates, ends, deletion and listing."""

    def test_create_starts_empty(self, backend: Backend) -> None:
        """A new session has no messages and was last active when it started."""
        stored = backend.create_session(record("s1", message_count=5, tool_call_count=2))
        assert (stored.message_count, stored.tool_call_count) == (0, 0)
        assert stored.last_active == T0
        assert backend.get_session("s1") == stored

    def test_create_is_idempotent(self, backend: Backend) -> None:
        """Creating an existing id returns the stored record and changes nothing."""
        first = backend.create_session(record("s1", title="first"))
        again = backend.create_session(record("s1", title="second"))
        assert again == first
        stored = backend.get_session("s1")
        assert stored is not None
        assert stored.title == "first"

    def test_missing_session_is_none(self, backend: Backend) -> None:
        """Looking up an unknown session returns None."""
        assert backend.get_session("nope") is None

    def test_record_fields_round_trip(self, backend: Backend) -> None:
        """Every field of a record is stored as given."""
        backend.create_session(record("parent"))
        original = record(
            "s1",
            source="feishu",
            session_key="agent:main:feishu:group:oc_1:ou_1",
            user_id="ou_1",
            title="项目规划 #2",
            parent_session_id="parent",
            input_tokens=10,
            output_tokens=20,
            cache_read_tokens=30,
            cache_write_tokens=40,
            reasoning_tokens=50,
            estimated_cost_usd=0.125,
            model="anthropic/claude-sonnet-4",
            model_config={"max_tokens": None, "reasoning": {"effort": "medium"}},
            system_prompt="You are helpful.",
            archived=True,
            metadata={"cwd": "/home/lin", "tags": ["a", "b"]},
        )
        stored = backend.create_session(original)
        assert stored == evolve(original, last_active_at=T0)
        assert backend.get_session("s1") == stored

    def test_update_sets_values(self, backend: Backend) -> None:
        """update_session sets the allowed fields."""
        backend.create_session(record("s1"))
        updated = backend.update_session(
            "s1",
            values={"title": "新标题", "archived": True, "metadata": {"k": 1}, "model": "m"},
        )
        assert (updated.title, updated.archived, updated.metadata, updated.model) == (
            "新标题",
            True,
            {"k": 1},
            "m",
        )
        assert backend.get_session("s1") == updated

    def test_update_adds_to_counters(self, backend: Backend) -> None:
        """Increments add to token counters and cost."""
        backend.create_session(record("s1", input_tokens=5))
        backend.update_session("s1", increments={"input_tokens": 10, "estimated_cost_usd": 0.5})
        updated = backend.update_session(
            "s1", increments={"input_tokens": 1, "estimated_cost_usd": 0.25}
        )
        assert updated.input_tokens == 16
        assert updated.estimated_cost_usd == pytest.approx(0.75)

    def test_concurrent_increments_are_not_lost(self, backend: Backend) -> None:
        """Increments from many threads all count."""
        backend.create_session(record("s1"))

        def add() -> None:
            for _ in range(25):
                backend.update_session("s1", increments={"output_tokens": 1})

        threads = [threading.Thread(target=add) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stored = backend.get_session("s1")
        assert stored is not None
        assert stored.output_tokens == 100

    @pytest.mark.parametrize(
        ("values", "increments"),
        [
            ({"message_count": 3}, None),
            ({"id": "other"}, None),
            ({"end_reason": "idle"}, None),
            (None, {"title": 1}),
            (None, {"message_count": 1}),
        ],
    )
    def test_update_refuses_managed_fields(
        self, backend: Backend, values: dict[str, object] | None, increments: dict[str, int] | None
    ) -> None:
        """Counters, ids and end state cannot be set through update_session."""
        backend.create_session(record("s1"))
        with pytest.raises(ValueError, match="update_session"):
            backend.update_session("s1", values=values, increments=increments)

    def test_writes_to_a_missing_session_raise(self, backend: Backend) -> None:
        """Updating, ending or reopening an unknown session raises SessionNotFoundError."""
        for call in (
            lambda: backend.update_session("nope", values={"title": "x"}),
            lambda: backend.end_session("nope", "idle", at=T0),
            lambda: backend.reopen_session("nope"),
            lambda: backend.append_messages("nope", [say("hi")]),
        ):
            with pytest.raises(SessionNotFoundError):
                call()

    def test_end_records_reason_and_time(self, backend: Backend) -> None:
        """Ending a session stores its reason and end time."""
        backend.create_session(record("s1"))
        ended = backend.end_session("s1", "idle", at=minutes(30))
        assert (ended.end_reason, ended.ended_at, ended.is_ended) == ("idle", minutes(30), True)

    def test_first_end_reason_wins(self, backend: Backend) -> None:
        """A second end does not overwrite the first reason or time."""
        backend.create_session(record("s1"))
        backend.end_session("s1", "compression", at=minutes(1))
        again = backend.end_session("s1", "idle", at=minutes(2))
        assert (again.end_reason, again.ended_at) == ("compression", minutes(1))

    def test_reopen_clears_the_end(self, backend: Backend) -> None:
        """Reopening clears the end; a later end records its own reason."""
        backend.create_session(record("s1"))
        backend.end_session("s1", "session_switch", at=minutes(1))
        reopened = backend.reopen_session("s1")
        assert (reopened.end_reason, reopened.ended_at) == (None, None)
        assert backend.end_session("s1", "daily", at=minutes(9)).end_reason == "daily"

    def test_delete_removes_session_and_messages(self, backend: Backend) -> None:
        """Deleting returns True once and the session and its messages are gone."""
        seed(backend, "s1", None, say("hello"))
        assert backend.delete_session("s1") is True
        assert backend.get_session("s1") is None
        assert backend.delete_session("s1") is False
        with pytest.raises(SessionNotFoundError):
            backend.get_messages("s1")

    def test_delete_orphans_children(self, backend: Backend) -> None:
        """Children of a deleted session survive without a parent."""
        backend.create_session(record("root"))
        backend.create_session(record("child", parent_session_id="root"))
        backend.delete_session("root")
        child = backend.get_session("child")
        assert child is not None
        assert child.parent_session_id is None


class ListingContract(ContractBase):
    """list_sessions: filters, order, pagination and previews."""

    @pytest.fixture
    def many(self, backend: Backend) -> Backend:
        """Five sessions with different sources, users, times and states."""
        seed(backend, "a", None, say("first question about docker", timestamp=minutes(50)))
        seed(backend, "b", None, say("x", timestamp=minutes(10)), source="feishu", user_id="u2")
        seed(
            backend,
            "c",
            None,
            say("one", timestamp=minutes(30)),
            say("two", timestamp=minutes(31)),
            started_at=minutes(5),
            archived=True,
        )
        backend.create_session(record("d", started_at=minutes(20), source="cron", user_id=None))
        backend.create_session(record("e", started_at=minutes(1), parent_session_id="a"))
        backend.end_session("d", "cron_complete", at=minutes(21))
        return backend

    def ids(self, backend: Backend, **filters: object) -> list[str]:
        """The ids of one full listing with ``filters``."""
        page = backend.list_sessions(SessionQuery(limit=None, **filters))  # type: ignore[arg-type]
        return [item.record.id for item in page.items]

    def test_default_order_is_last_active_newest_first(self, many: Backend) -> None:
        """Listings default to last activity, newest first."""
        assert self.ids(many) == ["a", "c", "d", "b", "e"]

    def test_order_by_start_ascending(self, many: Backend) -> None:
        """Ordering by start time ascending is available."""
        assert self.ids(many, order="started", descending=False) == ["a", "b", "e", "c", "d"]

    def test_filter_by_sources(self, many: Backend) -> None:
        """Sources keeps only those sources; exclude_sources drops some."""
        assert self.ids(many, sources=("feishu", "cron")) == ["d", "b"]
        assert self.ids(many, exclude_sources=("telegram",)) == ["d", "b"]

    def test_filter_by_key_and_user(self, many: Backend) -> None:
        """session_key and user_id filters match exactly."""
        assert self.ids(many, user_id="u2") == ["b"]
        assert self.ids(many, session_key="agent:main:telegram:dm:u2") == ["b"]

    def test_filter_by_archived_and_ended(self, many: Backend) -> None:
        """Archived and ended filters take True, False or None."""
        assert self.ids(many, archived=True) == ["c"]
        assert self.ids(many, ended=True) == ["d"]
        assert "d" not in self.ids(many, ended=False)

    def test_filter_by_end_reason(self, many: Backend) -> None:
        """exclude_end_reasons hides sessions ended for those reasons, keeping open ones."""
        assert self.ids(many, exclude_end_reasons=("cron_complete",)) == ["a", "c", "b", "e"]
        assert self.ids(many, exclude_end_reasons=("idle",)) == ["a", "c", "d", "b", "e"]

    def test_filter_by_message_count(self, many: Backend) -> None:
        """min_messages keeps sessions with at least that many active messages."""
        assert self.ids(many, min_messages=2) == ["c"]

    def test_filter_by_time_ranges(self, many: Backend) -> None:
        """Start and activity ranges include the lower bound and exclude the upper one."""
        assert self.ids(many, started_after=minutes(5), started_before=minutes(20)) == ["c"]
        assert self.ids(many, active_after=minutes(30)) == ["a", "c"]

    def test_filter_by_parent_and_prefix(self, many: Backend) -> None:
        """parent_session_id lists children; id_prefix matches the start of ids."""
        assert self.ids(many, parent_session_id="a") == ["e"]
        assert self.ids(many, id_prefix="c") == ["c"]

    def test_filter_by_title_and_lineage(self, backend: Backend) -> None:
        """Titles compare case-insensitively; lineage matches ``X`` and ``X #N`` only."""
        backend.create_session(record("p1", title="My Project"))
        backend.create_session(record("p2", title="my project #2"))
        backend.create_session(record("p3", title="my project 2"))
        backend.create_session(record("p4", title="my_project"))
        assert self.ids(backend, title="MY PROJECT") == ["p1"]
        assert sorted(self.ids(backend, title_lineage="my project #5")) == ["p1", "p2"]

    def test_visibility_rule(self, backend: Backend) -> None:
        """Visibility admits the key's own sessions and the user's on the same platform."""
        backend.create_session(record("own", session_key="K", user_id="other"))
        backend.create_session(record("mine", session_key="K2", user_id="me"))
        backend.create_session(record("elsewhere", source="feishu", user_id="me"))
        backend.create_session(record("theirs", session_key="K3", user_id="them"))
        backend.create_session(record("anon", session_key="K4", user_id=None))
        rule = Visibility(session_key="K", platform="telegram", user_id="me")
        assert sorted(self.ids(backend, visible_to=rule)) == ["mine", "own"]
        nobody = Visibility(session_key="K4", platform="telegram", user_id=None)
        assert self.ids(backend, visible_to=nobody) == ["anon"]

    def test_pagination_covers_everything_once(self, many: Backend) -> None:
        """Following next_cursor visits every session exactly once, then stops."""
        seen: list[str] = []
        cursor = None
        for _ in range(10):
            page = many.list_sessions(SessionQuery(limit=2, cursor=cursor))
            seen.extend(item.record.id for item in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == ["a", "c", "d", "b", "e"]

    def test_bad_cursor_is_refused(self, many: Backend) -> None:
        """A cursor we did not make raises InvalidCursorError."""
        with pytest.raises(InvalidCursorError):
            many.list_sessions(SessionQuery(cursor="not-a-cursor"))

    def test_preview_is_the_first_user_message(self, backend: Backend) -> None:
        """The preview is the first active user message on one line, cut to 60 characters."""
        long = "word " * 30
        seed(backend, "s1", None, say("system", role="system"), say(long), say("later"))
        seed(backend, "s2", None, say("only the assistant", role="assistant"))
        page = backend.list_sessions(SessionQuery(order="started"))
        previews = {item.record.id: item.preview for item in page.items}
        assert previews["s2"] is None
        preview = previews["s1"]
        assert preview is not None
        assert len(preview) == 60
        assert preview.startswith("word word")
        assert preview.endswith("…")

    def test_last_active_follows_the_newest_message(self, backend: Backend) -> None:
        """A session's last activity is its newest message's time."""
        seed(backend, "s1", None, say("a", timestamp=minutes(3)))
        backend.append_messages("s1", [say("b", timestamp=minutes(8))])
        page = backend.list_sessions(SessionQuery())
        assert page.items[0].last_active == minutes(8)
