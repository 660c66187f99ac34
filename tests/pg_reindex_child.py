"""A child process for the PostgreSQL re-index kill test (run as a script, never imported).

``DSN SCHEMA BATCH STOP``: open the schema and re-index it in batches of BATCH messages,
printing ``progress DONE TOTAL`` after every committed batch. While building the search rows of
message number STOP of this run — inside the transaction of its batch — print ``inside`` and
wait on stdin, where the parent kills the process.
"""

from __future__ import annotations

import os
import sys
import warnings

from hermes_sessions.backends.postgres import PostgresBackend, _reindex


def report(line: str) -> None:
    """One whole line in one write, so the parent never reads half of it."""
    os.write(1, (line + "\n").encode())


def main() -> None:
    """Re-index until told to stop inside a batch."""
    dsn, schema, size, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rows_of = _reindex.documents
    calls = 0

    def slow_documents(searchable: str) -> list[tuple[bool, str]]:
        nonlocal calls
        calls += 1
        if calls == stop:
            report("inside")
            sys.stdin.readline()  # the parent kills the process here
        return rows_of(searchable)

    _reindex.documents = slow_documents  # type: ignore[assignment]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the "re-index needed" warning
        backend = PostgresBackend(dsn, schema=schema, max_size=2)
    backend.reindex(batch_size=size, progress=lambda p: report(f"progress {p.done} {p.total}"))
    report("finished")


if __name__ == "__main__":
    main()
