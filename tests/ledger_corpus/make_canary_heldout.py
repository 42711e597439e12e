"""Write the held-out survival canary of the ledger bench (issue 22): stdlib only, seeded, deterministic.

    python tests/ledger_corpus/make_canary_heldout.py            # writes beside this file
    python tests/ledger_corpus/make_canary_heldout.py OUT_DIR
    python tests/ledger_corpus/make_canary_heldout.py --from heldout3 [OUT_DIR]   # canary-heldout3.jsonl
    python tests/ledger_corpus/make_canary_heldout.py --from heldout4 [OUT_DIR]   # canary-heldout4.jsonl
    python tests/ledger_corpus/make_canary_heldout.py --from heldout5 [OUT_DIR]   # canary-heldout5.jsonl
    python tests/ledger_corpus/make_canary_heldout.py --from heldout6 [OUT_DIR]   # canary-heldout6.jsonl

canary-heldout3.jsonl and canary-heldout4.jsonl are the same construction over
heldout3.jsonl and heldout4.jsonl (a third and a fourth hand, also never shown the
detector): same seed, same parts and rounds, each its own file name. One difference for
heldout4: its author wrote down which earlier statement each correction replaces
(src/heldout4-retires.json, one entry per ``supersedes`` line: the index of the old
statement, "retire" or "amend", and the old words that are now stale). A retired
statement is no longer probed; an amended one (a correction of one value of several)
is still probed for the words that still hold, and only the replaced value is stale.
Without such a file (heldout2, heldout3) a correction retires every statement of its
kinds in the line it corrects, and all their words are stale candidates.
canary-heldout5.jsonl is the same over heldout5.jsonl (a fifth hand, same rules), with its
author's map src/heldout5-retires.json. There an entry may name no words: a retire with
none stops probing the old statement without marking any word stale (used where a later
correction brings the old value back, since a chain carries its stale words on, and where
the new value only takes effect later), and an amend with none keeps probing all of it.
canary-heldout6.jsonl is the same over heldout6.jsonl (a sixth hand, same rules), with its
author's map src/heldout6-retires.json.

canary-heldout.jsonl
    heldout2.jsonl's 283 lines, in order, as messages of their role (a user line as
    a user message, an assistant line as a reply, a tool line as run_shell output,
    an instructions file as a user message that quotes the file), cut into eight
    parts at user turns. After each part comes a round of ordinary work (make_canary's
    generator, about 12k tokens, chars/4), then one probe for every labelled statement
    said so far that is still current: ``expect`` is its ``must_keep`` words. A
    statement of a line that a later line ``supersedes`` (same kind) is no longer
    probed; its words go into the ``stale`` field of the correction's probe (the way
    canary-typed marks them), all of the chain's old values for a chain. Header
    window 4,096; the bench runs it at 4,096 and 8,192.

heldout2 was written by a hand that never saw the detector, and this trace was built
after the ledger's tuning ended. It is real data, not generated: unlike the other
canaries, an ``expect`` word may also occur in a line other than its statement (an
assistant's echo, a later mention), where a probe can find it; ``python
make_canary_heldout.py`` prints how many do. Stale words are kept only if they occur
in no line but the superseded ones, so a stale word found in the ledger or a summary
is the old value. Proposals (``proposal: true``, an assistant's own words the user had
not agreed to) are not probed; the user's line is the one that counts.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 2202
PARTS = 8
ROUND_TOKENS = 12000
# source name -> (corpus file, canary file, trace name)
SOURCES = {
    "heldout2": ("heldout2.jsonl", "canary-heldout.jsonl", "canary-heldout"),
    "heldout3": ("heldout3.jsonl", "canary-heldout3.jsonl", "canary-heldout3"),
    "heldout4": ("heldout4.jsonl", "canary-heldout4.jsonl", "canary-heldout4"),
    "heldout5": ("heldout5.jsonl", "canary-heldout5.jsonl", "canary-heldout5"),
    "heldout6": ("heldout6.jsonl", "canary-heldout6.jsonl", "canary-heldout6"),
}
# source name -> its author's map of what each correction replaces (see the docstring)
RETIRES = {
    "heldout4": "src/heldout4-retires.json",
    "heldout5": "src/heldout5-retires.json",
    "heldout6": "src/heldout6-retires.json",
}


def _make_canary():
    spec = importlib.util.spec_from_file_location("make_canary", HERE / "make_canary.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_rows(source: str = "heldout2") -> list[dict]:
    with open(HERE / SOURCES[source][0], encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_retires(source: str) -> dict[str, list[list]] | None:
    if source not in RETIRES:
        return None
    with open(HERE / RETIRES[source], encoding="utf-8") as f:
        return json.load(f)


def message(row: dict) -> dict:
    if row["role"] == "tool":
        return {"role": "tool", "tool": "run_shell", "content": row["text"]}
    if row["role"] == "instructions":
        return {"role": "user", "content": "here's the instructions file of this repo:\n\n" + row["text"]}
    return {"role": row["role"], "content": row["text"]}


def parts(rows: list[dict]) -> list[list[dict]]:
    """PARTS slices of about equal length, each ending just before a user (or instructions) line."""
    out, start = [], 0
    for k in range(1, PARTS):
        cut = max(start + 1, round(len(rows) * k / PARTS))
        while cut < len(rows) and rows[cut]["role"] not in ("user", "instructions"):
            cut += 1
        out.append(rows[start:cut])
        start = cut
    out.append(rows[start:])
    assert sum(map(len, out)) == len(rows) and all(out)
    return out


def canary_heldout(source: str = "heldout2") -> tuple[list[dict], dict[str, int]]:
    mc = _make_canary()
    rng = random.Random(SEED)
    work = mc.Work(rng)
    rows = load_rows(source)
    by_id = {r["id"]: r for r in rows}
    retires = load_retires(source)
    assert retires is None or set(retires) == {r["id"] for r in rows if r["supersedes"]}
    lines: list[dict] = [
        {
            "trace": SOURCES[source][2],
            "window": 4096,
            "system": "You are a coding agent. The user moves between several repositories over the days.",
        }
    ]
    # statements: (line id, index) -> state
    current: dict[tuple[str, int], dict] = {}
    # which line ids' texts a stale word may be in: the chain of superseded lines
    chain: dict[str, list[str]] = {}
    stats = {
        "probes": 0,
        "expect_words": 0,
        "stale_probes": 0,
        "stale_dropped": 0,
        "expect_elsewhere": 0,
        "expect_words_in_work_talk": 0,
        "last_round_words": 0,
    }
    work_lines: list[str] = []
    for n, part in enumerate(parts(rows), 1):
        for row in part:
            lines.append(message(row))
            kinds = {st["kind"] for st in row["statements"]}
            old_words: dict[str, list[str]] = {}  # by kind
            old_ids: list[str] = []
            if row["supersedes"]:
                old = by_id[row["supersedes"]]
                old_ids = [old["id"], *chain.get(old["id"], [])]
                if retires is None:
                    for i, st in enumerate(old["statements"]):
                        if st["kind"] in kinds:
                            state = current.pop((old["id"], i), None)
                            old_words.setdefault(st["kind"], []).extend(st["must_keep"] + (state["stale"] if state else []))
                else:
                    for i, how, words in retires[row["id"]]:
                        st = old["statements"][i]
                        assert st["kind"] in kinds and set(words) <= set(st["must_keep"]) and how in ("retire", "amend")
                        if how == "retire":
                            state = current.pop((old["id"], i), None)
                            words = words + (state["stale"] if state else [])
                        else:
                            state = current[(old["id"], i)]
                            state["expect"] = [w for w in state["expect"] if w not in words]
                            assert state["expect"], f"{row['id']} amends every word of {old['id']}"
                        old_words.setdefault(st["kind"], []).extend(words)
                chain[row["id"]] = old_ids
            first_of_kind: set[str] = set()  # the stale words go to the correction's first statement of the kind
            for i, st in enumerate(row["statements"]):
                if st.get("proposal"):
                    continue
                stale: list[str] = []
                if st["kind"] in old_words and st["kind"] not in first_of_kind:
                    keep = {w.casefold() for w in st["must_keep"]}
                    others = [r["text"].casefold() for r in rows if r["id"] not in old_ids]
                    for w in dict.fromkeys(old_words[st["kind"]]):
                        if w.casefold() in keep or any(w.casefold() in t for t in others):
                            stats["stale_dropped"] += 1
                        elif w not in stale:
                            stale.append(w)
                first_of_kind.add(st["kind"])
                current[(row["id"], i)] = {"kind": st["kind"], "expect": st["must_keep"], "stale": stale}
        body = mc._round(rng, work, ROUND_TOKENS)
        work_lines += [m["content"] for m in body]
        lines += body
        for (rid, _i), state in sorted(current.items()):
            probe = {"probe": f"[round {n}] {rid} ({state['kind']}): still current?", "expect": state["expect"]}
            if state["stale"]:
                probe["stale"] = state["stale"]
                stats["stale_probes"] += 1
            stats["probes"] += 1
            stats["expect_words"] += len(state["expect"])
            lines.append(probe)
    # checks: a stale word is never expected, nor said in the work talk; count the probed words a probe
    # could find outside their statement (real data: "Ines" is in "lines", "prod" in many lines)
    low_work = [t.casefold() for t in work_lines]
    in_work: set[str] = set()
    for p in (x for x in lines if "probe" in x):
        assert not {w.casefold() for w in p["expect"]} & {w.casefold() for w in p.get("stale", [])}
        for w in p.get("stale", []):
            assert not any(w.casefold() in t for t in low_work), f"stale {w!r} is in the work talk"
        in_work.update(w for w in p["expect"] if any(w.casefold() in t for t in low_work))
    stats["expect_words_in_work_talk"] = len(in_work)
    last_round = [p for p in lines if "probe" in p and p["probe"].startswith(f"[round {PARTS}]")]
    for p in last_round:
        rid = p["probe"].split()[2]
        texts = [r["text"].casefold() for r in rows if r["id"] != rid] + low_work
        stats["expect_elsewhere"] += sum(1 for w in p["expect"] if any(w.casefold() in t for t in texts))
    stats["last_round_words"] = sum(len(p["expect"]) for p in last_round)
    return lines, stats


def write(out: Path = HERE, source: str = "heldout2") -> dict[str, int]:
    lines, stats = canary_heldout(source)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    (out / SOURCES[source][1]).write_text(text, encoding="utf-8")
    stats["bytes"] = len(text.encode("utf-8"))
    return stats


def main(argv: list[str]) -> int:
    source = "heldout2"
    if argv[:1] == ["--from"]:
        if len(argv) < 2 or argv[1] not in SOURCES:
            print(f"--from takes one of: {', '.join(SOURCES)}", file=sys.stderr)
            return 2
        source, argv = argv[1], argv[2:]
    if len(argv) > 1:
        print(f"usage: make_canary_heldout.py [--from {'|'.join(SOURCES)}] [OUT_DIR]", file=sys.stderr)
        return 2
    print(write(Path(argv[0]) if argv else HERE, source))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
