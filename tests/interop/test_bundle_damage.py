"""A damaged bundle is refused whole, naming the line, before anything is written."""

from __future__ import annotations

import io
import json
import sys
from datetime import UTC, datetime

import pytest

from hermes_sessions import InvalidSourceError, SessionStore
from hermes_sessions.backends import InMemoryBackend
from hermes_sessions.cli import main
from hermes_sessions.interop import export_bundle, import_bundle
from hermes_sessions.memory import MemoryStore
from hermes_sessions.models import Message, SessionEntry, SessionRecord
from hermes_sessions.queries import SessionQuery

T0 = datetime(2026, 5, 12, 1, 0, tzinfo=UTC)
KEY = "agent:main:telegram:dm:42"


def _lines():
    """The lines (as JSON objects) of a bundle of two sessions, a key and state."""
    backend = InMemoryBackend()
    for session_id in ("s1", "s2"):
        backend.create_session(SessionRecord(id=session_id, source="telegram", started_at=T0))
        backend.append_messages(session_id, [Message(role="user", content="hi", timestamp=T0)])
    entry = SessionEntry(session_key=KEY, session_id="s2", created_at=T0, updated_at=T0)
    backend.put_entry(entry, expected_revision=None)
    backend.update_state({"session|s1": {"step": 1}})
    stream = io.StringIO()
    export_bundle(backend, stream, now=T0)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _bundle(tmp_path, lines, *, raw=None):
    """Write ``lines`` (JSON objects, or bytes as they are) to a bundle file; return its path."""
    path = tmp_path / "b.jsonl"
    body = b"".join(
        line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n" for line in lines
    )
    path.write_bytes(body if raw is None else raw)
    return path


def _refused(tmp_path, path, line, *words):
    """The bundle is refused by the library and the CLI, naming ``line``; nothing is written."""
    target = InMemoryBackend()
    with pytest.raises(InvalidSourceError) as caught:
        import_bundle(target, path)
    assert caught.value.line == line
    assert f"{path}:{line}:" in str(caught.value)
    for word in words:
        assert word in str(caught.value)
    assert target.list_sessions(SessionQuery(limit=None)).items == ()
    assert target.entries() == []
    assert target.get_state(["session|s1"]) == {}
    return caught.value


def _index(lines, kind):
    return next(n for n, line in enumerate(lines) if line.get("type") == kind)


