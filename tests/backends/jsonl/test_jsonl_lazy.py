"""Opening from a snapshot read lazily: line offsets at opening, each line decoded when needed."""

from __future__ import annotations

import pytest
from jsonl_helpers import edit_lines, json_lines, signed

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.jsonl import _snapindex
from hermes_sessions.exceptions import CorruptRecordError, TitleConflictError
from hermes_sessions.models import SessionEntry
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import T0, minutes, say, seed

KEYS = [
    "agent:main:telegram:dm:1",
    'agent:main:x:dm:"quoted"',
    "agent:main:x:dm:back\\slash",
    "agent:main:x:dm:ünïcode",
    "agent:main:x:dm:😀",
    "agent:main:x:dm:tab\there",
    "agent:main:a",
    "agent:main:z",
]


def populate(directory, keys):
    """A compacted directory with one session per key (``s0``, ``s1``, ...); closed again."""
    with JSONLBackend(directory) as backend:
        for n, key in enumerate(keys):
            seed(backend, f"s{n}", key, say(f"hello number{n}"))
        backend.compact()


@pytest.fixture
def decoded(monkeypatch):
    """The snapshot lines decoded from now on (line numbers)."""
    seen: list[int] = []
    original = _snapindex.parse_snapshot_line

    def counting(data, *, path, line):
        seen.append(line)
        return original(data, path=path, line=line)

    monkeypatch.setattr(_snapindex, "parse_snapshot_line", counting)
    return seen


def test_opening_decodes_only_the_header(directory, decoded):
    """Opening a compacted directory decodes the header line and no entry or session line."""
    populate(directory, [f"agent:main:x:dm:{n}" for n in range(64)])
    with JSONLBackend(directory) as backend:
        assert decoded == [1]
        assert backend.get_entry("agent:main:x:dm:17").session_id == "s17"
        assert len(decoded) <= 1 + 8  # a binary search decodes the line it finds, once
        assert backend._engine.state.sessions.base is not None


def test_every_key_is_found_and_no_other(directory):
    """Keys with quotes, backslashes, control characters or non-ASCII text are all found."""
    populate(directory, KEYS)
    with JSONLBackend(directory) as backend:
        for n, key in enumerate(KEYS):
            assert backend.get_entry(key).session_id == f"s{n}"
            assert backend.get_session(f"s{n}").session_key == key
        for missing in ("agent:main:b", "", "zzz", 'agent:main:x:dm:"', "agent:main:x:dm:😁"):
            assert backend.get_entry(missing) is None
        assert backend.get_session("s99") is None
        assert [e.session_key for e in backend.entries()] == sorted(KEYS)


def test_changes_after_the_snapshot_overlay_it(directory):
    """Entries put, deleted and repointed after the snapshot win over it, reopened or compacted."""
    populate(directory, KEYS[:4])
    with JSONLBackend(directory) as backend:
        first = backend.get_entry(KEYS[0])
        backend.delete_entry(KEYS[1], expected_revision=backend.get_entry(KEYS[1]).revision)
        moved = backend.get_entry(KEYS[2])
        backend.put_entry(
            SessionEntry(session_key=KEYS[2], session_id="s0", created_at=T0, updated_at=T0),
            expected_revision=moved.revision,
        )
        backend.put_entry(
            SessionEntry(
                session_key="agent:main:new", session_id="s3", created_at=T0, updated_at=T0
            ),
            expected_revision=None,
        )
        assert_overlaid(backend, first)
    with JSONLBackend(directory) as backend:  # the journal replayed on the snapshot
        assert_overlaid(backend, first)
        backend.compact()
    with JSONLBackend(directory) as backend:  # all in the snapshot
        assert_overlaid(backend, first)


