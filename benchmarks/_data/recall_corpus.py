"""A recall corpus: conversations with known answers, distractors that share their words, questions.

Written for ``benchmarks/recall.py``. Each *topic* is one conversation (user and assistant turns)
that a question should find. *Near misses* are hand-written conversations that share a topic's
vocabulary but not its subject. ``distractors(n, seed)`` generates more conversations from
templates filled with the same vocabulary. Questions come in kinds: exact keywords, other word
forms, natural questions, words spread over messages, paraphrases, CJK questions with filler
words, and questions that no conversation answers (their words occur in the corpus, in other
combinations, or not at all).
"""

from __future__ import annotations

import random
from typing import Final

TOPICS: Final[dict[str, list[str]]] = {
    "docker-oom": [
        "The api container keeps restarting on staging, exit code 137.",
        (
            "Exit code 137 is a SIGKILL, usually the kernel OOM killer. Check `docker inspect` for "
            "OOMKilled: true."
        ),
        "Yes, OOMKilled is true. The image runs the Java service with the default heap.",
        "Set -Xmx below the memory limit and raise mem_limit in docker-compose.yml to 2g.",
    ],
    "registry-deploy": [
        "Deploying the web service failed: pull access denied for registry.internal/web.",
        "The registry password was rotated last night; the deploy job still uses the old one.",
        "I updated the CI secret REGISTRY_PASSWORD and re-ran the pipeline, the rollout finished.",
    ],
    "postgres-vacuum": [
        "Our postgres database grew to 400 GB even though we delete old events every day.",
        (
            "Deleted rows leave dead tuples until autovacuum reclaims them; check n_dead_tup in "
            "pg_stat_user_tables."
        ),
        "n_dead_tup is huge on the events table and autovacuum never finishes there.",
        (
            "Lower autovacuum_vacuum_scale_factor for that table to 0.01 and partition it by month "
            "so you can drop old partitions instead of deleting rows."
        ),
    ],
    "nginx-502": [
        "Users see 502 Bad Gateway from nginx after the upgrade.",
        "The upstream socket path changed: gunicorn now listens on /run/app/gunicorn.sock.",
        "Pointed proxy_pass at the new socket and reloaded nginx, the errors stopped.",
    ],
    "tls-renewal": [
        "The certificate for shop.example.com expires in three days and certbot renew fails.",
        (
            "certbot says the HTTP-01 challenge returns 404; the redirect to the new frontend "
            "swallows /.well-known/acme-challenge."
        ),
        "Added a location block for the acme challenge before the redirect; renewal works now.",
    ],
    "flaky-tests": [
        "test_checkout fails maybe once in ten CI runs, never locally.",
        "It depends on the order of a set; pytest-randomly changes the seed on CI.",
        (
            "Sorted the items before comparing and pinned the seed while debugging. The test is "
            "stable now."
        ),
    ],
    "python-upgrade": [
        "We want to move the monorepo from Python 3.9 to 3.12. What breaks?",
        (
            "distutils is gone in 3.12, and some of your pinned wheels have no builds for it. "
            "Start with the lockfile."
        ),
        "numpy 1.21 was the blocker; bumping it to 1.26 fixed the build. The upgrade is done.",
    ],
    "react-rerender": [
        "The dashboard table re-renders on every keystroke in the search box and lags.",
        (
            "The rows array is rebuilt on each render; wrap it in useMemo and memoize the row "
            "component with React.memo."
        ),
        "With useMemo the typing is smooth again.",
    ],
    "s3-costs": [
        "Our AWS bill jumped, mostly S3 storage in the logs bucket.",
        (
            "Nothing expires there. Add a lifecycle rule: move objects to Glacier after 30 days "
            "and delete them after a year."
        ),
        "Lifecycle rule added; the bucket size should fall over the next weeks.",
    ],
    "k8s-crashloop": [
        "The worker pod is in CrashLoopBackOff after we added the new config map.",
        "kubectl logs --previous shows the YAML parse error: a tab in the config map.",
        "Replaced the tab with spaces, the pod is running.",
    ],
    "redis-eviction": [
        "Sessions disappear randomly; users get logged out.",
        (
            "Redis is at maxmemory and the policy is allkeys-lru, so session keys get evicted "
            "with cache keys."
        ),
        "Moved sessions to their own Redis instance with noeviction.",
    ],
    "git-rebase": [
        "I messed up an interactive rebase and lost two commits.",
        "They are still in the reflog: git reflog, then git cherry-pick the two hashes.",
        "Found them in the reflog and cherry-picked them back. Thanks!",
    ],
    "cron-timezone": [
        "The nightly report job runs at 8 in the morning instead of midnight.",
        (
            "The server clock is UTC and the crontab assumes local time. Set CRON_TZ or convert "
            "the "
            "schedule."
        ),
        "Set CRON_TZ=Asia/Shanghai in the crontab; the report arrived at midnight.",
    ],
    "webhook-signature": [
        "Stripe webhooks fail signature verification in production only.",
        (
            "The framework parses the JSON body before your handler, so the raw payload differs. "
            "Verify against the raw bytes."
        ),
        "Using the raw request body fixed the signature check.",
    ],
    "disk-full": [
        "The build server ran out of disk space again.",
        (
            "Old docker images and build caches take 300 GB. docker system prune -a clears them; "
            "schedule it weekly."
        ),
        "Added a weekly prune job; 280 GB free now.",
    ],
    "email-spam": [
        "Our password reset emails land in spam at Gmail.",
        "The domain has no DKIM record and SPF does not include the mail provider.",
        "Added DKIM and fixed SPF; the reset mails reach the inbox now.",
    ],
    "slow-query": [
        "The orders page takes eight seconds to load.",
        "EXPLAIN shows a sequential scan on orders filtered by customer_id; there is no index.",
        "Created an index on orders(customer_id, created_at); the page loads in 200 ms.",
    ],
    "vpn-dns": [
        "When I connect to the office VPN I cannot resolve internal hostnames.",
        (
            "The VPN pushes its DNS server but systemd-resolved keeps using the Wi-Fi resolver for "
            "that domain."
        ),
        (
            "Set the routing domain ~corp.internal on the VPN interface with resolvectl; names "
            "resolve now."
        ),
    ],
    "memory-leak-node": [
        "The Node.js gateway uses more memory every hour until it is restarted.",
        "Take two heap snapshots an hour apart and compare the retained objects.",
        (
            "The snapshots show event listeners piling up on the socket; we never removed them on "
            "disconnect."
        ),
        "Removing the listeners on close fixed the leak.",
    ],
    "backup-restore": [
        "Can we actually restore last month's backup? Nobody has tried.",
        "Let's do a restore drill into a scratch database and time it.",
        (
            "The drill took 2 hours; the pg_dump archive was fine but the roles were missing, so "
            "we now dump globals too."
        ),
    ],
    "feishu-bot-cert": [
        "飞书机器人突然收不到消息了，回调一直报错。",
        "看了日志，是回调地址的证书过期了，飞书校验失败。",
        "续签证书并重启网关以后，机器人恢复正常。",
    ],
    "zh-mysql-lock": [
        "订单表更新的时候经常出现死锁，用户下单失败。",
        "两个事务按不同顺序更新库存和订单，导致互相等待。",
        "统一先更新库存再更新订单的顺序以后，死锁没有再出现。",
    ],
    "zh-log-rotation": [
        "服务器磁盘被日志占满了，应用写不进去。",
        "logrotate 没有配置压缩，旧日志一直保留。",
        "加上按天切割和压缩，只保留七天，磁盘空间恢复了。",
    ],
    "zh-mini-program": [
        "小程序上线审核被拒绝了，理由是缺少隐私协议。",
        "需要在小程序后台填写用户隐私保护指引，并在登录页弹出授权。",
        "补充隐私指引后重新提交，审核通过了。",
    ],
    "zh-cache-avalanche": [
        "大促开始那一刻数据库被打满，接口全部超时。",
        "大量缓存在同一时间过期，请求全部落到数据库，这是缓存雪崩。",
        "给过期时间加随机值，并提前预热热点数据，问题解决。",
    ],
    "ja-deploy-rollback": [
        "本番のデプロイ後に決済画面でエラーが出ています。",
        "新しいバージョンの環境変数が足りていません。まずロールバックしましょう。",
        "ロールバックして、環境変数を追加してから再デプロイしました。",
    ],
    "ja-character-encoding": [
        "CSVをエクセルで開くと文字化けします。",
        "UTF-8のBOMがないとエクセルはShift_JISとして読みます。",
        "BOM付きで出力するようにしたら文字化けが直りました。",
    ],
    "ja-batch-timeout": [
        "夜間バッチが途中でタイムアウトして止まります。",
        "集計クエリにインデックスが効いていないので、処理時間が長すぎます。",
        "インデックスを追加して、バッチは二十分で終わるようになりました。",
    ],
    "ko-docker-memory": [
        "도커 컨테이너가 메모리 부족으로 계속 재시작됩니다.",
        "컨테이너의 메모리 제한이 너무 낮습니다. 힙 크기도 확인하세요.",
        "메모리 제한을 2기가로 늘리고 힙 크기를 줄였더니 안정적입니다.",
    ],
    "ko-login-error": [
        "앱에서 로그인하면 토큰 만료 오류가 바로 나옵니다.",
        "서버 시간이 오 분 정도 틀어져 있어서 토큰이 만료된 것으로 판단됩니다.",
        "서버 시간 동기화를 설정하니 로그인 오류가 사라졌습니다.",
    ],
    "ko-payment-webhook": [
        "결제 완료 알림이 중복으로 처리됩니다.",
        "웹훅이 재전송될 때 같은 주문을 두 번 처리하고 있습니다. 멱등성 키가 필요합니다.",
        "주문 번호로 중복 처리를 막았더니 문제가 해결되었습니다.",
    ],
}
"""Conversations a question should find: name → messages (user first, then alternating)."""

