"""Extra peak RSS while run_shell streams a 1 GB output into a spill file.

Goal: under 64 MB of extra peak RSS for a command that prints 1 GB, with the
spill sink writing to a temp file (the whole output kept on disk, only the
rung-1 head of `shell_max_bytes` held in memory).

Each measurement runs in a fresh child process, so one run's peak cannot hide
another's: the child notes its RSS after importing the tools, runs the
command, then reads its peak RSS (ru_maxrss). For contrast, a second child
reads a smaller output the naive way (subprocess.run, capture_output), whose
peak grows with the output.

    .venv/bin/python benchmarks/shell_spill_bench.py [--mb 1000] [--naive-mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_MB = 64
MB = 1_000_000


def _rss_now() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _peak_rss() -> int:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _command(nbytes: int) -> str:
    return f"head -c {nbytes} /dev/zero | tr '\\0' x"


def child_spill(nbytes: int) -> dict:
    from tailrent_tui.agent.tools import ToolContext, run_tool

    workdir = Path(tempfile.mkdtemp(prefix="tailrent-bench-"))
    spill_path = workdir / "spill.out"

    def sink():
        return spill_path.open("wb"), str(spill_path)

    ctx = ToolContext(root=workdir, spill_sink=sink)
    before = _rss_now()
    peak_before = _peak_rss()
    started = time.perf_counter()
    result = run_tool("run_shell", {"command": _command(nbytes), "timeout": 600}, ctx)
    seconds = time.perf_counter() - started
    peak_after = _peak_rss()
    spilled = spill_path.stat().st_size if spill_path.exists() else 0
    spill_path.unlink(missing_ok=True)
    workdir.rmdir()
    return {
        "bytes": result.meta.get("bytes"),
        "spilled_bytes": spilled,
        "content_chars": len(result.content),
        "is_error": result.is_error,
        "exit_code": result.meta.get("exit_code"),
        "seconds": seconds,
        "rss_before": before,
        "peak_before": peak_before,
        "peak_after": peak_after,
    }


def child_naive(nbytes: int) -> dict:
    before = _rss_now()
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", _command(nbytes)], capture_output=True)
    text = done.stdout.decode("utf-8", errors="replace")
    seconds = time.perf_counter() - started
    return {
        "bytes": len(done.stdout),
        "chars": len(text),
        "seconds": seconds,
        "rss_before": before,
        "peak_after": _peak_rss(),
    }


def run_child(mode: str, nbytes: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--bytes", str(nbytes)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000, help="output size for the spill run, in MB (10^6 bytes)")
    parser.add_argument("--naive-mb", type=int, default=200, help="output size for the naive contrast run (0: skip)")
    parser.add_argument("--child", choices=["spill", "naive"], help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "spill":
        print(json.dumps(child_spill(args.bytes)))
        return
    if args.child == "naive":
        print(json.dumps(child_naive(args.bytes)))
        return

    spill = run_child("spill", args.mb * MB)
    extra = (spill["peak_after"] - spill["rss_before"]) / 2**20
    print(f"run_shell with a spill sink, command printing {args.mb:,} MB:")
    print(
        f"  output read        {spill['bytes']:,} bytes in {spill['seconds']:.1f} s "
        f"({spill['bytes'] / MB / spill['seconds']:.0f} MB/s)"
    )
    print(
        f"  spill file         {spill['spilled_bytes']:,} bytes (whole output kept: "
        f"{spill['spilled_bytes'] == spill['bytes'] == args.mb * MB})"
    )
    print(f"  rung-1 head        {spill['content_chars']:,} characters in the outcome")
    print(f"  RSS before         {spill['rss_before'] / 2**20:.1f} MiB")
    print(f"  peak RSS after     {spill['peak_after'] / 2**20:.1f} MiB")
    print(f"  extra peak RSS     {extra:.1f} MiB  (goal < {GOAL_MB} MB: {'met' if extra < GOAL_MB else 'MISSED'})")
    if args.naive_mb:
        naive = run_child("naive", args.naive_mb * MB)
        naive_extra = (naive["peak_after"] - naive["rss_before"]) / 2**20
        print(f"naive subprocess.run(capture_output=True), {args.naive_mb:,} MB, for contrast:")
        print(
            f"  extra peak RSS     {naive_extra:.1f} MiB in {naive['seconds']:.1f} s "
            f"({naive_extra / args.naive_mb:.2f} MiB per MB of output)"
        )


if __name__ == "__main__":
    main()
