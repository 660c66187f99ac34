"""``hermes-sessions ledger pending|unknown`` (issue 40): what a restarted gateway has to do."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.cli import main

if TYPE_CHECKING:
    from pathlib import Path

DM = SessionSource(platform="telegram", chat_id="5", user_id="5")


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A store a gateway died in: one message accepted, one reply stored but never marked."""
    path = tmp_path / "home"
    with SessionStore.open(path, "sqlite", ledger=True) as store:
        key = store.key_for(DM)
        ask = Message(role="user", content="q1", platform_message_id="5:1")
        store.ledger.accept(DM, ask, holder="gw-dead")
        ask = Message(role="user", content="q2", platform_message_id="5:2")
        store.ledger.accept(DM, ask, holder="gw-dead")
        reply = Message(role="assistant", content="a2")
        store.ledger.answer(key, "5:2", reply, holder="gw-dead", ttl=timedelta(0))
    return path


def test_pending_lists_accepted_messages(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    """The table shows the lane, message, age and holder; --json the same, machine-readable."""
    code, out, _ = run(capsys, "--home", home, "ledger", "pending")
    assert code == 0
    assert "5:1" in out
    assert "gw-dead" in out
    assert "running" in out
    assert "5:2" not in out
    code, out, _ = run(capsys, "--home", home, "ledger", "pending", "--json")
    (item,) = json.loads(out)
    assert item["platform_message_id"] == "5:1"
    assert item["holder"] == "gw-dead"
    assert item["held"] is True
    assert datetime.fromisoformat(item["accepted_at"]) <= datetime.now(UTC)


def test_unknown_lists_unmarked_sends(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    """An intent whose holder's lease ran out before its mark is listed with its key."""
    code, out, _ = run(capsys, "--home", home, "ledger", "unknown", "--json")
    assert code == 0
    (item,) = json.loads(out)
    assert item["inbound"] == "5:2"
    assert item["idempotency_key"].startswith("hs-")
    code, out, _ = run(capsys, "--home", home, "ledger", "unknown")
    assert item["idempotency_key"] in out
    code, out, _ = run(capsys, "--home", home, "ledger", "unknown", "--key", "agent:other")
    assert out == "no unknown sends\n"


def test_an_empty_ledger_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A store without ledger rows prints one line."""
    with SessionStore.open(tmp_path / "home", "sqlite"):
        pass
    code, out, _ = run(capsys, "--home", tmp_path / "home", "ledger", "pending")
    assert (code, out) == (0, "no accepted messages waiting\n")
