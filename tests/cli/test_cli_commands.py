"""The CLI commands on a demo store and on an imported Hermes profile."""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.cli import main
from hermes_sessions.cli._output import display_width, fit, parse_duration, table


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory):
    """A home holding the demo's SQLite store."""
    home = tmp_path_factory.mktemp("demo") / "home"
    assert main(["demo", "--home", str(home)]) == 0
    return home


def run(capsys, *argv):
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_demo_suggestions_work(capsys, demo_home):
    """The commands list, show and search 部署, suggested by the demo, work on its data."""
    code, out, _ = run(capsys, "--home", demo_home, "list", "--all", "--json")
    sessions = json.loads(out)
    assert code == 0
    assert sessions
    code, out, _ = run(capsys, "--home", demo_home, "show", sessions[0]["id"])
    assert code == 0
    assert "林晓 (Lin):" in out
    code, out, _ = run(capsys, "--home", demo_home, "search", "部署")
    assert code == 0
    assert ">>>部署<<<" in out


def test_read_only_commands_never_create_a_store(capsys, tmp_path):
    """Read-only commands on a missing home says so in one line, exits 2 and creates nothing."""
    home = tmp_path / "nothing"
    for command in ("list", "stats", "check"):
        code, _, err = run(capsys, "--home", home, command)
        assert code == 2
        assert err.count("\n") == 1
        assert "no hermes-sessions store" in err
    assert not home.exists()


def test_user_errors_are_one_line(capsys, demo_home):
    """An unknown id and a bad duration give one line and exit 2."""
    code, _, err = run(capsys, "--home", demo_home, "show", "nope")
    assert (code, err.count("\n")) == (2, 1)
    code, _, err = run(capsys, "--home", demo_home, "prune", "--older-than", "ninety")
    assert (code, err.count("\n")) == (2, 1)
    assert "bad duration" in err


def test_import_hermes_and_list_everything(capsys, tmp_path):
    """import-hermes on a non-Hermes directory fails cleanly; on a profile it lists all sessions."""
    code, _, err = run(capsys, "--home", tmp_path / "t", "import-hermes", tmp_path)
    assert code == 2
    assert "not a Hermes home" in err


def test_manage_commands(capsys, tmp_path, demo_home):
    """rename, archive, stats, check, prune, erase-user, optimize, export and import work."""
    home = tmp_path / "copy"
    bundle = tmp_path / "b.jsonl"
    assert run(capsys, "--home", demo_home, "export", bundle)[0] == 0
    code, out, _ = run(capsys, "--home", home, "import", bundle, "--json")
    assert code == 0
    ids = json.loads(out)["sessions"]
    assert run(capsys, "--home", home, "rename", ids[0], "新名字")[0] == 0
    assert run(capsys, "--home", home, "archive", ids[0])[0] == 0
    code, out, _ = run(capsys, "--home", home, "stats", "--json")
    assert json.loads(out)["archived"] == 1
    assert run(capsys, "--home", home, "check")[0] == 0
    code, out, _ = run(capsys, "--home", home, "prune", "--older-than", "1d", "--json")
    assert json.loads(out)["dry_run"] is True
    code, out, _ = run(capsys, "--home", home, "erase-user", "feishu", "ou_bob", "--json")
    assert json.loads(out)["dry_run"] is True
    assert run(capsys, "--home", home, "erase-user", "feishu", "ou_bob", "--yes")[0] == 0
    assert run(capsys, "--home", home, "optimize")[0] == 0
    assert run(capsys, "--home", home, "import", tmp_path / "missing")[0] == 2


def test_memory_commands(capsys, tmp_path):
    """The memory add, show and remove commands edit the home's memory files."""
    home = tmp_path / "h"
    assert run(capsys, "--home", home, "memory", "show")[0] == 2
    assert run(capsys, "--home", home, "memory", "add", "memory", "部署用 make")[0] == 0
    _, out, _ = run(capsys, "--home", home, "memory", "show", "--json")
    assert json.loads(out)["memory"] == ["部署用 make"]
    assert run(capsys, "--home", home, "memory", "remove", "memory", "部署")[0] == 0
    assert run(capsys, "--home", home, "memory", "add")[0] == 2


def test_tables_count_cjk_double():
    """Wide characters take two columns, and tables fit the width they are given."""
    assert display_width("部署a") == 5
    assert display_width(fit("部署部署部署", 7)) == 7
    lines = table(["ID", "TITLE"], [["s1", "很长的标题" * 10]], width=30).splitlines()
    assert all(display_width(line) <= 30 for line in lines)
    assert parse_duration("1w2d").days == 9


def test_reindex_rewrites_an_older_index_once(capsys, tmp_path):
    """The reindex command rewrites an index an older version wrote; check names it till then."""
    home = tmp_path / "h"
    with SessionStore.open(home) as store:
        session_id = store.get_or_create(SessionSource(platform="cli", chat_id="me")).session_id
        store.append(session_id, Message(role="user", content="ＡＰＩ ｶﾞｲﾄﾞ"))
        store.append(session_id, Message(role="user", content="api guide"))
    connection = sqlite3.connect(home / "state.db", isolation_level=None)
    connection.execute("UPDATE meta SET value = '1' WHERE name = 'tokens_version'")
    connection.close()
    with pytest.warns(RuntimeWarning, match="reindex"):
        code, out, _ = run(capsys, "--home", home, "check")
    assert code == 1
    assert "hermes-sessions reindex" in out
    code, out, err = run(capsys, "--home", home, "reindex", "--batch-size", "1", "--json")
    assert (code, json.loads(out), err) == (0, {"reindexed": 2, "needed": True}, "")
    code, out, _ = run(capsys, "--home", home, "reindex")
    assert (code, out) == (0, "the search index is current: nothing to re-index\n")
    assert run(capsys, "--home", home, "check")[0] == 0


def test_reindex_on_a_jsonl_home_has_nothing_to_do(capsys, tmp_path):
    """A JSONL store indexes in memory when it opens, so there is never anything to rewrite."""
    home = tmp_path / "j"
    SessionStore.open(home, backend="jsonl").close()
    code, out, _ = run(capsys, "--home", home, "reindex", "--json")
    assert (code, json.loads(out)) == (0, {"reindexed": 0, "needed": False})
