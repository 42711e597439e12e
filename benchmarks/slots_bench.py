"""KV slots on the real engine (issue 14): a resume after the server restarted, with and
without the slot tailrent saved.

    .venv/bin/python benchmarks/slots_bench.py [--notes 140] [--ctx 8192]

`tailrent ask` (a real process, `--json`) builds a session of one long turn and one short
one on a llama.cpp server (xllamacpp, gemma3-270m, 2 threads) started with a slot dir;
each ask saves the slot at its end. The server is stopped and a new one started on the
same slot dir, then `ask --continue` runs twice more, each time after a restart: first
with the slot file there (restored before the request), then with the slot dir emptied
(the fallback). The table gives what the server reported for the first request of each
resume: the prompt tokens, those it evaluated (`timings.prompt_n`) and its prompt time,
with the save and restore figures tailrent printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.engine import assemble_model_file  # noqa: E402  (the repository is put on the path above)

TAILRENT = str(Path(sys.executable).with_name("tailrent"))


def start(slot_dir: Path, n_ctx: int) -> Any:
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = str(assemble_model_file())
    p.n_ctx = n_ctx
    p.cpuparams.n_threads = 2
    p.cpuparams_batch.n_threads = 2
    p.hostnames = ["127.0.0.1"]
    p.port = 0
    p.sampling.seed = 42
    p.sampling.temp = 0.0
    p.endpoint_slots = True
    p.slot_save_path = str(slot_dir) + "/"  # llama.cpp joins path and name with no separator
    return xlc.Server(p)


def ask(env: dict[str, str], ws: Path, url: str, *args: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [TAILRENT, "--workspace", str(ws), "ask", "--model", f"openai:{url}", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ask failed: {proc.stderr.strip()[-500:]}")
    out = json.loads(proc.stdout)
    out["wall_s"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=140, help="sentences in the first message (~22 tokens each)")
    ap.add_argument("--ctx", type=int, default=8192)
    a = ap.parse_args()
    long = " ".join(
        f"Note {i}: the service on port {8000 + i} keeps its cache for {i % 7 + 1} minutes because request {i} said so."
        for i in range(a.notes)
    )
    with tempfile.TemporaryDirectory(prefix="slots-bench-") as tmp:
        root = Path(tmp)
        slot_dir, ws = root / "slots", root / "ws"
        slot_dir.mkdir()
        ws.mkdir()
        env = {
            **os.environ,
            "TAILRENT_HOME": str(root / "data"),
            "TAILRENT_CONFIG_DIR": str(root / "config"),
            "TAILRENT_FSYNC": "false",
            "TAILRENT_MAX_REPLY_TOKENS": "8",
            "TAILRENT_SLOTS_DIR": str(slot_dir),
        }
        for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "OLLAMA_HOST"):
            env.pop(var, None)

        server = start(slot_dir, a.ctx)
        first = ask(env, ws, server.listening_address, long)
        second = ask(env, ws, server.listening_address, "--continue", "And the cache?")
        del server
        gc.collect()

        server = start(slot_dir, a.ctx)
        restored = ask(env, ws, server.listening_address, "--continue", "Which port?")
        del server
        gc.collect()

        for f in slot_dir.iterdir():
            f.unlink()
        server = start(slot_dir, a.ctx)
        cold = ask(env, ws, server.listening_address, "--continue", "Again?")
        del server
        gc.collect()

    save = second["slot"]["save"]
    print(
        f"model gemma3-270m (xllamacpp, 2 threads), n_ctx {a.ctx}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"first turn: {first['usage'][0]['prompt_tokens']:,} prompt tokens evaluated "
        f"in {first['usage'][0]['prompt_ms'] / 1000:.1f} s; "
        f"slot saved at the end of each ask: {save['tokens']:,} tokens, {save['bytes'] / 1048576:.1f} MB in {save['ms']:.0f} ms"
    )
    print()
    print(f"{'resume after a server restart':<34} {'prompt':>7} {'evaluated':>9} {'share':>6} {'prompt s':>8}  {'restore':>8}")
    rows = [("slot restored (hash matched)", restored), ("slot file removed (fallback)", cold)]
    for label, run in rows:
        u = run["usage"][0]
        share = u["evaluated_tokens"] / u["prompt_tokens"]
        r = run["slot"]["restore"]
        restore = f"{r['ms']:.0f} ms" if r.get("ok") and r.get("ms") is not None else "-"
        print(
            f"{label:<34} {u['prompt_tokens']:>7,} {u['evaluated_tokens']:>9,} {share:>6.1%} "
            f"{u['prompt_ms'] / 1000:>8.2f}  {restore:>8}"
        )
    print()
    print("what tailrent said before the request:")
    for label, run in rows:
        print(f"  {label}: " + " | ".join(n for n in run["notices"] if "slot" in n.lower() or n.startswith("resume")))
    ok = restored["usage"][0]["evaluated_tokens"] <= 0.05 * restored["usage"][0]["prompt_tokens"]
    print(f"\ngoal: a restored slot re-evaluates <= 5% of the context: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
