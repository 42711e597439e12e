"""grep as the model's call runs it: `tailrent tool grep` timed as a whole process (issue 24).

    .venv/bin/python benchmarks/grep_bench.py [--runs 5]

Two cases: a catastrophic pattern, `(a+)+$`, over a file whose second line is
40 a's and a '!' (the hand-written search backtracked on it until its 10 s
grep_timeout cap); and `def [a-z_]+\\(` over this repository's tracked files
(`git archive HEAD`, so the tree is the same whatever is untracked). Each run is
a fresh process (start-up included, as the model's call pays it); the figures
are the median, min and max of wall time and of CPU time (the process and its
children, rg included) after one warm-up run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAILRENT = str(Path(sys.executable).with_name("tailrent"))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], list[float], dict]:
    walls, cpus, last = [], [], {}
    for i in range(runs + 1):
        cpu0, t0 = _children_cpu(), time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        last = json.loads(done.stdout) if "--json" in argv else {}
        if i:  # the first run warms the caches
            walls.append(wall)
            cpus.append(cpu)
    return walls, cpus, last


def _row(name: str, walls: list[float], cpus: list[float], out: dict) -> str:
    meta = out["meta"]
    what = f"{meta['matches']:,} matches in {meta['files_searched']:,} files, timed out: {meta['timed_out']}"
    return (
        f"| {name} | {statistics.median(walls):.3f} ({min(walls):.3f}-{max(walls):.3f}) "
        f"| {statistics.median(cpus):.3f} ({min(cpus):.3f}-{max(cpus):.3f}) | {what} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        env = {**os.environ, "TAILRENT_HOME": str(base / "home"), "TAILRENT_CONFIG_DIR": str(base / "config")}
        evil = base / "evil"
        evil.mkdir()
        (evil / "evil.txt").write_text("aaa\n" + "a" * 40 + "!\n")
        repo = base / "repo"
        repo.mkdir()
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        tar_path = base / "head.tar"
        tar_path.write_bytes(archive)
        with tarfile.open(tar_path) as tar:
            tar.extractall(repo, filter="data")
        cases = [
            ("`(a+)+$`, a 40-character line", {"pattern": "(a+)+$"}, evil),
            ("`def [a-z_]+\\(` over the repository", {"pattern": r"def [a-z_]+\("}, repo),
        ]
        print(f"{args.runs} runs each after one warm-up; seconds, median (min-max)\n")
        print("| case | wall s | cpu s | result |")
        print("| --- | --- | --- | --- |")
        for name, tool_args, ws in cases:
            argv = [TAILRENT, "tool", "grep", json.dumps(tool_args), "--workspace", str(ws), "--json"]
            print(_row(name, *_time(argv, env, args.runs)), flush=True)
        version = subprocess.run([TAILRENT, "--version"], capture_output=True, text=True, env=env, check=False).stdout
        startup, _, _ = _time([TAILRENT, "--version"], env, args.runs)
        print(f"\nprocess start-up alone (`tailrent --version`: {version.strip()}): {statistics.median(startup):.3f} s wall")


if __name__ == "__main__":
    main()
