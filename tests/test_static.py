"""Static checks: ruff and mypy (with the pydantic plugin), as configured in pyproject.toml.

They run here, so the README's test command (and `.ci/run`) fails the day either finds
something. Issue 16 splits the app, the agent and the engine's speed work across
ui/, agent/, core/, cli.py and commands/; until that lands, those are checked apart
and allowed to fail.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# under rework for issue 16; their tests move with them
PENDING = ("tailrent_tui/ui", "tailrent_tui/agent", "tailrent_tui/core", "tailrent_tui/cli.py", "tailrent_tui/commands")
PENDING_TESTS = ("tests/test_ui_", "tests/test_agent_", "tests/test_core_", "tests/ui_helpers.py")
PENDING_REASON = "ui/, agent/, core/, cli.py and commands/ are being reworked for issue 16"


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.skip(f"{name} is not installed in this environment: install the 'test' extra")
    return str(path)


def _pending(path: str) -> bool:
    return path.startswith(PENDING) or path.startswith(PENDING_TESTS)


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
    found = _ruff([p for p in _python_files() if not _pending(p)])
    assert not found, found


@pytest.mark.xfail(strict=False, reason=PENDING_REASON)
def test_ruff_is_clean_in_the_parts_being_reworked():
    found = _ruff([p for p in _python_files() if _pending(p)])
    assert not found, found


@pytest.fixture(scope="module")
def mypy_errors() -> list[str]:
    return _mypy_errors()


def test_mypy_is_clean(mypy_errors):
    found = [e for e in mypy_errors if not _pending(e)]
    assert not found, "\n".join(found)


@pytest.mark.xfail(strict=False, reason=PENDING_REASON)
def test_mypy_is_clean_in_the_parts_being_reworked(mypy_errors):
    found = [e for e in mypy_errors if _pending(e)]
    assert not found, "\n".join(found)
