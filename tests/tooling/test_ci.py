"""CI runs the static checks before the tests: ruff, mypy and the import contracts left pytest for `.ci/run`."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_ruff_mypy_and_the_import_contracts_before_the_tests():
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#")]
    tests = next(i for i, ln in enumerate(commands) if ln.endswith("python -m pytest"))
    for check in (".venv/bin/ruff check", ".venv/bin/mypy", ".venv/bin/lint-imports"):
        at = [i for i, ln in enumerate(commands) if ln.startswith(check)]
        assert at and at[0] < tests, f"{check} is not run before the tests in .ci/run"
    assert commands.index("set -euo pipefail") < min(i for i, ln in enumerate(commands) if ln.startswith(".venv/bin/"))
