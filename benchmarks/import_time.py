"""Import and first use against a bare interpreter start, in the same run.

Three programs, each started many times in a fresh interpreter, their runs interleaved (bare,
import, first use, bare, ...) so the load of a shared machine hits all three alike:

* ``python -c pass`` — the baseline;
* ``import hermes_sessions``;
* the first use: import, open a SQLite store in a new directory (creating its schema; the
  parent names the directory, so the child loads nothing but the library) and run the first
  turn (``get_or_create`` then an ``append`` of the user message and the reply).

The figures are the CPU time (user and system) of each process, medians over the runs, minus
the baseline's median: on a shared machine the wall time of a process swings several-fold with
the load of the others, and that of the first use also waits for the disk (its fsyncs).

Targets: importing the package costs under 150 ms (DESIGN §11); the first use, under 100 ms
over the bare interpreter (issue 39, item 5). The package's bytecode is compiled first (as an
installed package's is), so the runs do not measure compiling it when
``PYTHONDONTWRITEBYTECODE`` is set.

    python benchmarks/import_time.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import compileall
import itertools
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

IMPORT_TARGET_MS = 150.0
FIRST_USE_TARGET_MS = 100.0

FIRST_USE = """
import sys
from hermes_sessions import Message, SessionSource, SessionStore
with SessionStore.open(sys.argv[1]) as store:
    lookup = store.get_or_create(SessionSource(platform="telegram", chat_id="1", user_id="1"))
    store.append(
        lookup.session_id,
        Message(role="user", content="hello", platform_message_id="1"),
        Message(role="assistant", content="hi, how can I help?"),
    )
"""
PROGRAMS = {
    "bare": "pass",
    "import": "import hermes_sessions",
    "first use": FIRST_USE,
}


def run_once(code: str, home: str) -> float:
    """CPU time (user and system) in milliseconds of ``python -c code home`` in a new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code, home], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return used * 1000


def compile_package() -> None:
    """Write the package's bytecode, as installing it does."""
    import hermes_sessions  # noqa: PLC0415

    compileall.compile_dir(Path(hermes_sessions.__file__).parent, quiet=1)


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few runs, for CI smoke tests")
    parser.add_argument("--runs", type=int, default=None, help="runs of each program (median)")
    args = parser.parse_args()
    runs = args.runs or (5 if args.quick else 21)
    compile_package()
    times: dict[str, list[float]] = {name: [] for name in PROGRAMS}
    with tempfile.TemporaryDirectory() as scratch:
        homes = (str(Path(scratch) / str(number)) for number in itertools.count())
        for code in PROGRAMS.values():  # warm the page cache, untimed
            run_once(code, next(homes))
        for _ in range(runs):
            for name, code in PROGRAMS.items():
                times[name].append(run_once(code, next(homes)))
    median = {name: statistics.median(samples) for name, samples in times.items()}
    bare = median["bare"]
    over_import = median["import"] - bare
    over_first = median["first use"] - bare
    print(f"CPU time, medians of {runs} fresh processes each, runs interleaved")
    print(f"python -c pass:                    {bare:7.1f} ms (the baseline)")
    print(
        f"import hermes_sessions:            {median['import']:7.1f} ms, {over_import:6.1f} ms over"
    )
    print(
        f"first use (open a new store, one turn): {median['first use']:7.1f} ms, "
        f"{over_first:6.1f} ms over"
    )
    mark = "pass" if over_import < IMPORT_TARGET_MS else "MISS"
    print(f"target: import under {IMPORT_TARGET_MS:.0f} ms over the bare interpreter: {mark}")
    mark = "pass" if over_first <= FIRST_USE_TARGET_MS else "MISS"
    print(
        f"target: first use at most {FIRST_USE_TARGET_MS:.0f} ms over the bare interpreter "
        f"(ratio to it {median['first use'] / bare:.2f}): {mark}"
    )


if __name__ == "__main__":
    main()
