"""SIGKILL a process that is appending to the journal, again and again; nothing whose append returned is lost.

All the kills hit the same journal, so each new writer also has to start a
fresh line after whatever torn tail the previous kill left.

The suite kills 25 and 15 times (the same seeds, so the same first runs);
`benchmarks/fault_bench.py` passes `--full-counts` and kills 100 and 60 times.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tailrent_tui.core.messages import Folded, MessageAdded
from tailrent_tui.store.journal import load_journal
from tailrent_tui.store.sessions import SessionDir

HELPER = Path(__file__).with_name("store_kill_child.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.fault("SIGKILL during appends")
def test_sigkill_at_random_moments_loses_no_returned_append(tmp_path: Path, full_counts: bool) -> None:
    kills = 100 if full_counts else 25
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
        for run in range(kills):
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
    assert len(returned) > 3 * kills  # about 5.5 a kill: the kills landed after appends, not only before the first
    print(f"{len(returned)} returned appends checked over {kills} kills; {torn_seen} reloads stepped over a torn tail")


LADDER_HELPER = Path(__file__).with_name("store_kill_ladder_child.py")


class LadderLog:
    """What the ladder child reported: each step listed here had returned when it was reported."""

    def __init__(self) -> None:
        self.msgs: list[str] = []
        self.spills: dict[str, str] = {}
        self.folds: list[int] = []
        self.repairs = 0

    def take(self, words: list[str]) -> None:
        kind = words[1]
        if kind == "msg":
            self.msgs.append(words[2])
        elif kind == "spill":
            self.msgs.append(words[2])
            self.spills[words[2]] = words[3]
        elif kind == "fold":
            self.folds.append(int(words[2]))
        elif kind == "repair":
            self.repairs += 1

    def check(self, sd: SessionDir, run: int) -> list[int]:
        """After a death: the journal loads and replays, and every step that returned is in it with its files.

        A fold journaled but not reported is allowed: the kill can land between its journal line and
        its report (so it did not return to anyone). What must hold is that fold numbers are never
        reused or skipped on disk, and that every fold that was reported is there. Returns the
        journal's fold numbers."""
        assert sd.journal_path.exists(), f"run {run}: no journal"
        events = load_journal(sd.journal_path).events
        added = {e.message.id: e.message for e in events if isinstance(e, MessageAdded)}
        missing = [m for m in self.msgs if m not in added]
        assert not missing, f"run {run}: steps that returned are missing after reload: {missing[:5]}"
        for mid, spill_id in self.spills.items():
            assert added[mid].spill_id == spill_id and sd.spills().exists(spill_id), f"run {run}: spill {spill_id}"
        journaled = [e.fold.fold_no for e in events if isinstance(e, Folded)]
        assert journaled == list(range(1, len(journaled) + 1)), f"run {run}: fold numbers reused or skipped: {journaled}"
        assert self.folds == sorted(set(self.folds)), f"run {run}: a fold number reported twice: {self.folds}"
        lost = sorted(set(self.folds) - set(journaled))
        assert not lost, f"run {run}: folds that returned are missing after reload: {lost}"
        assert all(sd.archive().path_for(n).exists() for n in journaled), f"run {run}: a fold without its archive"
        sd.replay(save_torn=False)  # and the whole journal replays
        return journaled


def ladder_helper(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(LADDER_HELPER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(tmp_path / "state")},
    )


def close_helper(helper: subprocess.Popen[str]) -> None:
    assert helper.stdin is not None
    helper.stdin.close()
    try:
        helper.wait(timeout=30)
    except subprocess.TimeoutExpired:
        helper.kill()
        raise


