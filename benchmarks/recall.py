"""Recall of session search on questions people and agents ask, against two plain baselines.

Builds a SQLite store from ``_data/recall_corpus.py``: conversations that answer known questions,
hand-written near misses sharing their words, and generated distractors (about 600 sessions;
150 with --quick). Then asks every question five ways, in the same run:

* **tool**: ``session_search`` as a model calls it (the natural mode, its default; limit 5);
* **natural**: ``store.search(q, mode="natural", limit=5)``;
* **exact**: ``store.search(q)`` in the exact language (today's behaviour), sessions in hit order;
* **FTS5 AND**: a plain SQLite FTS5 table (``unicode61``) of the messages, every word of the
  question required, ranked by ``bm25()``, sessions in hit order;
* **BM25**: whole sessions as documents, Snowball-stemmed English words and CJK character
  bigrams, Okapi BM25 over every token of the question; it always answers.

Printed per kind of question and overall: recall@5 (the answering session among the first five),
MRR (the reciprocal rank of the answering session, 0 when absent) and, for the questions that no
session answers, how many got no session offered (a method that returns something offers it).
Also the median and p95 time per question of the natural and the exact mode.

    python benchmarks/recall.py --quick   # 150 sessions (CI)
    python benchmarks/recall.py           # about 600 sessions
"""

from __future__ import annotations

import argparse
import collections
import math
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data.recall_corpus import NEAR_MISSES, QUESTIONS, TOPICS, distractors

from hermes_sessions import FrozenClock, Message, SessionSource, SessionStore, text
from hermes_sessions.tools import SearchToolContext, handle_session_search

if TYPE_CHECKING:
    from collections.abc import Callable

TOP = 5
USER = "u1"


