"""Bundles: lossless between backends, versioned, merged by id without overwriting."""

from __future__ import annotations

import io
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_sessions import IncompatibleStoreError, InvalidSourceError, serde
from hermes_sessions.backends import InMemoryBackend, JSONLBackend, SQLiteBackend
from hermes_sessions.interop import BUNDLE_VERSION, export_bundle, import_bundle
from hermes_sessions.memory import MemoryStore
from hermes_sessions.models import Message, SessionEntry, SessionRecord
from hermes_sessions.queries import SessionQuery
from hermes_sessions.titles import title_key

T0 = datetime(2026, 5, 12, 1, 0, tzinfo=UTC)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)

messages_strategy = st.lists(
    st.builds(
        Message,
        role=st.sampled_from(["user", "assistant", "tool"]),
        content=st.one_of(
            st.none(), TEXT, st.just([{"type": "text", "text": "图"}, {"type": "image_url"}])
        ),
        tool_calls=st.one_of(st.none(), st.just([{"id": "c", "function": {"name": "t"}}])),
        timestamp=st.integers(0, 10_000).map(lambda s: T0 + timedelta(seconds=s)),
        reasoning=st.one_of(st.none(), TEXT),
        active=st.booleans(),
        extra=st.dictionaries(st.sampled_from(["reasoning_details", "x_provider"]), TEXT),
    ),
    max_size=5,
)


def _title_of_owner(record):
    """What must be unique among the sessions of one owner (titles are unique per owner)."""
    if record.title is None:
        return ("untitled", record.id)
    return (record.source, title_key(record.title))


sessions_strategy = st.lists(
    st.tuples(
        st.builds(
            SessionRecord,
            id=st.from_regex(r"s[a-z0-9]{1,6}", fullmatch=True),
            source=st.sampled_from(["cli", "feishu", "telegram"]),
            started_at=st.just(T0),
            title=st.one_of(st.none(), TEXT),
            end_reason=st.one_of(st.none(), st.just("idle")),
            input_tokens=st.integers(0, 1000),
            archived=st.booleans(),
            metadata=st.dictionaries(st.just("k"), TEXT),
        ),
        messages_strategy,
    ),
    max_size=4,
    unique_by=(lambda pair: pair[0].id, lambda pair: _title_of_owner(pair[0])),
)


def _fill(backend, sessions):
    for record, messages in sessions:
        backend.create_session(record)
        if messages:
            backend.append_messages(record.id, messages)
    if sessions:
        first = sessions[0][0]
        entry = SessionEntry(
            session_key="agent:main:cli:dm:me", session_id=first.id, created_at=T0, updated_at=T0
        )
        backend.put_entry(entry, expected_revision=None)


