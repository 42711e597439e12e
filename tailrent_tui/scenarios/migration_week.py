"""The `migration-week` trace: five working days of a multi-service migration.

Generated deterministically from a seeded `random.Random`, so every run and
every policy sees the same trace. What it holds:

- five days, each resumed in the morning after an overnight gap (an idle of
  well over 12 hours), with a lunch break and a couple of shorter pauses;
- over 2,000 message lines: user requests, tool results of realistic shape
  (file reads, pytest logs, grep results, diffs, kubectl tables; some several
  thousand tokens), assistant replies;
- 14 decisions spread across the week, each carrying facts (numbers with units,
  names, reasons), phrased in different ways: some with the markers a decision
  detector looks for ("DECISION:", "we decided", "let's go with", "agreed:",
  an ADR "Status: accepted"), some in plain words a detector may miss
  ("final answer on ...", "going forward ...", "settled: ...");
- chatter that sounds like decisions but is not ("did we decide ...?",
  "let's look at ...", "we will need to check ..."), to measure false pins;
- after each day, one probe per decision made so far, expecting its facts.

Every chat line carries `"decision": true|false` (the generator's own
bookkeeping) so the bench can score false pins; the policies never read it.

The window is 32,768 tokens: the context people commonly run a 7-14B local
model with (Ollama's `num_ctx` raised from its default) on a single 16-24 GB
GPU. The trace's total content is many times that, so every policy that
respects the window has to fold several times a day.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

SEED = 20261102
WINDOW = 32768
SYSTEM = (
    "You are a coding agent helping migrate the Acme order platform (orders, billing, "
    "auth, inventory, gateway) from a Flask monolith to separate services on Kubernetes. "
    "Use the tools to read files, search the code, and run tests and shell commands. "
    "Be concise; state what you changed and what you verified."
)
DAYS = 5
EXCHANGES_PER_DAY = 165
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

# (day, topic, question, text, role, expected facts). The expected strings are
# verbatim in the text; the probe asks about the topic.
DECISIONS: list[tuple[int, str, str, str, list[str]]] = [
    (
        0,
        "refresh tokens",
        "user",
        "DECISION: refresh tokens live in Redis with a 15 minute TTL and rotate on every use, "
        "because the mobile client can't persist tokens between app restarts.",
        ["Redis", "15 minute", "rotate", "mobile"],
    ),
    (
        0,
        "the orders database",
        "user",
        "We decided to run Postgres 16 for the orders service, because logical replication lets us "
        "cut over with under 30 seconds of write downtime.",
        ["Postgres 16", "30 seconds", "logical replication"],
    ),
    (
        0,
        "connection pooling",
        "assistant",
        "Given the pool exhaustion we just saw, let's go with pgbouncer in transaction mode, pool size 40 "
        "per service, since the payments worker opens a connection per job.",
        ["pgbouncer", "transaction mode", "40"],
    ),
    (
        1,
        "the billing API version",
        "user",
        "Agreed: the billing API keeps the /v2/invoices path until 2027-03-31 because three partners "
        "(Globex, Initech, Umbrella) still call it.",
        ["/v2/invoices", "2027-03-31", "Globex"],
    ),
    (
        1,
        "the inventory event queue",
        "assistant",
        "ADR-007: Message queue for inventory events\nStatus: accepted\nContext: inventory emits "
        "~1,200 events/s at peak.\nDecision: RabbitMQ quorum queues with a 24 h message TTL, because "
        "running Kafka needs an ops rotation we do not have.",
        ["RabbitMQ", "quorum", "24 h", "Kafka"],
    ),
    (
        1,
        "gateway retries",
        "user",
        "decision: gateway retries are capped at 3 attempts with 250 ms base backoff, due to the "
        "double-charge incident INC-4471.",
        ["3 attempts", "250 ms", "INC-4471"],
    ),
    (
        2,
        "the sessions table",
        "user",
        "We will shard the sessions table by tenant_id into 8 partitions because the Northwind tenant "
        "alone writes 2,000 rows per second.",
        ["tenant_id", "8 partitions", "Northwind"],
    ),
    (
        2,
        "log retention",
        "user",
        "OK, final answer on log retention: 14 days hot in Loki, 90 days cold in S3 Glacier; SOC 2 needs the 90.",
        ["14 days", "Loki", "90 days", "SOC 2"],
    ),
    (
        2,
        "worker pod sizing",
        "user",
        "Going forward the worker pods get 512 MB of memory and at most 6 replicas; the node pool "
        "can't fit more until the January upgrade.",
        ["512 MB", "6 replicas"],
    ),
    (
        3,
        "feature flags",
        "user",
        "Settled: feature flags go through Unleash, not LaunchDarkly, since the licence would cost $18,000 a year.",
        ["Unleash", "$18,000"],
    ),
    (
        3,
        "the Python version",
        "assistant",
        "Per your call this morning, we're standardising on Python 3.12 for every service image; "
        "3.9 goes end of life in October and the base image drops it.",
        ["Python 3.12", "October"],
    ),
    (
        3,
        "the cutover window",
        "user",
        "The cutover window is Saturday 02:00-04:00 UTC, chosen because traffic is at 6% of peak then.",
        ["02:00-04:00 UTC", "6% of peak"],
    ),
    (
        4,
        "inventory to orders calls",
        "user",
        "Let's go with gRPC between inventory and orders, deadline 800 ms, because JSON over HTTP was 40% of CPU in the profile.",
        ["gRPC", "800 ms", "40% of CPU"],
    ),
    (
        4,
        "the legacy cron host",
        "user",
        "We decided the old cron host cron-legacy-01 is switched off on Friday once the last job moves to Argo Workflows.",
        ["cron-legacy-01", "Argo Workflows"],
    ),
]

SERVICES = ("orders", "billing", "auth", "inventory", "gateway")
MODULES = ("api", "db", "models", "handlers", "tasks", "client", "config", "schemas", "retry", "metrics")
WORDS = (
    "invoice",
    "token",
    "order",
    "tenant",
    "session",
    "refund",
    "ledger",
    "cart",
    "stock",
    "event",
    "payment",
    "webhook",
    "quota",
    "batch",
    "cursor",
    "report",
    "audit",
    "queue",
    "lease",
    "shard",
)

ACKS = (
    "Noted. I'll keep that in mind for the next changes.",
    "Understood, I'll apply that where it comes up.",
    "Got it. I'll update the affected services accordingly.",
)

# Chatter: requests and replies that are not decisions, some using decision-ish words.
USER_CHATTER = (
    "Can you run the {svc} tests again?",
    "Let's look at the failing test in {svc}.",
    "What does {path} do with {word}s?",
    "Search for every place that builds a {word} in {svc}.",
    "Did we decide anything about {word} retention yet? I don't remember.",
    "We will need to check the {svc} migrations before lunch.",
    "Open {path} and show me the {word} handling.",
    "Let's see what the pods look like in staging.",
    "I think we should probably talk about {word} caching later, not now.",
    "Run the linter on {svc} and fix what is trivial.",
    "Why is {svc} slower than yesterday?",
    "Show me the diff for the {word} change.",
    "Let's go through the {svc} handlers one by one.",
    "Maybe we'll move {word}s to a separate table at some point; park it.",
    "Check whether {path} still imports the old monolith helpers.",
    "The {svc} build is red again, can you see why?",
)
ASSISTANT_CHATTER = (
    "The {svc} suite passes except one flaky test around {word} expiry; I re-ran it and it passed.",
    "{path} wraps the {word} repository and adds a retry around the commit.",
    "I found {n} call sites; most go through the shared client, two build it by hand.",
    "Staging looks healthy: all {svc} pods are Running, no restarts in the last hour.",
    "The failure is an import cycle between {path} and the metrics module; I moved the import into the function.",
    "Lint fixed {n} trivial issues in {svc}; the rest need a decision from you on naming.",
    "The slowdown comes from an N+1 query in the {word} listing; I added a join and it is back to normal.",
    "The diff touches {n} files, mostly renames from the old monolith package.",
    "Yes, {path} still imports two helpers from the monolith; I can inline them.",
    "The build failed on a missing environment variable in the {svc} chart; I added it to values.yaml.",
    "I will wait for your go before touching the {svc} migrations.",
    "We could cache {word}s, but nothing has been agreed; I left it as it is.",
)


def _path(rng: random.Random) -> str:
    return f"services/{rng.choice(SERVICES)}/app/{rng.choice(MODULES)}.py"


def _fill(rng: random.Random, template: str) -> str:
    return template.format(svc=rng.choice(SERVICES), path=_path(rng), word=rng.choice(WORDS), n=rng.randint(2, 40))


def _read_file(rng: random.Random, path: str) -> str:
    lines = [
        "from __future__ import annotations",
        "",
        "import logging",
        f"from app import {rng.choice(MODULES)}",
        "",
        "log = logging.getLogger(__name__)",
        "",
    ]
    for _ in range(rng.randint(2, 24)):
        w = rng.choice(WORDS)
        fn = f"{rng.choice(('get', 'list', 'create', 'update', 'sync', 'expire'))}_{w}"
        lines.append(f"def {fn}(session, {w}_id: int, *, limit: int = {rng.choice((10, 50, 100, 500))}):")
        lines.append(f'    """{fn.replace("_", " ").capitalize()} for the {rng.choice(SERVICES)} service."""')
        for _ in range(rng.randint(1, 4)):
            lines.append(f"    {w} = session.query({w.capitalize()}).filter_by(id={w}_id).first()")
            lines.append(f"    if {w} is None:")
            lines.append(f'        log.warning("{w} %s missing", {w}_id)')
            lines.append("        return None")
        lines.append(f"    return {w}")
        lines.append("")
    body = "\n".join(f"{i + 1:5d}\t{line}" for i, line in enumerate(lines))
    return f"{path} ({len(lines)} lines)\n{body}"


def _pytest_log(rng: random.Random, svc: str) -> str:
    n = rng.randint(8, 160)
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.12.7, pytest-8.3.3, pluggy-1.5.0",
        f"rootdir: /src/services/{svc}",
        f"collected {n} items",
        "",
    ]
    failed = rng.random() < 0.3
    for i in range(n):
        w = rng.choice(WORDS)
        out.append(
            f"tests/test_{w}.py::test_{w}_{rng.choice(('create', 'expire', 'list', 'retry'))}_{i} PASSED"
            f" [{int(100 * (i + 1) / n):3d}%]"
        )
    if failed:
        w = rng.choice(WORDS)
        out += [
            "",
            "=================================== FAILURES ===================================",
            f"___________________________ test_{w}_roundtrip ___________________________",
            "",
            f"    def test_{w}_roundtrip(client):",
            f"        resp = client.post('/{w}s', json={{'amount': {rng.randint(1, 999)}}})",
            ">       assert resp.status_code == 201",
            "E       assert 500 == 201",
            f"tests/test_{w}.py:{rng.randint(10, 300)}: AssertionError",
            "=========================== short test summary info ============================",
            f"FAILED tests/test_{w}.py::test_{w}_roundtrip - assert 500 == 201",
            f"========================= 1 failed, {n} passed in {rng.uniform(1, 90):.2f}s =========================",
        ]
    else:
        out.append(f"============================== {n} passed in {rng.uniform(1, 90):.2f}s ==============================")
    return "\n".join(out)


def _grep(rng: random.Random, word: str) -> str:
    n = rng.randint(3, 120)
    hits = []
    for _ in range(n):
        p = _path(rng)
        hits.append(f"{p}:{rng.randint(1, 900)}:    {word} = build_{word}(session, {rng.choice(WORDS)}_id)")
    return "\n".join(hits) + f"\n[{n} matches]"


def _diff(rng: random.Random, path: str) -> str:
    out = [f"diff --git a/{path} b/{path}", "index 3f2a1c4..9be07d2 100644", f"--- a/{path}", f"+++ b/{path}"]
    for _ in range(rng.randint(1, 12)):
        start = rng.randint(1, 400)
        out.append(f"@@ -{start},7 +{start},8 @@")
        w = rng.choice(WORDS)
        out += [
            f" def sync_{w}(session, {w}_id):",
            f"-    from monolith.helpers import load_{w}",
            f"+    from app.db import load_{w}",
            f"     {w} = load_{w}(session, {w}_id)",
            f"+    log.debug('synced {w} %s', {w}_id)",
            f"     return {w}",
        ]
    return "\n".join(out)


def _kubectl(rng: random.Random, svc: str) -> str:
    out = ["NAME                                READY   STATUS    RESTARTS   AGE"]
    for _ in range(rng.randint(3, 14)):
        suffix = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5))
        pod, restarts, age = rng.randint(10000, 99999), rng.randint(0, 3), rng.randint(1, 72)
        out.append(f"{svc}-{pod}-{suffix:<14} 1/1     Running   {restarts:<10} {age}h")
    return "\n".join(out)


def _tool_call(rng: random.Random) -> tuple[str, str]:
    kind = rng.choices(("read_file", "run_shell", "grep", "diff", "kubectl"), weights=(4, 3, 3, 2, 1))[0]
    if kind == "read_file":
        return "read_file", _read_file(rng, _path(rng))
    if kind == "run_shell":
        return "run_shell", _pytest_log(rng, rng.choice(SERVICES))
    if kind == "grep":
        return "grep", _grep(rng, rng.choice(WORDS))
    if kind == "diff":
        return "run_shell", _diff(rng, _path(rng))
    return "run_shell", _kubectl(rng, rng.choice(SERVICES))


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def migration_week_records(seed: int = SEED) -> list[dict]:
    """The trace as records (header first); deterministic for a given seed."""
    rng = random.Random(seed)
    records: list[dict] = [{"trace": "migration-week", "window": WINDOW, "system": SYSTEM}]
    made: list[tuple[str, list[str]]] = []
    for day in range(DAYS):
        todays = [d for d in DECISIONS if d[0] == day]
        slots = sorted(rng.sample(range(5, EXCHANGES_PER_DAY - 5), len(todays)))
        decision_at = dict(zip(slots, todays, strict=True))
        lunch = EXCHANGES_PER_DAY // 2
        pauses = set(rng.sample(range(10, EXCHANGES_PER_DAY - 10), 2))
        for x in range(EXCHANGES_PER_DAY):
            if x == lunch:
                records.append({"idle": 3600})
            elif x in pauses:
                records.append({"idle": rng.choice((420, 600, 900))})
            user: dict = {"role": "user", "content": _fill(rng, rng.choice(USER_CHATTER)), "decision": False}
            if x == 0:
                user["at"] = _stamp(START + timedelta(days=day))
            records.append(user)
            for _ in range(rng.choices((0, 1, 2), weights=(3, 6, 2))[0]):
                tool, content = _tool_call(rng)
                records.append({"role": "tool", "tool": tool, "content": content})
            records.append({"role": "assistant", "content": _fill(rng, rng.choice(ASSISTANT_CHATTER)), "decision": False})
            if x in decision_at:
                _, topic, role, text, expect = decision_at[x]
                records.append({"role": role, "content": text, "decision": True})
                other = "assistant" if role == "user" else "user"
                reply = rng.choice(ACKS) if other == "assistant" else "Yes, go ahead."
                records.append({"role": other, "content": reply, "decision": False})
                made.append((topic, expect))
        for topic, expect in made:
            records.append({"probe": f"What did we decide about {topic}, and why?", "expect": expect})
        records.append({"idle": 16 * 3600})
    return records


def decision_line_numbers(seed: int = SEED) -> list[int]:
    """1-based line numbers (in the JSONL) of the lines that state a decision."""
    return [i + 1 for i, r in enumerate(migration_week_records(seed)) if r.get("decision")]