def assert_overlaid(backend, first):
    """What test_changes_after_the_snapshot_overlay_it expects to read."""
    expected = sorted([KEYS[0], KEYS[2], KEYS[3], "agent:main:new"])
    assert [e.session_key for e in backend.entries()] == expected
    assert backend.get_entry(KEYS[1]) is None
    assert backend.get_entry(KEYS[0]) == first
    assert [e.session_key for e in backend.entries(session_id="s0")] == [KEYS[0], KEYS[2]]
    assert backend.entries(session_id="s2") == []
    assert [e.session_key for e in backend.entries(session_id="s3")] == sorted(
        ["agent:main:new", KEYS[3]]
    )


def test_activity_moves_every_key_of_a_session(directory):
    """An append touches every key pointing at the session, as its snapshot line lists them."""
    populate(directory, KEYS[:2])
    with JSONLBackend(directory) as backend:
        backend.put_entry(
            SessionEntry(
                session_key="agent:main:also", session_id="s0", created_at=T0, updated_at=T0
            ),
            expected_revision=None,
        )
        backend.compact()
    with JSONLBackend(directory) as backend:
        backend.append_messages("s0", [say("again")], touch_at=minutes(5))
        assert {e.session_key: e.updated_at for e in backend.entries(session_id="s0")} == {
            KEYS[0]: minutes(5),
            "agent:main:also": minutes(5),
        }
        assert backend.get_entry(KEYS[1]).updated_at == T0


def test_sessions_read_from_the_snapshot_are_dropped_beyond_the_bound(directory):
    """Unchanged sessions decoded from the snapshot leave memory past a bound; changed ones stay."""
    populate(directory, [f"agent:main:x:dm:{n}" for n in range(40)])
    with JSONLBackend(directory, cache_sessions=2) as backend:
        sessions = backend._engine.state.sessions
        sessions.bound = 4
        backend.append_messages("s0", [say("changed")])
        for n in range(40):
            assert backend.get_session(f"s{n}").id == f"s{n}"
        backend.get_messages("s1")  # a transcript read trims
        assert len(sessions.held) <= 2 * sessions.bound + 2
        assert "s0" in sessions.held
        assert backend.get_session("s0").message_count == 2
        assert len(sessions) == 40


def test_another_process_compacting_is_followed(directory):
    """A reader follows another process's writes and compaction, keeping unchanged transcripts."""
    populate(directory, KEYS[:3])
    with JSONLBackend(directory) as reader, JSONLBackend(directory) as writer:
        assert [m.content for m in reader.get_messages("s1")] == ["hello number1"]
        held = reader._engine.state.sessions["s1"].loaded
        writer.append_messages("s2", [say("more")], touch_at=minutes(3))
        seed(writer, "s9", "agent:main:late", say("late"))
        writer.delete_session("s0")
        writer.compact()
        assert reader.get_entry("agent:main:late").session_id == "s9"
        assert reader.get_entry(KEYS[2]).updated_at == minutes(3)
        assert [m.content for m in reader.get_messages("s2")] == ["hello number2", "more"]
        assert reader.get_session("s0") is None
        assert reader._engine.state.sessions["s1"].loaded is held
        assert len(reader._engine.state.sessions) == 3


def test_a_damaged_line_is_reported_when_it_is_read(directory):
    """A snapshot line whose checksum fails is found when a call reads it, and by check()."""
    keys = ["agent:main:a", "agent:main:b", "agent:main:c"]
    populate(directory, keys)
    snapshot = directory / "routing.jsonl"
    data = snapshot.read_bytes()
    at = data.index(b'"session_id":"s1"') + len('"session_id":"s')
    snapshot.write_bytes(data[:at] + b"7" + data[at + 1 :])  # same length, checksum now wrong
    with JSONLBackend(directory) as backend:
        assert backend.get_entry(keys[0]).session_id == "s0"
        with pytest.raises(CorruptRecordError, match="checksum"):
            backend.get_entry(keys[1])
        assert not backend.check().ok


