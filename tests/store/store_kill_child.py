"""Helper process for the journal kill test.

Run as `python store_kill_child.py`: it imports the store once, then for each
line `RUN SEED JOURNAL` on stdin forks a child that appends events to JOURNAL
with the sync JournalWriter forever, printing `RUN ID` after each append has
returned. The forked child is what the test kills with SIGKILL; this process
prints `pid RUN PID` when a child starts and `dead RUN` once it has been
reaped, so every id the child printed comes before `dead`.
"""

import os
import random
import sys
from pathlib import Path

from tailrent_tui.core.messages import Message, MessageAdded
from tailrent_tui.store.journal import JournalWriter

OUT = sys.stdout.fileno()


def say(text: str) -> None:
    os.write(OUT, (text + "\n").encode())


def append_forever(path: Path, run: str, seed: int) -> None:
    rng = random.Random(seed)
    # fsync off: SIGKILL ends the process, not the kernel, so a returned write is already
    # in the page cache; fsync guards power loss, which this test cannot simulate
    writer = JournalWriter(path, session_id="kill-test", fsync=False)
    i = 0
    while True:
        # now and then a big line, so that some kills land in the middle of its write
        size = 300_000 if rng.random() < 0.05 else rng.choice((10, 300, 5_000, 60_000))
        mid = f"r{run}-{i}"
        event = MessageAdded(message=Message(id=mid, role="user", content="é" * size, tokens=size // 4))
        if not writer.append(event):
            say(f"ERROR {writer.last_error}")
            os._exit(1)
        say(f"{run} {mid}")
        i += 1


def main() -> None:
    for line in sys.stdin:
        run, seed, journal = line.split(maxsplit=2)
        pid = os.fork()
        if pid == 0:
            append_forever(Path(journal.strip()), run, int(seed))
        say(f"pid {run} {pid}")
        os.waitpid(pid, 0)
        say(f"dead {run}")


if __name__ == "__main__":
    main()
