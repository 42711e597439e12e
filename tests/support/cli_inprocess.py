"""Run the `tailrent` command in this process, the way its console script does.

`run_cli(args, env=..., cwd=...)` calls `tailrent_tui.cli:main` (the console
script's entry point) with `sys.argv`, the environment and the working
directory set as a real process would see them, captures what it writes to
stdout and stderr, and returns a `subprocess.CompletedProcess` with the exit
code. An exception that escapes `main` is printed to the captured stderr as
the interpreter would print it (a "Traceback" and exit code 1), so a test that
checks for "no traceback" still can fail.

Everything is put back afterwards: the environment, the working directory,
sys.argv and the standard streams. What a subprocess adds (its own exit code
from the kernel, a fresh interpreter, file-size limits, signals, a terminal)
is kept for the few cases that need it; see tests/test_settings_faults.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


class _Stream(io.TextIOWrapper):
    """A text stream over bytes, like a pipe's: `.buffer` exists for code that writes bytes."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="surrogateescape", newline=None, write_through=True)

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        self.flush()
        raw = self.buffer.getvalue()  # type: ignore[attr-defined]
        return raw.decode("utf-8", errors="replace")


@contextlib.contextmanager
def _process_like(env: Mapping[str, str], cwd: Path, argv: Sequence[str]) -> Iterator[tuple[_Stream, _Stream]]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv = sys.argv
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    out, err = _Stream(), _Stream()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = list(argv)
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    try:
        with warnings.catch_warnings():
            _interpreter_warnings()
            yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _interpreter_warnings() -> None:
    """Warnings as a fresh interpreter shows them: on stderr (pytest would record them instead),
    with Python's default filters (deprecations and resource warnings hidden)."""
    warnings.resetwarnings()
    warnings.simplefilter("default")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # type: ignore[no-untyped-def]
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show


def run_cli(args: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`tailrent ARGS` through `tailrent_tui.cli:main`, in this process; stdin is empty."""
    from tailrent_tui.cli import main

    argv = ["tailrent", *args]
    with _process_like(env, cwd, argv) as (out, err):
        try:
            main()
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:  # sys.exit("message") prints the message and exits 1
                print(exc.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            # what the interpreter would print for an uncaught exception ("Traceback (most recent call last):" …)
            traceback.print_exc(file=err)
            code = 1
    return subprocess.CompletedProcess(argv, code, out.text(), err.text())