@pytest.mark.fault("SIGKILL during folds/spills/repair")
def test_sigkill_during_folds_spills_and_repair_apply_loses_nothing_that_returned(tmp_path: Path, full_counts: bool) -> None:
    """60 kills (15 in the suite) of a process that spills, folds and runs `repair --apply` on one session:
    after each, the journal loads, and every step that returned is there with its files."""
    kills = 60 if full_counts else 15
    sd = SessionDir.create(tmp_path / "data", tokenizer="chars4", session_id="ladder-kill")
    rng = random.Random(20261201)
    log = LadderLog()
    helper = ladder_helper(tmp_path)
    assert helper.stdin is not None and helper.stdout is not None
    try:
        for run in range(kills):
            helper.stdin.write(f"{run} {rng.randrange(1 << 30)} {sd.path}\n")
            helper.stdin.flush()
            wanted = rng.randrange(0, 25)
            pid, got = None, 0
            while pid is None or got < wanted:
                words = helper.stdout.readline().split()
                assert words and words[0] != "ERROR", words
                if words[0] == "pid":
                    pid = int(words[2])
                else:
                    log.take(words)
                    got += 1
            if rng.random() < 0.5:
                time.sleep(rng.random() * 0.01)
            os.kill(pid, signal.SIGKILL)
            while True:
                words = helper.stdout.readline().split()
                assert words and words[0] != "ERROR", words
                if words[0] == "dead":
                    break
                log.take(words)
            log.check(sd, run)
    finally:
        close_helper(helper)
    # per kill, about a dozen steps: enough messages, spills, folds and repairs that kills landed inside each
    counts = (len(log.msgs), len(log.spills), len(log.folds), log.repairs)
    assert (
        len(log.msgs) > 2.5 * kills and len(log.spills) > kills / 2 and len(log.folds) > kills / 3 and log.repairs > kills / 12
    ), counts
    print(
        f"{kills} kills: {len(log.msgs)} messages, {len(log.spills)} spills, {len(log.folds)} folds, "
        f"{log.repairs} repairs checked"
    )


#: Deaths at exact points (the child dies by itself there, as a kill leaves things), each run
#: `(seed, death)`: `death` is `WHAT NTH KEEP` (see store_kill_ladder_child.py), or None for a
#: SIGKILL after the child's first three reports.
EXACT_DEATHS = {
    # the case the random kills found once in CI: fold 2 is journaled, its report never goes
    # out, and a later run's fold 3 is reported; nothing was lost, the report was
    "between a fold's journal line and its report": [(5, "report-fold 1 0"), (6, "report-fold 2 0"), (7, None)],
    # the next run must number its fold as the torn one was (no gap, no repeat)
    "a fold's journal line torn in half": [(5, "journal-folded 2 120"), (6, "report-fold 2 0"), (7, None)],
    # the fix-up after a torn line cut off after its newline: the fragment is a whole line now
    "the torn-line marker cut after its newline": [(5, "journal-folded 1 60"), (6, "journal-marker 1 1"), (7, None)],
    "the torn-line marker cut inside": [(5, "journal-folded 1 60"), (6, "journal-marker 1 12"), (7, None), (8, None)],
}


@pytest.mark.fault("SIGKILL during folds/spills/repair")
@pytest.mark.parametrize("case", list(EXACT_DEATHS), ids=list(EXACT_DEATHS))
def test_deaths_at_exact_points_of_a_fold_lose_nothing_that_returned(tmp_path: Path, case: str) -> None:
    sd = SessionDir.create(tmp_path / "data", tokenizer="chars4", session_id="ladder-kill")
    log = LadderLog()
    helper = ladder_helper(tmp_path)
    assert helper.stdin is not None and helper.stdout is not None
    journaled: list[int] = []
    try:
        for run, (seed, death) in enumerate(EXACT_DEATHS[case]):
            helper.stdin.write(f"{run} {seed} {'DIE ' + death + ' ' if death else ''}{sd.path}\n")
            helper.stdin.flush()
            pid, got = None, 0
            while True:
                words = helper.stdout.readline().split()
                assert words and words[0] != "ERROR", words
                if words[0] == "dead":
                    break
                if words[0] == "pid":
                    pid = int(words[2])
                else:
                    log.take(words)
                    got += 1
                if death is None and pid is not None and got == 3:
                    os.kill(pid, signal.SIGKILL)
            journaled = log.check(sd, run)
    finally:
        close_helper(helper)
    unreported = sorted(set(journaled) - set(log.folds))
    if case == "between a fold's journal line and its report":
        # a fold on disk that was never reported, with folds reported after it
        assert unreported and max(log.folds) > unreported[0], (journaled, log.folds)
    assert log.folds, "no fold returned: the case did not get as far as its point"
