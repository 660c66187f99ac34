"""The CLI on encrypted stores: keys from a key file or the environment, one-line refusals."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from typing import TYPE_CHECKING

import pytest

from hermes_sessions import SessionStore
from hermes_sessions.backends.encrypted import EncryptedBackend
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.cipher import Cipher, StaticKeys
from hermes_sessions.cli import main
from hermes_sessions.interop import export_bundle
from hermes_sessions.queries import SessionQuery
from interop.conftest import Profile
from pg_support import drop_schemas, open_pg, requires_pg, schema_dump, schema_for, test_dsn

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

DATA_KEY = hashlib.sha256(b"cli data key").digest()
TOKEN_KEY = hashlib.sha256(b"cli token key").digest()
KINDS = [
    "sqlite",
    "jsonl",
    pytest.param("postgres", marks=requires_pg),
]
SECRET_TITLE = "mkclisecrettitle"  # noqa: S105  # a marker searched for in the stored bytes


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


KEYS_TEXT = f"k1:{_b64(DATA_KEY)}"


def cipher() -> Cipher:
    """The cipher the key file and the variables describe."""
    return Cipher(StaticKeys({"k1": DATA_KEY}), token_key=TOKEN_KEY)


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class Target:
    """One encrypted store for the CLI: its options, its backend and its stored bytes."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.home = root / "home"
        self.home.mkdir()
        self.schema = schema_for(root / "cli") if kind == "postgres" else None
        self.options: list[object] = ["--home", self.home]
        if kind == "postgres":
            self.options += ["--backend", "postgres", "--dsn", test_dsn(), "--schema", self.schema]
        else:
            self.options += ["--backend", kind]

    def inner(self) -> SQLiteBackend | JSONLBackend:
        """A plain backend on the store (what a reader without keys sees)."""
        if self.kind == "postgres":
            return open_pg(self.home.parent / "cli")  # type: ignore[return-value]
        if self.kind == "sqlite":
            return SQLiteBackend(self.home / "state.db")
        return JSONLBackend(self.home)

    def stored(self) -> bytes:
        """Every byte the store keeps."""
        if self.kind == "postgres":
            return schema_dump(self.home.parent / "cli")
        return b"".join(p.read_bytes() for p in sorted(self.home.rglob("*")) if p.is_file())


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """A key file (mode 600) holding the two variables."""
    path = tmp_path / "keys.env"
    path.write_text(
        f"# hermes-sessions keys\nHERMES_SESSIONS_KEYS={KEYS_TEXT}\n"
        f"HERMES_SESSIONS_TOKEN_KEY={_b64(TOKEN_KEY)}\n",
        encoding="utf-8",
    )
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle exported from the demo's SQLite store."""
    root = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--home", str(root / "home")]) == 0
    path = root / "demo.jsonl"
    with SessionStore.open(root / "home") as store:
        export_bundle(store, path)
    return path


