"""SIGKILL a process that is appending to the journal, 100 times; nothing whose append returned is lost.

All 100 kills hit the same journal, so each new writer also has to start a
fresh line after whatever torn tail the previous kill left.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tailrent_tui.core.messages import MessageAdded
from tailrent_tui.store.journal import load_journal

HELPER = Path(__file__).with_name("store_kill_child.py")
ROOT = Path(__file__).resolve().parents[1]


def test_sigkill_at_random_moments_loses_no_returned_append(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    rng = random.Random(20261102)
    returned: list[str] = []
    torn_seen = 0
    helper = subprocess.Popen(
        [sys.executable, str(HELPER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert helper.stdin is not None and helper.stdout is not None
    try:
        for run in range(100):
            helper.stdin.write(f"{run} {rng.randrange(1 << 30)} {journal}\n")
            helper.stdin.flush()
            wanted = rng.randrange(0, 12)
            pid = None
            got = 0
            # the child may print before the helper reports its pid: read until both are in
            while pid is None or got < wanted:
                line = helper.stdout.readline().split()
                assert line and line[0] != "ERROR", line
                if line[0] == "pid":
                    pid = int(line[2])
                else:
                    returned.append(line[1])
                    got += 1
            # a random extra moment so that some kills land inside a write, not only between appends
            if rng.random() < 0.5:
                time.sleep(rng.random() * 0.004)
            os.kill(pid, signal.SIGKILL)
            while True:
                line = helper.stdout.readline().split()
                assert line and line[0] != "ERROR", line
                if line[0] == "dead":
                    break
                # printed after our last read but before the kill: that append returned too
                returned.append(line[1])

            result = load_journal(journal)
            torn_seen += result.torn
            ids = [e.message.id for e in result.events if isinstance(e, MessageAdded)]
            assert len(ids) == len(set(ids)), "an event was written twice"
            order = {i: n for n, i in enumerate(ids)}
            missing = [i for i in returned if i not in order]
            assert not missing, f"run {run}: appends that returned are missing after reload: {missing[:5]}"
            positions = [order[i] for i in returned]
            assert positions == sorted(positions), "events on disk are out of order"
    finally:
        helper.stdin.close()
        try:
            helper.wait(timeout=30)
        except subprocess.TimeoutExpired:
            helper.kill()
            raise
    assert len(returned) > 300
    print(f"{len(returned)} returned appends checked over 100 kills; {torn_seen} reloads stepped over a torn tail")
