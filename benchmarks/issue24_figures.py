"""Issue 24's figures, before (an earlier commit) and after (this tree): package size, the largest
class, the worst cyclomatic complexity, and grep's time.

    .venv/bin/pip install radon      # the complexity (not a dependency of tailrent)
    .venv/bin/python benchmarks/issue24_figures.py --before 270bbab

The earlier commit's tree is taken with `git archive` into a temporary directory. Package lines
count every `.py` line under tailrent_tui/ (`wc -l`), with and without the ledger scorer's
generated weights table (core/_ledger_weights.py, data written by a training script). A class's
size is its lines from `class` to its last statement; core/session.py's Session is left out (the
issue names it). The complexity is radon's cyclomatic complexity of every function and method
(closures counted on their own). grep's time is benchmarks/grep_bench.py's paired run of the two
trees (before and after alternating, one ratio per pair).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: data, not code: the learned scorer's weights, generated (benchmarks/train_ledger_scorer.py)
GENERATED = "tailrent_tui/core/_ledger_weights.py"
LEFT_OUT = "tailrent_tui/core/session.py:Session"


def modules(tree: Path) -> list[Path]:
    return sorted((tree / "tailrent_tui").rglob("*.py"))


def lines(paths: list[Path]) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in paths)


def largest_classes(tree: Path, n: int = 3) -> list[tuple[int, str]]:
    rows = []
    for path in modules(tree):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                rows.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(tree)}:{node.name}"))
    return sorted((r for r in rows if r[1] != LEFT_OUT), reverse=True)[:n]


def worst_complexity(tree: Path, n: int = 5) -> list[tuple[int, str]]:
    from radon.complexity import cc_visit
    from radon.visitors import Class

    rows: list[tuple[int, str]] = []

    def add(path: str, block: object, owner: str) -> None:
        rows.append((block.complexity, f"{path}:{owner}{block.name}"))  # type: ignore[attr-defined]
        for inner in getattr(block, "closures", []):
            add(path, inner, f"{owner}{block.name}.")  # type: ignore[attr-defined]

    for path in modules(tree):
        # radon lists a class's methods on their own too (with their class's name): the class itself is skipped
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if not isinstance(block, Class):
                owner = f"{block.classname}." if getattr(block, "classname", None) else ""
                add(str(path.relative_to(tree)), block, owner)
    return sorted(rows, reverse=True)[:n]


def figures(name: str, tree: Path) -> None:
    paths = modules(tree)
    code = [p for p in paths if str(p.relative_to(tree)) != GENERATED]
    print(f"### {name}\n")
    print(f"- modules: {len(paths)}; lines: {lines(paths):,} ({lines(code):,} without {GENERATED}, generated data)")
    shown = ", ".join(f"{where} ({size:,} lines)" for size, where in largest_classes(tree))
    print(f"- largest classes but {LEFT_OUT}: {shown}")
    print("- worst cyclomatic complexity (radon): " + ", ".join(f"{where} {cc}" for cc, where in worst_complexity(tree)))
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="270bbab", help="the earlier commit (default: 270bbab, the issue's review)")
    ap.add_argument("--runs", type=int, default=5, help="grep: runs of each tree after one warm-up round")
    args = ap.parse_args()
    try:
        import radon  # noqa: F401
    except ImportError:
        sys.exit("the complexity needs radon: .venv/bin/pip install radon")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
        (Path(tmp) / "before.tar").write_bytes(archive)
        with tarfile.open(Path(tmp) / "before.tar") as tar:
            tar.extractall(before, filter="data")
        figures(f"before: {args.before}", before)
        figures(f"after: {head} (this tree)", ROOT)
        print(f"### grep, {args.before} against {head}: benchmarks/grep_bench.py --before\n", flush=True)
        grep = [sys.executable, str(ROOT / "benchmarks" / "grep_bench.py"), "--before", str(before), "--runs", str(args.runs)]
        subprocess.run(grep, cwd=ROOT, check=False)


if __name__ == "__main__":
    main()
