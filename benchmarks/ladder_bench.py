"""One ladder (issue 11): the app's ladder is the bench's, folds shrink, requests fit.

    .venv/bin/python benchmarks/ladder_bench.py              # parity + the ask-driven 2,048-token session
    .venv/bin/python benchmarks/ladder_bench.py --engine     # + 30 ask turns on llama.cpp, the model summarizing

1. Parity: `tailrent bench --driver agent` against `--driver core`, JSON compared,
   on both built-in traces with both deterministic summarizers.
2. `tailrent ask` (the real command, a process per turn) with the mock, a
   2,048-token window and 12 prompts of about 500 tokens: folds, whether any
   grew the context, the largest request against the window.
3. With --engine: 30 `tailrent ask` turns of about 170 tokens against llama.cpp
   (gemma3-270m, window 3,072) with the model writing the fold summaries.

Every figure is read back from the session's journal, not from the command's output.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tailrent_tui.bench.runner import run_bench  # noqa: E402
from tailrent_tui.core.messages import Folded, UsageRecorded  # noqa: E402
from tailrent_tui.scenarios.traces import get_trace  # noqa: E402
from tailrent_tui.store.sessions import find_session  # noqa: E402
from tests.core.test_ladder_plans import _VOCABULARY  # noqa: E402

TAILRENT = str(Path(sys.executable).with_name("tailrent"))
CHATTER = _VOCABULARY  # the chatter of tests/core/test_ladder_plans.py: one list of filler words


def parity() -> None:
    print("## bench --driver agent against --driver core\n")
    print(
        "| trace | summarizer | policies | agent == core | ladder folds | folds that grew "
        "| requests over the window | seconds (agent / core) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for trace in ("article", "migration-week"):
        # the baselines fold on every add with a summarizer that barely shrinks: minutes on the week
        slow = trace == "migration-week"
        for summarizer in ("mock-lossy", "mock-extractive"):
            policies = ["none", "ladder"] if slow and summarizer == "mock-extractive" else None
            kw = {"summarizer": summarizer, "price_sheet": "local"}
            if policies:
                kw["policies"] = policies
            t0 = time.perf_counter()
            agent = run_bench(get_trace(trace), driver="agent", **kw).to_json()
            t1 = time.perf_counter()
            core = run_bench(get_trace(trace), driver="core", **kw).to_json()
            t2 = time.perf_counter()
            ladder = agent["extras"][0]["policies"]["ladder"]
            names = ", ".join(agent["traces"][0]["policies"])
            print(
                f"| {trace} | {summarizer} | {names} | {'yes' if agent == core else 'NO'} | "
                f"{agent['traces'][0]['policies']['ladder']['folds']} | {ladder['folds_grew']} | "
                f"{ladder['requests_over_window']} | {t1 - t0:.1f} / {t2 - t1:.1f} |"
            )
    print()


def chatter(seed: int, words: int) -> str:
    import random

    rng = random.Random(seed)
    return " ".join(rng.choice(CHATTER) for _ in range(words))


def journal_figures(data: Path, session_id: str, window: int) -> dict:
    events = list(find_session(data, session_id).events())
    folds = [e.fold for e in events if isinstance(e, Folded)]
    usage = [e for e in events if isinstance(e, UsageRecorded)]
    rejected = Counter((f.rejected or "").split(": ", 1)[-1].split(";")[0] for f in folds if f.rejected)
    errors = [abs((u.prompt_tokens - u.context_tokens) / u.prompt_tokens) for u in usage if u.prompt_tokens]
    return {
        "turns": len(usage),
        "folds": len(folds),
        "folds that grew": sum(f.context_after >= f.context_before for f in folds),
        "deepest fold": max((f.depth for f in folds), default=0),
        "summaries by": dict(Counter(f.summarizer for f in folds)),
        "model summaries refused, by reason": dict(rejected),
        "largest request (predicted tokens)": max((u.context_tokens for u in usage), default=0),
        "window": window,
        "requests over the window": sum(u.context_tokens > window for u in usage),
        "server prompt tokens, largest": max((u.prompt_tokens or 0 for u in usage), default=0),
        "spills": sum(e.type == "spilled" for e in events)
        + sum(e.type == "message_added" and e.message.kind.value == "spill_pointer" for e in events),
        "predicted against server prompt tokens, median error": (f"{sorted(errors)[len(errors) // 2]:.1%}" if errors else "-"),
    }


def ask_session(model: str, window: int, prompts: list[str], extra_env: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        data, ws = Path(tmp) / "data", Path(tmp) / "ws"
        ws.mkdir()
        env = {
            **os.environ,
            "TAILRENT_HOME": str(data),
            "TAILRENT_CONFIG_DIR": str(Path(tmp) / "cfg"),
            "TAILRENT_WINDOW": str(window),
            "TAILRENT_FSYNC": "false",
            **extra_env,
        }
        session_id, failed = None, []
        t0 = time.perf_counter()
        for i, prompt in enumerate(prompts):
            cmd = [TAILRENT, "--workspace", str(ws), "ask", "--model", model, "--json", *(["--continue"] if i else []), prompt]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            try:
                out = json.loads(proc.stdout)
            except json.JSONDecodeError:
                failed.append(f"turn {i}: {proc.stderr.strip()[-200:]}")
                continue
            session_id = out["session"]
            if out.get("error"):
                failed.append(f"turn {i}: {out['error']['message']}")
        took = time.perf_counter() - t0
        figures = journal_figures(data, session_id, window) if session_id else {}
        figures["failed turns"] = failed
        figures["wall seconds"] = round(took)
        return figures


def show(title: str, figures: dict) -> None:
    print(f"## {title}\n")
    for k, v in figures.items():
        print(f"- {k}: {v}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", action="store_true", help="also 30 ask turns on llama.cpp with model summaries")
    ap.add_argument("--skip-parity", action="store_true")
    ap.add_argument("--skip-mock", action="store_true", help="leave out the ask session on the mock")
    args = ap.parse_args()
    if not args.skip_parity:
        parity()
    if not args.skip_mock:
        prompts = [f"Step {i}: the build uses port {8000 + i}. " + chatter(i, 380) for i in range(12)]
        show("tailrent ask, mock model, window 2,048, 12 prompts of about 500 tokens", ask_session("mock", 2048, prompts, {}))
    if args.engine:
        import xllamacpp as xlc

        from tests.support.engine import assemble_model_file

        p = xlc.CommonParams()
        p.model.path = str(assemble_model_file())
        p.n_ctx = 3072
        p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 2
        p.hostnames = ["127.0.0.1"]
        p.port = 0
        p.sampling.temp = 0.0
        server = xlc.Server(p)
        prompts = [
            f"Step {i}: we moved the billing worker to port {5410 + i} in eu-west-2 for ticket PAY-{4410 + i}, "
            "because the old host ran out of memory at 2 GB. " + chatter(100 + i, 90)
            for i in range(30)
        ]
        show(
            "tailrent ask on llama.cpp (gemma3-270m, window 3,072), 30 turns of about 170 tokens, the model summarizing",
            ask_session(f"openai:{server.listening_address}", 3072, prompts, {"TAILRENT_FOLD_SUMMARIZER": "model"}),
        )
        del server


if __name__ == "__main__":
    main()