def build(home: Path, conversations: dict[str, list[str]]) -> tuple[SessionStore, dict[str, str]]:
    """A SQLite store holding ``conversations``; return it and session id → conversation name."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    store = SessionStore.open(home, backend="sqlite", clock=FrozenClock(start))
    names = {}
    for number, (name, lines) in enumerate(conversations.items()):
        source = SessionSource(platform="cli", chat_id=f"chat-{number}", user_id=USER)
        session_id = store.get_or_create(source).session_id
        at = start + timedelta(minutes=number)
        store.append(
            session_id,
            *(
                Message(
                    role="user" if index % 2 == 0 else "assistant",
                    content=line,
                    timestamp=at + timedelta(seconds=index),
                )
                for index, line in enumerate(lines)
            ),
        )
        names[session_id] = name
    return store, names


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3]+")
_WORD = re.compile(r"[^\W_]+")


def plain_tokens(value: str) -> list[str]:
    """Stemmed lower-case words and CJK character bigrams (the BM25 baseline's analysis)."""
    tokens = []
    for run in _CJK.findall(value):
        tokens.extend(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    tokens.extend(text.stem(word) for word in _WORD.findall(_CJK.sub(" ", value.casefold())))
    return tokens


class PlainBM25:
    """Okapi BM25 over whole sessions (k1 1.2, b 0.75)."""

    def __init__(self, conversations: dict[str, list[str]]) -> None:
        self.docs = {
            name: collections.Counter(plain_tokens(" ".join(m)))
            for name, m in conversations.items()
        }
        self.lengths = {name: sum(c.values()) for name, c in self.docs.items()}
        self.average = sum(self.lengths.values()) / len(self.lengths)
        self.df: collections.Counter[str] = collections.Counter()
        for counts in self.docs.values():
            self.df.update(counts.keys())

    def rank(self, question: str) -> list[str]:
        """The five best sessions, any token of the question counting."""
        n = len(self.docs)
        terms = set(plain_tokens(question))
        scores = {}
        for name, counts in self.docs.items():
            norm = 1.2 * (1 - 0.75 + 0.75 * self.lengths[name] / self.average)
            score = 0.0
            for term in terms:
                tf = counts.get(term, 0)
                if tf:
                    idf = math.log1p((n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                    score += idf * tf * 2.2 / (tf + norm)
            if score > 0:
                scores[name] = score
        return sorted(scores, key=lambda name: -scores[name])[:TOP]


class PlainFTS:
    """A plain FTS5 table of the messages; every word of the question required."""

    def __init__(self, conversations: dict[str, list[str]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE m USING fts5(session UNINDEXED, body)")
        self.db.executemany(
            "INSERT INTO m VALUES (?, ?)",
            [(name, line) for name, lines in conversations.items() for line in lines],
        )

    def rank(self, question: str) -> list[str]:
        """The sessions of the best messages holding every word of the question."""
        words = _WORD.findall(question)
        if not words:
            return []
        match = " AND ".join('"' + w.replace('"', "") + '"' for w in words)
        rows = self.db.execute(
            "SELECT session FROM m WHERE m MATCH ? ORDER BY bm25(m) LIMIT 200", (match,)
        ).fetchall()
        return list(dict.fromkeys(row[0] for row in rows))[:TOP]


Found = tuple[list[str], bool]
"""Sessions best first, and whether the first is offered as a confident match."""


def evaluate(method: Callable[[str], Found]) -> tuple[dict[str, list[float]], list[float], int]:
    """Reciprocal ranks per kind, seconds per question, no-answer questions left unanswered."""
    ranks: dict[str, list[float]] = collections.defaultdict(list)
    seconds = []
    silent = 0
    for kind, question, answer in QUESTIONS:
        started = time.perf_counter()
        found, confident = method(question)
        found = found[:TOP]
        seconds.append(time.perf_counter() - started)
        if answer is None:
            silent += not (found and confident)
            continue
        ranks[kind].append(1.0 / (found.index(answer) + 1) if answer in found else 0.0)
    return ranks, seconds, silent


def answered(found: list[str]) -> Found:
    """A baseline's answer: whatever it returns, it offers."""
    return found, bool(found)


def main() -> None:
    """Build the store and the baselines, ask every question, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="150 sessions (CI)")
    arguments = parser.parse_args()
    total = 150 if arguments.quick else 600
    conversations = {**TOPICS, **NEAR_MISSES}
    conversations.update(distractors(total - len(conversations)))
    with tempfile.TemporaryDirectory() as home:
        store, names = build(Path(home), conversations)
        context = SearchToolContext(
            store=store, requester=SessionSource(platform="cli", chat_id="asker", user_id=USER)
        )

        def tool(question: str) -> Found:
            results = handle_session_search(context, {"query": question, "limit": TOP})["results"]
            return [names[r["session_id"]] for r in results], bool(
                results and results[0]["confident"]
            )

        def natural(question: str) -> Found:
            matches = store.search(question, mode="natural", limit=TOP)
            return [names[m.session.id] for m in matches], bool(matches and matches[0].confident)

        def exact(question: str) -> Found:
            hits = store.search(question, limit=200)
            return answered(list(dict.fromkeys(names[h.session.id] for h in hits)))

        fts, bm25 = PlainFTS(conversations), PlainBM25(conversations)
        methods: dict[str, Callable[[str], Found]] = {
            "tool": tool,
            "natural": natural,
            "exact": exact,
            "FTS5 AND": lambda question: answered(fts.rank(question)),
            "BM25": lambda question: answered(bm25.rank(question)),
        }
        results = {name: evaluate(method) for name, method in methods.items()}
        store.close()
    kinds = list(dict.fromkeys(kind for kind, _q, answer in QUESTIONS if answer is not None))
    no_answer = sum(1 for _k, _q, answer in QUESTIONS if answer is None)
    print(f"{len(conversations)} sessions, {len(QUESTIONS)} questions ({no_answer} without answer)")
    print(f"{'recall@5':<12}" + "".join(f"{name:>10}" for name in methods))
    for kind in [*kinds, "all"]:
        cells = []
        for ranks, _s, _n in results.values():
            values = [r for k in kinds for r in ranks[k]] if kind == "all" else ranks[kind]
            cells.append(f"{sum(v > 0 for v in values) / len(values):>10.0%}")
        print(f"{kind:<12}" + "".join(cells))
    print(
        f"{'MRR (all)':<12}"
        + "".join(
            f"{statistics.fmean([r for k in kinds for r in ranks[k]]):>10.3f}"
            for ranks, _s, _n in results.values()
        )
    )
    print(
        f"{'no answer':<12}"
        + "".join(f"{f'{silent}/{no_answer}':>10}" for _r, _s, silent in results.values())
    )
    print("  (no answer: questions without an answer for which no session was offered as a")
    print("   confident match; the natural mode may list weak candidates, marked so)")
    for name in ("natural", "exact"):
        seconds = sorted(results[name][1])
        p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))]
        median = statistics.median(seconds)
        print(f"{name:<8} median {median * 1000:6.2f} ms, p95 {p95 * 1000:6.2f} ms")


if __name__ == "__main__":
    main()
