"""The morning after on llama.cpp: predicted against measured prompt tokens, per turn (issue 12).

    .venv/bin/python benchmarks/morning_after_bench.py [--tokenizers cl100k auto]

Runs the session of tests/ui/test_morning_after.py — the real app driven by Pilot,
22 turns carrying facts in a 1,536-token window, folds the model is asked to
write, one reply cancelled with escape, a resume two hours later, probes, one
more turn — on gemma3-270m served by llama.cpp, once per tokenizer: `cl100k`
(what the app counted with before) and `auto` (the server's own tokenizer and
the framing its chat template adds). For each run: the worst and the median
error of the predicted context against the server's `prompt_tokens`, over the
conversation's requests (fold summaries are requests of their own, reported
apart), read back from the session's journal.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tailrent_tui.core.messages import Folded, UsageRecorded  # noqa: E402
from tests.support.engine import assemble_model_file, start_llama_server  # noqa: E402
from tests.ui import test_morning_after  # noqa: E402
from tests.ui.test_morning_after import (  # noqa: E402
    error_figures,
    morning_settings,
    prediction_errors,
    this_morning,
    yesterday,
)


def run(url: str, tokenizer: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TAILRENT_CONFIG_DIR"] = str(Path(tmp) / "config")
        settings = morning_settings(Path(tmp), url, tokenizer)
        t0 = time.perf_counter()
        yesterday(settings)
        sd, probes = this_morning(settings)
        took = time.perf_counter() - t0
        events = sd.events()
        summaries = [
            (e.context_tokens - e.prompt_tokens) / e.prompt_tokens
            for e in events
            if isinstance(e, UsageRecorded) and e.purpose == "summary" and e.prompt_tokens
        ]
        return {
            **error_figures(prediction_errors(sd)),
            "summary requests": len(summaries),
            "summary median": error_figures(summaries)["median"] if summaries else None,
            "folds": sum(isinstance(e, Folded) for e in events),
            "facts visible": f"{sum(h for h, _, _ in probes)}/{sum(t for _, t, _ in probes)}",
            "seconds": round(took),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", nargs="+", default=["cl100k", "auto"], choices=["cl100k", "chars4", "auto"])
    args = ap.parse_args()
    # cl100k folds later and refolds more: on a loaded machine one turn can take minutes
    test_morning_after.TURN_SECONDS = 1200.0
    server = start_llama_server(assemble_model_file())
    print(
        "| tokenizer | turns | worst error | median error | folds | summary requests (median error) | facts visible | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for tokenizer in args.tokenizers:
        f = run(server.listening_address, tokenizer)
        summary = f"{f['summary requests']} ({f['summary median']:.1%})" if f["summary requests"] else "0"
        print(
            f"| {tokenizer} | {f['turns']} | {f['worst']:+.1%} | {f['median']:.1%} | {f['folds']} | {summary} | "
            f"{f['facts visible']} | {f['seconds']} |",
            flush=True,
        )
    del server


if __name__ == "__main__":
    main()
