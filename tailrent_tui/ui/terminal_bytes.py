"""Bytes from the terminal that are not UTF-8 are keys too: decoded with U+FFFD, never a crash.

Textual's Linux driver decodes stdin with a strict incremental UTF-8 decoder in
its input thread: one byte that is not UTF-8 (typed in a latin-1 terminal,
pasted from a binary) raised UnicodeDecodeError there and took the app down with
the unsent input. `install` makes the driver's decoder replace what it cannot
decode (a valid character split across two reads still joins: the decoder is
incremental). The input then holds U+FFFD where the byte was, and the message
is sent and journaled as any other.
"""

from __future__ import annotations

import codecs
import functools
from typing import Any


def _replacing(encoding: str) -> Any:
    return functools.partial(codecs.getincrementaldecoder(encoding), errors="replace")


def install() -> None:
    """Make Textual's Linux driver decode stdin with replacement (once; harmless where it is absent)."""
    try:
        from textual.drivers import linux_driver
    except ImportError:  # another platform's driver
        return
    if getattr(linux_driver, "getincrementaldecoder", None) is not _replacing:
        linux_driver.getincrementaldecoder = _replacing