def test_invalid_utf8_is_refused_with_its_line(tmp_path, capsys):
    """A line that is not UTF-8 refuses the bundle, naming the line; the CLI exits 2 in one line."""
    lines = _lines()
    lines.insert(2, b'{"type": "lane", "x": "\xff\xfe"}\n')
    path = _bundle(tmp_path, lines)
    _refused(tmp_path, path, 3, "UTF-8")
    home = tmp_path / "home"
    assert main(["--home", str(home), "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{path}:3:" in err
    with SessionStore.open(home, "sqlite") as store:
        assert store.backend.get_session("s1") is None


class _Stdin(io.BytesIO):
    """Bytes named like the real standard input."""

    name = "<stdin>"


def test_invalid_utf8_on_standard_input_is_refused(tmp_path, capsys, monkeypatch):
    """``import -`` reads bytes, so a bad byte on standard input is the same one-line refusal."""
    lines = _lines()
    lines.insert(2, b"\xc3\x28\n")
    body = b"".join(
        line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n" for line in lines
    )
    stdin = io.TextIOWrapper(_Stdin(body), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["--home", str(tmp_path / "home"), "import", "-"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "<stdin>:3:" in err


def test_a_deeply_nested_line_is_refused(tmp_path):
    """A line nested past the depth limit refuses the bundle instead of a RecursionError."""
    lines = _lines()
    depth = 100_000
    lines.insert(2, b'{"type": "session", "session": ' + b"[" * depth + b"]" * depth + b"}\n")
    _refused(tmp_path, _bundle(tmp_path, lines), 3, "nested")


def test_an_end_line_announcing_more_sessions_is_refused(tmp_path):
    """An end line counting 50 sessions where the bundle holds 2 refuses it: lines are missing."""
    lines = _lines()
    lines[-1]["sessions"] = 50
    _refused(tmp_path, _bundle(tmp_path, lines), len(lines), "50", "2 session")


def test_an_end_line_miscounting_entries_is_refused(tmp_path):
    """An end line whose entry count differs from the entry lines refuses the bundle."""
    lines = _lines()
    lines[-1]["entries"] = 3
    _refused(tmp_path, _bundle(tmp_path, lines), len(lines), "entr")


def test_a_routing_key_that_is_not_a_key_is_refused(tmp_path):
    """An entry whose session key no key form reads refuses the bundle at its line."""
    lines = _lines()
    at = _index(lines, "entry")
    lines[at]["entry"]["session_key"] = "not a key"
    _refused(tmp_path, _bundle(tmp_path, lines), at + 1, "not a key")


def test_a_state_scope_that_is_not_a_scope_is_refused(tmp_path):
    """A state line whose scope is not ``kind|parts`` of a known kind refuses the bundle."""
    lines = _lines()
    at = _index(lines, "state")
    lines[at]["scope"] = "???"
    _refused(tmp_path, _bundle(tmp_path, lines), at + 1, "???")


@pytest.mark.parametrize(
    "scope",
    ["app|", "user|main|telegram", "session|../etc", "lane|not a key", "nope|x", "app|a|b"],
)
def test_malformed_scopes_are_refused(tmp_path, scope):
    """Each scope kind needs its number of non-empty parts, a valid session id or key."""
    lines = _lines()
    at = _index(lines, "state")
    lines[at]["scope"] = scope
    _refused(tmp_path, _bundle(tmp_path, lines), at + 1, "scope")


def test_a_bad_record_after_good_ones_writes_nothing(tmp_path):
    """A bad message in the second session line leaves the first session unwritten too."""
    lines = _lines()
    lines[2]["messages"][0]["role"] = ""
    _refused(tmp_path, _bundle(tmp_path, lines), 3, "role")


def test_a_malformed_state_value_is_refused(tmp_path):
    """A state line whose value is not a JSON object refuses the bundle."""
    lines = _lines()
    at = _index(lines, "state")
    lines[at]["value"] = [1]
    _refused(tmp_path, _bundle(tmp_path, lines), at + 1, "value")


def test_a_state_value_over_the_scope_limit_is_refused(tmp_path):
    """A state value larger than a scope may hold refuses the bundle before anything is written."""
    lines = _lines()
    at = _index(lines, "state")
    lines[at]["value"] = {"big": "x" * 70_000}
    _refused(tmp_path, _bundle(tmp_path, lines), at + 1, "bytes")


def test_a_torn_last_line_is_refused(tmp_path):
    """A last line without its newline (a bundle cut short) refuses the bundle."""
    lines = _lines()
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines[:-1]) + b'{"type": "ses'
    path = _bundle(tmp_path, [], raw=body)
    _refused(tmp_path, path, len(lines), "incomplete")


def test_a_missing_end_line_is_refused(tmp_path):
    """A bundle without its end line is incomplete and refused, naming the line after the last."""
    lines = _lines()[:-1]
    _refused(tmp_path, _bundle(tmp_path, lines), len(lines) + 1, "end line")


def test_lines_after_the_end_are_refused(tmp_path):
    """A record after the end line refuses the bundle: two bundles were joined or one damaged."""
    lines = _lines()
    lines.append(lines[1])
    _refused(tmp_path, _bundle(tmp_path, lines), len(lines), "after the end")


def test_a_session_twice_in_one_bundle_is_refused(tmp_path):
    """Two session lines with one id refuse the bundle at the second."""
    lines = _lines()
    lines.insert(3, lines[1])
    lines[-1]["sessions"] = 3
    _refused(tmp_path, _bundle(tmp_path, lines), 4, "s1")


def test_an_entry_pointing_nowhere_is_refused(tmp_path):
    """An entry whose session is in neither the bundle nor the target refuses the bundle."""
    lines = _lines()
    at = _index(lines, "entry")
    lines[at]["entry"]["session_id"] = "s9"
    _refused(tmp_path, _bundle(tmp_path, lines), at + 1, "s9")


def test_an_entry_may_point_at_a_session_the_target_holds(tmp_path):
    """An entry for a session the target already has (not in the bundle) is imported."""
    lines = _lines()
    at = _index(lines, "entry")
    lines[at]["entry"]["session_id"] = "s9"
    target = InMemoryBackend()
    target.create_session(SessionRecord(id="s9", source="telegram", started_at=T0))
    report = import_bundle(target, _bundle(tmp_path, lines))
    assert report.entries == (KEY,)
    assert target.get_entry(KEY).session_id == "s9"


def test_a_memory_line_for_an_unknown_target_is_refused(tmp_path):
    """A memory line whose target is neither memory nor user refuses the bundle."""
    lines = _lines()
    lines.insert(-1, {"type": "memory", "target": "notes", "entries": ["x"]})
    path = _bundle(tmp_path, lines)
    with pytest.raises(InvalidSourceError, match="notes"):
        import_bundle(InMemoryBackend(), path, memory=MemoryStore(tmp_path / "m"))


def test_an_unknown_record_type_is_reported_and_the_rest_imported(tmp_path):
    """A record type of a later version is reported and skipped; the bundle is not damaged."""
    lines = _lines()
    lines.insert(-1, {"type": "lane", "anything": 1})
    report = import_bundle(InMemoryBackend(), _bundle(tmp_path, lines))
    assert [(p.kind, p.where) for p in report.problems] == [
        ("unknown_record", f"{tmp_path / 'b.jsonl'}:{len(lines) - 1}")
    ]
    assert report.sessions == ("s1", "s2")


def test_a_line_that_is_not_an_object_is_refused(tmp_path):
    """A JSON line that is not an object with a string type is damage, not a later record type."""
    lines = _lines()
    lines.insert(2, [1, 2])
    _refused(tmp_path, _bundle(tmp_path, lines), 3, "object")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"{not json}\n", "not a JSON line"),
        (b'{"type": "state", "scope": 5, "value": {"a": 1}}\n', "scope must be a string"),
        (b'{"type": "state", "scope": "app|main", "value": {"a": NaN}}\n', "NaN"),
        (b'{"type": "memory", "target": "user", "entries": [1]}\n', "must be strings"),
        (b'{"type": "entry", "entry": {"session_key": 5}}\n', "SessionEntry"),
    ],
)
def test_each_kind_of_damaged_line_is_named(tmp_path, line, words):
    """Every way a line can be damaged refuses the bundle with its line and what is wrong."""
    lines = _lines()
    lines.insert(2, line)
    _refused(tmp_path, _bundle(tmp_path, lines), 3, words)


