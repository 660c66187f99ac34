"""The test-only crash points: named, counted, armed in-process or through the environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from hermes_sessions import crashpoints


@pytest.fixture(autouse=True)
def _disarmed():
    yield
    crashpoints.disarm()


def test_unknown_points_and_counts_are_refused():
    """An unknown point or a count below one is refused, naming what is allowed."""
    with pytest.raises(ValueError, match=r"unknown crash point 'sqlite\.nowhere'; use one of"):
        crashpoints.arm("sqlite.nowhere")
    with pytest.raises(ValueError, match="at least 1"):
        crashpoints.arm("sqlite.after_commit", after=0)
    assert crashpoints.armed() is None


def test_reaching_another_point_or_a_disarmed_one_is_harmless():
    """Only the armed point counts down; after ``disarm`` nothing does."""
    crashpoints.arm("sqlite.after_commit", after=1)
    assert crashpoints.armed() == "sqlite.after_commit"
    crashpoints.reached("sqlite.before_commit")
    crashpoints.disarm()
    crashpoints.reached("sqlite.after_commit")
    assert crashpoints.armed() is None


def test_a_process_armed_through_the_environment_dies_at_the_nth_commit(tmp_path):
    """``HERMES_SESSIONS_CRASH_AT=point:n`` kills a spawned process at the n-th arrival."""
    script = (
        "from hermes_sessions import Message, SessionSource, SessionStore\n"
        "import sys\n"
        f"store = SessionStore.open({str(tmp_path)!r})\n"
        "lookup = store.get_or_create(SessionSource(platform='cli', chat_id='1'))\n"
        "for n in range(10):\n"
        "    store.append(lookup.session_id, Message(role='user', content=str(n)))\n"
        "    print(n, flush=True)\n"
    )
    environment = os.environ | {crashpoints.ENVIRONMENT: "sqlite.after_commit:4"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    # the first commit creates the session; appends 0 and 1 are acknowledged, 2 is committed
    assert done.stdout.split() == ["0", "1"]
