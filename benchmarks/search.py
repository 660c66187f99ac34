"""Search latency of the store on a generated corpus, against Hermes's search and raw FTS5 queries.

Builds a database of generated messages (English, Chinese, Japanese and mixed text with Zipf
frequencies; 20,000 by default, the size of the held-out search eval, and 1,000,000 with
--full) through the backend's own API, and the same messages in a Hermes-shaped ``state.db``
(``_data/hermes_search.py``), then runs a fixed, seeded query mix. Ranked classes keep only
queries matching at most 10,000 messages; the ``common`` class holds the most frequent terms
(more matches) and is run with order="newest".

Two parts, each printing median and p95 per query for the store, for the emulation of Hermes's
search and for raw FTS5 on the same corpus in the same run, and their ratios:

* limit 20: each class with the backend's search (default filters, 20 hits with snippets)
  beside the same FTS5 MATCH run directly with sqlite3 and Hermes's search with limit 20;
* every hit (the eval's way): ``SessionStore.search(q, limit=None)`` reading every hit's
  message id (and once more reading every snippet too), Hermes's search without a limit (its
  snippets and per-hit context included, as it always computes them) and raw FTS5 returning
  every matching rowid best first.

A last part times natural questions (``search(..., mode="natural")``) beside exact queries of
their content words and prints the p95 ratio (issue 35 asks at most 2 on 1,000,000 messages).

    python benchmarks/search.py --quick         # 20,000 messages, few queries (CI)
    python benchmarks/search.py                 # 20,000 messages, the full query mix
    python benchmarks/search.py --full          # 1,000,000 messages (builds for ~20 minutes)
    python benchmarks/search.py --db /tmp/s.db  # keep the databases; a later run reuses them
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data.corpus import KANA_WORDS, TECH, Corpus
from _data.encryption import encrypted
from _data.hermes_search import build_hermes, hermes_search

from hermes_sessions import SessionStore, text
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite._search import fts_query
from hermes_sessions.models import Message, SessionRecord
from hermes_sessions.protocols import RotationPlan
from hermes_sessions.queries import SearchQuery

RANKED_LIMIT = 10_000  # ranked queries must match at most this many messages (DESIGN §11)


def build(backend: SQLiteBackend, corpus: Corpus, total: int) -> float:
    """Append ``total`` messages, one transaction per session; return the seconds it took."""
    started = time.perf_counter()
    for number, source, rows in corpus.sessions(total):
        record = SessionRecord(
            id=f"s{number:07d}", source=source, started_at=rows[0][2], user_id=f"u{number % 97}"
        )
        messages = [Message(role=role, content=body, timestamp=at) for role, body, at in rows]
        backend.apply(RotationPlan(at=rows[0][2], create=record, messages=messages))
        if number % 2000 == 0 and number:
            done = number * 50
            rate = done / (time.perf_counter() - started)
            print(f"  ... {done:,} messages ({rate:,.0f} msg/s)", flush=True)
    return time.perf_counter() - started


def candidates(corpus: Corpus, rng: random.Random) -> dict[str, list[str]]:
    """Candidate queries per class (more than needed; filtered by match count later)."""
    sample = random.Random(rng.random())
    english = [corpus.english_text(sample).rstrip(".?!").lower().split() for _ in range(400)]
    chinese = [corpus.chinese_text(sample) for _ in range(400)]
    japanese = [corpus.japanese_text(sample).rstrip("。") for _ in range(400)]
    han = set(corpus.han)

    def pieces(lines: list[str], width: int) -> list[str]:
        found = []
        for line in lines:
            if len(line) > width:
                start = sample.randrange(len(line) - width)
                found.append(line[start : start + width])
        return found

    def han_runs(width: int) -> list[str]:
        found = []
        for line in chinese:
            start = sample.randrange(max(1, len(line) - width))
            piece = line[start : start + width]
            if len(piece) == width and all(char in han for char in piece):
                found.append(piece)
        return found

    return {
        "latin-rare": [rng.choice(corpus.english[1_000:]) for _ in range(300)],
        "latin-common": [rng.choice(corpus.english[30:600]) for _ in range(300)],
        "phrase": [
            '"{} {}"'.format(*words[i : i + 2])
            for words in english
            if len(words) > 2
            for i in [sample.randrange(len(words) - 2)]
        ],
        "prefix": [
            word[:4] + "*" for word in rng.sample(corpus.english[200:5_000], 300) if len(word) > 5
        ],
        "cjk-1": [rng.choice(corpus.han[150:]) for _ in range(300)],
        "cjk-2": han_runs(2),
        "cjk-3": han_runs(3),
        "japanese": pieces(japanese, 3) + pieces(japanese, 4) + list(KANA_WORDS),
        "mixed": [f"{rng.choice(TECH)} {piece}" for piece in han_runs(2)],
        "common": [*corpus.english[:15], *corpus.han[:15]],
    }


def count(raw: sqlite3.Connection, query: str) -> int:
    """How many messages a query matches (all roles and sources), straight from FTS5."""
    match = fts_query(text.parse_query(query))
    sql = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
    return int(raw.execute(sql, (match,)).fetchone()[0])


def choose(raw: sqlite3.Connection, pool: dict[str, list[str]], per_class: int) -> dict:
    """Keep ``per_class`` queries per class: ranked ones match 1..10,000 messages."""
    chosen: dict[str, list[tuple[str, int]]] = {}
    for name, queries in pool.items():
        kept: list[tuple[str, int]] = []
        for query in dict.fromkeys(queries):
            matches = count(raw, query)
            if name == "common" or 0 < matches <= RANKED_LIMIT:
                kept.append((query, matches))
            if len(kept) == per_class:
                break
        chosen[name] = kept
    return chosen


def timed(call) -> float:  # noqa: ANN001  # any zero-argument callable
    """Milliseconds one call takes."""
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def p95(samples: list[float]) -> float:
    """The 95th percentile of ``samples``."""
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def ratios(label: str, ours: list[float], hermes: list[float], baseline: list[float]) -> None:
    """One line: the store's median/p95 beside Hermes's and raw FTS5's, as ratios."""
    median, high = statistics.median(ours), p95(ours)
    print(
        f"{label}: store median {median:.2f} ms, p95 {high:.2f} ms | "
        f"Hermes {statistics.median(hermes):.2f}/{p95(hermes):.2f} ms "
        f"(ratio median {median / statistics.median(hermes):.2f}, "
        f"p95 {high / p95(hermes):.2f}) | "
        f"raw FTS5 {statistics.median(baseline):.2f}/{p95(baseline):.2f} ms "
        f"(ratio median {median / statistics.median(baseline):.2f}, "
        f"p95 {high / p95(baseline):.2f})"
    )


