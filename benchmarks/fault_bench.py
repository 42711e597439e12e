"""The fault table: every hostile case the test suite tries, by class, and its outcome (issue 13).

    .venv/bin/python benchmarks/fault_bench.py

Hostile cases are tests marked ``@pytest.mark.fault("class")`` (a parametrized test
counts once per case). This runs them all with pytest and tabulates, per class, the
cases tried and how many held (passed). Nothing here is written by hand: a class
whose cases fail shows its failures. It passes `--full-counts`, so the stress cases
run at their full counts (100 SIGKILLs of the journal writer, 60 during folds), where
the suite runs fewer.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


class _Classes:
    """A pytest plugin that records each collected test's fault class."""

    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            mark = item.get_closest_marker("fault")
            if mark is not None and mark.args:
                self.by_id[item.nodeid] = str(mark.args[0])


def main() -> None:
    plugin = _Classes()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "faults.xml"
        progress = io.StringIO()
        with contextlib.redirect_stdout(progress):  # pytest's dots stay out of the table
            code = pytest.main(
                # -n 0: in this process, where the plugin sees each test's class (not in xdist's workers)
                [
                    "-q",
                    "-n",
                    "0",
                    "-m",
                    "fault",
                    "--full-counts",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:warnings",
                    f"--junitxml={junit}",
                    "tests",
                ],
                plugins=[plugin],
            )
        tally = [line for line in progress.getvalue().splitlines() if " in " in line and ("passed" in line or "failed" in line)]
        results: dict[str, str] = {}
        for case in ET.parse(junit).iter("testcase"):
            cls, name = case.get("classname", ""), case.get("name", "")
            outcome = "held"
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "broke"
            elif case.find("skipped") is not None:
                outcome = "skipped"
            results[f"{cls}::{name}"] = outcome
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for nodeid, fault in plugin.by_id.items():
        path, _, name = nodeid.partition("::")
        key = path.removesuffix(".py").replace("/", ".") + "::" + name
        table[fault][results.get(key, "not run")] += 1
    print("| class | cases | held | broke | skipped |")
    print("|---|---|---|---|---|")
    total: Counter[str] = Counter()
    for fault in sorted(table):
        c = table[fault]
        total.update(c)
        print(f"| {fault} | {sum(c.values())} | {c['held']} | {c['broke'] + c['not run']} | {c['skipped']} |")
    print(f"| **all** | {sum(total.values())} | {total['held']} | {total['broke'] + total['not run']} | {total['skipped']} |")
    if tally:
        print(f"\npytest: {tally[-1].strip('= ')}")
    if code not in (0, 5):
        print(progress.getvalue()[-4000:])  # what broke, for the reader of RESULTS.md
    sys.stdout.flush()
    if code not in (0, 5):
        sys.exit(int(code))


if __name__ == "__main__":
    main()
