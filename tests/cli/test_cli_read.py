"""What list, show and search print: senders, zoned dates, titles apart from previews, roles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.cli import main
from hermes_sessions.testing import FrozenClock

T0 = datetime(2026, 5, 12, 1, 0, tzinfo=UTC)  # 09:00 in Shanghai
TOPIC = SessionSource(
    platform="telegram", chat_type="group", chat_id="-100", thread_id="7", user_id="11"
)


def run(capsys, *argv):
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def home(tmp_path):
    """A home with a forum topic two people talk in, with a tool call, and an untitled DM."""
    path = tmp_path / "home"
    with SessionStore.open(path, "sqlite", clock=FrozenClock(T0)) as store:
        topic = store.get_or_create(TOPIC).session_id
        store.append(
            topic,
            Message(
                role="user",
                content="部署 staging 用哪个端口？",
                sender_name="林晓",
                sender_id="11",
                timestamp=T0,
            ),
            Message(
                role="user",
                content="我也想知道",
                sender_name="Bob",
                sender_id="12",
                timestamp=T0 + timedelta(minutes=1),
            ),
            Message(
                role="assistant",
                content=None,
                timestamp=T0 + timedelta(minutes=2),
                tool_calls=[{"id": "c1", "function": {"name": "grep", "arguments": "{}"}}],
            ),
            Message(
                role="tool",
                content="port=8443 in compose.yaml",
                tool_name="grep",
                tool_call_id="c1",
                timestamp=T0 + timedelta(minutes=2),
            ),
            Message(role="assistant", content="用 8443。", timestamp=T0 + timedelta(days=1)),
        )
        store.set_title(topic, "staging 端口")
        dm = store.get_or_create(SessionSource(platform="cli", chat_id="me")).session_id
        store.append(dm, Message(role="user", content="整理一下周报", timestamp=T0))
    return path, topic, dm


def test_show_names_each_sender_in_a_shared_lane(capsys, home):
    """In a forum topic each user message carries its sender's name, not ``user``."""
    path, topic, _ = home
    code, out, _ = run(capsys, "--home", path, "show", topic, "--tz", "UTC")
    assert code == 0
    assert "林晓: 部署 staging 用哪个端口？" in out
    assert "Bob: 我也想知道" in out
    assert "user:" not in out
    assert "tool grep: port=8443" in out


def test_show_prints_dates_in_the_zone_it_names(capsys, home):
    """``--tz`` sets the zone of every time shown; the header says which zone that is."""
    path, topic, _ = home
    _, shanghai, _ = run(capsys, "--home", path, "show", topic, "--tz", "Asia/Shanghai")
    _, utc, _ = run(capsys, "--home", path, "show", topic, "--tz", "UTC")
    assert "times in Asia/Shanghai (UTC+08:00)" in shanghai
    assert "times in UTC (UTC+00:00)" in utc
    assert "2026-05-12" in shanghai
    assert "[09:00] 林晓:" in shanghai
    assert "[01:00] 林晓:" in utc
    assert "2026-05-13" in shanghai  # the day the last answer came
    assert "started 2026-05-12 09:00" in shanghai


def test_the_default_zone_is_the_hosts_and_named(capsys, home, monkeypatch):
    """Without ``--tz`` times are in the host's zone, which the header names."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    path, topic, _ = home
    _, out, _ = run(capsys, "--home", path, "show", topic)
    assert "times in Europe/Berlin (UTC+02:00)" in out
    assert "[03:00] 林晓:" in out


def test_an_unknown_zone_is_one_line(capsys, home):
    """``--tz Mars/Olympus`` is a user error: one line, exit 2."""
    path, topic, _ = home
    code, _, err = run(capsys, "--home", path, "show", topic, "--tz", "Mars/Olympus")
    assert (code, err.count("\n")) == (2, 1)
    assert "Mars/Olympus" in err


def test_search_shows_date_title_and_source(capsys, home):
    """Each hit shows its date (in the zone named), source, sender and title, then its snippet."""
    path, topic, _ = home
    code, out, _ = run(capsys, "--home", path, "search", "端口", "--tz", "Asia/Shanghai")
    assert code == 0
    header, row, snippet, *_ = out.splitlines()
    assert header.split() == ["DATE", "(Asia/Shanghai)", "SESSION", "SOURCE", "ROLE", "TITLE"]
    assert row.split() == ["2026-05-12", "09:00", topic, "telegram", "林晓", "staging", "端口"]
    assert snippet.startswith("    ")
    assert ">>>端口<<<" in snippet


def test_search_finds_tool_output_with_role(capsys, home):
    """Tool output is found with ``--role tool`` or ``--role all``, not by default."""
    path, topic, _ = home
    _, out, _ = run(capsys, "--home", path, "search", "compose", "--json")
    assert json.loads(out) == []
    for role in ("tool", "all"):
        code, out, _ = run(capsys, "--home", path, "search", "compose", "--role", role, "--json")
        assert code == 0
        (hit,) = json.loads(out)
        assert (hit["session_id"], hit["role"], hit["source"]) == (topic, "tool", "telegram")
        assert hit["timestamp"].startswith("2026-05-12T01:02")


def test_search_role_is_repeatable(capsys, home):
    """``--role user --role tool`` searches both roles."""
    path, _, _ = home
    argv = ["--home", path, "search", "8443 OR 端口", "--role", "user", "--role", "tool", "--json"]
    _, out, _ = run(capsys, *argv)
    assert sorted(hit["role"] for hit in json.loads(out)) == ["tool", "user"]


def test_list_keeps_titles_and_previews_apart(capsys, home, monkeypatch):
    """A titled session shows its title; an untitled one its first message, marked as such."""
    monkeypatch.setenv("COLUMNS", "200")
    path, topic, dm = home
    _, out, _ = run(capsys, "--home", path, "list", "--tz", "UTC")
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert rows[topic].endswith("staging 端口")
    assert '(untitled) "整理一下周报"' in rows[dm]
    assert "LAST ACTIVE (UTC)" in out.splitlines()[0]


def test_show_piped_into_head_ends_quietly(home):
    """``show ID | head -1`` exits 0 without a broken-pipe message."""
    path, topic, _ = home
    with SessionStore.open(path, "sqlite") as store:
        store.append(topic, *[Message(role="assistant", content="长" * 1000) for _ in range(600)])
    command = [sys.executable, "-m", "hermes_sessions", "--home", str(path), "show", topic]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "TZ": "UTC"}
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith(topic.encode())
    process.stdout.close()
    assert process.stderr is not None
    err = process.stderr.read()
    process.stderr.close()
    assert (process.wait(), err.decode()) == (0, "")
