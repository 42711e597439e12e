"""Write the canary traces of the ledger bench (issue 22): stdlib only, seeded, deterministic.

    python tests/ledger_corpus/make_canary.py            # writes beside this file
    python tests/ledger_corpus/make_canary.py OUT_DIR

canary-typed.jsonl
    22 typed statements (SECURITY RULE, LIMIT, FACT, GOAL, PREFERENCE, DECISION,
    CONSTRAINT, RULE, ADR), each with an unguessable value, planted in the first
    30 messages among ordinary work; two are corrected mid-session (in rounds 2
    and 3). Then five rounds of ordinary work (asks, replies of 80-400 tokens,
    tool outputs of 20-200 lines), each round far larger than a 2,048-token
    window; after each round one probe per statement. Header window 2,048.
canary-natural.jsonl
    A five-day session (nights are ``{"idle": 50000}``), 600 user turns. The user
    states 25 rules, limits, preferences, goal states and identifiers in their own
    words on every day, and later corrects four of them; chatter and tool output
    between. Probes after each day. Header window 8,192.
repetitive.jsonl
    The stuck-ladder reproduction of issue 22, its snippet as is, plus probes.

Probes carry one field beyond DESIGN.md: ``"stale"``, the words of a superseded
value that must not be visible as current any more. A probe's ``expect`` words
occur in the trace only in the statement it probes (or its correction); the
generator checks that, and that no ordinary-work line contains a rule word.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 22

# -- values: random, unguessable, and never produced by the filler ------------------------------

TREES = [
    "alder",
    "birch",
    "cedar",
    "larch",
    "rowan",
    "hazel",
    "aspen",
    "elder",
    "holly",
    "maple",
    "yew",
    "juniper",
    "linden",
    "poplar",
    "sorrel",
    "tamarack",
    "wicken",
    "quince",
]
SURNAMES = [
    "Oliveira",
    "Nakashima",
    "Okonkwo",
    "Lindqvist",
    "Barzani",
    "Moreau",
    "Kowalczyk",
    "Haddad",
    "Ferreira",
    "Takeda",
    "Abernethy",
    "Szabo",
    "Iversen",
    "Castellanos",
]
FIRST = [
    "Ana",
    "Ilse",
    "Tomasz",
    "Priya",
    "Kemal",
    "Mei",
    "Dara",
    "Oskar",
    "Beatriz",
    "Jun",
    "Noor",
    "Rafael",
    "Sunniva",
    "Yusuf",
]
LETTERS = "abcdefghjkmnpqrstuvwxyz"


class Values:
    """Random tokens that cannot be guessed, each used once."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _fresh(self, make) -> str:
        while True:
            v = make()
            if v not in self.used:
                self.used.add(v)
                return v

    def tree(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(TREES)}-{r.randint(2, 9)}{r.choice(LETTERS)}{r.randint(10, 99)}")

    def secret(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"sk-{r.randint(1, 9)}{r.choice(LETTERS)}{r.randint(1, 9)}-{r.choice(TREES)}")

    def num(self, lo: int, hi: int) -> int:
        return int(self._fresh(lambda: str(self.rng.randint(lo, hi))))

    def person(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(FIRST)} {self.rng.choice(SURNAMES)}")

    def hexid(self, n: int = 4) -> str:
        return self._fresh(lambda: "".join(self.rng.choice("0123456789abcdef") for _ in range(n)))

    def upper(self, n: int = 3) -> str:
        return self._fresh(lambda: "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(n)))


# -- ordinary work: asks, replies, tool outputs; no statements in it -------------------------

MODULES = [
    "uploader",
    "scheduler",
    "parser",
    "ledger_io",
    "auth",
    "retry",
    "metrics",
    "storage",
    "cli",
    "config",
    "batching",
    "webhooks",
    "export",
    "normalize",
    "dedupe",
    "checksum",
]
FUNCS = [
    "load",
    "flush",
    "split_batch",
    "to_record",
    "from_row",
    "apply",
    "emit",
    "open_stream",
    "close",
    "validate",
    "merge",
    "resolve",
    "encode",
    "decode",
    "chunked",
    "with_backoff",
    "read_manifest",
    "write_manifest",
    "hash_file",
    "parse_header",
    "iter_rows",
    "commit",
]
VARS = [
    "rows",
    "batch",
    "buf",
    "payload",
    "cursor",
    "offset",
    "record",
    "items",
    "chunk",
    "state",
    "path",
    "handle",
    "result",
    "entries",
    "window",
    "headers",
    "manifest",
    "digest",
]

# an ask, and the tool output that answers it
ASKS = [
    ("can you read src/{pkg}/{mod}.py", "read"),
    ("run the {mod} tests", "pytest"),
    ("grep for {func} in src", "grep"),
    ("what does {func} in {mod}.py do", "read"),
    ("show me the diff for {mod}", "diff"),
    ("why is test_{func} failing", "pytest"),
    ("rerun the whole suite", "pytest"),
    ("ok, can you refactor {func} so it takes {var} explicitly", "diff"),
    ("check git log for {mod}.py", "gitlog"),
    ("add a test for {func} with an empty {var}", "pytest"),
    ("where is {func} called from", "grep"),
    ("can you explain the {var} handling in {mod}", "read"),
    ("rename {var} to {var2} in {mod}.py", "diff"),
    ("does {func} copy {var} or mutate it", "read"),
    ("what changed recently in {mod}", "gitlog"),
    ("read tests/test_{mod}.py", "read"),
]

REPLY_OPEN = [
    "I read `{mod}.py`.",
    "Here is what I found in `src/{pkg}/{mod}.py`.",
    "The failure comes from `{func}`.",
    "I ran it; the output is above.",
    "Short version: `{func}` walks `{var}` once and yields per item.",
    "I traced the call path from the CLI down to `{func}`.",
    "Looking at the diff, two things changed.",
]
REPLY_BODY = [
    "`{func}` takes `{var}` and returns a new list; the caller in `{mod2}.py` reuses the old one afterwards.",
    "The loop in `{func}` builds `{var}` incrementally, so a generator would save one copy.",
    "There are {n} call sites of `{func}`; all of them pass `{var}` positionally.",
    "The test builds a fixture with {n} rows and checks the count after `{func2}`.",
    "`{mod}` imports `{mod2}` only for the type of `{var}`; that import could move under TYPE_CHECKING.",
    "The assertion compares `{var}` before and after `{func}`, and the order differs because of the dict iteration in `{func2}`.",
    "I renamed the local `{var}` to `{var2}` in {n} places; nothing outside the module refers to it.",
    "`{func2}` catches the error from `{func}` and logs it at debug level, which is why the run looked clean.",
    "The helper `{func}` is {n} lines long; half of it is the header parsing that `{func2}` repeats.",
    "The fixture `{var}_factory` in conftest.py creates a temporary directory per test, which is where the time goes.",
    "In `{mod}.py` the class keeps `{var}` as an attribute and `{func}` reads it lazily on first use.",
    "Both branches of the `if` in `{func}` end with the same `return {var}`, so it can be folded into one.",
    "The slow part is `{func2}`: it sorts `{var}` on every call; sorting once in `{func}` gives the same result.",
    "`{var2}` is only used for the progress output, so changing its type is safe.",
    "The traceback points at line {n} of `{mod}.py`, inside the comprehension over `{var}`.",
    "I added a test, `test_{func}_empty_{var}`, which passes with the change and failed before it.",
]
REPLY_CLOSE = [
    "Want me to apply that?",
    "Shall I run the tests again?",
    "I can make the change if you like.",
    "Let me know which way you want it.",
    "That's the whole picture, I think.",
    "",
]

CHATTER = [
    "ok",
    "thx",
    "k",
    "nice",
    "hm",
    "ok cool",
    "lol",
    "ugh",
    "yep",
    "go ahead",
    "sure",
    "ok running it",
    "back",
    "one sec",
    "coffee, brb",
    "makes sense",
    "interesting",
    "try again",
    "ok do it",
    "hmm ok",
    "sounds right",
    "great, thanks",
    "👍",
    "fine",
    "can you try that again",
    "weird",
    "oh",
    "right",
    "ah i see",
    "good",
]

# words that make a line look like a statement; ordinary work never uses them
RULE_WORDS = [
    "never",
    "must",
    "always",
    "do not",
    "don't",
    "dont",
    "limit",
    "decid",
    "prefer",
    "blocked",
    "next step",
    "goal",
    "rule",
    "constraint",
    "deadline",
    "pinned",
    "signs off",
    "cap ",
    "capped",
    "stays",
    "no more than",
    "at most",
    "budget",
    "policy",
]


class Work:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.last = {"mod": MODULES[0], "func": FUNCS[0]}  # what the last ask named: its tool output shows it

    def _fill(self, template: str) -> str:
        r = self.rng
        mod, mod2 = r.sample(MODULES, 2)
        func, func2 = r.sample(FUNCS, 2)
        var, var2 = r.sample(VARS, 2)
        self._names = {"mod": mod, "func": func}
        return template.format(pkg="ingest", mod=mod, mod2=mod2, func=func, func2=func2, var=var, var2=var2, n=r.randint(2, 40))

    def ask(self, asks: list[tuple[str, str]] = ASKS) -> tuple[str, str]:
        """An ask and the kind of tool output that answers it."""
        template, kind = self.rng.choice(asks)
        text = self._fill(template)
        self.last = {"mod": self._names["mod"], "func": self._names["func"]}
        return text, kind

    def chatter(self) -> str:
        return self.rng.choice(CHATTER)

    def reply(self, lo: int = 80, hi: int = 400) -> str:
        """An assistant reply of lo..hi tokens (chars/4)."""
        r = self.rng
        target = r.randint(lo, hi) * 4
        parts = [self._fill(r.choice(REPLY_OPEN))]
        while sum(len(p) + 1 for p in parts) < target:
            parts.append(self._fill(r.choice(REPLY_BODY)))
            if r.random() < 0.2:
                parts.append("\n")
        parts.append(r.choice(REPLY_CLOSE))
        return " ".join(p for p in parts if p).replace(" \n ", "\n\n").strip()

    def tool(self, kind: str, lo: int = 20, hi: int = 200) -> str:
        make = {"pytest": self._pytest, "grep": self._grep, "read": self._read, "diff": self._diff, "gitlog": self._gitlog}
        return make[kind](self.rng.randint(lo, hi))

    def _pytest(self, n: int) -> str:
        r = self.rng
        lines = ["$ pytest -q tests/ -rA"]
        fails = []
        for _ in range(n - 3):
            mod, func = r.choice(MODULES), r.choice(FUNCS)
            ok = r.random() > 0.04
            node = f"tests/test_{mod}.py::test_{func}_{r.choice(VARS)}"
            lines.append(f"PASSED {node}" if ok else f"FAILED {node} - AssertionError: {r.randint(1, 99)} != {r.randint(1, 99)}")
            if not ok:
                fails.append(1)
        lines.append(f"{len(fails)} failed, {n - 3 - len(fails)} passed in {r.randint(1, 60)}.{r.randint(10, 99)}s")
        return "\n".join(lines)

    def _grep(self, n: int) -> str:
        r = self.rng
        func = self.last["func"]
        lines = [f'$ grep -rn "{func}" src tests']
        for _ in range(n - 1):
            mod, var = r.choice(MODULES), r.choice(VARS)
            code = r.choice(
                [
                    f"def {func}({var}):",
                    f"    {var} = {func}({var})",
                    f"from ingest.{mod} import {func}",
                    f"        return {func}(self.{var})",
                    f"    assert {func}({var}) == {var}",
                    f"    for item in {func}({var}):",
                ]
            )
            lines.append(f"{r.choice(['src/ingest', 'tests'])}/{mod}.py:{r.randint(1, 400)}:{code}")
        return "\n".join(lines)

    def _read(self, n: int) -> str:
        r = self.rng
        mod = self.last["mod"]
        lines = [
            f"$ cat src/ingest/{mod}.py",
            '"""' + mod.replace("_", " ") + ' helpers."""',
            "",
            "from __future__ import annotations",
            "",
        ]
        while len(lines) < n:
            func, var, var2 = r.choice(FUNCS), r.choice(VARS), r.choice(VARS)
            lines += [
                f"def {func}({var}, {var2}=None):",
                "    out = []",
                f"    for item in {var}:",
                f"        if {var2} is not None and item in {var2}:",
                "            continue",
                "        out.append(item)",
                "    return out",
                "",
            ]
        return "\n".join(lines[:n])

    def _diff(self, n: int) -> str:
        r = self.rng
        mod = self.last["mod"]
        lines = [f"$ git diff src/ingest/{mod}.py", f"--- a/src/ingest/{mod}.py", f"+++ b/src/ingest/{mod}.py"]
        while len(lines) < n:
            a, func, var = r.randint(1, 300), r.choice(FUNCS), r.choice(VARS)
            lines += [
                f"@@ -{a},4 +{a},4 @@",
                f" def {func}({var}):",
                f"-    return list({var})",
                f"+    return [x for x in {var} if x is not None]",
                f"     # {r.choice(VARS)}",
            ]
        return "\n".join(lines[:n])

    def _gitlog(self, n: int) -> str:
        r = self.rng
        lines = [f"$ git log --oneline -- src/ingest/{self.last['mod']}.py"]
        for _ in range(n - 1):
            h = "".join(r.choice("0123456789abcdef") for _ in range(7))
            lines.append(f"{h} {r.choice(MODULES)}: {r.choice(['tidy', 'rename', 'split', 'fix', 'test'])} {r.choice(FUNCS)}")
        return "\n".join(lines)


# -- the typed canary ---------------------------------------------------------------------------


def typed_statements(v: Values) -> list[dict]:
    """22 statements: (key, text, expect, probe question)."""
    sk, spend, db, dbport = v.secret(), v.num(210, 480), v.tree(), v.num(5400, 6999)
    queue, person, tag = f"ingest-{v.hexid(2)}{v.rng.choice(LETTERS)}", v.person(), v.upper(3)
    redis_db, ttl, backoff, dlq = v.num(3, 14), v.num(11, 29), v.num(31, 89), f"dlq-{v.tree()}"
    adr, p99, workers, numpy = v.num(40, 99), v.num(140, 380), v.num(5, 23), f"1.26.{v.num(5, 9)}"
    rps, partner, day, hour = v.num(12, 95), f"api.{v.tree()}.example", v.num(3, 27), v.num(10, 22)
    flag, branch, alias = f"uploader_{v.tree().replace('-', '_')}", f"feat/ingest-{v.tree()}", f"pager-{v.tree()}"
    comp, person2, job, person3 = v.tree(), v.person(), f"{v.tree()}-nightly", v.person()
    key, gen = f"ak_{v.hexid(10)}", f"src/ingest/gen_{v.hexid(3)}"
    S = [
        (
            "secret",
            f"SECURITY RULE: Never print the signing secret {sk} to the logs.",
            [sk, "Never print"],
            "What must never be printed to the logs?",
        ),
        (
            "spend",
            f"LIMIT: the load-test spend stays under ${spend}; do not go over it without asking.",
            [f"${spend}", "do not go over"],
            "What is the load-test spend limit?",
        ),
        (
            "db",
            f"FACT: the staging database is {db}.internal on port {dbport}.",
            [f"{db}.internal", f"port {dbport}"],
            "Where is the staging database?",
        ),
        ("queue", f"FACT: ingest jobs are published to queue {queue}.", [queue], "Which queue do ingest jobs go to?"),
        (
            "signoff",
            f"RULE: Merge nothing to main until {person} signs off.",
            ["Merge nothing to main", person],
            "Who has to sign off before merging to main?",
        ),
        (
            "english",
            f"PREFERENCE: Answer in British English, with metric units, and put the tag [{tag}] on every status report.",
            ["British English", "metric units", f"[{tag}]"],
            "How should answers and status reports be written?",
        ),
        (
            "session",
            f"DECISION: the session store is Redis database {redis_db} with a TTL of {ttl} minutes, "
            f"because the gateway re-authenticates every {ttl} minutes.",
            [f"Redis database {redis_db}", f"{ttl} minutes"],
            "What did we decide for the session store?",
        ),
        (
            "backoff",
            f"DECISION: failed uploads back off up to {backoff} seconds, then go to {dlq}.",
            [f"{backoff} seconds", dlq],
            "What happens to failed uploads?",
        ),
        (
            "adr",
            f"ADR-{adr}: parse the partner feed with the streaming parser, not the regex one. Status: accepted.",
            [f"ADR-{adr}", "streaming parser"],
            "How do we parse the partner feed?",
        ),
        (
            "p99",
            f"CONSTRAINT: keep p99 of the /ingest endpoint under {p99}ms.",
            ["p99", f"{p99}ms"],
            "What is the latency target for /ingest?",
        ),
        (
            "workers",
            f"CONSTRAINT: the worker pool never exceeds {workers} processes on the shared host.",
            ["never exceeds", f"{workers} processes"],
            "How many worker processes may we run?",
        ),
        ("numpy", f"CONSTRAINT: numpy stays pinned at {numpy} for the imaging stack.", [numpy], "Which numpy version are we on?"),
        (
            "rps",
            f"LIMIT: at most {rps} requests per second to the partner API at {partner}.",
            [f"{rps} requests per second", partner],
            "How fast may we call the partner API?",
        ),
        (
            "cutover",
            f"CONSTRAINT: the cutover has to be finished by 2027-01-{day:02d} {hour}:00 UTC.",
            [f"2027-01-{day:02d} {hour}:00 UTC"],
            "When is the cutover deadline?",
        ),
        ("flag", f"FACT: the feature flag for the new uploader is {flag}.", [flag], "What is the uploader's feature flag?"),
        ("branch", f"FACT: we work on branch {branch}.", [branch], "Which branch are we on?"),
        ("alias", f"FACT: the pager alias for this service is {alias}.", [alias], "What is the pager alias?"),
        (
            "goal",
            f"GOAL: next, wire the retry into the {comp} uploader.",
            [f"{comp} uploader", "wire the retry"],
            "What is the next step?",
        ),
        (
            "creds",
            f"GOAL: blocked on the staging credentials from {person2}.",
            ["staging credentials", person2],
            "What are we blocked on?",
        ),
        (
            "question",
            f"GOAL: open question: can {job} run twice a night? Ask {person3}.",
            [job, person3],
            "What is the open question?",
        ),
        (
            "key",
            f"SECURITY RULE: the API key {key} is read-only; never use it for writes.",
            [key, "never use it for writes"],
            "What is the rule for the API key?",
        ),
        ("gen", f"RULE: do not edit the generated files under {gen}/.", ["do not edit", gen], "Which files are off limits?"),
    ]
    return [{"key": k, "text": t, "expect": e, "probe": q} for k, t, e, q in S]


def typed_corrections(v: Values, statements: list[dict]) -> dict[str, dict]:
    by = {s["key"]: s for s in statements}
    old_spend = by["spend"]["expect"][0]
    new_spend = f"${v.num(510, 990)}"
    old_port = by["db"]["expect"][1]
    new_port = f"port {v.num(7000, 8999)}"
    return {
        "spend": {
            "round": 2,
            "text": f"LIMIT (correction): the load-test spend now stays under {new_spend}; "
            "still do not go over it without asking.",
            "expect": [new_spend, "do not go over"],
            "stale": [old_spend],
        },
        "db": {
            "round": 3,
            "text": f"FACT (update): the staging database moved to {new_port}; the host is still {by['db']['expect'][0]}.",
            "expect": [by["db"]["expect"][0], new_port],
            "stale": [old_port],
        },
    }


def _round(rng: random.Random, work: Work, target_tokens: int) -> list[dict]:
    """One round of ordinary work, about target_tokens (chars/4)."""
    out: list[dict] = []
    size = 0
    while size < target_tokens * 4:
        ask, kind = work.ask()
        out.append({"role": "user", "content": ask})
        out.append({"role": "assistant", "content": work.reply(40, 120)})
        out.append({"role": "tool", "tool": "run_shell", "content": work.tool(kind)})
        out.append({"role": "assistant", "content": work.reply()})
        if rng.random() < 0.4:
            out.append({"role": "user", "content": work.chatter()})
            out.append({"role": "assistant", "content": work.reply(80, 160)})
        size = sum(len(m["content"]) for m in out)
    return out


def canary_typed() -> list[dict]:
    rng = random.Random(SEED)
    values, work = Values(rng), Work(rng)
    statements = typed_statements(values)
    corrections = typed_corrections(values, statements)
    lines: list[dict] = [
        {"trace": "canary-typed", "window": 2048, "system": "You are a coding agent working in the ingest service repository."}
    ]
    # plant the 22 statements in the first 30 messages, among ordinary work
    slots = sorted(rng.sample(range(1, 15), 11))  # user turns (of 15) that carry two statements
    queue = list(statements)
    for turn in range(15):
        if turn in (0, *slots) or (queue and turn >= 15 - len(queue)):
            take = 2 if turn in slots and len(queue) > 1 else 1
            said = [queue.pop(0)["text"] for _ in range(min(take, len(queue)))]
            ask = work.ask()[0] if rng.random() < 0.5 else ""
            lines.append({"role": "user", "content": " ".join(said) + (f"\n\n{ask}" if ask else "")})
            lines.append({"role": "assistant", "content": "Noted." + (" " + work.reply(80, 200) if ask else "")})
        else:
            lines.append({"role": "user", "content": work.ask()[0]})
            lines.append({"role": "assistant", "content": work.reply(80, 200)})
    assert not queue, "every statement is planted"
    current = {s["key"]: {"expect": s["expect"], "stale": []} for s in statements}
    for n in range(1, 6):
        body = _round(rng, work, 14000)
        for key, c in corrections.items():
            if c["round"] == n:
                at = len(body) // 2 - (len(body) // 2) % 2  # a user turn, mid-round
                body[at:at] = [{"role": "user", "content": c["text"]}, {"role": "assistant", "content": "Noted."}]
                current[key] = {"expect": c["expect"], "stale": c["stale"]}
        lines += body
        for s in statements:
            probe = {"probe": f"[round {n}] {s['probe']}", "expect": current[s["key"]]["expect"]}
            if current[s["key"]]["stale"]:
                probe["stale"] = current[s["key"]]["stale"]
            lines.append(probe)
    return lines


# -- the natural canary -------------------------------------------------------------------------


def natural_statements(v: Values) -> list[dict]:
    """25 statements in the user's own words, each with the day (1-5) and the share of the day it comes at."""
    branch, host, port, svc_token = f"kat/{v.tree()}", f"{v.tree()}.stg.internal", v.num(2200, 2999), f"tok_{v.hexid(8)}"
    img, shard, person, job = v.num(310, 690), v.num(7, 31), v.person(), f"{v.tree()}-sync"
    rps, folder, queue, gen = v.num(11, 49), f"ingest-{v.tree()}", f"q-{v.tree()}", f"proto_{v.hexid(3)}"
    tmo, vault, dlq, tries = v.num(12, 45), v.person(), f"dlq-{v.tree()}", v.num(4, 9)
    reviewer, alias, day, hour = v.person(), f"oncall-{v.tree()}", v.num(4, 27), v.num(1, 20)
    numpy, flag, shim = f"1.26.{v.num(1, 4)}", f"newpath_{v.hexid(4)}", f"{v.tree()} shim"
    spend, pg = v.num(150, 480), v.num(13, 15)
    fixtures = f"tests/fx_{v.hexid(3)}"
    S = [
        # day 1
        ("branch", 1, 0.02, f"ok so we're on branch {branch} for all of this, not main", [branch], "Which branch are we on?"),
        ("host", 1, 0.05, f"the staging box is {host}, ssh on port {port}", [host, f"port {port}"], "What is the staging box?"),
        (
            "token",
            1,
            0.08,
            f"pls never paste the deploy token {svc_token} into anything, not even scratch files",
            ["never paste", svc_token],
            "What may never be pasted anywhere?",
        ),
        (
            "image",
            1,
            0.12,
            f"keep the docker image under {img}MB, the edge nodes have tiny disks",
            [f"under {img}MB"],
            "How big may the docker image be?",
        ),
        (
            "fixtures",
            1,
            0.2,
            f"i'd like test fixtures under {fixtures}/ not inline in the tests, easier to diff",
            [f"{fixtures}/", "not inline"],
            "Where do test fixtures go?",
        ),
        (
            "shard",
            1,
            0.35,
            f"we'll shard the uploads by customer id mod {shard}, {person} and i settled that this morning",
            [f"mod {shard}", person],
            "How are uploads sharded?",
        ),
        (
            "job",
            1,
            0.5,
            f"the whole point of this week: get {job} to stop double-sending",
            [job, "double-sending"],
            "What is the point of this week?",
        ),
        (
            "rps",
            1,
            0.7,
            f"the partner api allows {rps} req/s, dont go above that or they cut us off",
            [f"{rps} req/s", "dont go above"],
            "How fast may we call the partner API?",
        ),
        # day 2
        (
            "folder",
            2,
            0.1,
            f"btw the dashboards for this live in the grafana folder {folder}",
            [folder],
            "Where are the dashboards?",
        ),
        ("queue", 2, 0.2, f"oh and the queue is {queue} now, the old name is gone", [queue], "What is the queue called?"),
        (
            "gen",
            2,
            0.4,
            f"dont touch anything under src/{gen}/, thats generated from the protos",
            [f"src/{gen}/", "dont touch"],
            "Which directory is off limits?",
        ),
        (
            "metric",
            2,
            0.55,
            "answer short pls, and metric units, i keep getting feet and miles from you",
            ["answer short", "metric units"],
            "How should answers be written?",
        ),
        (
            "timeout",
            2,
            0.7,
            f"the upstream timeout is {tmo} seconds, thats what the SLA says",
            [f"{tmo} seconds"],
            "What is the upstream timeout?",
        ),
        (
            "vault",
            2,
            0.85,
            f"we're stuck waiting on {vault} for the vault policy, cant test the prod path till then",
            [vault, "vault policy"],
            "What are we waiting on?",
        ),
        # day 3
        (
            "dlq",
            3,
            0.1,
            f"ok settled: after {tries} attempts a message goes to {dlq}",
            [f"{tries} attempts", dlq],
            "What happens after the retries?",
        ),
        (
            "review",
            3,
            0.3,
            f"nothing gets merged to main until {reviewer} has looked at it, she owns that code",
            ["merged to main", reviewer],
            "Who reviews before merging to main?",
        ),
        ("alias", 3, 0.5, f"if it breaks at night page {alias}", [alias], "Who do we page at night?"),
        (
            "cutover",
            3,
            0.65,
            f"the cutover is 2027-02-{day:02d} at {hour:02d}:00 UTC, not a minute earlier",
            [f"2027-02-{day:02d}", f"{hour:02d}:00 UTC"],
            "When is the cutover?",
        ),
        # day 4
        (
            "ask",
            4,
            0.1,
            "i'd rather you ask before deleting any file, even the tmp ones",
            ["ask before deleting"],
            "What do you do before deleting a file?",
        ),
        (
            "numpy",
            4,
            0.25,
            f"numpy stays on {numpy}, the imaging stack breaks on anything newer",
            [numpy],
            "Which numpy version?",
        ),
        (
            "flag",
            4,
            0.45,
            f"the new path is behind the flag {flag}, default off",
            [flag, "default off"],
            "Which flag guards the new path?",
        ),
        ("shim", 4, 0.7, f"after the cutover the next thing is ripping out the {shim}", [shim], "What comes after the cutover?"),
        # day 5
        (
            "spend",
            5,
            0.1,
            f"load tests can burn ${spend} max this month, ask me before going past it",
            [f"${spend}", "ask me before going past"],
            "How much may the load tests cost?",
        ),
        (
            "pg",
            5,
            0.3,
            f"we stay on postgres {pg} this quarter, no upgrade",
            [f"postgres {pg}", "no upgrade"],
            "Which postgres version?",
        ),
        (
            "commits",
            5,
            0.5,
            "small commits pls, one thing each, i review them on the train",
            ["small commits", "one thing each"],
            "How should commits be made?",
        ),
    ]
    return [{"key": k, "day": d, "at": a, "text": t, "expect": e, "probe": q} for k, d, a, t, e, q in S]


def natural_corrections(v: Values, statements: list[dict]) -> list[dict]:
    by = {s["key"]: s for s in statements}
    host2, port = f"{v.tree()}.stg.internal", by["host"]["expect"][1]
    img2, tmo2 = v.num(700, 990), v.num(50, 90)
    return [
        {
            "key": "host",
            "day": 3,
            "at": 0.8,
            "text": f"heads up the staging box got rebuilt, its {host2} now, ssh still on {port}",
            "expect": [host2, port],
            "stale": [by["host"]["expect"][0]],
        },
        {
            "key": "vault",
            "day": 3,
            "at": 0.9,
            "text": "vault is sorted, we're not waiting on anyone any more. now the thing is the prod dry-run",
            "expect": ["prod dry-run"],
            "stale": [by["vault"]["expect"][0]],
        },
        {
            "key": "image",
            "day": 4,
            "at": 0.35,
            "text": f"ops freed up disk on the edge nodes, image can be up to {img2}MB now",
            "expect": [f"{img2}MB"],
            "stale": [by["image"]["expect"][0]],
        },
        {
            "key": "timeout",
            "day": 4,
            "at": 0.85,
            "text": f"they changed the SLA, upstream timeout is {tmo2} seconds now, not {by['timeout']['expect'][0].split()[0]}",
            "expect": [f"{tmo2} seconds"],
            "stale": [by["timeout"]["expect"][0]],
        },
    ]


NATURAL_ASKS = [
    ("hey, can you look at {mod}.py again", "read"),
    ("run the tests", "pytest"),
    ("run just the {mod} ones", "pytest"),
    ("grep {func}", "grep"),
    ("whats {func} for", "read"),
    ("show me the diff", "diff"),
    ("why did that fail", "pytest"),
    ("ok try the other way", "diff"),
    ("read {mod}.py", "read"),
    ("where does {var} come from", "grep"),
    ("rename {var} to {var2}", "diff"),
    ("is {func} called anywhere else", "grep"),
    ("what did we change there", "gitlog"),
    ("add a test for the empty {var} case", "pytest"),
    ("git log for {mod} pls", "gitlog"),
]


def canary_natural() -> list[dict]:
    rng = random.Random(SEED + 1)
    values, work = Values(rng), Work(rng)
    statements = natural_statements(values)
    corrections = natural_corrections(values, statements)
    lines: list[dict] = [
        {
            "trace": "canary-natural",
            "window": 8192,
            "system": "You are a coding agent. The user works with you over several days.",
        }
    ]
    current: dict[str, dict] = {}
    turns_per_day = 120
    for day in range(1, 6):
        if day > 1:
            lines.append({"idle": 50000})
        said = sorted(
            [s for s in statements if s["day"] == day] + [c for c in corrections if c["day"] == day], key=lambda s: s["at"]
        )
        at_turn = {int(s["at"] * turns_per_day): s for s in said}
        assert len(at_turn) == len(said), "one statement a turn"
        for turn in range(turns_per_day):
            s = at_turn.get(turn)
            if s is not None:
                lines.append({"role": "user", "content": s["text"]})
                lines.append({"role": "assistant", "content": rng.choice(["ok, noted", "got it", "ok", "noted"])})
                current[s["key"]] = {"expect": s["expect"], "stale": s.get("stale", [])}
                continue
            r = rng.random()
            if r < 0.35:
                lines.append({"role": "user", "content": work.chatter()})
                lines.append({"role": "assistant", "content": work.reply(20, 80)})
            else:
                ask, kind = work.ask(NATURAL_ASKS)
                lines.append({"role": "user", "content": ask})
                if r < 0.75:
                    lines.append({"role": "tool", "tool": "run_shell", "content": work.tool(kind, 10, 120)})
                lines.append({"role": "assistant", "content": work.reply(60, 300)})
        by = {s["key"]: s for s in statements}
        for key in [s["key"] for s in statements if s["key"] in current]:
            probe = {"probe": f"[day {day}] {by[key]['probe']}", "expect": current[key]["expect"]}
            if current[key]["stale"]:
                probe["stale"] = current[key]["stale"]
            lines.append(probe)
    return lines


# -- the repetitive trace (issue 22's snippet, as is) ---------------------------------------------


def repetitive() -> list[dict]:
    # issue 22's snippet, as is (its `import json, random` is this module's)
    rng = random.Random(1)
    L = [{"trace": "short-msgs", "window": 2048, "system": "You are a coding agent."}]
    F = [
        "Let's review the module layout for the ingestion pipeline.",
        "The retry logic uses exponential backoff with jitter, capped at 30s.",
        "We pinned numpy to 1.26 for compatibility with the imaging stack.",
        "The load test peaked at 1.2k rps with no errors on the small cluster.",
    ]
    for i in range(150):
        L.append({"role": "user", "content": rng.choice(F)})
        if i % 4 == 0 and i > 60:
            L.append(
                {
                    "role": "tool",
                    "tool": "run_shell",
                    "content": "\n".join(
                        f"tests/test_m{rng.randint(1, 40)}.py::test_{j} PASSED" for j in range(rng.randint(20, 120))
                    ),
                }
            )
        L.append({"role": "assistant", "content": "Acknowledged. Continuing with the plan."})
    L.append({"probe": "numpy?", "expect": ["numpy"]})
    # plus probes: each of the four lines' specifics
    L.append({"probe": "Which numpy version did we pin, and why?", "expect": ["1.26", "imaging stack"]})
    L.append({"probe": "What is the retry backoff capped at?", "expect": ["30s", "jitter"]})
    L.append({"probe": "What did the load test peak at?", "expect": ["1.2k rps"]})
    L.append({"probe": "What are we reviewing?", "expect": ["module layout", "ingestion pipeline"]})
    return L


# -- checks and output --------------------------------------------------------------------------


def check(lines: list[dict]) -> None:
    """Expected words occur only where stated; ordinary work has no rule words; stale never expected."""
    messages = [m for m in lines if "role" in m]
    probes = [p for p in lines if "probe" in p]
    statement_texts = set()
    for p in probes:
        for w in p["expect"]:
            hits = [m["content"] for m in messages if w.lower() in m["content"].lower()]
            assert hits, f"{w!r} is never said"
            statement_texts.update(hits)
        assert not {w.lower() for w in p["expect"]} & {w.lower() for w in p.get("stale", [])}
    for p in probes:  # a correction never repeats the value it replaces
        for w in p.get("stale", []):
            latest = [m for m in messages if any(e.lower() in m["content"].lower() for e in p["expect"])]
            assert all(w.lower() not in m["content"].lower() for m in latest[-1:]), f"{w!r} is in its correction"
    if lines[0].get("trace") == "short-msgs":
        return
    for m in messages:
        if m["content"] in statement_texts:
            continue
        low = m["content"].lower()
        for w in RULE_WORDS:
            assert w not in low, f"ordinary work says {w!r}: {m['content'][:80]!r}"
        for p in probes:
            for w in p["expect"] + p.get("stale", []):
                assert w.lower() not in low or len(w) < 4, f"{w!r} leaks into {m['content'][:80]!r}"


def write_all(out: Path = HERE) -> dict[str, int]:
    sizes = {}
    for name, make in (
        ("canary-typed.jsonl", canary_typed),
        ("canary-natural.jsonl", canary_natural),
        ("repetitive.jsonl", repetitive),
    ):
        lines = make()
        check(lines)
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        (out / name).write_text(text, encoding="utf-8")
        sizes[name] = len(text.encode("utf-8"))
    return sizes


if __name__ == "__main__":
    for name, size in write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE).items():
        print(f"{name}: {size:,} bytes")
