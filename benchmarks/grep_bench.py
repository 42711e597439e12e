"""grep as the model's call runs it: `tailrent tool grep` timed as a whole process (issue 24).

    .venv/bin/python benchmarks/grep_bench.py [--runs 5]
    git worktree add /tmp/before 270bbab
    .venv/bin/python benchmarks/grep_bench.py --before /tmp/before

With `--before DIR` (a checkout of an earlier commit) each case runs the package in DIR
and this one in turn, before and after alternating run by run, both through this
interpreter (`PYTHONPATH=DIR` for the earlier one), and the table gives each one's
wall time and the ratio before/after, pair by pair: a machine whose speed drifts
during the run moves both sides of a pair alike.

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


def _what(out: dict) -> str:
    meta = out.get("meta", {})
    stopped = meta.get("timed_out", "stopped after" in (out.get("cut") or ""))
    return f"{meta.get('matches', 0):,} matches in {meta.get('files_searched', 0):,} files, timed out: {stopped}"


def _paired(cmds: list[tuple[list[str], dict[str, str]]], runs: int, cwd: Path) -> list[tuple[list[float], list[float], dict]]:
    """Each command in turn, run by run (A B A B ...), after one warm-up round, in `cwd` (not a checkout:
    `python -c` puts the working directory first on the path)."""
    walls: list[list[float]] = [[] for _ in cmds]
    cpus: list[list[float]] = [[] for _ in cmds]
    last: list[dict] = [{} for _ in cmds]
    for i in range(runs + 1):
        for k, (argv, env) in enumerate(cmds):
            cpu0, t0 = _children_cpu(), time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, cwd=cwd)
            wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
            last[k] = json.loads(done.stdout)
            if i:
                walls[k].append(wall)
                cpus[k].append(cpu)
    return list(zip(walls, cpus, last, strict=True))


def _compare(name: str, before: tuple[list[float], list[float], dict], after: tuple[list[float], list[float], dict]) -> str:
    ratios = [b / a for b, a in zip(before[0], after[0], strict=True)]
    return (
        f"| {name} | {statistics.median(before[0]):.3f} | {statistics.median(after[0]):.3f} "
        f"| {statistics.median(ratios):.1f}x ({min(ratios):.1f}-{max(ratios):.1f}) "
        f"| {_what(before[2])} | {_what(after[2])} |"
    )


def _row(name: str, walls: list[float], cpus: list[float], out: dict) -> str:
    what = _what(out)
    return (
        f"| {name} | {statistics.median(walls):.3f} ({min(walls):.3f}-{max(walls):.3f}) "
        f"| {statistics.median(cpus):.3f} ({min(cpus):.3f}-{max(cpus):.3f}) | {what} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", type=Path, help="a checkout of an earlier commit: its grep against this one's, paired")
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
        if args.before is not None:
            _main_paired(args.before.resolve(), cases, env, args.runs, base)
            return
        print(f"{args.runs} runs each after one warm-up; seconds, median (min-max)\n")
        print("| case | wall s | cpu s | result |")
        print("| --- | --- | --- | --- |")
        for name, tool_args, ws in cases:
            argv = [TAILRENT, "tool", "grep", json.dumps(tool_args), "--workspace", str(ws), "--json"]
            print(_row(name, *_time(argv, env, args.runs)), flush=True)
        version = subprocess.run([TAILRENT, "--version"], capture_output=True, text=True, env=env, check=False).stdout
        startup, _, _ = _time([TAILRENT, "--version"], env, args.runs)
        print(f"\nprocess start-up alone (`tailrent --version`: {version.strip()}): {statistics.median(startup):.3f} s wall")


def _main_paired(before: Path, cases: list[tuple[str, dict[str, str], Path]], env: dict[str, str], runs: int, cwd: Path) -> None:
    run = [sys.executable, "-c", "from tailrent_tui.cli import main; main()"]
    old_env = {**env, "PYTHONPATH": str(before)}
    print(f"before: {before} ({_head(before)}), after: {ROOT} ({_head(ROOT)})")
    print(f"{runs} runs each, before and after alternating, after one warm-up round; wall seconds, median\n")
    print("| case | before s | after s | before/after, median (min-max) | before | after |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, tool_args, ws in cases:
        argv = [*run, "tool", "grep", json.dumps(tool_args), "--workspace", str(ws), "--json"]
        old, new = _paired([(argv, old_env), (argv, env)], runs, cwd)
        print(_compare(name, old, new), flush=True)


def _head(tree: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    main()
