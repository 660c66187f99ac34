"""Everything the library creates is private: directories 0700, files 0600 (issue 18, item 4)."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import pytest

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.cli import main
from hermes_sessions.memory import MemoryStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin")


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """A umask that lets group and others read (the usual default), so modes come from us."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def modes_under(root: Path) -> dict[str, str]:
    """The permission bits of every directory and file below ``root``, by relative path."""
    found = {}
    for directory, names, files in os.walk(root):
        for name in [*names, *files]:
            path = os.path.join(directory, name)  # noqa: PTH118  # os.walk gives strings
            found[os.path.relpath(path, root)] = oct(stat.S_IMODE(os.lstat(path).st_mode))
    return found


def assert_private(root: Path) -> None:
    """Every directory below ``root`` is 0700 and every file 0600."""
    modes = modes_under(root)
    assert modes
    wrong = {
        path: mode
        for path, mode in modes.items()
        if mode != ("0o700" if (root / path).is_dir() else "0o600")
    }
    assert wrong == {}


def use(store: SessionStore) -> None:
    """Route, append, reset and search, so every file a backend writes gets written."""
    lookup = store.get_or_create(LIN)
    store.append(lookup.session_id, Message(role="user", content="部署 staging"))
    entry = store.reset(lookup.entry.session_key)
    store.append(entry.session_id, Message(role="user", content="again"))
    assert store.search("部署")


@pytest.mark.parametrize("backend", ["sqlite", "jsonl"])
def test_a_store_in_a_missing_home_is_private(tmp_path, backend):
    """The home and its missing parents are 0700; the database, WAL, locks and sessions 0600."""
    home = tmp_path / "made" / "by" / "us" / "home"
    with SessionStore.open(home, backend=backend) as store:
        use(store)
        assert_private(tmp_path / "made")  # while open: the -wal, -shm and lock files too
    assert_private(tmp_path / "made")


def test_the_memory_store_and_cli_exports_are_private(tmp_path, capsys):
    """Memory files, their directory and parents, and a bundle the CLI exports are private."""
    memory = MemoryStore(tmp_path / "made" / "deep" / "memories")
    memory.add("memory", "部署用 make")
    home = tmp_path / "made" / "home"
    with SessionStore.open(home) as store:
        use(store)
    assert main(["--home", str(home), "export", str(tmp_path / "made" / "bundle.jsonl")]) == 0
    capsys.readouterr()
    assert_private(tmp_path / "made")
