"""A fixed, seeded corpus of chat messages in English, Chinese, Japanese and mixed text.

Word and character frequencies follow Zipf's law (a few very common terms, a long tail of rare
ones), so queries can be chosen by how many messages they match. The same seed always gives the
same messages.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

COMMON_ENGLISH = (
    "the be to of and a in that have i it for not on with he as you do at this but his by from "
    "they we say her she or an will my one all would there their what so up out if about who get "
    "which go me when make can like time no just him know take people into year your good some "
    "could them see other than then now look only come its over think also back after use two how "
    "our work first well way even new want because any these give day most us is are was were "
    "deploy server docker config error log build test release fix bug update user message "
    "session search index database query cache request response token model agent"
).split()
COMMON_HAN = (
    "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对"
    "可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同"
    "三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明部署服务端配置修改飞书机器模型"
)
KANA_WORDS = (
    "です ます した して いる ある こと もの ため よう から まで など について サーバー "
    "デプロイ ログ エラー テスト リリース ユーザー メッセージ データベース キャッシュ モデル "
    "東京 大阪 会議 確認 設定 修正 開発 問題 対応 お願い ありがとう よろしく"
).split()
TECH = "docker redis youer nginx kubernetes postgres sqlite feishu webhook k8s grpc".split()
SOURCES = ("telegram", "feishu", "discord", "slack", "cli")


def _zipf_weights(count: int, exponent: float = 1.07) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank**exponent) for rank in range(1, count + 1)))


@dataclass
class Corpus:
    """Generates messages deterministically from ``seed``."""

    seed: int = 20260501
    english: list[str] = field(init=False)
    han: list[str] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        letters = "etaoinshrdlcumwfgypbvkjxqz"
        letter_weights = list(itertools.accumulate(range(26, 0, -1)))
        words = dict.fromkeys(COMMON_ENGLISH)
        while len(words) < 30_000:
            size = rng.randint(3, 10)
            word = "".join(
                letters[bisect.bisect(letter_weights, rng.random() * letter_weights[-1])]
                for _ in range(size)
            )
            words[word] = None
        self.english = list(words)
        extra = [chr(code) for code in range(0x4E00, 0x9FA5) if chr(code) not in COMMON_HAN]
        rng.shuffle(extra)
        self.han = list(dict.fromkeys(COMMON_HAN)) + extra[:4_000]
        self._english_weights = _zipf_weights(len(self.english))
        self._han_weights = _zipf_weights(len(self.han), 0.95)
        self._kana_weights = _zipf_weights(len(KANA_WORDS), 0.8)

    def _pick(self, rng: random.Random, items: list[str], weights: list[float]) -> str:
        return items[bisect.bisect(weights, rng.random() * weights[-1])]

    def english_text(self, rng: random.Random) -> str:
        """An English-like sentence or two."""
        words = [
            self._pick(rng, self.english, self._english_weights) for _ in range(rng.randint(4, 40))
        ]
        return " ".join(words).capitalize() + rng.choice((".", "?", "!", ""))

    def chinese_text(self, rng: random.Random) -> str:
        """A run of Chinese characters with punctuation."""
        chars = [self._pick(rng, self.han, self._han_weights) for _ in range(rng.randint(5, 60))]
        for position in range(8, len(chars), rng.randint(6, 14)):
            chars[position] = rng.choice("，。？！、")
        return "".join(chars)

    def japanese_text(self, rng: random.Random) -> str:
        """Kana and kanji words, mostly without spaces."""
        words = [self._pick(rng, KANA_WORDS, self._kana_weights) for _ in range(rng.randint(3, 15))]
        if rng.random() < 0.5:
            words.insert(rng.randrange(len(words)), self.chinese_text(rng)[:4])
        return "".join(words) + "。"

    def mixed_text(self, rng: random.Random) -> str:
        """Chinese with technical Latin words written into it, often without spaces."""
        parts = []
        for _ in range(rng.randint(2, 5)):
            parts.append(self.chinese_text(rng)[: rng.randint(3, 15)])
            parts.append(rng.choice(TECH) if rng.random() < 0.7 else self.english_text(rng))
        return rng.choice(("", " ")).join(parts)

    def text(self, rng: random.Random) -> tuple[str, str]:
        """One message text and its language class."""
        draw = rng.random()
        if draw < 0.4:
            return "english", self.english_text(rng)
        if draw < 0.7:
            return "chinese", self.chinese_text(rng)
        if draw < 0.85:
            return "japanese", self.japanese_text(rng)
        return "mixed", self.mixed_text(rng)

    def sessions(self, total: int, per_session: int = 50):  # noqa: ANN201  # a plain generator
        """Yield ``(session_number, source, [(role, text, timestamp), ...])`` up to ``total``."""
        rng = random.Random(self.seed + 1)
        start = datetime(2025, 1, 1, tzinfo=UTC)
        made = 0
        number = 0
        while made < total:
            count = min(per_session, total - made)
            source = "tool" if rng.random() < 0.05 else rng.choice(SOURCES)
            rows = []
            for index in range(count):
                role = "user" if index % 2 == 0 else "assistant"
                if rng.random() < 0.05:
                    role = "tool"
                moment = start + timedelta(seconds=30 * (made + index))
                rows.append((role, self.text(rng)[1], moment))
            yield number, source, rows
            made += count
            number += 1
