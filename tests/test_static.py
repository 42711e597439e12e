"""Static checks: ruff and mypy (with the pydantic plugin), as configured in pyproject.toml.

They run here, so the README's test command (and `.ci/run`) fails the day either finds
something.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    assert path.exists(), f"{name} is not installed in this environment: install the 'test' extra"
    return str(path)


def _ruff(paths: list[str]) -> str:
    proc = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "--output-format", "concise", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return proc.stdout if proc.returncode else ""


def _mypy_errors() -> list[str]:
    """mypy's error lines over the package (pyproject's `files`), each `path:line: error: ...`."""
    proc = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if re.match(r"[^:]+:\d+: error:", line)]


def _python_files() -> list[str]:
    return [str(p.relative_to(ROOT)) for d in ("tailrent_tui", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]


def test_ruff_is_clean():
    found = _ruff(_python_files())
    assert not found, found


def test_mypy_is_clean():
    found = _mypy_errors()
    assert not found, "\n".join(found)
