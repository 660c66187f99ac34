"""The CLI on the PostgreSQL backend: every command, the DSN options and one-line errors.

The tests that talk to the server need ``HERMES_SESSIONS_TEST_PG_DSN`` and skip without it; each
works in a schema of its own, dropped when it ends. The error tests need no server.
"""

from __future__ import annotations

import json
import socket
import sys

import pytest

from hermes_sessions.cli import main
from interop.conftest import Profile
from pg_support import drop_schemas, requires_pg, schema_for, test_dsn


def run(capsys, *argv):
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def pg(tmp_path):
    """The CLI options naming this test's own schema on the test server (dropped afterwards)."""
    if test_dsn() is None:
        pytest.skip("needs HERMES_SESSIONS_TEST_PG_DSN (and the postgres extra)")
    schema = schema_for(tmp_path / "cli")
    yield [
        "--home",
        tmp_path / "home",
        "--backend",
        "postgres",
        "--dsn",
        test_dsn(),
        "--schema",
        schema,
    ]
    drop_schemas(schema)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A bundle exported from the demo's SQLite store."""
    root = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--home", str(root / "home")]) == 0
    path = root / "demo.jsonl"
    assert main(["--home", str(root / "home"), "export", str(path)]) == 0
    return path


def _schema_exists(name: str) -> bool:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(test_dsn(), autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (name,)
        ).fetchone()
    return bool(row and row[0])


@requires_pg
def test_every_command_works_on_postgres(capsys, pg, bundle, tmp_path):
    """Every command (import, list, search, ..., import-hermes) runs on a PostgreSQL schema."""
    code, out, _ = run(capsys, *pg, "import", bundle, "--json")
    assert code == 0
    ids = json.loads(out)["sessions"]
    assert len(ids) == 6
    code, out, _ = run(capsys, *pg, "list", "--all", "--json")
    assert sorted(s["id"] for s in json.loads(out)) == sorted(ids)
    code, out, _ = run(capsys, *pg, "search", "部署")
    assert code == 0
    assert ">>>部署<<<" in out
    code, out, _ = run(capsys, *pg, "search", "部署", "--json")
    target = json.loads(out)[0]["session_id"]
    code, out, _ = run(capsys, *pg, "show", target)
    assert (code, out.splitlines()[0].split()[0]) == (0, target)
    assert run(capsys, *pg, "rename", target, "新名字")[0] == 0
    assert run(capsys, *pg, "archive", target)[0] == 0
    code, out, _ = run(capsys, *pg, "stats", "--json")
    stats = json.loads(out)
    assert (stats["backend"], stats["sessions"], stats["archived"]) == ("PostgresBackend", 6, 1)
    code, out, _ = run(capsys, *pg, "check", "--json")
    assert (code, json.loads(out)["ok"]) == (0, True)
    code, out, _ = run(capsys, *pg, "prune", "--older-than", "1d", "--json")
    assert json.loads(out)["dry_run"] is True
    code, out, _ = run(capsys, *pg, "erase-user", "feishu", "ou_bob", "--yes", "--json")
    assert (code, json.loads(out)["dry_run"]) == (0, False)
    _, out, _ = run(capsys, *pg, "list", "--all", "--json")
    ended = next(s["id"] for s in json.loads(out) if s.get("end_reason") and s["id"] != target)
    code, out, err = run(capsys, *pg, "delete", ended, "--json")
    assert (code, json.loads(out)) == (0, {"deleted": ended}), err
    _, out, _ = run(capsys, *pg, "list", "--all", "--json")
    assert ended not in {s["id"] for s in json.loads(out)}
    assert run(capsys, *pg, "optimize", "--json")[0] == 0
    code, out, _ = run(capsys, *pg, "reindex", "--json")
    assert (code, json.loads(out)["needed"]) == (0, False)
    exported = tmp_path / "out.jsonl"
    code, out, _ = run(capsys, *pg, "export", exported, "--json")
    assert code == 0
    assert exported.is_file()
    profile = Profile(tmp_path / "hermes")
    profile.session("20260301_090000_abcdef12", source="cli")
    profile.message("20260301_090000_abcdef12", "user", "迁移到 postgres")
    profile.close()
    code, out, err = run(capsys, *pg, "import-hermes", profile.root, "--timezone", "UTC", "--json")
    assert (code, json.loads(out)["sessions"]) == (0, ["20260301_090000_abcdef12"]), err
    assert ">>>postgres<<<" in run(capsys, *pg, "search", "postgres")[1]


def _without_ids(shown):
    """A transcript without message ids (SQLite numbers them store-wide, PostgreSQL per session)."""
    return [{k: v for k, v in m.items() if k != "id"} for m in shown["messages"]]