def test_an_end_line_with_counts_that_are_not_counts_is_refused(tmp_path):
    """An end line whose counts are not whole numbers refuses the bundle."""
    lines = _lines()
    lines[-1]["sessions"] = "two"
    _refused(tmp_path, _bundle(tmp_path, lines), len(lines), "counts")


def test_blank_lines_are_skipped(tmp_path):
    """Blank lines between records are not damage."""
    lines = _lines()
    lines.insert(2, b"\n")
    lines.insert(4, b"   \n")
    report = import_bundle(InMemoryBackend(), _bundle(tmp_path, lines))
    assert report.sessions == ("s1", "s2")


@pytest.mark.parametrize("body", [b"", b"\xff\xfe\n", b"[1]\n"])
def test_a_file_without_a_bundle_header_is_refused(tmp_path, body):
    """An empty file, or one whose first line is not a bundle header, is not a bundle."""
    path = tmp_path / "b.jsonl"
    path.write_bytes(body)
    with pytest.raises(InvalidSourceError, match="not a hermes-sessions bundle"):
        import_bundle(InMemoryBackend(), path)


def test_a_header_with_a_bad_version_is_refused(tmp_path):
    """A header whose version is not a positive whole number is refused, naming line 1."""
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({"format": "hermes-sessions-bundle", "version": "1"}) + "\n")
    with pytest.raises(InvalidSourceError, match="invalid bundle version") as caught:
        import_bundle(InMemoryBackend(), path)
    assert caught.value.line == 1


def test_a_text_stream_that_is_not_utf8_is_refused(tmp_path):
    """An open text file that does not decode is refused before anything is written."""
    lines = _lines()
    lines.insert(2, b'{"type": "lane", "x": "\xff"}\n')
    raw = b"".join(
        line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n" for line in lines
    )
    stream = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
    target = InMemoryBackend()
    with pytest.raises(InvalidSourceError, match="UTF-8") as caught:
        import_bundle(target, stream)
    assert caught.value.line is not None
    assert caught.value.line <= 3  # the decoder reads ahead of the line it gives
    assert target.get_session("s1") is None


def test_a_session_line_whose_messages_are_not_a_list_is_refused(tmp_path):
    """A session line whose messages are an object refuses the bundle."""
    lines = _lines()
    lines[1]["messages"] = {}
    _refused(tmp_path, _bundle(tmp_path, lines), 2, "must be a list")