def test_an_older_snapshot_is_read_whole_and_given_an_index(directory, decoded):
    """A snapshot written before the index opens (read whole), and opening adds the index."""
    populate(directory, KEYS[:3])
    snapshot = directory / "routing.jsonl"
    lines = json_lines(snapshot)
    for line in lines:
        line.pop("index", None)
        line.pop("keys", None)
    snapshot.write_bytes(b"".join(signed(line) for line in lines))
    with JSONLBackend(directory) as backend:
        assert backend.get_entry(KEYS[1]).session_id == "s1"
    assert json_lines(snapshot)[0]["index"] == 1
    decoded.clear()
    with JSONLBackend(directory) as backend:
        assert decoded == [1]
        assert backend.get_entry(KEYS[1]).session_id == "s1"


def test_check_finds_session_keys_that_differ_from_the_entries(directory):
    """check() reports a snapshot whose session line lists keys its entries do not hold."""
    populate(directory, KEYS[:2])
    edit_lines(directory / "routing.jsonl", b'"keys":["agent:main:telegram:dm:1"]', b'"keys":[]')
    with JSONLBackend(directory) as backend:
        report = backend.check()
    assert any("keys differ" in problem.detail for problem in report.problems)


def test_titles_and_children_are_found_among_sessions_not_decoded(directory):
    """Titles and children of sessions known only from the snapshot are found."""
    with JSONLBackend(directory) as backend:
        seed(backend, "p", "agent:main:p", say("parent"), title="Deploy notes", user_id="u")
        seed(backend, "c", "agent:main:c", say("child"), parent_session_id="p", user_id="u")
        seed(backend, "o", "agent:main:o", say("other"), user_id="u")
        backend.compact()
    with JSONLBackend(directory) as backend:
        with pytest.raises(TitleConflictError):
            backend.update_session("o", values={"title": "Deploy notes"})
        assert backend.delete_session("p")
        assert backend.get_session("c").parent_session_id is None


def test_search_keeps_no_transcript_beyond_the_bound(directory):
    """The first search reads every file, yet the cache holds no more transcripts than before."""
    populate(directory, [f"agent:main:x:dm:{n}" for n in range(20)])
    with JSONLBackend(directory, cache_sessions=2) as backend:
        hits = backend.search(SearchQuery(text="hello", limit=50))
        assert {hit.message.session_id for hit in hits} == {f"s{n}" for n in range(20)}
        assert backend._engine.state.held <= 2
        assert [h.message.session_id for h in backend.search(SearchQuery(text="number7"))] == ["s7"]
        assert backend._engine.state.held <= 2


def test_search_follows_files_changed_while_their_transcripts_were_dropped(directory):
    """Sessions rewritten or deleted by another process leave the reader's index, held or not."""
    populate(directory, [f"agent:main:x:dm:{n}" for n in range(6)])
    with (
        JSONLBackend(directory, cache_sessions=1) as reader,
        JSONLBackend(directory) as writer,
    ):
        assert len(reader.search(SearchQuery(text="hello", limit=50))) == 6
        writer.replace_messages("s2", [say("zebra crossing")])
        writer.delete_session("s4")
        assert reader.search(SearchQuery(text="number2")) == []
        assert reader.search(SearchQuery(text="number4")) == []
        assert [h.message.session_id for h in reader.search(SearchQuery(text="zebra"))] == ["s2"]
        assert len(reader.search(SearchQuery(text="hello", limit=50))) == 4
        writer.compact()  # the reader starts over from the new snapshot, the index too
        assert len(reader.search(SearchQuery(text="hello", limit=50))) == 4


def test_a_session_file_the_lazy_index_does_not_list_is_refused(directory):
    """Opening from an index still refuses a session file it does not list, or deleted since."""
    populate(directory, KEYS[:3])
    sessions = directory / "sessions"
    (sessions / "s9.jsonl").write_bytes((sessions / "s1.jsonl").read_bytes())
    with pytest.raises(CorruptRecordError, match="not in the index"):
        JSONLBackend(directory)
    (sessions / "s9.jsonl").unlink()
    with JSONLBackend(directory) as backend:
        kept = (sessions / "s0.jsonl").read_bytes()
        backend.delete_session("s0")
    (sessions / "s0.jsonl").write_bytes(kept)
    with pytest.raises(CorruptRecordError, match="not in the index"):
        JSONLBackend(directory)
