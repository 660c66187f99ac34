"""A child process for the re-index kill test (run as a script, never imported by pytest).

``PATH BATCH STOP``: open the database at PATH and re-index it in batches of BATCH messages,
printing ``progress DONE TOTAL`` after every committed batch. While tokenizing message number
STOP of this run — inside the write transaction of its batch — print ``inside`` and wait on
stdin, where the parent kills the process.
"""

from __future__ import annotations

import os
import sys
import warnings

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _reindex


def report(line: str) -> None:
    """One whole line in one write, so the parent never reads half of it."""
    os.write(1, (line + "\n").encode())


def main() -> None:
    """Re-index until told to stop inside a batch."""
    path, size, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    tokenize = _reindex.row_tokens
    calls = 0

    def slow_tokens(row: object) -> str:
        nonlocal calls
        calls += 1
        if calls == stop:
            report("inside")
            sys.stdin.readline()  # the parent kills the process here
        return tokenize(row)  # type: ignore[arg-type]

    _reindex.row_tokens = slow_tokens  # type: ignore[assignment]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the "re-index needed" warning
        backend = SQLiteBackend(path)
    backend.reindex(batch_size=size, progress=lambda p: report(f"progress {p.done} {p.total}"))
    report("finished")


if __name__ == "__main__":
    main()