NEAR_MISSES: Final[dict[str, list[str]]] = {
    "docker-network": [
        "Two docker containers on the same compose network cannot reach each other.",
        "Use the service name as the hostname, not localhost.",
    ],
    "docs-deploy": [
        "The docs site deployment to GitHub Pages shows an old version.",
        "The pages branch was not rebuilt; trigger the workflow again.",
    ],
    "postgres-upgrade": [
        "We plan to upgrade postgres from 13 to 16 with pg_upgrade.",
        "Test it on a copy first and check the extensions.",
    ],
    "nginx-gzip": [
        "Enable gzip in nginx for the JSON responses?",
        "Add gzip_types application/json and reload nginx.",
    ],
    "test-coverage": [
        "How do I get coverage for the CI tests?",
        "Run pytest with --cov and upload the report as an artifact.",
    ],
    "java-heap-tuning": [
        "Which garbage collector should the Java service use with a large heap?",
        "G1 is the default and fine; set -Xmx to about three quarters of the memory.",
    ],
    "redis-cluster": [
        "Should we move Redis to cluster mode?",
        "Only if one instance cannot hold the data; cluster mode limits multi-key commands.",
    ],
    "k8s-ingress": [
        "The kubernetes ingress returns 404 for the api path.",
        "The path type must be Prefix, not Exact.",
    ],
    "zh-docker-build": [
        "docker 镜像构建太慢了，每次都重新下载依赖。",
        "把依赖安装放在复制代码之前，利用构建缓存。",
    ],
    "zh-deploy-script": [
        "部署脚本需要支持回滚吗？",
        "建议保留上一个版本的目录，回滚时切换软链接。",
    ],
    "ja-test-env": [
        "テスト環境のデータベースを毎晩リセットしたいです。",
        "夜間ジョブでダンプから復元すれば簡単です。",
    ],
    "ko-server-setup": [
        "새 서버에 도커를 설치하는 방법을 알려주세요.",
        "공식 저장소를 추가하고 패키지로 설치하면 됩니다.",
    ],
}
"""Conversations that share a topic's words but answer none of the questions."""

