"""Opening from the snapshot's session summaries, and the bounded cache of transcripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from jsonl_helpers import edit_lines, json_lines, session_file, signed

import hermes_sessions
from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.jsonl import _cache, _engine, _verify
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.queries import SearchQuery, SessionQuery
from hermes_sessions.testing._support import say, seed


@pytest.fixture
def reads(monkeypatch):
    """The session files read whole or in part from now on (their session ids, in order)."""
    seen: list[str] = []
    for module in (_cache, _engine, _verify):
        original = module.read_chunk

        def counting(path, *args, _original=original, **kwargs):
            if path.parent.name == "sessions":
                seen.append(path.stem)
            return _original(path, *args, **kwargs)

        monkeypatch.setattr(module, "read_chunk", counting)
    return seen


def populate(directory, count, **options):
    """A compacted directory of ``count`` sessions, one message each; closed again."""
    with JSONLBackend(directory, **options) as backend:
        for n in range(count):
            seed(backend, f"s{n}", f"agent:main:telegram:dm:{n}", say(f"hello number{n}"))
        backend.compact()


def test_opening_a_compacted_directory_reads_no_session_file(directory, reads):
    """Entries, records and listings come from the snapshot: no session file is read."""
    populate(directory, 12)
    reads.clear()
    with JSONLBackend(directory) as backend:
        listed = backend.list_sessions(SessionQuery(limit=None)).items
        assert len(listed) == 12
        assert {item.preview for item in listed} == {f"hello number{n}" for n in range(12)}
        assert backend.get_session("s3").message_count == 1
        assert backend.get_entry("agent:main:telegram:dm:3").session_id == "s3"
        assert reads == []


def test_records_after_the_snapshot_read_only_the_files_they_name(directory, reads):
    """Opening reads the session files the journal names after the snapshot, and no other."""
    populate(directory, 8)
    with JSONLBackend(directory) as backend:
        backend.append_messages("s5", [say("later")])
    reads.clear()
    with JSONLBackend(directory) as backend:
        assert set(reads) == {"s5"}
        assert [m.content for m in backend.get_messages("s5")] == ["hello number5", "later"]


def test_a_transcript_is_read_when_first_needed(directory, reads):
    """Reading messages reads that session's file once; later reads come from the cache."""
    populate(directory, 4)
    reads.clear()
    with JSONLBackend(directory) as backend:
        assert [m.content for m in backend.get_messages("s2")] == ["hello number2"]
        assert backend.find_message("s2", "nothing") is None
        assert reads == ["s2"]


def test_the_cache_holds_at_most_cache_sessions_transcripts(directory, reads):
    """Beyond ``cache_sessions`` the least recently used transcript is dropped and re-read."""
    populate(directory, 10)
    reads.clear()
    with JSONLBackend(directory, cache_sessions=3) as backend:
        for n in range(10):
            assert backend.get_messages(f"s{n}")[0].content == f"hello number{n}"
            assert backend._engine.state.held <= 3
        assert backend.get_messages("s9")[0].content == "hello number9"  # still cached
        assert reads == [f"s{n}" for n in range(10)]
        backend.append_messages("s0", [say("again")])  # dropped long ago: read again first
        assert backend._engine.state.held <= 3
        assert [m.content for m in backend.get_messages("s0")] == ["hello number0", "again"]
        assert backend.get_session("s0").message_count == 2


def test_cache_sessions_must_be_positive_or_none(directory):
    """A cache bound below one is refused before anything is created."""
    with pytest.raises(ValueError, match="cache_sessions"):
        JSONLBackend(directory, cache_sessions=0)
    assert not directory.exists()


def test_search_covers_sessions_whose_transcripts_were_dropped(directory):
    """Searching finds messages of every session, cached or not."""
    populate(directory, 6)
    with JSONLBackend(directory, cache_sessions=1) as backend:
        backend.get_messages("s0")
        hits = backend.search(SearchQuery(text="hello"))
        assert {hit.message.session_id for hit in hits} == {f"s{n}" for n in range(6)}
        backend.append_messages("s4", [say("zebra crossing")])
        assert [hit.message.session_id for hit in backend.search(SearchQuery(text="zebra"))] == [
            "s4"
        ]


