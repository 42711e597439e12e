"""Check the ledger corpus files (data only, no detector): python tests/ledger_corpus/check.py"""

import collections
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
KINDS = ("decision", "rule", "constraint", "preference", "goal", "fact")
ROLES = ("user", "assistant", "tool", "instructions")


def load(name):
    with open(HERE / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def problems(rows, prefix):
    errs, seen = [], {}
    for row in rows:
        rid = row.get("id")
        if set(row) != {"id", "role", "text", "statements", "supersedes"}:
            errs.append(f"{rid}: keys {sorted(row)}")
        if not isinstance(rid, str) or not rid.startswith(prefix):
            errs.append(f"{rid}: id must start with {prefix!r}")
        if rid in seen:
            errs.append(f"{rid}: duplicate id")
        if row.get("role") not in ROLES:
            errs.append(f"{rid}: role {row.get('role')!r}")
        text = row.get("text") or ""
        if not text.strip():
            errs.append(f"{rid}: empty text")
        for st in row.get("statements", []):
            if st.get("kind") not in KINDS:
                errs.append(f"{rid}: kind {st.get('kind')!r}")
            q = st.get("quote", "")
            if not q or q not in text:
                errs.append(f"{rid}: quote not in text: {q!r}")
            keep = st.get("must_keep") or []
            if not keep:
                errs.append(f"{rid}: no must_keep")
            for k in keep:
                if not k or k not in q:
                    errs.append(f"{rid}: must_keep {k!r} not in quote {q!r}")
            if set(st) - {"kind", "quote", "must_keep", "proposal"}:
                errs.append(f"{rid}: statement keys {sorted(st)}")
        sup = row.get("supersedes")
        if sup is not None:
            if sup not in seen:
                errs.append(f"{rid}: supersedes {sup!r}, not an earlier id")
            else:
                old = {s["kind"] for s in seen[sup]["statements"]}
                new = {s["kind"] for s in row["statements"]}
                if not old & new:
                    errs.append(f"{rid}: supersedes {sup} but shares no kind ({new} vs {old})")
        seen[rid] = row
    return errs


def counts(rows):
    c = collections.Counter()
    for row in rows:
        c["lines"] += 1
        if not row["statements"]:
            c["empty"] += 1
        if row["supersedes"]:
            c["corrections"] += 1
        c["role:" + row["role"]] += 1
        for st in row["statements"]:
            c["statements"] += 1
            c[st["kind"]] += 1
            if st.get("proposal"):
                c["proposal"] += 1
    return c


def main():
    total = collections.Counter()
    files = (("heldout.jsonl", "h"), ("dev.jsonl", "d"))
    files += (
        ("heldout2.jsonl", "g"),
        ("heldout3.jsonl", "k"),
        ("heldout4.jsonl", "m"),
        ("heldout5.jsonl", "n"),
        ("heldout6.jsonl", "p"),
    )
    for name, prefix in files:
        if not (HERE / name).exists():
            continue
        rows = load(name)
        for e in problems(rows, prefix):
            print("ERROR", name, e)
        c = counts(rows)
        total += c
        print(name, dict(sorted(c.items())))
    print("total", dict(sorted(total.items())))


if __name__ == "__main__":
    main()