def _dump(backend):
    out = {}
    for item in backend.list_sessions(SessionQuery(limit=None)).items:
        messages = backend.get_messages(item.record.id, include_inactive=True)
        out[item.record.id] = (
            serde.unstructure(item.record),
            [{k: v for k, v in serde.unstructure(m).items() if k != "id"} for m in messages],
        )
    entries = [serde.unstructure(e) | {"revision": 0} for e in backend.entries()]
    return out, entries


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(sessions=sessions_strategy)
def test_sqlite_jsonl_sqlite_is_lossless(sessions):
    """SQLite → bundle → JSONL → bundle → SQLite keeps every record, message and key."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        with SQLiteBackend(root / "a" / "state.db") as first:
            _fill(first, sessions)
            expected = _dump(first)
            export_bundle(first, root / "one.jsonl")
        with JSONLBackend(root / "b") as middle:
            import_bundle(middle, root / "one.jsonl")
            assert _dump(middle) == expected
            export_bundle(middle, root / "two.jsonl")
        with SQLiteBackend(root / "c" / "state.db") as last:
            report = import_bundle(last, root / "two.jsonl")
            assert _dump(last) == expected
            assert not report.problems


def _one_session_bundle(tmp_path):
    backend = InMemoryBackend()
    backend.create_session(SessionRecord(id="s1", source="cli", started_at=T0))
    backend.append_messages("s1", [Message(role="user", content="hi", timestamp=T0)])
    path = tmp_path / "b.jsonl"
    export_bundle(backend, path, now=T0)
    return backend, path


def test_header_names_format_and_version(tmp_path):
    """The first line states the format and version; the last line is the end record."""
    _, path = _one_session_bundle(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "hermes-sessions-bundle"
    assert json.loads(lines[0])["version"] == BUNDLE_VERSION
    assert json.loads(lines[-1]) == {"type": "end", "sessions": 1, "entries": 0}


def test_newer_version_is_refused(tmp_path):
    """A bundle from a newer version is refused with IncompatibleStoreError."""
    path = tmp_path / "new.jsonl"
    header = {"format": "hermes-sessions-bundle", "version": BUNDLE_VERSION + 1}
    path.write_text(json.dumps(header) + "\n", encoding="utf-8")
    with pytest.raises(IncompatibleStoreError):
        import_bundle(InMemoryBackend(), path)


def test_not_a_bundle_is_refused(tmp_path):
    """A file without a bundle header is refused clearly."""
    path = tmp_path / "x.jsonl"
    path.write_text('{"hello": 1}\n', encoding="utf-8")
    with pytest.raises(InvalidSourceError, match="not a hermes-sessions bundle"):
        import_bundle(InMemoryBackend(), path)
    with pytest.raises(InvalidSourceError, match="cannot open"):
        import_bundle(InMemoryBackend(), tmp_path / "missing.jsonl")


def test_merge_reports_conflicts_and_keeps_the_target(tmp_path):
    """A session the target holds differently is reported, not overwritten; a copy is unchanged."""
    _, path = _one_session_bundle(tmp_path)
    same = InMemoryBackend()
    import_bundle(same, path)
    again = import_bundle(same, path)
    assert (again.sessions, again.unchanged, again.problems) == ((), ("s1",), ())
    other = InMemoryBackend()
    other.create_session(SessionRecord(id="s1", source="feishu", started_at=T0))
    report = import_bundle(other, path)
    assert [p.where for p in report.conflicts] == ["s1"]
    assert other.get_session("s1").source == "feishu"


def test_unknown_lines_are_reported_and_a_torn_bundle_refused(tmp_path):
    """Unknown record types are listed and skipped; a torn last line refuses the whole bundle."""
    _, path = _one_session_bundle(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join([*lines[:-1], '{"type": "lane"}\n', lines[-1]]), "utf-8")
    report = import_bundle(InMemoryBackend(), path)
    assert [p.kind for p in report.problems] == ["unknown_record"]
    assert report.sessions == ("s1",)
    path.write_text("".join([*lines[:-1], '{"type": "ses']), "utf-8")
    target = InMemoryBackend()
    with pytest.raises(InvalidSourceError, match="incomplete"):
        import_bundle(target, path)
    assert target.get_session("s1") is None


def test_memory_travels_when_asked(tmp_path):
    """Memory entries are exported and imported when a memory store is given."""
    source = MemoryStore(tmp_path / "m1")
    source.add("memory", "部署在 /srv")
    target = MemoryStore(tmp_path / "m2")
    stream = io.StringIO()
    export_bundle(InMemoryBackend(), stream, memory=source)
    stream.seek(0)
    report = import_bundle(InMemoryBackend(), stream, memory=target)
    assert report.memory_entries == 1
    assert target.entries("memory") == ("部署在 /srv",)


def _stateful_store(backend):
    """A store with one DM whose every scope holds state."""
    from hermes_sessions import SessionSource, SessionStore, StateScope  # noqa: PLC0415

    store = SessionStore(backend)
    source = SessionSource(platform="telegram", chat_id="7", user_id="7")
    lookup = store.get_or_create(source)
    store.append(
        lookup.session_id,
        Message(role="user", content="hi"),
        state_delta={
            StateScope.app("main"): {"flag": True},
            StateScope.user("main", "telegram", "7"): {"lang": "zh"},
            StateScope.lane(lookup.entry.session_key): {"model": "m-2"},
            StateScope.session(lookup.session_id): {"step": [1, 2]},
        },
    )
    return store, source


@pytest.mark.parametrize("target", ["memory", "sqlite", "jsonl"])
def test_state_travels_with_its_sessions(tmp_path, target):
    """Every scope the exported session sees arrives; a second import changes nothing."""
    store, source = _stateful_store(SQLiteBackend(tmp_path / "a.db"))
    bundle = tmp_path / "b.jsonl"
    export_bundle(store, bundle)
    lines = [json.loads(line) for line in bundle.read_text(encoding="utf-8").splitlines()]
    assert sum(line.get("type") == "state" for line in lines) == 4
    backend = {
        "memory": InMemoryBackend,
        "sqlite": lambda: SQLiteBackend(tmp_path / "t.db"),
        "jsonl": lambda: JSONLBackend(tmp_path / "t"),
    }[target]()
    first = import_bundle(backend, bundle)
    again = import_bundle(backend, bundle)
    from hermes_sessions import SessionStore  # noqa: PLC0415

    moved = SessionStore(backend).get_or_create(source)
    assert moved.state == store.get_or_create(source).state
    assert first.problems == ()
    assert again.problems == ()
    assert again.unchanged == tuple(first.sessions)


def test_state_the_target_holds_differently_is_kept_and_reported(tmp_path):
    """Merging never overwrites: a scope that differs is a conflict, the target's value stays."""
    from hermes_sessions import StateScope  # noqa: PLC0415

    store, _ = _stateful_store(InMemoryBackend())
    bundle = io.StringIO()
    export_bundle(store, bundle)
    target = InMemoryBackend()
    app = StateScope.app("main").id
    target.update_state({app: {"flag": False}})
    report = import_bundle(target, io.StringIO(bundle.getvalue()))
    assert [(p.kind, p.where) for p in report.problems] == [("conflict", app)]
    assert target.get_state([app]) == {app: {"flag": False}}


def test_a_malformed_state_line_refuses_the_bundle(tmp_path):
    """A state line without a JSON object value refuses the bundle, naming its line."""
    store, _ = _stateful_store(InMemoryBackend())
    bundle = io.StringIO()
    export_bundle(store, bundle)
    lines = bundle.getvalue().splitlines()
    end = lines.pop()
    lines += [json.dumps({"type": "state", "scope": "app|x", "value": [1]}), end]
    with pytest.raises(InvalidSourceError, match="value") as caught:
        import_bundle(InMemoryBackend(), io.StringIO("\n".join(lines) + "\n"))
    assert caught.value.line == len(lines) - 1