def run(
    backend: SQLiteBackend,
    raw: sqlite3.Connection,
    hermes: sqlite3.Connection,
    chosen: dict,
    repeats: int,
) -> tuple[list[float], list[float]]:
    """Time every class with limit 20; print a line per class and the overall figures.

    Returns the store's and raw FTS5's samples of the ranked classes.
    """
    ranked_ours: list[float] = []
    ranked_raw: list[float] = []
    ranked_hermes: list[float] = []
    print(
        f"{'class':<16}{'queries':>8}{'matches med/max':>18}{'hits':>6}"
        f"{'ours med/p95 ms':>18}{'raw med/p95 ms':>17}{'ratio':>7}{'Hermes med/p95':>17}"
    )
    for name, queries in chosen.items():
        if not queries:
            print(f"{name:<16}{0:>8}  (no query of this class fits the corpus)")
            continue
        newest = name == "common"
        order = "newest" if newest else "rank"
        raw_sql = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? " + (
            "ORDER BY rowid DESC LIMIT 20" if newest else "ORDER BY rank LIMIT 20"
        )
        ours: list[float] = []
        baseline: list[float] = []
        theirs: list[float] = []
        hits = []
        for query, _matches in queries:
            search = SearchQuery(text=query, order=order, limit=20)
            match = fts_query(text.parse_query(query))
            hits.append(len(backend.search(search)))  # warm-up
            raw.execute(raw_sql, (match,)).fetchall()
            hermes_search(hermes, query, limit=20)
            for _ in range(repeats):
                ours.append(timed(lambda s=search: backend.search(s)))
                baseline.append(timed(lambda m=match, q=raw_sql: raw.execute(q, (m,)).fetchall()))
                theirs.append(timed(lambda q=query: hermes_search(hermes, q, limit=20)))
        matches = [m for _q, m in queries]
        if not newest:
            ranked_ours += ours
            ranked_raw += baseline
            ranked_hermes += theirs
        print(
            f"{name + (' (newest)' if newest else ''):<16}{len(queries):>8}"
            f"{statistics.median(matches):>10,.0f}/{max(matches):>7,}"
            f"{statistics.mean(hits):>6.1f}"
            f"{statistics.median(ours):>10.2f}/{p95(ours):>7.2f}"
            f"{statistics.median(baseline):>10.2f}/{p95(baseline):>6.2f}"
            f"{statistics.median(ours) / statistics.median(baseline):>7.1f}"
            f"{statistics.median(theirs):>10.2f}/{p95(theirs):>6.2f}"
        )
        if newest:
            verdict(f"common terms, newest, limit 20 ({len(queries)} queries)", ours, baseline)
    verdict("all ranked classes", ranked_ours, ranked_raw)
    ratios("limit 20, ranked classes", ranked_ours, ranked_hermes, ranked_raw)
    return ranked_ours, ranked_raw


