"""How long ``import hermes_sessions`` takes, against a bare interpreter start in the same run.

Run ``python benchmarks/import_time.py`` (``--quick`` for a smoke run). Target (DESIGN §11):
importing the package costs under 150 ms. Each sample starts a fresh interpreter; the figure is
the median over the runs, minus the median start-up of ``python -c pass``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET_MS = 150.0


def sample(code: str, runs: int) -> float:
    """Median wall time in milliseconds of ``python -c code`` over ``runs`` fresh processes."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few runs, for CI smoke tests")
    args = parser.parse_args()
    runs = 3 if args.quick else 21
    baseline = sample("pass", runs)
    package = sample("import hermes_sessions", runs)
    loaded = sample("import hermes_sessions as h; h.SessionStore, h.MemoryStore, h.Message", runs)
    print(f"python -c pass:                  {baseline:7.1f} ms (baseline, median of {runs})")
    print(f"import hermes_sessions:          {package:7.1f} ms, {package - baseline:6.1f} ms over")
    print(f"  then SessionStore, MemoryStore: {loaded:7.1f} ms, {loaded - baseline:6.1f} ms over")
    verdict = "met" if package - baseline < TARGET_MS else "MISSED"
    print(
        f"target: import under {TARGET_MS:.0f} ms: {verdict} "
        f"(ratio to the bare interpreter {package / baseline:.2f})"
    )


if __name__ == "__main__":
    main()
