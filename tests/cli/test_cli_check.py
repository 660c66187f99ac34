"""``hermes-sessions check``: the backend's ``check()``, exit 1 when something is wrong."""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.cli import main


def run(capsys, *argv):
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _home(tmp_path, backend):
    home = tmp_path / backend
    with SessionStore.open(home, backend=backend) as store:
        lookup = store.get_or_create(SessionSource(platform="cli", chat_id="me"))
        store.append(lookup.session_id, Message(role="user", content="hello"))
        store.append(lookup.session_id, Message(role="user", content="again"))
    return home


@pytest.mark.parametrize("backend", ["sqlite", "jsonl"])
def test_a_healthy_home_exits_zero(capsys, tmp_path, backend):
    """A store as the library wrote it: ok, one session, exit 0; JSON says the same."""
    home = _home(tmp_path, backend)
    code, out, _ = run(capsys, "--home", home, "check")
    assert (code, out) == (0, "ok: 1 sessions, every key and counter consistent\n")
    code, out, _ = run(capsys, "--home", home, "check", "--json")
    assert (code, json.loads(out)) == (
        0,
        {"ok": True, "sessions": 1, "problems": [], "details": []},
    )


def test_stale_counters_on_sqlite_exit_one(capsys, tmp_path):
    """Counters that disagree with the transcript are a ``counters`` problem; exit 1."""
    home = _home(tmp_path, "sqlite")
    connection = sqlite3.connect(home / "state.db", isolation_level=None)
    connection.execute("UPDATE sessions SET message_count = 5")
    connection.close()
    code, out, _ = run(capsys, "--home", home, "check", "--json")
    report = json.loads(out)
    assert code == 1
    assert [d["kind"] for d in report["details"]] == ["counters"]


def test_a_damaged_sqlite_row_is_reported_not_raised(capsys, tmp_path):
    """A message body that is not JSON: the problem names the table and row; exit 1."""
    home = _home(tmp_path, "sqlite")
    connection = sqlite3.connect(home / "state.db", isolation_level=None)
    connection.execute("UPDATE messages SET body = '{bad'")
    connection.close()
    code, out, err = run(capsys, "--home", home, "check")
    assert (code, err) == (1, "")
    assert "corrupt: " in out
    assert "state.db messages" in out


def test_a_damaged_jsonl_line_exits_one(capsys, tmp_path):
    """A bit flip in a session file is reported with the file and line; exit 1."""
    home = _home(tmp_path, "jsonl")
    path = next((home / "sessions").glob("*.jsonl"))
    data = bytearray(path.read_bytes())
    data[data.index(b"again")] ^= 0x01
    path.write_bytes(bytes(data))
    code, out, _ = run(capsys, "--home", home, "check")
    assert code == 1
    assert f"{path} line" in out


def test_a_sqlite_file_too_damaged_to_open_is_one_problem(capsys, tmp_path):
    """A database file overwritten with other bytes: the open's error is the report; exit 1."""
    home = _home(tmp_path, "sqlite")
    (home / "state.db").write_bytes(b"not a database at all" * 400)
    code, out, err = run(capsys, "--home", home, "check", "--json")
    report = json.loads(out)
    assert (code, err, report["ok"]) == (1, "", False)
    assert "state.db" in report["details"][0]["where"]
