"""The cost of a search hit on a huge message, as a ratio to the same search hitting a small one.

One SQLite store holds a 10 MB message with a rare word deep inside (at 60 %) and a small message
with another rare word. Each search returns one hit; the ratio is the median time of the search
returning the huge message over the median time of the one returning the small message, in the
same run. With bounded snippets (``hermes_sessions.text.match_window``) the ratio stays small;
the last lines repeat the huge search without reading the snippet (it is cut when first read)
and with the window turned off (the whole text tokenized, as before), for comparison.

    python benchmarks/hit_cost.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import hermes_sessions.text._snippets as snippets
from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends.sqlite import SQLiteBackend


def huge_text(size: int) -> str:
    """About ``size`` characters of mixed Latin and CJK text with ``zyxhuge`` at 60 %."""
    filler = "deploy the staging container again 部署 服务端 "
    body = (filler * (size // len(filler) + 1))[:size]
    cut = body.index(" ", size * 6 // 10)
    return body[:cut] + " zyxhuge " + body[cut:]


def median_ms(store: SessionStore, query: str, repeats: int, *, snippet: bool = True) -> float:
    """The median time of ``store.search(query)`` and reading the hit's snippet, in ms.

    Snippets are cut when first read, so ``snippet=False`` times the search alone.
    """
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        hits = store.search(query, limit=10)
        if snippet:
            _ = [hit.snippet for hit in hits]
        samples.append((time.perf_counter() - started) * 1000)
        if len(hits) != 1:
            raise SystemExit(f"{query!r} found {len(hits)} hits, expected 1")
    return statistics.median(samples)


def main() -> None:
    """Build the store, time both searches, print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2 MB message, fewer runs")
    args = parser.parse_args()
    size = 2_000_000 if args.quick else 10_000_000
    repeats = 5 if args.quick else 15
    with tempfile.TemporaryDirectory() as folder:
        backend = SQLiteBackend(Path(folder) / "state.db", max_message_bytes=None)
        with SessionStore(backend) as store:
            one = store.get_or_create(SessionSource(platform="cli", chat_id="huge")).session_id
            two = store.get_or_create(SessionSource(platform="cli", chat_id="small")).session_id
            store.append(one, Message(role="user", content=huge_text(size)))
            store.append(two, Message(role="user", content="a small message: zyxsmall here"))
            small = median_ms(store, "zyxsmall", repeats)
            huge = median_ms(store, "zyxhuge", repeats)
            print(f"search returning one hit, median of {repeats} runs:")
            print(f"  small message          {small:9.2f} ms")
            print(
                f"  {size / 1e6:.0f} MB message          {huge:9.2f} ms   ratio {huge / small:8.1f}"
            )
            unread = median_ms(store, "zyxhuge", repeats, snippet=False)
            label = f"{size / 1e6:.0f} MB, snippet unread"
            print(f"  {label:<22} {unread:9.2f} ms   ratio {unread / small:8.1f}")
            original = snippets.match_window
            snippets.match_window = lambda _text, _query: None  # the whole text, as before
            try:
                whole = median_ms(store, "zyxhuge", max(3, repeats // 5))
            finally:
                snippets.match_window = original
            label = f"{size / 1e6:.0f} MB, whole text"
            print(
                f"  {label:<22} {whole:9.2f} ms   ratio {whole / small:8.1f}"
                f"   (bounded window is {whole / huge:.0f}x faster)"
            )


if __name__ == "__main__":
    main()
