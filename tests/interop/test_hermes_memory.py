"""Hermes memory files into scoped memory: MEMORY.md to app, USER.md to a named user's profile."""

from __future__ import annotations

import json

import pytest

from hermes_sessions import SessionStore
from hermes_sessions.backends import InMemoryBackend
from hermes_sessions.cli import main
from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.interop import import_hermes
from hermes_sessions.memory import MemoryContext, MemoryScope, MemoryStore, ScopedMemory
from hermes_sessions.queries import SessionQuery

ZONE = "Asia/Shanghai"


@pytest.fixture
def hermes(profile):
    """A Hermes profile with one session and both memory files."""
    profile.session("s1")
    profile.message("s1", "user", "hi")
    profile.memory("MEMORY.md", ["staging runs on port 8443", "CI runs on Fridays"])
    profile.memory("USER.md", ["Name: Lin Xiao", "Prefers answers in Chinese"])
    return profile


def test_user_md_goes_to_the_named_users_profile(hermes, tmp_path):
    """With user='platform:id', USER.md becomes that user's profile; MEMORY.md app memory."""
    memory = ScopedMemory(tmp_path / "memories")
    store = SessionStore(InMemoryBackend())
    report = import_hermes(hermes.root, store, timezone=ZONE, memory=memory, user="telegram:42")
    assert report.memory_mapping == {"MEMORY.md": "app", "USER.md": "user:telegram:42"}
    assert report.memory_entries == 4
    app = [e.text for e in memory.entries(MemoryScope.app())]
    assert app == ["staging runs on port 8443", "CI runs on Fridays"]
    profile = memory.entries(MemoryScope.user("telegram", "42"))
    assert [e.text for e in profile] == ["Name: Lin Xiao", "Prefers answers in Chinese"]
    # Imported profile entries carry no stamp: they load in the user's DMs, not in groups.
    dm = MemoryContext(session_key="agent:main:telegram:dm:42", platform="telegram", user_id="42")
    group = MemoryContext(
        session_key="agent:main:telegram:group:-1:42", platform="telegram", user_id="42"
    )
    assert memory.snapshot(dm).user.entries == ("Name: Lin Xiao", "Prefers answers in Chinese")
    assert memory.snapshot(group).user.entries == ()
    again = import_hermes(hermes.root, store, timezone=ZONE, memory=memory, user="telegram:42")
    assert again.memory_entries == 0


def test_without_a_user_the_profile_is_marked_as_the_owners(hermes, tmp_path):
    """Without a user, USER.md goes to app memory, each entry marked as the owner's profile."""
    memory = ScopedMemory(tmp_path / "memories")
    report = import_hermes(
        hermes.root, SessionStore(InMemoryBackend()), timezone=ZONE, memory=memory
    )
    assert report.memory_mapping["USER.md"] == "app (marked as the owner's profile)"
    texts = [e.text for e in memory.entries(MemoryScope.app())]
    assert texts[-2:] == [
        "Owner's profile: Name: Lin Xiao",
        "Owner's profile: Prefers answers in Chinese",
    ]
    assert not (tmp_path / "memories" / "users").exists()


def test_a_plain_store_maps_one_to_one_and_refuses_a_user(hermes, tmp_path):
    """A MemoryStore keeps MEMORY.md and USER.md as they are; a user needs scoped memory."""
    memory = MemoryStore(tmp_path / "plain")
    store = SessionStore(InMemoryBackend())
    report = import_hermes(hermes.root, store, timezone=ZONE, memory=memory)
    assert report.memory_mapping == {"MEMORY.md": "memory", "USER.md": "user"}
    assert memory.entries("user") == ("Name: Lin Xiao", "Prefers answers in Chinese")
    with pytest.raises(InvalidArgumentError, match="ScopedMemory"):
        import_hermes(hermes.root, store, timezone=ZONE, memory=memory, user="telegram:42")


@pytest.mark.parametrize("user", ["telegram", ":42", "telegram:", ""])
def test_a_malformed_user_is_refused_before_anything_is_read(hermes, tmp_path, user):
    """The user is 'platform:id'; anything else is refused and nothing is imported."""
    store = SessionStore(InMemoryBackend())
    with pytest.raises(InvalidArgumentError, match="platform:id"):
        import_hermes(
            hermes.root, store, timezone=ZONE, memory=ScopedMemory(tmp_path / "m"), user=user
        )
    assert store.backend.list_sessions(SessionQuery(limit=None)).items == ()


def test_cli_import_hermes_takes_user_and_reports_the_mapping(hermes, tmp_path, capsys):
    """import-hermes --user platform:id writes the profile and says where each file went."""
    home = tmp_path / "home"
    argv = ["--home", str(home), "import-hermes", str(hermes.root), "--timezone", ZONE]
    assert main([*argv, "--user", "telegram:42", "--json"]) == 0
    value = json.loads(capsys.readouterr().out)
    assert value["memory_mapping"] == {"MEMORY.md": "app", "USER.md": "user:telegram:42"}
    assert (home / "memories" / "users" / "telegram" / "42" / "USER.md").is_file()
    assert main([*argv, "--user", "telegram:42"]) == 0
    assert "USER.md -> user:telegram:42" in capsys.readouterr().out
    assert main(["--home", str(home), "erase-user", "telegram", "42", "--yes"]) == 0
    assert "memory: 1 profile(s)" in capsys.readouterr().out
    assert not (home / "memories" / "users" / "telegram" / "42").exists()