def all_hits(
    store: SessionStore,
    raw: sqlite3.Connection,
    hermes: sqlite3.Connection,
    chosen: dict,
    repeats: int,
) -> tuple[list[float], list[float], list[float]]:
    """Every hit of every ranked query (the eval's way); returns store, Hermes, raw samples."""
    ours: list[float] = []
    snipped: list[float] = []
    theirs: list[float] = []
    baseline: list[float] = []
    counts: list[int] = []
    raw_sql = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank"

    def ids(query: str) -> list[object]:
        return [hit.message.id for hit in store.search(query, limit=None)]

    def snippets(query: str) -> list[object]:
        return [(hit.message.id, hit.snippet) for hit in store.search(query, limit=None)]

    for name, queries in chosen.items():
        if name == "common":
            continue
        for query, _matches in queries:
            match = fts_query(text.parse_query(query))
            counts.append(len(ids(query)))  # warm-up
            hermes_search(hermes, query, limit=-1)
            for _ in range(repeats):
                ours.append(timed(lambda q=query: ids(q)))
                snipped.append(timed(lambda q=query: snippets(q)))
                theirs.append(timed(lambda q=query: hermes_search(hermes, q, limit=-1)))
                baseline.append(timed(lambda m=match: raw.execute(raw_sql, (m,)).fetchall()))
    print(
        f"every hit (limit=None), {len(counts)} ranked queries, "
        f"hits per query median {statistics.median(counts):,.0f}, max {max(counts):,}:"
    )
    ratios("  reading message ids", ours, theirs, baseline)
    ratios("  reading snippets too", snipped, theirs, baseline)
    return ours, theirs, baseline


def verdict(label: str, ours: list[float], baseline: list[float]) -> None:
    """Print median/p95 against the targets (median < 10 ms, p95 < 50 ms)."""
    median, high = statistics.median(ours), p95(ours)
    ok = "met" if median < 10 and high < 50 else "MISSED"
    print(
        f"{label}: median {median:.2f} ms, p95 {high:.2f} ms "
        f"(raw FTS5: median {statistics.median(baseline):.2f} ms, p95 {p95(baseline):.2f} ms; "
        f"ratio {median / statistics.median(baseline):.1f}); "
        f"target median < 10 ms and p95 < 50 ms: {ok}"
    )


