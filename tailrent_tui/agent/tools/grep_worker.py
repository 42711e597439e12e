"""The search half of grep, run as its own process so that a deadline or a cancel can kill it.

A regex that backtracks catastrophically (`(a+)+$` on a line of 40 a's) runs
for minutes inside one C call that holds the GIL: no thread can stop it, and
the app would freeze. In a child process it costs nothing to kill.

Standard library only, run as a script (`python -I -S grep_worker.py`) so it
starts in milliseconds. Reads one JSON job on stdin; writes JSON lines on
stdout: {"file": rel} before each file, {"match": text} for each shown match,
{"counts": {...}} after each file, so the parent keeps what was found before a kill.

Each file is opened as read_file opens it, by the same code: `workspace.py`
(standard library only) is loaded from its file, and each path is walked from
the workspace root one component at a time with O_NOFOLLOW (`open_beneath`),
then opened and checked on its fd (`open_regular`). A symlink swapped in after
the parent listed the files cannot lead out, and a hard-linked file, a FIFO or
a device is not read: it is reported as {"refused": rel, "why": text}.
"""

import importlib.util
import io
import json
import os
import re
import sys

_SNIFF = 8192


def _emit(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _load_workspace():
    """tailrent_tui/agent/workspace.py, loaded from its file (this process has no site-packages)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("_tailrent_workspace", os.path.join(here, "workspace.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {here}/workspace.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks its module up
    spec.loader.exec_module(module)
    return module


def _open(ws, root, data_dir, rel):
    """The file `rel`, opened beneath `root` as read_file opens it: (binary file, None) or (None, why)."""
    try:
        spot = ws.open_beneath(root, rel, data_dir=data_dir)
    except (ws.WorkspaceEscape, OSError) as exc:
        return None, str(exc) or f"cannot open {rel}"
    try:
        fd, _ = ws.open_regular(spot, "grep")
    except ws.FileRefused as exc:
        return None, str(exc)
    finally:
        spot.close()
    return os.fdopen(fd, "rb"), None


def main():
    job = json.load(sys.stdin)
    ws = _load_workspace()
    regex = re.compile(job["pattern"])
    max_matches, count_limit, max_chars = job["max_matches"], job["count_limit"], job["max_line_chars"]
    counts = {"matches": 0, "files_searched": 0, "binary_files_skipped": 0, "files_refused": 0, "counted_all": True}
    shown = 0
    for rel in job["files"]:
        fh, why = _open(ws, job["root"], job["data_dir"], rel)
        if fh is None:
            counts["files_refused"] += 1
            _emit({"refused": rel, "why": why})
            continue
        with fh:
            try:
                binary = b"\x00" in fh.read(_SNIFF)
                fh.seek(0)
            except OSError:
                binary = True
            if binary:
                counts["binary_files_skipped"] += 1
                continue
            counts["files_searched"] += 1
            _emit({"file": rel})
            lines = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline=None)
            try:
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
            except OSError:
                pass
            finally:
                lines.detach()
        _emit({"counts": counts})
        if not counts["counted_all"]:
            break
    _emit({"counts": counts, "done": True})


if __name__ == "__main__":
    main()
