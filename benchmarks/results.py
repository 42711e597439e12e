"""Run every benchmark and write benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/results.py            # all of them (about 30-60 min on 2 shared cores)
    .venv/bin/python benchmarks/results.py --only engine journal

Each section records the exact command and its output, verbatim, with the
machine's load before and after: these machines are shared and noisy, so the
figures to compare are the ratios measured inside one run. The summary at the
top (between the summary markers) is written by hand from these outputs and
kept when the file is regenerated.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
TAILRENT = str(Path(PY).with_name("tailrent"))

BENCHES: list[tuple[str, str, list[str]]] = [
    ("engine", "Engine: appends per second, cl100k against bare tiktoken (issue 2)", [PY, "benchmarks/engine.py"]),
    ("journal", "Journal: loading a 100,000-event session (issue 3)", [PY, "benchmarks/journal_bench.py"]),
    ("models", "Model client overhead against the llama.cpp engine (issue 4)", [PY, "benchmarks/models_bench.py"]),
    ("ui", "UI: cold start, a 10,000-message session, key to panel update (issue 5)", [PY, "benchmarks/ui_bench.py"]),
    ("article", "Policies on the article trace (issues 6, 8)", [TAILRENT, "bench", "--trace", "article"]),
    (
        "article-local",
        "Policies on the article trace, local price sheet (re-evaluated tokens)",
        [TAILRENT, "bench", "--trace", "article", "--price", "local"],
    ),
    ("week", "Policies on migration-week (issues 6, 8)", [TAILRENT, "bench", "--trace", "migration-week"]),
    (
        "week-local",
        "Policies on migration-week, local price sheet",
        [TAILRENT, "bench", "--trace", "migration-week", "--price", "local"],
    ),
    (
        "week-slots",
        "Policies on migration-week, local engine with KV slot restore (issue 14)",
        [TAILRENT, "bench", "--trace", "migration-week", "--price", "local-slots"],
    ),
    (
        "week-1h",
        "Policies on migration-week, anthropic-1h: keep-warm pings against a longer TTL (issue 14)",
        [TAILRENT, "bench", "--trace", "migration-week", "--price", "anthropic-1h"],
    ),
    (
        "engine-article",
        "Predicted against measured on the real llama.cpp engine (issue 6)",
        [PY, "benchmarks/bench_policies.py", "--traces", "article", "--prices", "local", "--engine", "--no-json"],
    ),
    ("shell", "run_shell streaming 1 GB into a spill: extra peak RSS (issue 7)", [PY, "benchmarks/shell_spill_bench.py"]),
    ("grep", "grep by ripgrep: a catastrophic pattern and this repository (issue 24)", [PY, "benchmarks/grep_bench.py"]),
    (
        "issue24",
        "Issue 24: one owner per feature — figures",
        [PY, "benchmarks/issue24_figures.py", "--before", "270bbab"],
    ),
    (
        "mcp",
        "MCP tool servers: start-up with three, overhead per call, schema tokens per server (issue 25)",
        [PY, "benchmarks/mcp_bench.py"],
    ),
    ("guard", "Fact guard speed (issue 8)", [PY, "benchmarks/guard_bench.py"]),
    (
        "ladder",
        "One ladder: bench drivers agree, folds shrink, requests fit; ask on the mock (issue 11)",
        [PY, "benchmarks/ladder_bench.py"],
    ),
    (
        "ladder-engine",
        "One ladder on llama.cpp: 30 ask turns, the model writing the fold summaries (issue 11)",
        [PY, "benchmarks/ladder_bench.py", "--engine", "--skip-parity", "--skip-mock"],
    ),
    (
        "guard-corpus",
        "Fact guard on the labelled coding-chat corpus: precision and recall (issue 11)",
        [PY, "benchmarks/guard_bench.py", "--corpus"],
    ),
    (
        "ledger-corpus",
        "The ledger's statement detector on a corpus written by other hands: precision and recall per kind (issue 22)",
        [PY, "benchmarks/ledger_bench.py"],
    ),
    (
        "ledger-canary",
        "The ledger on the canary sessions: probed words after five rounds, stale values, facts lost (issue 22)",
        [PY, "benchmarks/ledger_bench.py", "--canary"],
    ),
    (
        "ledger-ask",
        "The ledger through tailrent ask: 30 turns of ~500 tokens at a 2,048 window, fold depth (issue 22)",
        [PY, "benchmarks/ledger_bench.py", "--ask", "30"],
    ),
    (
        "week-extractive",
        "Policies on migration-week with the extractive summarizer: the guard's cost is linear (issue 22)",
        [TAILRENT, "bench", "--trace", "migration-week", "--summarizer", "mock-extractive"],
    ),
    ("faults", "Hardening: the hostile cases by class, and how many held (issues 13 and 27)", [PY, "benchmarks/fault_bench.py"]),
    (
        "morning-after",
        "The morning after on llama.cpp: predicted against measured prompt tokens per turn, cl100k against auto (issue 12)",
        [PY, "benchmarks/morning_after_bench.py"],
    ),
    (
        "slots",
        "KV slots on llama.cpp: a resume after a server restart with and without the saved slot (issue 14)",
        [PY, "benchmarks/slots_bench.py"],
    ),
]

START, END = "<!-- summary -->", "<!-- /summary -->"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(key: str, title: str, cmd: list[str]) -> str:
    shown = " ".join(("tailrent" if c == TAILRENT else ".venv/bin/python" if c == PY else c) for c in cmd)
    print(f"[{key}] {shown}", file=sys.stderr, flush=True)
    before = load()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - t0
    out = proc.stdout.strip() or "(no output)"
    if proc.returncode != 0:
        out += f"\n\n[exit code {proc.returncode}]\n{proc.stderr.strip()[-2000:]}"
    return f"## {title}\n\n`{shown}` — {took:.0f} s wall, load average {before} before, {load()} after\n\n```\n{out}\n```\n"


def _sections(text: str) -> dict[str, str]:
    """The sections of an existing RESULTS.md by title, so a partial run keeps the others."""
    out: dict[str, str] = {}
    title: str | None = None
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("## ") and not fenced:  # a heading inside a bench's output is not a section
            if title is not None:
                out[title] = "\n".join(lines).rstrip() + "\n"
            title, lines = line[3:].strip(), []
        if title is not None:
            lines.append(line)
    if title is not None:
        out[title] = "\n".join(lines).rstrip() + "\n"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=[b[0] for b in BENCHES])
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = ap.parse_args()
    chosen = [b for b in BENCHES if not args.only or b[0] in args.only]
    fresh = {b[1]: run(*b) for b in chosen}
    # read the file only now: a long run must not undo what was written into it meanwhile
    old = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    summary = old[old.index(START) : old.index(END) + len(END)] if START in old and END in old else f"{START}\n{END}"
    kept = _sections(old)
    # the file's own order, each section rerun in its place; a section written by hand (no bench
    # makes it) stays; a bench's section the file lacks goes after the one listed before it
    order = list(kept)
    for i, (_, title, _) in enumerate(BENCHES):
        if title not in order:
            after = next((BENCHES[j][1] for j in range(i - 1, -1, -1) if BENCHES[j][1] in order), None)
            order.insert(order.index(after) + 1 if after is not None else len(order), title)
    kept.update(fresh)
    sections = [kept[t] for t in order if t in kept]
    head = (
        "# Benchmark results\n\n"
        "Regenerate with `.venv/bin/python benchmarks/results.py` "
        f"(this run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}). "
        "The machines are shared and noisy: compare the ratios inside one run, not absolute times.\n\n"
    )
    args.out.write_text(head + summary + "\n\n" + "\n".join(sections), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