def targets(
    ranked: tuple[list[float], list[float]],
    every: tuple[list[float], list[float], list[float]],
    total: int,
) -> None:
    """The targets of issue 21, item 3, met or missed in this run."""
    ours, theirs, _raw = every
    median = statistics.median(ours) / statistics.median(theirs)
    high = p95(ranked[0]) / p95(ranked[1])
    print(
        f"every hit: store median {median:.2f}x Hermes's (target <= 0.5: "
        f"{'met' if median <= 0.5 else 'MISSED'}); limit 20, ranked: store p95 {high:.2f}x "
        f"raw FTS5's (target <= 1.2 on 1,000,000 messages: "
        + (("met" if high <= 1.2 else "MISSED") if total >= 1_000_000 else "run --full")
        + ")"
    )


def natural_beside_exact(store: SessionStore, chosen: dict, repeats: int) -> None:
    """Natural questions beside exact queries of the same content words (limit 5 and 20).

    Each question wraps one or two of the chosen words in filler (``why did the … fail?``,
    ``上周…怎么了`` with a full-width question mark); the exact query is the content words
    alone, so the ratio is the cost of reading a question naturally over searching its words.
    """

    def words(name: str) -> list[str]:
        return [query for query, _matches in chosen.get(name, [])]

    rare, common = words("latin-rare"), words("latin-common")
    pairs = [(f"why did the {a} {b} fail?", f"{a} {b}") for a, b in zip(rare, common, strict=False)]
    pairs += [(f"what did we say about {a}?", a) for a in rare]
    pairs += [(f"上周{q.split()[-1]}怎么了？", q.split()[-1]) for q in words("mixed")]
    pairs += [(f"{q} について", q) for q in words("japanese")]
    natural, exact = [], []
    for question, plain in pairs:
        for _ in range(repeats):
            natural.append(timed(lambda q=question: store.search(q, mode="natural", limit=5)))
            exact.append(timed(lambda q=plain: store.search(q, limit=20)))
    if len(natural) < 2:  # quantiles need two samples
        return
    print(f"natural questions beside exact queries of their words ({len(pairs)} questions):")
    print(f"{'mode':<10}{'median ms':>12}{'p95 ms':>10}")
    print(f"{'natural':<10}{statistics.median(natural):>12.2f}{p95(natural):>10.2f}")
    print(f"{'exact':<10}{statistics.median(exact):>12.2f}{p95(exact):>10.2f}")
    ratio = p95(natural) / p95(exact)
    print(
        f"natural / exact: median {statistics.median(natural) / statistics.median(exact):.1f}, "
        f"p95 {ratio:.1f} (issue 35 target: p95 at most 2.0)"
    )


def hermes_database(path: Path, corpus: Corpus, total: int) -> sqlite3.Connection:
    """Build (or reuse) the Hermes-shaped copy of the corpus at ``path``; connect to it."""
    if not path.exists():
        print(f"building the Hermes copy in {path} ...", flush=True)
        seconds = build_hermes(path, corpus.sessions(total))
        print(f"Hermes copy: {total:,} messages in {seconds:,.1f} s")
    connection = sqlite3.connect(path)
    stored = connection.execute("SELECT count(*) FROM messages").fetchone()[0]
    if stored != total:
        sys.exit(f"{path} holds {stored:,} messages, not {total:,}; use another --db")
    return connection