_WORDS: Final = (
    "docker container deployment registry postgres database nginx certificate test CI python "
    "react memory S3 bucket pod config redis session git commit cron job webhook disk email "
    "index query VPN DNS backup restore timeout upgrade cache log server error service build "
    "pipeline secret password network latency heap"
).split()
_TEMPLATES: Final = (
    "Can you check the {a} settings for the {b} tomorrow?",
    "I renamed the {a} folder, the {b} still points at the old path.",
    "Meeting notes: we agreed to document the {a} and the {b} before the release.",
    "What is the naming convention for {a} labels in the {b} dashboard?",
    "Please review my pull request about the {a} README and the {b} diagram.",
    "The {a} graph on the {b} page looks fine today.",
    "Write a short summary of how our {a} and {b} fit together for the new hire.",
    "Which team owns the {a}? The {b} owners said it is not theirs.",
)
_ZH_WORDS: Final = (
    "部署 数据库 证书 机器人 日志 磁盘 缓存 订单 服务器 接口 小程序 审核 脚本 版本 配置 监控 "
    "报警 权限 文档 网关"
).split()
_ZH_TEMPLATES: Final = (
    "请帮我整理一下{a}相关的文档，{b}的部分也加上。",
    "明天的周会要讨论{a}和{b}的负责人。",
    "{a}的命名规范是什么？{b}也一样吗？",
    "新同事想了解{a}，顺便介绍一下{b}。",
)
_JA_WORDS: Final = (
    "デプロイ 環境変数 エクセル バッチ インデックス データベース サーバー ログ 設定 テスト".split()
)
_JA_TEMPLATES: Final = (
    "{a}の資料を来週までにまとめてください。{b}も含めて。",
    "{a}と{b}の担当者は誰ですか。",
)
_KO_WORDS: Final = "도커 컨테이너 메모리 로그인 서버 결제 주문 웹훅 토큰 설정 문서".split()
_KO_TEMPLATES: Final = (
    "{a} 문서를 정리해 주세요. {b} 부분도 포함해서요.",
    "다음 회의에서 {a}와 {b} 담당자를 정합시다.",
)


