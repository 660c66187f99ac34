"""``hermes-sessions migrate-keys``: policies from the command line, dry run first, then --yes."""

from __future__ import annotations

import json

import pytest

from hermes_sessions import KeyPolicy, Message, SessionSource, SessionStore
from hermes_sessions.cli import main
from hermes_sessions.cli._migrate import parse_policy
from hermes_sessions.cli._output import UsageError

LIN = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_lin")
EVE = SessionSource(platform="feishu", chat_type="group", chat_id="oc_team", user_id="ou_eve")


def run(capsys, *argv):
    """Run the CLI; return the exit status, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def home(tmp_path):
    """A SQLite home where two members of one group each have a session."""
    home = tmp_path / "home"
    with SessionStore.open(home) as store:
        for source in (LIN, EVE):
            lookup = store.get_or_create(source)
            store.append(lookup.session_id, Message(role="user", content="你好"))
    return home


def keys(home) -> list[str]:
    """The routing keys the home holds."""
    with SessionStore.open(home) as store:
        return [e.session_key for e in store.backend.entries()]


def test_a_dry_run_reports_then_yes_moves(capsys, home):
    """Without --yes nothing moves; with it the members' keys merge into the group's."""
    code, out, _ = run(capsys, "--home", home, "migrate-keys", "--to", "group=off", "--json")
    report = json.loads(out)
    assert (code, report["dry_run"], len(report["moved"]), len(report["merged"])) == (0, True, 2, 1)
    assert len(keys(home)) == 2
    code, out, _ = run(capsys, "--home", home, "migrate-keys", "--to", "group=off", "--yes")
    assert code == 0
    assert "moved 2 key(s)" in out
    assert keys(home) == ["agent:main:feishu:group:oc_team"]


def test_refused_collisions_move_nothing(capsys, home):
    """--refuse-collisions leaves both members' keys and says why."""
    argv = ["--home", home, "migrate-keys", "--to", "group=off", "--refuse-collisions", "--yes"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert out.count("(collision)") == 2
    assert len(keys(home)) == 2


def test_policies_are_parsed_with_defaults():
    """Omitted settings keep the defaults; each given one sets its flag."""
    assert parse_policy("") == KeyPolicy()
    policy = parse_policy("namespace=work, group=off, thread=on, whatsapp=off")
    assert (policy.namespace, policy.group_sessions_per_user, policy.thread_sessions_per_user) == (
        "work",
        False,
        True,
    )
    assert "whatsapp" not in policy.canonicalizers


@pytest.mark.parametrize(
    "spec", ["group", "colour=red", "group=maybe", "namespace=a:b", "group=on,group=off"]
)
def test_bad_policies_are_usage_errors(spec):
    """A malformed setting is a usage error naming what to write."""
    with pytest.raises(UsageError):
        parse_policy(spec)


def test_a_bad_policy_exits_2(capsys, home):
    """On the command line a bad policy prints one line and exits with status 2."""
    code, _, err = run(capsys, "--home", home, "migrate-keys", "--to", "group=maybe")
    assert code == 2
    assert "on or off" in err
