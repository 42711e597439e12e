"""The search half of grep, run as its own process so that a deadline or a cancel can kill it.

A regex that backtracks catastrophically (`(a+)+$` on a line of 40 a's) runs
for minutes inside one C call that holds the GIL: no thread can stop it, and
the app would freeze. In a child process it costs nothing to kill.

Standard library only, run as a script (`python -I -S grep_worker.py`) so it
starts in milliseconds. Reads one JSON job on stdin; writes JSON lines on
stdout: {"file": rel} before each file, {"match": text} for each shown match,
{"counts": {...}} after each file, so the parent keeps what was found before a kill.
"""

import json
import re
import sys

_SNIFF = 8192


def _emit(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def main():
    job = json.load(sys.stdin)
    regex = re.compile(job["pattern"])
    max_matches, count_limit, max_chars = job["max_matches"], job["count_limit"], job["max_line_chars"]
    counts = {"matches": 0, "files_searched": 0, "binary_files_skipped": 0, "counted_all": True}
    shown = 0
    for rel, path in job["files"]:
        try:
            with open(path, "rb") as fh:
                binary = b"\x00" in fh.read(_SNIFF)
        except OSError:
            binary = True
        if binary:
            counts["binary_files_skipped"] += 1
            continue
        counts["files_searched"] += 1
        _emit({"file": rel})
        try:
            lines = open(path, encoding="utf-8", errors="replace", newline=None)  # noqa: SIM115
        except OSError:
            continue
        with lines:
            for lineno, line in enumerate(lines, start=1):
                if regex.search(line) is None:
                    continue
                counts["matches"] += 1
                if shown < max_matches:
                    text = line.rstrip("\n")
                    if len(text) > max_chars:
                        text = text[:max_chars] + " …[line shortened]"
                    _emit({"match": f"{rel}:{lineno}: {text}"})
                    shown += 1
                if counts["matches"] >= count_limit:
                    counts["counted_all"] = False
                    break
        _emit({"counts": counts})
        if not counts["counted_all"]:
            break
    _emit({"counts": counts, "done": True})


if __name__ == "__main__":
    main()