def distractors(count: int, seed: int = 7) -> dict[str, list[str]]:
    """``count`` generated conversations built from the topics' vocabulary (no topic's answer)."""
    rng = random.Random(seed)
    sets = (
        (_WORDS, _TEMPLATES, 6),
        (_ZH_WORDS, _ZH_TEMPLATES, 2),
        (_JA_WORDS, _JA_TEMPLATES, 1),
        (_KO_WORDS, _KO_TEMPLATES, 1),
    )
    weighted = [s for s in sets for _ in range(s[2])]
    result = {}
    for number in range(count):
        words, templates, _ = rng.choice(weighted)
        messages = []
        for _ in range(rng.randint(2, 5)):
            a, b = rng.sample(words, 2)
            messages.append(rng.choice(templates).format(a=a, b=b))
        result[f"distractor-{number:04d}"] = messages
    return result


QUESTIONS: Final[list[tuple[str, str, str | None]]] = [
    # (kind, question, the topic that answers it or None)
    ("exact", "OOMKilled", "docker-oom"),
    ("exact", "pull access denied", "registry-deploy"),
    ("exact", "n_dead_tup", "postgres-vacuum"),
    ("exact", "502 Bad Gateway", "nginx-502"),
    ("exact", "acme-challenge", "tls-renewal"),
    ("exact", "pytest-randomly", "flaky-tests"),
    ("exact", "useMemo", "react-rerender"),
    ("exact", "CrashLoopBackOff", "k8s-crashloop"),
    ("exact", "allkeys-lru", "redis-eviction"),
    ("exact", "CRON_TZ", "cron-timezone"),
    ("exact", "飞书机器人", "feishu-bot-cert"),
    ("exact", "文字化け", "ja-character-encoding"),
    ("forms", "container killed by oom", "docker-oom"),
    ("forms", "rotating registry passwords", "registry-deploy"),
    ("forms", "autovacuum partitions", "postgres-vacuum"),
    ("forms", "renewing certificates", "tls-renewal"),
    ("forms", "randomized seeds", "flaky-tests"),
    ("forms", "rerendering tables", "react-rerender"),
    ("forms", "evicted sessions", "redis-eviction"),
    ("forms", "cherry-picking lost commits", "git-rebase"),
    ("forms", "verifying webhook signatures", "webhook-signature"),
    ("forms", "indexes on orders", "slow-query"),
    ("natural", "why did the api container keep restarting on staging?", "docker-oom"),
    ("natural", "how did we fix the failed deploy of the web service", "registry-deploy"),
    ("natural", "what was the reason the postgres database kept growing", "postgres-vacuum"),
    ("natural", "how did we get rid of the nginx errors after the upgrade", "nginx-502"),
    ("natural", "why did certbot renewal fail", "tls-renewal"),
    ("natural", "which test failed only on CI and why", "flaky-tests"),
    ("natural", "what blocked the python upgrade", "python-upgrade"),
    ("natural", "how did we cut the S3 storage bill", "s3-costs"),
    ("natural", "why were users getting logged out randomly", "redis-eviction"),
    ("natural", "how can I get back commits I lost during a rebase", "git-rebase"),
    ("natural", "why did the nightly report run at the wrong time", "cron-timezone"),
    ("natural", "what did we do when the build server disk was full", "disk-full"),
    ("natural", "how did we find the memory leak in the node gateway", "memory-leak-node"),
    ("natural", "did the backup restore drill work", "backup-restore"),
    ("spread", "docker compose mem_limit java", "docker-oom"),
    ("spread", "registry password pipeline", "registry-deploy"),
    ("spread", "events table partition", "postgres-vacuum"),
    ("spread", "gunicorn socket nginx", "nginx-502"),
    ("spread", "certbot location redirect", "tls-renewal"),
    ("spread", "numpy distutils lockfile", "python-upgrade"),
    ("spread", "logs bucket glacier", "s3-costs"),
    ("spread", "kubectl tab config map", "k8s-crashloop"),
    ("spread", "heap snapshots listeners", "memory-leak-node"),
    ("spread", "pg_dump roles drill", "backup-restore"),
    ("paraphrase", "our cloud storage invoice went up", "s3-costs"),
    ("paraphrase", "people kept getting signed out of the site", "redis-eviction"),
    ("paraphrase", "the payment provider callbacks were rejected", "webhook-signature"),
    ("paraphrase", "password reset messages ended up in junk", "email-spam"),
    ("paraphrase", "orders page was very slow", "slow-query"),
    ("paraphrase", "internal host names did not resolve on the vpn", "vpn-dns"),
    ("paraphrase", "the gateway process kept eating ram", "memory-leak-node"),
    ("paraphrase", "build machine had no free space left", "disk-full"),
    ("paraphrase", "the web image could not be pulled during rollout", "registry-deploy"),
    ("paraphrase", "a test that fails now and then on the build server", "flaky-tests"),
    ("cjk", "上周飞书机器人为什么收不到消息了？", "feishu-bot-cert"),
    ("cjk", "之前订单死锁的问题是怎么解决的", "zh-mysql-lock"),
    ("cjk", "磁盘被日志占满了怎么办", "zh-log-rotation"),
    ("cjk", "小程序审核被拒绝是什么原因", "zh-mini-program"),
    ("cjk", "大促的时候数据库为什么被打满了？", "zh-cache-avalanche"),
    ("cjk", "缓存雪崩我们是怎么处理的吗", "zh-cache-avalanche"),
    ("cjk", "決済画面のエラーについて", "ja-deploy-rollback"),
    ("cjk", "エクセルの文字化けはどうやって直しましたか", "ja-character-encoding"),
    ("cjk", "夜間バッチのタイムアウトについて教えて", "ja-batch-timeout"),
    ("cjk", "도커 메모리 부족은 어떻게 해결했나요?", "ko-docker-memory"),
    ("cjk", "로그인 토큰 만료 오류에 대해 알려주세요", "ko-login-error"),
    ("cjk", "결제 알림 중복 처리는 어떻게 막았나요", "ko-payment-webhook"),
    ("none", "上周 docker 部署失败的那次", None),
    ("none", "how did we configure kafka consumer lag alerts", None),
    ("none", "what was the terraform state lock problem", None),
    ("none", "why did the elasticsearch cluster turn red", None),
    ("none", "how did we migrate from mongodb", None),
    ("none", "docker registry certificate expired", None),
    ("none", "redis backup restore drill", None),
    ("none", "nginx memory leak in the node gateway heap", None),
    ("none", "postgres webhook signature", None),
    ("none", "how did we fix the graphql n+1 problem", None),
    ("none", "小程序证书过期怎么办", None),
    ("none", "订单表分区的方案是什么", None),
    ("none", "エクセルのマクロが動かない件", None),
    ("none", "도커 결제 토큰 오류", None),
    ("none", "what did we decide about the ios push notification certificates", None),
    ("none", "why is the android build failing on gradle", None),
]
"""(kind, question, answering topic or None). Kind ``none`` (and any ``None``) has no answer."""
