"""The ledger's statement detector against a corpus it was not written from.

tests/ledger_corpus/ holds lines written by another hand, in the words people type
to a coding agent, each labelled with the statements it makes (kind, the quote, the
words a probe would ask for). The held-out part was written before the detector and
is reported apart; the dev part is what the detector was tuned on.

Per kind, for each part:

* recall: labelled statements whose probe words (`must_keep`) all lie in one detected
  statement's verbatim text, i.e. that the ledger would keep word for word;
  `kind ok` also asks that the detector named the same kind;
* precision: detections of that kind that cover some labelled statement of the line
  (any kind; a detection on a line with nothing load-bearing is a false positive);
* false pins on chatter: lines with nothing load-bearing where the detector finds a
  statement (the user's would be pinned or carried), as a share of those lines;
* corrections: run through one Session in order, the lines that supersede an earlier
  one, and whether the ledger marked a statement of that line superseded (and how
  many statements it superseded that no label said).

Run: .venv/bin/python benchmarks/ledger_bench.py [--part dev|heldout|both] [--misses N]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tailrent_tui.core.guard import DecisionDetector
from tailrent_tui.core.ledger import STATEMENT_KINDS, detect
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import get_counter

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "ledger_corpus"
# the fresh held-out part: scored once, by name, never by `--part both`, never trained on. heldout6 was scored
# once in the sixth pass (benchmarks/RESULTS.md) and is seen now; the next blind part is the next hand's
FRESH: tuple[str, ...] = ()
# the parts the detector and its scorer may learn from; `--part both` scores these
SEEN = tuple(p for p in ("dev", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6") if p not in FRESH)


def load(part: str) -> list[dict[str, Any]]:
    path = Path(part) if part.endswith(".jsonl") else CORPUS / f"{part}.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _covers(found_text: str, label: dict[str, Any]) -> bool:
    hay = found_text.casefold()
    return all(w.casefold() in hay for w in label["must_keep"]) and bool(label["must_keep"])


def score(lines: list[dict[str, Any]], misses: int = 0) -> dict[str, Any]:
    tp = Counter()
    tp_kind = Counter()
    total = Counter()
    det = Counter()
    det_ok = Counter()
    empty_lines = 0
    false_lines = 0
    missed: list[str] = []
    spurious: list[str] = []
    kept = kept_total = kept_chatter = 0
    for line in lines:
        found = detect(line["text"], line["role"])
        labels = line["statements"]
        # what the ledger keeps word for word: the statements, and the user's other words worth keeping
        words = detect(line["text"], line["role"], words=True) if line["role"] in ("user", "instructions") else found
        kept_total += len(labels)
        kept += sum(1 for lab in labels if any(_covers(f.text, lab) for f in words))
        if not labels:
            kept_chatter += bool(words)
        if not labels:
            empty_lines += 1
            false_lines += bool(found)
            if found and len(spurious) < misses:
                spurious.append(f"{line['id']} [{found[0].kind}] {found[0].text[:110]!r}")
        for lab in labels:
            total[lab["kind"]] += 1
            hit = [f for f in found if _covers(f.text, lab)]
            if hit:
                tp[lab["kind"]] += 1
                tp_kind[lab["kind"]] += any(f.kind == lab["kind"] for f in hit)
            elif len(missed) < misses:
                missed.append(f"{line['id']} [{lab['kind']}] {lab['quote'][:110]!r}")
        for f in found:
            det[f.kind] += 1
            det_ok[f.kind] += any(_covers(f.text, lab) or lab["quote"] in f.text or f.text in lab["quote"] for lab in labels)
    kinds = {}
    for k in STATEMENT_KINDS:
        kinds[k] = {
            "statements": total[k],
            "recall": tp[k] / total[k] if total[k] else None,
            "recall_kind_ok": tp_kind[k] / total[k] if total[k] else None,
            "detections": det[k],
            "precision": det_ok[k] / det[k] if det[k] else None,
        }
    all_total = sum(total.values())
    all_det = sum(det.values())
    return {
        "lines": len(lines),
        "kinds": kinds,
        "recall": sum(tp.values()) / all_total if all_total else None,
        "recall_kind_ok": sum(tp_kind.values()) / all_total if all_total else None,
        "precision": sum(det_ok.values()) / all_det if all_det else None,
        "chatter_lines": empty_lines,
        "false_pin_rate": false_lines / empty_lines if empty_lines else None,
        "corrections": corrections(lines),
        "kept_verbatim": kept / kept_total if kept_total else None,
        "kept_on_chatter": kept_chatter / empty_lines if empty_lines else None,
        "missed": missed,
        "spurious": spurious,
    }


def corrections(lines: list[dict[str, Any]]) -> dict[str, int]:
    """Every line through one Session, in order: did each labelled correction supersede the line it names?"""
    s = Session(counter=get_counter("chars4"), window=10_000_000, decisions=DecisionDetector(), pin_share=1.0)
    ids: dict[str, str] = {}
    for line in lines:
        role = "user" if line["role"] == "instructions" else line["role"]
        m = s.add(role, line["text"]) if role != "tool" else s.add("tool", line["text"], autopin=False)
        ids[line["id"]] = m.id
    by_message: dict[str, list[Any]] = {}
    for st in s.statements.values():
        by_message.setdefault(st.message_id, []).append(st)
    # a correction of one value of several amends the old statement instead (its amended_by names the new one)
    amended: dict[str, list[Any]] = {}
    for st in s.statements.values():
        if st.amended_by and st.amended_by in s.statements:
            amended.setdefault(s.statements[st.amended_by].message_id, []).append(st)
    labelled = ok = 0
    unlabelled = 0
    for line in lines:
        mine = by_message.get(ids[line["id"]], [])
        replaced = [s.statements[st.supersedes] for st in mine if st.supersedes] + amended.get(ids[line["id"]], [])
        if line.get("supersedes"):
            labelled += 1
            target = ids[line["supersedes"]]
            ok += any(r.message_id == target for r in replaced)
        else:
            unlabelled += len(replaced)
    return {"labelled": labelled, "superseded_right": ok, "superseded_unlabelled": unlabelled}


def canary(
    windows: tuple[int, ...] = (2048, 4096),
    summarizers: tuple[str, ...] = ("mock-lossy", "mock-extractive"),
    *,
    ladder_only: bool = False,
    only: tuple[str, ...] = (),
) -> str:
    """The canary traces through every policy: probed words visible (all rounds, and the last
    round's probes alone), superseded words shown as current, facts lost, requests over the window."""
    from tailrent_tui.bench.runner import run_bench
    from tailrent_tui.core.policies import PolicySettings
    from tailrent_tui.scenarios.traces import get_trace

    rows = [
        "| trace | window | summarizer | policy | probed words visible | last round | stale shown | facts lost | "
        "probe misses | over window | max depth | folds |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, trace_windows in (
        ("canary-typed", windows),
        ("canary-natural", (8192,)),
        ("repetitive", (2048,)),
        ("canary-heldout", (4096, 8192)),
        ("canary-heldout3", (4096, 8192)),
        ("canary-heldout4", (4096, 8192)),
        ("canary-heldout5", (4096, 8192)),
        ("canary-heldout6", (4096, 8192)),
    ):
        if only and name not in only:
            continue
        for window in trace_windows:
            trace = get_trace(str(CORPUS / f"{name}.jsonl"))
            trace = trace.model_copy(update={"window": window})
            probes = [st for st in trace.steps if st.kind == "probe"]
            last_msg = max(st.line for st in trace.steps if st.kind == "message")
            last = {st.line for st in probes if st.line > last_msg}
            last_total = sum(len(st.expect) for st in probes if st.line in last)
            for summ in summarizers:
                # the baselines refold their own summaries: with the extractive summarizer, which keeps every
                # fact sentence, naive's summary grows past the window and takes hours; the lossy one shows them
                every = ("none", "naive", "naive-pin", "autocompact", "ladder")
                policies = every if summ == "mock-lossy" and not ladder_only else ("ladder",)
                r = run_bench(trace, policies, summarizer=summ, price_sheet="local", settings=PolicySettings(window=window))
                for pol, p in r.traces[0].policies.items():
                    last_miss = sum(1 for m in p.probe_misses if int(m.split(":")[0].split()[1]) in last)
                    rows.append(
                        f"| {name} | {window:,} | {summ} | {pol} | {p.recall_hits}/{p.recall_total} "
                        f"({p.recall_hits / max(1, p.recall_total):.0%}) | {last_total - last_miss}/{last_total} | "
                        f"{p.stale_shown}/{p.stale_total} | {p.facts_lost} | {len(p.probe_misses)} | {p.over_window} | "
                        f"{p.max_depth} | {p.folds} |"
                    )
    return "\n".join(rows)


def ask_session(turns: int = 30, window: int = 2048) -> str:
    """`tailrent ask --continue` for `turns` turns of ~500-token messages at `window`: the folds' depth and
    whether any request passed the window (the path a user takes: the CLI, its journal)."""
    import os
    import subprocess
    import sys
    import tempfile

    from tailrent_tui.store.sessions import find_session

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.filler import words

    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "TAILRENT_HOME": f"{tmp}/data",
            "TAILRENT_CONFIG_DIR": f"{tmp}/config",
            "TAILRENT_WINDOW": str(window),
            "TAILRENT_FSYNC": "false",
        }
        env.pop("TAILRENT_MODEL", None)
        os.makedirs(f"{tmp}/ws")
        sid = None
        for i in range(turns):
            body = words(i, 380)
            args = [sys.executable, "-m", "tailrent_tui", "--workspace", f"{tmp}/ws", "ask", "--model", "mock", "--json"]
            args += ["--continue"] if i else []
            out = subprocess.run(
                [*args, f"Step {i}: the build uses port {8000 + i}. {body}"], env=env, capture_output=True, text=True, check=True
            )
            sid = json.loads(out.stdout)["session"]
        events = list(find_session(f"{tmp}/data", sid).events())
    folds = [e.fold for e in events if e.type == "folded"]
    usage = [e for e in events if e.type == "usage_recorded"]
    return (
        f"{turns} turns of ~500 tokens at a {window:,} window through `tailrent ask --continue`: {len(folds)} folds, "
        f"max depth {max((f.depth for f in folds), default=0)}, {sum(u.context_tokens > window for u in usage)} of "
        f"{len(usage)} requests over the window, largest request {max(u.context_tokens for u in usage):,} tokens"
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def report(part: str, r: dict[str, Any], trained_on: tuple[str, ...] | None = None) -> str:
    from tailrent_tui.core._ledger_weights import TRAINED_ON

    trained = TRAINED_ON if trained_on is None else trained_on
    seen = " (the learned scorer was trained on this part: not a held-out figure)" if part in trained else ""
    out = [f"## {part}: {r['lines']} lines, {sum(k['statements'] for k in r['kinds'].values())} statements{seen}", ""]
    out.append("| kind | statements | recall | recall, kind right | detections | precision |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for k, v in r["kinds"].items():
        out.append(
            f"| {k} | {v['statements']} | {_pct(v['recall'])} | {_pct(v['recall_kind_ok'])} | {v['detections']} | "
            f"{_pct(v['precision'])} |"
        )
    out.append(
        f"| all | {sum(k['statements'] for k in r['kinds'].values())} | {_pct(r['recall'])} | {_pct(r['recall_kind_ok'])} | "
        f"{sum(k['detections'] for k in r['kinds'].values())} | {_pct(r['precision'])} |"
    )
    c = r["corrections"]
    out += [
        "",
        f"false pins on chatter: {_pct(r['false_pin_rate'])} of {r['chatter_lines']} lines with nothing load-bearing",
        f"kept verbatim (statements + the user's other words, ranked last): {_pct(r['kept_verbatim'])} of the "
        f"statements; {_pct(r['kept_on_chatter'])} of the chatter lines keep something",
        f"corrections: {c['superseded_right']} of {c['labelled']} superseded (or amended) what they correct; "
        f"{c['superseded_unlabelled']} supersessions no label asked for",
    ]
    if r["missed"]:
        out += ["", "missed:", *(f"  {m}" for m in r["missed"])]
    if r["spurious"]:
        out += ["", "found on chatter:", *(f"  {m}" for m in r["spurious"])]
    return "\n".join(out)


def bounds() -> str:
    """How long the detector takes on issue 22's bad input (median of five, one process)."""
    import statistics
    import time

    paste = "\n".join(f"RULE: never touch table t{i}." for i in range(1000))
    huge = "\n".join(f"tests/test_{i}.py::test_x PASSED" for i in range(50_000)) + "\nNever commit the fixtures.\n"
    long = "RULE: " + "never do that " * 2000
    rows = ["| input | detect() median of 5 |", "| --- | ---: |"]
    for name, text, role in (
        ("a thousand RULE lines in one paste", paste, "user"),
        ("a rule after a 50,000-line tool output", huge, "tool"),
        ("a 28,000-character statement", long, "user"),
    ):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            detect(text, role)
            times.append(time.perf_counter() - t0)
        rows.append(f"| {name} | {statistics.median(times) * 1000:,.0f} ms |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="both", help="a seen part, a .jsonl path, or both (the seen parts; a fresh part by name)")
    ap.add_argument("--misses", type=int, default=0, help="list up to N misses and spurious finds per part")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--canary", action="store_true", help="the canary traces through every policy instead")
    ap.add_argument("--ladder-only", action="store_true", help="with --canary: the ladder's rows alone (the baselines take long)")
    ap.add_argument("--only", nargs="+", default=(), metavar="TRACE", help="with --canary: these canary traces alone")
    ap.add_argument("--bounds", action="store_true", help="the detector's time on issue 22's bad input instead")
    ap.add_argument("--rules-only", action="store_true", help="the rules alone: the learned scorer admits nothing")
    ap.add_argument("--ask", type=int, metavar="TURNS", help="an ask-driven session of TURNS turns instead")
    args = ap.parse_args()
    if args.rules_only:
        from tailrent_tui.core import ledger

        ledger.ADMIT = 2.0
    if args.bounds:
        print(bounds())
        return
    if args.canary:
        print(canary(ladder_only=args.ladder_only, only=tuple(args.only)))
        return
    if args.ask:
        print(ask_session(args.ask))
        return
    parts = SEEN if args.part == "both" else (args.part,)
    results = {p: score(load(p), args.misses) for p in parts}
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print("\n\n".join(report(p, r) for p, r in results.items()))


if __name__ == "__main__":
    main()