@requires_pg
def test_a_sqlite_store_moves_to_postgres_with_a_bundle(capsys, pg, bundle, tmp_path):
    """SQLite export, then ``--backend postgres import``: every transcript arrives the same."""
    assert run(capsys, *pg, "import", bundle)[0] == 0
    sqlite_home = tmp_path / "sqlite"
    assert run(capsys, "--home", sqlite_home, "import", bundle)[0] == 0
    _, listed, _ = run(capsys, "--home", sqlite_home, "list", "--all", "--json")
    for session in json.loads(listed):
        _, on_sqlite, _ = run(capsys, "--home", sqlite_home, "show", session["id"], "--json")
        _, on_pg, _ = run(capsys, *pg, "show", session["id"], "--json")
        assert _without_ids(json.loads(on_pg)) == _without_ids(json.loads(on_sqlite))
    again = run(capsys, *pg, "import", bundle, "--json")[1]
    assert json.loads(again)["messages"] == 0  # merging by id: a second import adds nothing


@requires_pg
def test_read_only_commands_never_create_a_schema(capsys, pg):
    """list, show, search, stats and check on a schema without a store exit 2 and create nothing."""
    schema = pg[pg.index("--schema") + 1]
    for command in (["list"], ["show", "x"], ["search", "a"], ["stats"], ["check"]):
        code, _, err = run(capsys, *pg, *command)
        assert (code, err.count("\n")) == (2, 1)
        assert f"no hermes-sessions store in schema {schema!r}" in err
    assert not _schema_exists(schema)


@requires_pg
def test_the_dsn_comes_from_the_environment(capsys, pg, bundle, monkeypatch):
    """Without --dsn the CLI connects to $HERMES_SESSIONS_DSN."""
    monkeypatch.setenv("HERMES_SESSIONS_DSN", test_dsn())
    without_dsn = [a for i, a in enumerate(pg) if a != "--dsn" and pg[i - 1] != "--dsn"]
    assert run(capsys, *without_dsn, "import", bundle)[0] == 0
    code, out, _ = run(capsys, *without_dsn, "stats", "--json")
    assert (code, json.loads(out)["sessions"]) == (0, 6)


def test_a_missing_dsn_is_one_line(capsys, tmp_path, monkeypatch):
    """--backend postgres without --dsn or $HERMES_SESSIONS_DSN says how to give one."""
    monkeypatch.delenv("HERMES_SESSIONS_DSN", raising=False)
    code, _, err = run(capsys, "--home", tmp_path, "--backend", "postgres", "list")
    assert (code, err.count("\n")) == (2, 1)
    assert "--dsn postgresql://" in err
    assert "HERMES_SESSIONS_DSN" in err


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_one_line_without_the_password(capsys, tmp_path):
    """A server that refuses connections gives one line naming host and port, not the password."""
    pytest.importorskip("psycopg", reason="needs the postgres extra")
    dsn = f"postgresql://someone:s3cr3t@127.0.0.1:{_closed_port()}/db"
    for command in (["list"], ["import", "-"]):
        code, _, err = run(
            capsys, "--home", tmp_path, "--backend", "postgres", "--dsn", dsn, *command
        )
        assert (code, err.count("\n")) == (2, 1), err
        assert "cannot connect to PostgreSQL 'db' on 127.0.0.1" in err
        assert "s3cr3t" not in err


def test_a_bad_dsn_or_schema_is_one_line(capsys, tmp_path):
    """A DSN that is not one, a schema name PostgreSQL cannot hold, --dsn on SQLite: one line."""
    pytest.importorskip("psycopg", reason="needs the postgres extra")
    base = ["--home", tmp_path, "--backend", "postgres"]
    code, _, err = run(capsys, *base, "--dsn", "no-equals-sign", "list")
    assert (code, err.count("\n")) == (2, 1)
    assert "bad --dsn" in err
    code, _, err = run(capsys, *base, "--dsn", "host=127.0.0.1", "--schema", "x" * 64, "list")
    assert (code, err.count("\n")) == (2, 1)
    assert "bad --schema" in err
    code, _, err = run(capsys, "--home", tmp_path, "--backend", "sqlite", "--dsn", "x", "list")
    assert (code, err.count("\n")) == (2, 1)
    assert "--dsn is for --backend postgres" in err


def test_without_the_driver_the_error_names_the_extra(capsys, tmp_path, monkeypatch):
    """With psycopg not installed, --backend postgres says which extra to install."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    code, _, err = run(
        capsys, "--home", tmp_path, "--backend", "postgres", "--dsn", "host=x", "stats"
    )
    assert (code, err.count("\n")) == (2, 1)
    assert "pip install 'hermes-sessions[postgres]'" in err


@requires_pg
def test_check_reports_a_damaged_row_on_postgres(capsys, pg, bundle):
    """A session row whose metadata is not JSON: check names the schema and table; exit 1."""
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    assert run(capsys, *pg, "import", bundle, "--json")[0] == 0
    schema = pg[-1]
    with psycopg.connect(test_dsn(), autocommit=True) as connection:
        connection.execute(
            sql.SQL("UPDATE {}.sessions SET metadata = 'not json'").format(sql.Identifier(schema))
        )
    code, out, err = run(capsys, *pg, "check", "--json")
    report = json.loads(out)
    assert (code, err, report["ok"]) == (1, "", False)
    assert report["details"][0]["kind"] == "corrupt"
    assert schema in report["details"][0]["where"]
    assert "sessions" in report["details"][0]["where"]