def test_a_snapshot_without_summaries_opens_and_compaction_adds_them(directory, reads):
    """An older snapshot (no summaries) is read with every file once; the next one has them."""
    populate(directory, 3)
    snapshot = directory / "routing.jsonl"
    lines = json_lines(snapshot)
    for line in lines:
        line.pop("index", None)  # written since: an older snapshot is read whole
        if line["type"] == "session":
            for field in ("record", "next_id", "preview", "bytes", "keys"):
                line.pop(field, None)
    snapshot.write_bytes(b"".join(signed(line) for line in lines))
    reads.clear()
    with JSONLBackend(directory) as backend:
        assert sorted(reads) == ["s0", "s1", "s2"]
        assert backend.get_session("s1").message_count == 1
        backend.compact()
    sessions = [line for line in json_lines(snapshot) if line["type"] == "session"]
    assert all(line["record"]["message_count"] == 1 for line in sessions)
    reads.clear()
    with JSONLBackend(directory) as backend:
        assert backend.get_session("s2").message_count == 1
        assert reads == []


def test_a_file_rewritten_behind_a_lock_free_read_is_read_again(directory):
    """A transcript read finds the file changed since catching up: it catches up and re-reads."""
    populate(directory, 2)
    with JSONLBackend(directory) as first, JSONLBackend(directory) as second:
        assert first.get_session("s1").message_count == 1
        second.replace_messages("s1", [say("new one"), say("new two")])
        transcript = first._engine.state.transcript("s1")  # not caught up yet
        assert [m.content for m in transcript.messages.values()] == ["new one", "new two"]
        assert first.get_session("s1").message_count == 2


def test_another_process_sees_writes_to_sessions_it_dropped(directory):
    """A real second process appends to a session this one dropped from its cache; it sees it."""
    populate(directory, 3)
    with JSONLBackend(directory, cache_sessions=1) as backend:
        assert backend.get_messages("s0")[0].content == "hello number0"
        backend.get_messages("s1")  # s0 is dropped
        script = textwrap.dedent(
            """
            import sys
            from hermes_sessions.backends import JSONLBackend
            from hermes_sessions.models import Message
            with JSONLBackend(sys.argv[1], cache_sessions=1) as other:
                other.append_messages("s0", [Message(role="user", content="from the child")])
                print(other.get_session("s0").message_count)
            """
        )
        source = Path(hermes_sessions.__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": str(source)}
        done = subprocess.run(
            [sys.executable, "-c", script, str(directory)],
            capture_output=True,
            check=True,
            env=env,
            text=True,
        )
        assert done.stdout.strip() == "2"
        assert [m.content for m in backend.get_messages("s0")] == [
            "hello number0",
            "from the child",
        ]
        assert backend.get_session("s0").message_count == 2
    assert json.loads(session_file(directory, "s0").read_bytes().splitlines()[-1])["tx"] > 0


def test_a_summary_that_does_not_match_its_file_is_found_and_repaired(directory):
    """A re-signed edit of a summary: check() reports it, reading the file refuses, repair fixes."""
    populate(directory, 2)
    edit_lines(directory / "routing.jsonl", b'"message_count":1', b'"message_count":7')
    with JSONLBackend(directory) as backend:
        assert backend.get_session("s1").message_count == 7  # served from the summary
        problems = backend.check().problems
        assert any("summary" in problem.detail for problem in problems)
        with pytest.raises(CorruptRecordError, match="summary"):
            backend.get_messages("s1")
    JSONLBackend.repair(directory)
    with JSONLBackend(directory) as backend:
        assert backend.get_session("s1").message_count == 1
        assert backend.check().ok
