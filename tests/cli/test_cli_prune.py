"""``hermes-sessions prune``: the retention engine behind the CLI, its flags and its report."""

from __future__ import annotations

import json

import pytest

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.cli import main
from hermes_sessions.cli._output import UsageError, parse_size

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin")


def run(capsys, *argv):
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def home(tmp_path):
    """A SQLite home whose one key has four sessions, three of them ended."""
    home = tmp_path / "home"
    store = SessionStore.open(home)
    with store:
        for i in range(4):
            lookup = store.get_or_create(LIN)
            store.append(lookup.session_id, Message(role="user", content=f"第 {i} 轮"))
            if i < 3:
                store.reset(lookup.entry.session_key)
    return home


def sessions(home) -> int:
    """How many sessions the home holds."""
    with SessionStore.open(home) as store:
        return len(store.list_sessions(limit=None).items)


def test_max_per_key_dry_run_then_yes(capsys, home):
    """--max-per-key reports what would go, deletes nothing, then deletes with --yes."""
    code, out, _ = run(capsys, "--home", home, "prune", "--max-per-key", "2", "--json")
    report = json.loads(out)
    assert code == 0
    assert report["dry_run"] is True
    assert len(report["sessions"]) == 2
    assert {r["rule"] for r in report["removed"]} == {"max_sessions_per_key"}
    assert report["bytes"] > 0
    assert sessions(home) == 4
    code, out, _ = run(capsys, "--home", home, "prune", "--max-per-key", "2", "--yes")
    assert code == 0
    assert out.startswith("deleted 2 session(s)")
    assert sessions(home) == 2


def test_max_size_keeps_only_protected_sessions(capsys, home):
    """--max-size 0 removes every ended session; the live one stays."""
    code, out, _ = run(capsys, "--home", home, "prune", "--max-size", "0", "--yes", "--json")
    assert code == 0
    assert {r["rule"] for r in json.loads(out)["removed"]} == {"max_store_bytes"}
    assert sessions(home) == 1


def test_older_than_and_sources_still_work(capsys, home):
    """The old flags keep their meaning: nothing of telegram goes, nothing recent goes."""
    code, out, _ = run(
        capsys, "--home", home, "prune", "--older-than", "0s", "--source", "telegram", "--json"
    )
    assert (code, json.loads(out)["sessions"]) == (0, [])
    code, out, _ = run(capsys, "--home", home, "prune", "--older-than", "30d", "--json")
    assert (code, json.loads(out)["sessions"]) == (0, [])


def test_prune_needs_a_rule_and_valid_values(capsys, home):
    """No rule, a bad size or a bad count: one line on stderr and exit 2."""
    code, _, err = run(capsys, "--home", home, "prune")
    assert (code, err.count("\n")) == (2, 1)
    assert "--older-than, --max-per-key and/or --max-size" in err
    code, _, err = run(capsys, "--home", home, "prune", "--max-size", "lots")
    assert (code, err.count("\n")) == (2, 1)
    assert "bad size" in err
    with pytest.raises(SystemExit):
        main(["--home", str(home), "prune", "--max-per-key", "0"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("1000", 1000), ("64k", 65536), ("500MB", 500 * 1024**2), ("2G", 2 * 1024**3)],
)
def test_parse_size(text, expected):
    """Sizes take a plain byte count or k/M/G/T (powers of 1024), with an optional B."""
    assert parse_size(text) == expected


def test_parse_size_refuses_garbage():
    """A size without digits is a usage error naming the forms accepted."""
    with pytest.raises(UsageError, match="500MB"):
        parse_size("big")
