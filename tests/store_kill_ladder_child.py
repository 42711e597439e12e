"""Helper process for the kill test during folds, spills and `repair --apply`.

Like store_kill_child.py: it imports the store once, then for each line
`RUN SEED SESSION_DIR` on stdin forks a child that opens the session through
the real `open_session` (lock, replay, journal writer) and, forever, adds
messages, admits big tool results (spilled: spill file, then pointer), folds
the two oldest unpinned messages (archive file, then Folded event) and now
and then runs `repair_session(apply=True)` on its own closed session. After
each step has returned it prints `RUN msg ID`, `RUN spill ID SPILL_ID`,
`RUN fold N` or `RUN repair`. The parent kills the child with SIGKILL; this
process prints `pid RUN PID` when a child starts and `dead RUN` once reaped.

A line may hold `RUN SEED DIE WHAT NTH KEEP SESSION_DIR`: the child then dies by itself (os._exit, as
a kill leaves things: no cleanup) at an exact point instead of whenever the
SIGKILL lands, so that a case found by the random kills can be replayed. WHAT
names a write: `report-fold` (the line that reports a fold: the fold is
journaled, its report never goes out), `journal-folded` (a Folded event's
journal line) or `journal-marker` (the line that closes off a torn tail); at
the NTH such write the child writes only its first KEEP bytes and dies.
"""

import os
import random
import sys
from pathlib import Path

from folds import fold_span

from tailrent_tui.core.rungs.fold import Folded, oldest_unpinned
from tailrent_tui.core.rungs.spill import admit_tool_result
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.store.journal import JOURNAL_NAME
from tailrent_tui.store.repair import repair_session
from tailrent_tui.store.sessions import SessionDir, close_session, open_session

OUT = sys.stdout.fileno()


def say(text: str) -> None:
    os.write(OUT, (text + "\n").encode())


def work_forever(sd: SessionDir, run: str, seed: int) -> None:
    rng = random.Random(seed)
    i = 0
    while True:
        opened = open_session(sd, fsync=False)
        session = opened.session
        for _ in range(rng.randrange(3, 12)):
            i += 1
            step = rng.random()
            if step < 0.45:
                m = session.add("user", f"r{run}-{i} " + "w" * rng.choice((10, 400, 4000)))
                say(f"{run} msg {m.id}")
            elif step < 0.75:
                m = admit_tool_result(
                    session, "grep", f"r{run}-{i}\n" + "hit line\n" * rng.choice((300, 3000)), sd.spills(), threshold=50
                )
                say(f"{run} spill {m.id} {m.spill_id}")
            else:
                span = oldest_unpinned(session, 2)
                if len(span) == 2:
                    ev = fold_span(session, span, summarizer=LossySummarizer(), guard="off", archive=sd.archive())
                    if isinstance(ev, Folded):
                        say(f"{run} fold {ev.fold.fold_no}")
        close_session(opened)
        if rng.random() < 0.3:
            repair_session(sd, apply=True)
            say(f"{run} repair")


def die_at(what: str, nth: int, keep: int) -> None:
    """Make this (forked) process die at the NTH write that matches WHAT, after KEEP of its bytes."""
    real_write = os.write
    seen = 0

    def matches(fd: int, head: bytes) -> bool:
        if what == "report-fold":
            return fd == OUT and b" fold " in head
        if fd == OUT or not os.readlink(f"/proc/self/fd/{fd}").endswith(JOURNAL_NAME):
            return False
        if what == "journal-folded":
            return head.startswith(b"{") and b'"type":"folded"' in head[:120]
        return what == "journal-marker" and head.startswith(b'\n{"journal_torn"')

    def write(fd: int, data: bytes | memoryview) -> int:
        nonlocal seen
        head = bytes(data[:160])
        if matches(fd, head):
            seen += 1
            if seen == nth:
                if keep:
                    real_write(fd, bytes(data[:keep]))
                os._exit(9)
        return real_write(fd, data)

    os.write = write  # type: ignore[assignment]


def main() -> None:
    for line in sys.stdin:
        run, seed, path = line.split(maxsplit=2)
        die = path.split(maxsplit=4) if path.startswith("DIE ") else None
        if die is not None:
            path = die[4]
        pid = os.fork()
        if pid == 0:
            try:
                if die is not None:
                    die_at(die[1], int(die[2]), int(die[3]))
                work_forever(SessionDir(Path(path.strip())), run, int(seed))
            except BaseException as exc:  # the parent fails the test on this line
                say(f"ERROR {type(exc).__name__}: {exc}")
                os._exit(1)
        say(f"pid {run} {pid}")
        os.waitpid(pid, 0)
        say(f"dead {run}")


if __name__ == "__main__":
    main()