@pytest.fixture(params=KINDS)
def target(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    key_file: Path,
    bundle: Path,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[Target]:
    """An encrypted store of each kind, made by ``import`` with the key file."""
    made = Target(str(request.param), tmp_path)
    code, _, err = run(capsys, *made.options, "--key-file", key_file, "import", bundle)
    assert (code, err) == (0, "")
    yield made
    if made.schema is not None:
        drop_schemas(made.schema)


def _first_session(target: Target) -> str:
    with target.inner() as inner:
        return inner.list_sessions(SessionQuery(limit=1)).items[0].record.id


def _commands(session_id: str, tmp_path: Path, bundle: Path) -> list[list[object]]:
    profile = Profile(tmp_path / "hermes")
    profile.session("s1")
    profile.close()
    return [
        ["list"],
        ["show", session_id],
        ["search", "部署"],
        ["stats"],
        ["ledger", "pending"],
        ["check"],
        ["rename", session_id, SECRET_TITLE],
        ["archive", session_id],
        ["delete", session_id],
        ["prune", "--older-than", "1d", "--yes"],
        ["migrate-keys", "--to", "namespace=other", "--yes"],
        ["erase-user", "feishu", "ou_1", "--yes"],
        ["export", tmp_path / "out.jsonl"],
        ["import", bundle],
        ["import-hermes", tmp_path / "hermes"],
        ["optimize"],
        ["reindex"],
        ["memory", "show"],
    ]


def test_every_command_refuses_an_encrypted_store_without_its_keys(
    target: Target,
    tmp_path: Path,
    bundle: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a key, each command prints one line naming the remedy, exits 2, writes nothing."""
    for name in ("HERMES_SESSIONS_KEYS", "HERMES_SESSIONS_TOKEN_KEY", "HERMES_SESSIONS_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    (target.home / "memories").mkdir(exist_ok=True)
    session_id = _first_session(target)
    before = target.stored()
    for command in _commands(session_id, tmp_path, bundle):
        if target.kind == "postgres" and command[0] == "memory":
            continue  # the memory files sit in the home; the store is in the schema
        code, out, err = run(capsys, *target.options, *command)
        assert (code, out) == (2, ""), command
        assert err.count("\n") == 1, command
        assert "is encrypted" in err, command
        assert "--key-file" in err, command
    assert target.stored() == before


def test_commands_work_with_the_key_file(
    target: Target, key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """list, show, search, rename and check read and write the store encrypted."""
    session_id = _first_session(target)
    keyed = [*target.options, "--key-file", key_file]
    code, out, _ = run(capsys, *keyed, "search", "部署")
    assert code == 0
    assert ">>>部署<<<" in out
    code, out, _ = run(capsys, *keyed, "show", session_id)
    assert code == 0
    assert "林晓 (Lin):" in out  # show names the sender, decrypted
    assert run(capsys, *keyed, "rename", session_id, SECRET_TITLE)[0] == 0
    code, out, _ = run(capsys, *keyed, "list", "--all", "--json")
    assert code == 0
    assert SECRET_TITLE in [item.get("title") for item in json.loads(out)]
    assert run(capsys, *keyed, "check")[0] == 0
    assert SECRET_TITLE.encode() not in target.stored()
    with SessionStore(EncryptedBackend(target.inner(), cipher=cipher())) as store:  # the app
        record = store.backend.get_session(session_id)
        assert record is not None
        assert record.title == SECRET_TITLE


def test_keys_from_the_environment(
    tmp_path: Path,
    bundle: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$HERMES_SESSIONS_KEYS and $HERMES_SESSIONS_TOKEN_KEY work as the key file does."""
    monkeypatch.setenv("HERMES_SESSIONS_KEYS", KEYS_TEXT)
    monkeypatch.setenv("HERMES_SESSIONS_TOKEN_KEY", _b64(TOKEN_KEY))
    home = tmp_path / "home"
    assert run(capsys, "--home", home, "import", bundle)[0] == 0
    code, out, _ = run(capsys, "--home", home, "search", "部署")
    assert code == 0
    assert ">>>部署<<<" in out
    monkeypatch.delenv("HERMES_SESSIONS_KEYS")
    code, _, err = run(capsys, "--home", home, "list")
    assert (code, err.count("\n")) == (2, 1)


def test_the_key_file_variable_names_the_file(
    tmp_path: Path,
    bundle: Path,
    key_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$HERMES_SESSIONS_KEY_FILE is the default of --key-file."""
    monkeypatch.setenv("HERMES_SESSIONS_KEY_FILE", str(key_file))
    home = tmp_path / "home"
    assert run(capsys, "--home", home, "import", bundle)[0] == 0
    monkeypatch.delenv("HERMES_SESSIONS_KEY_FILE")
    assert run(capsys, "--home", home, "--key-file", key_file, "stats")[0] == 0
    assert run(capsys, "--home", home, "stats")[0] == 2


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_a_key_file_others_can_read_is_refused(
    tmp_path: Path, key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key file readable by group or others is one line, exit 2, naming chmod 600."""
    key_file.chmod(0o644)
    code, _, err = run(capsys, "--home", tmp_path, "--key-file", key_file, "list")
    assert (code, err.count("\n")) == (2, 1)
    assert "chmod 600" in err


def test_a_plain_home_with_a_key_is_refused(
    tmp_path: Path, bundle: Path, key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain store opened with a key is refused in one line (encrypt_store converts it)."""
    home = tmp_path / "plain"
    assert run(capsys, "--home", home, "import", bundle)[0] == 0
    code, _, err = run(capsys, "--home", home, "--key-file", key_file, "list")
    assert (code, err.count("\n")) == (2, 1)
    assert "not encrypted" in err


def test_a_wrong_key_is_one_line(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key file with another key under the same id is refused before anything is written."""
    wrong = tmp_path / "wrong.env"
    wrong.write_text(
        f"HERMES_SESSIONS_KEYS=k1:{_b64(TOKEN_KEY)}\nHERMES_SESSIONS_TOKEN_KEY={_b64(TOKEN_KEY)}\n",
        encoding="utf-8",
    )
    os.chmod(wrong, 0o600)  # noqa: PTH101  # beside write_text: the mode is the point
    code, _, err = run(capsys, *target.options, "--key-file", wrong, "rename", "x", "y")
    assert (code, err.count("\n")) == (2, 1)
    assert "does not open" in err


def test_erase_user_with_the_user_keys_destroys_the_key(
    tmp_path: Path, key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--user-keys opens a store with per-user keys; erase-user destroys the user's key file."""
    from hermes_sessions import Message, SessionSource  # noqa: PLC0415
    from hermes_sessions.backends.encrypted import DirectoryUserKeys, UserKeys  # noqa: PLC0415

    home, keys = tmp_path / "home", tmp_path / "user-keys"
    home.mkdir()
    user_keys = UserKeys(DirectoryUserKeys(keys))
    inner = SQLiteBackend(home / "state.db")
    with SessionStore(EncryptedBackend(inner, cipher=cipher(), user_keys=user_keys)) as store:
        source = SessionSource(platform="telegram", chat_id="9", user_id="alice")
        store.append(store.get_or_create(source).session_id, Message(role="user", content="hi"))
    assert len(list(keys.glob("u-*.key"))) == 1
    code, _, err = run(capsys, "--home", home, "--key-file", key_file, "list")
    assert (code, err.count("\n")) == (2, 1)
    assert "per-user keys" in err
    argv = ["--home", home, "--key-file", key_file, "--user-keys", keys]
    code, out, _ = run(capsys, *argv, "erase-user", "telegram", "alice", "--yes", "--json")
    assert code == 0
    assert json.loads(out)["keys_destroyed"] == 1
    assert list(keys.glob("u-*.key")) == []
