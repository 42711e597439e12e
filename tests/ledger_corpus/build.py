"""Turn the hand-written authoring files (src/*.txt) into the JSONL corpus.

Authoring format (one record after another):

    ~~~REC <role> [#label] [sup:<label>]
    text, any number of lines (kept verbatim, trailing newline removed)
    %% <kind> || <quote> || <must_keep> ;; <must_keep> [|| P]

A quote that spans lines is written on one ``%%`` line with ``\u23ce`` for each
line break and ``\u21e5`` for a tab. ``%%`` lines are statements (``P`` marks ``"proposal": true``); a record with
none is an empty line (nothing load-bearing). ``sup:<label>`` names the label
of the earlier record this one corrects. Ids are given in order: ``h001`` ...
for heldout, ``d001`` ... for dev, ``g001`` ... for heldout2, ``k001`` ... for heldout3, ``m001`` ... for heldout4,
``n001`` ... for heldout5, ``p001`` ... for heldout6.

    python tests/ledger_corpus/build.py   # writes heldout.jsonl, dev.jsonl, heldout2.jsonl ... heldout6.jsonl
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def parse(path, prefix):
    recs, labels, cur = [], {}, None
    for raw in path.read_text(encoding="utf-8").split("\n"):
        if raw.startswith("~~~REC"):
            cur = {"hdr": raw.split()[1:], "text": [], "st": []}
            recs.append(cur)
        elif raw.startswith("%% "):
            cur["st"].append(raw[3:])
        elif cur is not None:
            if cur["st"]:
                if raw.strip():
                    sys.exit(f"text after a statement in {path}: {raw!r}")
                continue
            cur["text"].append(raw)
    out = []
    for n, r in enumerate(recs, 1):
        rid = f"{prefix}{n:03d}"
        role, sup = r["hdr"][0], None
        for h in r["hdr"][1:]:
            if h.startswith("#"):
                labels[h[1:]] = rid
            elif h.startswith("sup:"):
                sup = labels[h[4:]]
        text = "\n".join(r["text"]).strip("\n")
        sts = []
        for s in r["st"]:
            parts = [p.strip() for p in s.split(" || ")]
            quote = parts[1].replace("\u23ce", "\n").replace("\u21e5", "\t")
            st = {"kind": parts[0], "quote": quote, "must_keep": [k.strip() for k in parts[2].split(" ;; ")]}
            if len(parts) > 3 and parts[3] == "P":
                st["proposal"] = True
            sts.append(st)
        out.append({"id": rid, "role": role, "text": text, "statements": sts, "supersedes": sup})
    return out


def main():
    sources = (
        ("heldout", "h"),
        ("dev", "d"),
        ("heldout2", "g"),
        ("heldout3", "k"),
        ("heldout4", "m"),
        ("heldout5", "n"),
        ("heldout6", "p"),
    )
    for name, prefix in sources:
        src = HERE / "src" / f"{name}.txt"
        if not src.exists():
            continue
        rows = parse(src, prefix)
        with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(name, len(rows))


if __name__ == "__main__":
    main()
