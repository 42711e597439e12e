"""The layers import downwards only, as DESIGN.md orders them (import-linter contracts in pyproject.toml).

cli > commands > ui > scenarios > agent > settings > models | store > caps > core,
and core imports no textual, httpx or aiofiles.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 kept, 0 broken" in proc.stdout