def main() -> None:
    """Build (or reuse) the corpus databases and run the query mix."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few queries, one run (CI smoke test)")
    parser.add_argument("--full", action="store_true", help="1,000,000 messages")
    parser.add_argument("--messages", type=int, help="corpus size (default 20,000)")
    parser.add_argument("--db", type=Path, help="database file to build or reuse")
    parser.add_argument("--repeats", type=int, help="timed runs per query (default 3, 1 quick)")
    parser.add_argument("--queries", type=int, help="queries per class (default 25, 4 quick)")
    parser.add_argument(
        "--optimize", action="store_true", help="run optimize() before the queries and time it"
    )
    args = parser.parse_args()
    total = args.messages or (1_000_000 if args.full else 20_000)
    per_class = args.queries or (4 if args.quick else 25)
    repeats = args.repeats or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory() as scratch:
        path = args.db or Path(scratch) / "state.db"
        corpus = Corpus()
        with SQLiteBackend(path) as backend:
            connection = backend._connections.connection()  # noqa: SLF001  # a raw count
            stored = connection.execute("SELECT count(*) FROM messages").fetchone()[0]
            if stored == 0:
                print(f"building {total:,} messages in {path} ...", flush=True)
                seconds = build(backend, corpus, total)
                print(
                    f"build: {total:,} messages appended and indexed in {seconds:,.1f} s "
                    f"({total / seconds:,.0f} msg/s, one transaction per 50-message session)"
                )
            elif stored != total:
                sys.exit(f"{path} holds {stored:,} messages, not {total:,}; use another --db")
            else:
                print(f"reusing {path} with {stored:,} messages")
            if args.optimize:
                started = time.perf_counter()
                backend.optimize()
                print(f"optimize(): {time.perf_counter() - started:,.1f} s")
            size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
            print(f"database: {size / 2**20:,.0f} MiB")
            hermes = hermes_database(path.with_name(path.name + ".hermes"), corpus, total)
            raw = sqlite3.connect(path)
            try:
                chosen = choose(raw, candidates(corpus, random.Random(7)), per_class)
                ranked = run(backend, raw, hermes, chosen, repeats)
                every = all_hits(SessionStore(backend), raw, hermes, chosen, repeats)
                targets(ranked, every, total)
                natural_beside_exact(SessionStore(backend), chosen, repeats)
            finally:
                raw.close()
                hermes.close()
        # Small in --quick (CI): the prefix scans decrypt every message.
        encrypted_beside_plain(Path(scratch), 5_000 if args.quick else 100_000, chosen)


def encrypted_beside_plain(folder: Path, total: int, chosen: dict) -> None:
    """The same classes on an encrypted and a plain store of ``total`` messages (same corpus).

    Whole-token classes run on the index of hashed tokens; ``prefix`` and ``cjk-1`` (a lone CJK
    character is a prefix) scan and decrypt every message, so they grow with the store.
    """
    plain = SQLiteBackend(folder / "plain-small.db")
    sealed = encrypted(SQLiteBackend(folder / "encrypted.db"))
    try:
        print(f"encrypted beside plain, {total:,} messages each:")
        seconds = {
            name: build(b, Corpus(), total) for name, b in (("plain", plain), ("enc", sealed))
        }
        print(
            f"build: plain {total / seconds['plain']:,.0f} msg/s, encrypted "
            f"{total / seconds['enc']:,.0f} msg/s; ratio {seconds['plain'] / seconds['enc']:.2f}"
        )
        sizes = {
            name: sum(p.stat().st_size for p in folder.glob(f"{name}.db*"))
            for name in ("plain-small", "encrypted")
        }
        print(
            f"database: plain {sizes['plain-small'] / 2**20:,.1f} MiB, encrypted "
            f"{sizes['encrypted'] / 2**20:,.1f} MiB; ratio "
            f"{sizes['encrypted'] / sizes['plain-small']:.2f}"
        )
        print(f"{'class':<16}{'plain med ms':>14}{'encrypted med ms':>18}{'ratio':>8}")
        for name, queries in chosen.items():
            times: dict[str, list[float]] = {"plain": [], "enc": []}
            for query, _matches in queries[:5]:
                search = SearchQuery(text=query, limit=20)
                for label, backend in (("plain", plain), ("enc", sealed)):
                    backend.search(search)  # warm-up
                    times[label].append(timed(lambda b=backend, s=search: b.search(s)))
            if times["plain"]:
                ours, base = statistics.median(times["enc"]), statistics.median(times["plain"])
                print(f"{name:<16}{base:>14.2f}{ours:>18.2f}{ours / base:>8.1f}")
    finally:
        plain.close()
        sealed.close()


if __name__ == "__main__":
    main()
