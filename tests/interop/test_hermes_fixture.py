"""Importing the real Hermes profile fixture reproduces its manifest."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from hermes_sessions import SessionStore
from hermes_sessions.interop import import_hermes
from hermes_sessions.memory import MemoryStore

FIXTURE = Path(__file__).parents[2].parent / "shared" / "fixtures" / "hermes-profile-a"
if not (FIXTURE / "state.db").is_file():  # worktrees sit beside ../shared on the build host
    FIXTURE = Path("/work/shared/fixtures/hermes-profile-a")

pytestmark = pytest.mark.skipif(
    not (FIXTURE / "state.db").is_file(),
    reason="the Hermes fixture profile (shared/fixtures/hermes-profile-a) is not on this machine",
)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """A SQLite store holding the imported fixture profile."""
    home = tmp_path_factory.mktemp("target")
    manifest = json.loads((FIXTURE / "manifest.json").read_text(encoding="utf-8"))
    store = SessionStore.open(home, "sqlite")
    memory = MemoryStore(home / "memories")
    report = import_hermes(FIXTURE, store, timezone=manifest["timezone"], memory=memory)
    yield store, memory, report, manifest
    store.close()


def test_every_session_matches_the_manifest(imported):
    """Source, title, parent, end reason, counters, times and flags match for every session."""
    store, _, report, manifest = imported
    longer = {e["session_id"]: e["jsonl_only_messages"] for e in manifest["legacy_jsonl"]}
    assert sorted(report.sessions) == sorted(s["id"] for s in manifest["sessions"])
    for expected in manifest["sessions"]:
        record = store.session(expected["id"])
        extra = longer.get(expected["id"], 0)
        assert record.source == expected["source"]
        assert record.user_id == expected["user_id"]
        assert record.title == expected["title"]
        assert record.parent_session_id == expected["parent_session_id"]
        assert record.end_reason == expected["end_reason"]
        assert record.archived == expected["archived"]
        assert record.model == expected["model"]
        assert record.model_config == (expected["model_config"] or {})
        assert record.started_at.timestamp() == pytest.approx(expected["started_at"])
        if expected["ended_at"] is None:
            assert record.ended_at is None
        else:
            assert record.ended_at.timestamp() == pytest.approx(expected["ended_at"])
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            assert getattr(record, name) == expected[name], name
        assert record.estimated_cost_usd == pytest.approx(expected["estimated_cost_usd"])
        assert record.message_count == expected["message_count_active"] + extra
        everything = store.transcript(expected["id"], include_inactive=True)
        assert len(everything) == expected["message_count_total"] + extra


def test_counts_and_message_features(imported):
    """Totals by role, soft-deleted rows and every listed message feature survive the import."""
    store, _, report, manifest = imported
    by_hermes_id = {}
    for session_id in report.sessions:
        for message in store.transcript(session_id, include_inactive=True):
            if "hermes_id" in message.extra:
                by_hermes_id[message.extra["hermes_id"]] = message
    counts = manifest["counts"]
    assert len(by_hermes_id) == counts["messages_total"]
    assert Counter(m.role for m in by_hermes_id.values()) == counts["messages_by_role"]
    assert sum(not m.active for m in by_hermes_id.values()) == counts["messages_inactive"]
    features = manifest["message_features"]
    checks = {
        "multimodal": lambda m: isinstance(m.content, list),
        "assistant_with_tool_calls": lambda m: bool(m.tool_calls),
        "tool_results": lambda m: m.role == "tool",
        "with_reasoning": lambda m: bool(m.reasoning),
        "with_reasoning_details": lambda m: "reasoning_details" in m.extra,
        "reasoning_content_empty_string": lambda m: m.extra.get("reasoning_content") == "",
        "inactive": lambda m: not m.active,
        "null_content": lambda m: m.content is None,
        "empty_string_content": lambda m: m.content == "",
        "observed": lambda m: bool(m.extra.get("observed")),
        "with_platform_message_id": lambda m: m.platform_message_id is not None,
    }
    for name, check in checks.items():
        found = sorted(i for i, m in by_hermes_id.items() if check(m))
        assert found == features[name], name


TOPIC_KEY = "agent:main:telegram:group:-1002231450987:1342"


def test_routing_memory_and_legacy_report(imported):
    """Keys map to the manifest's sessions, memory entries match, the longer JSONL is reported."""
    store, memory, report, manifest = imported
    expected = {
        key.replace(":1342", ":thread:1342") if key == TOPIC_KEY else key: session_id
        for key, session_id in manifest["sessions_json"].items()
    }
    assert {e.session_key: e.session_id for e in store.backend.entries()} == expected
    assert list(memory.entries("memory")) == manifest["memories"]["MEMORY.md"]
    assert list(memory.entries("user")) == manifest["memories"]["USER.md"]
    assert report.jsonl_preferred == tuple(
        e["session_id"] for e in manifest["legacy_jsonl"] if e["jsonl_only_messages"]
    )


def test_the_forum_topics_hermes_key_is_written_with_the_thread_marker(imported):
    """Hermes's ``<chat>:<topic>`` key arrives as ``<chat>:thread:<topic>``, and is reported."""
    store, _, report, manifest = imported
    session_id = manifest["sessions_json"][TOPIC_KEY]
    marked = "agent:main:telegram:group:-1002231450987:thread:1342"
    assert store.entry(marked).session_id == session_id
    assert store.session(session_id).session_key == marked
    assert [(p.kind, p.where) for p in report.problems if p.kind == "rekeyed"] == [
        ("rekeyed", f"sessions.json {TOPIC_KEY}")
    ]
    topic = store.entry(marked).origin
    assert topic is not None
    assert store.key_for(topic) == marked  # the next message from the topic finds it


def test_cjk_content_is_searchable(imported):
    """Chinese, Japanese and Korean content of the profile is found by search."""
    store, *_ = imported
    for query in ("连接池", "インストール", "항저우", "권한", "youer"):
        assert store.search(query, sources=None, exclude_sources=()), query


def test_cli_imports_lists_and_searches_the_profile(tmp_path, capsys):
    """import-hermes, then list --json --all shows every session and search finds CJK text."""
    from hermes_sessions.cli import main  # noqa: PLC0415

    home = str(tmp_path / "home")
    assert main(["--home", home, "import-hermes", str(FIXTURE), "--timezone", "Asia/Shanghai"]) == 0
    capsys.readouterr()
    assert main(["--home", home, "list", "--json", "--all", "--limit", "100"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 16
    for query in ("连接池", "インストール", "권한"):
        assert main(["--home", home, "search", query, "--json"]) == 0
        assert json.loads(capsys.readouterr().out), query
