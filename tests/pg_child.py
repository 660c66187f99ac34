"""A client process for the PostgreSQL kill test (run as a script, never imported by pytest).

``DSN SCHEMA SEED``: forever, on a few keys, append turns to the key's session and rotate keys
to new sessions (``/new``), printing one line per *acknowledged* operation (after the call
returned, before the next one starts) until the parent kills it:

* ``A <session_id> <tag>`` — appended ``<tag>-u`` and ``<tag>-a`` (one batch) to the session;
* ``R <key> <session_id>`` — the key was rotated to the new session.
"""

from __future__ import annotations

import random
import sys

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.backends.postgres import PostgresBackend

KEYS = 3


def source(number: int) -> SessionSource:
    """The conversation of key ``number``."""
    return SessionSource(platform="telegram", chat_id=f"c{number}", user_id=f"u{number}")


def main(dsn: str, schema: str, seed: int) -> None:
    """Run operations until killed."""
    rng = random.Random(seed)  # noqa: S311  # test data, not secrets
    never = ResetPolicies(ResetPolicy(mode="none"))
    backend = PostgresBackend(dsn, schema=schema, min_size=1, max_size=2)
    with SessionStore(backend, resets=never) as store:
        n = 0
        while True:
            n += 1
            number = rng.randrange(KEYS)
            if rng.random() < 0.2:
                store.get_or_create(source(number))  # /new needs a conversation to reset
                entry = store.reset(store.key_for(source(number)))
                print(f"R {entry.session_key} {entry.session_id}", flush=True)  # noqa: T201  # the protocol
                continue
            lookup = store.get_or_create(source(number))
            tag = f"{seed}.{n}"
            store.append(
                lookup.session_id,
                Message(role="user", content=f"{tag}-u", platform_message_id=tag),
                Message(role="assistant", content=f"{tag}-a"),
            )
            print(f"A {lookup.session_id} {tag}", flush=True)  # noqa: T201  # the protocol


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
