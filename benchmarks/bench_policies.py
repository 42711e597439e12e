"""Every policy on the built-in traces: tail rent, folds, recall; optionally on the real engine.

    .venv/bin/python benchmarks/bench_policies.py                   # article + migration-week, two price sheets
    .venv/bin/python benchmarks/bench_policies.py --engine          # + the article on llama.cpp (gemma3-270m)
    .venv/bin/python benchmarks/bench_policies.py --engine --engine-steps 400   # + migration-week's first 400 lines

Prints markdown tables (for benchmarks/RESULTS.md), the goal ratios, then the JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tailrent_tui.bench.runner import BenchResult, run_bench  # noqa: E402
from tailrent_tui.scenarios.traces import get_trace  # noqa: E402


def table(result: BenchResult) -> str:
    out = []
    for t in result.traces:
        out.append(
            f"**{t.trace}** (window {t.window:,}, {t.tokenizer}, {t.summarizer}, price {t.price_sheet}"
            + (f", engine {t.engine}" if t.engine else "")
            + ")\n"
        )
        cols = [
            "policy",
            "prompt",
            "cached",
            "re-evaluated",
            "$",
            "folds",
            "peak ctx",
            "recall",
            "facts lost",
            "guard share",
            "false pins",
            "expiries",
        ]
        if t.engine:
            cols += ["srv prompt", "srv cached", "srv evaluated", "predicted eval", "error", "prompt s"]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "---|" * len(cols))
        for n, p in t.policies.items():
            fp = f"{p.false_pins}/{p.chatter_lines}" if p.chatter_lines else "-"
            row = [
                n,
                f"{p.prompt_tokens:,}",
                f"{p.cached_tokens:,}",
                f"{p.reevaluated_tokens:,}",
                f"{p.billed_usd:.4f}",
                str(p.folds),
                f"{p.peak_context_tokens:,}",
                f"{p.recall_hits}/{p.recall_total}",
                str(p.facts_lost),
                f"{p.guard_share:.1%}",
                fp,
                str(p.expiries),
            ]
            if t.engine and p.engine:
                e = p.engine
                row += [
                    f"{e.prompt_tokens:,}",
                    f"{e.cached_tokens:,}",
                    f"{e.evaluated_tokens:,}",
                    f"{e.predicted_evaluated_tokens:,}",
                    e.evaluated_error_text,
                    f"{e.prompt_ms / 1000:.1f}",
                ]
            out.append("| " + " | ".join(row) + " |")
        pol = t.policies
        if {"none", "naive", "ladder"} <= set(pol):
            lad = pol["ladder"].reevaluated_tokens
            out.append("")
            out.append(
                f"ladder / naive re-evaluated: {lad / max(1, pol['naive'].reevaluated_tokens):.3f}; "
                f"ladder / none (floor): {lad / max(1, pol['none'].reevaluated_tokens):.3f}"
                + (
                    f"; ladder / autocompact: {lad / max(1, pol['autocompact'].reevaluated_tokens):.3f}"
                    if "autocompact" in pol
                    else ""
                )
            )
        out.append("")
    return "\n".join(out)


def progress(policy: str, i: int, total: int) -> None:
    if total >= 1000 and i % 500 == 0:
        print(f"  {policy}: {i}/{total}", file=sys.stderr, flush=True)


def start_server(n_ctx: int):
    import xllamacpp as xlc

    from tests.support.engine import assemble_model_file

    p = xlc.CommonParams()
    p.model.path = str(assemble_model_file())
    p.n_ctx = n_ctx
    p.cpuparams.n_threads = 2
    p.cpuparams_batch.n_threads = 2
    p.hostnames = ["127.0.0.1"]
    p.port = 0
    p.sampling.seed = 42
    p.sampling.temp = 0.0
    return xlc.Server(p)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", nargs="*", default=["article", "migration-week"])
    ap.add_argument("--prices", nargs="*", default=["anthropic-5m", "local"])
    ap.add_argument("--engine", action="store_true", help="also run the article on llama.cpp (gemma3-270m)")
    ap.add_argument("--engine-steps", type=int, default=0, help="also run this many migration-week lines on it")
    ap.add_argument("--n-ctx", type=int, default=32768)
    ap.add_argument("--no-json", action="store_true", help="print the tables only")
    args = ap.parse_args()

    everything = BenchResult()
    for name in args.traces:
        trace = get_trace(name)
        for price in args.prices:
            t0 = time.perf_counter()
            r = run_bench(trace, price_sheet=price, progress=progress)
            print(f"[{name} / {price}: {time.perf_counter() - t0:.0f} s]", file=sys.stderr)
            everything.traces += r.traces
            print(table(r), flush=True)

    if args.engine:
        server = start_server(args.n_ctx)
        try:
            url = f"openai:{server.listening_address}"
            runs = [get_trace("article")]
            if args.engine_steps:
                mw = get_trace("migration-week")
                mw.steps = mw.steps[: args.engine_steps]
                mw.name = f"migration-week[:{args.engine_steps}]"
                runs.append(mw)
            for trace in runs:
                t0 = time.perf_counter()
                r = run_bench(trace, engine=url, price_sheet="local", progress=progress)
                print(f"[{trace.name} on the engine: {time.perf_counter() - t0:.0f} s]", file=sys.stderr)
                everything.traces += r.traces
                print(table(r), flush=True)
        finally:
            del server
            gc.collect()

    if not args.no_json:
        print("```json")
        print(json.dumps(everything.to_json(), indent=1))
        print("```")


if __name__ == "__main__":
    main()
