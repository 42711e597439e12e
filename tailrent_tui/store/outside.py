"""What a session keeps outside its context: fold originals, spills, memory entries.

The probe behind `/recall` and `tailrent recall`, and the model's
`search_history` tool, read them all through `read_outside`. An entry that
cannot be read (an archive file that is missing, cut short or not JSON, an
altered spill, a damaged memory entry) becomes one line naming its file, and
the walk goes on: a damaged file costs its own entry, never the search.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from typing import TypeVar

from tailrent_tui.core.ports import FoldArchive, Memory, SpillStore, StoreEntryError
from tailrent_tui.core.session import Session

SNIPPET = 160
SNIPPETS_PER_TEXT = 3

K = TypeVar("K")
V = TypeVar("V")

# What reading one entry outside the context may raise besides a missing or
# damaged entry: a spill too big to read whole or a file the user cannot read
# (OSError), a line range past the end or a hand-made file whose name is not a
# key (ValueError). None of them is a fault of the reader.
UNREADABLE = (StoreEntryError, OSError, ValueError)


@dataclass(frozen=True)
class OutsideText:
    label: str  # where it lives, as the probe reports it: "fold #2 archive", "spill 1a2b3c4d", "memory plan"
    pointer: str  # how the model brings it back, as a search hit names it
    text: str


@dataclass
class Outside:
    texts: list[OutsideText] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # one line each, naming the file

    def read(self, reader: Callable[[K], V], key: K) -> V | None:
        """What `reader` reads under `key`, or None with the reason kept in `unreadable`."""
        try:
            return reader(key)
        except UNREADABLE as exc:
            self.unreadable.append(" ".join(str(exc).split()))
            return None

    def by_label(self) -> dict[str, str]:
        """The texts joined per label, so that a fold's originals count as one place."""
        joined: dict[str, list[str]] = {}
        for t in self.texts:
            joined.setdefault(t.label, []).append(t.text)
        return {label: "\n".join(texts) for label, texts in joined.items()}

    def search(self, query: str) -> list[str]:
        """One line a match, case-insensitive: the pointer, then the text around the match."""
        pattern = re.compile(re.escape(query), re.IGNORECASE)
        hits = []
        for t in self.texts:
            for m in islice(pattern.finditer(t.text), SNIPPETS_PER_TEXT):
                a = max(0, m.start() - SNIPPET // 2)
                b = min(len(t.text), m.end() + SNIPPET // 2)
                hits.append(f"{t.pointer}: …{' '.join(t.text[a:b].split())}…")
        return hits


def read_outside(session: Session, archive: FoldArchive, spills: SpillStore, memory: Memory | None) -> Outside:
    """Every fold's originals, every spill and every memory entry of the session, oldest fold first."""
    out = Outside()
    for f in session.folds:
        for m in out.read(archive.read_originals, f.fold_no) or []:
            out.texts.append(OutsideText(f"fold #{f.fold_no} archive", f"fold #{f.fold_no} · {m.role} {m.id}", m.content))
    for spill_id in session.spills:
        text = out.read(spills.read_spill, spill_id)
        if text is not None:
            out.texts.append(OutsideText(f"spill {spill_id[:8]}", f'spill {spill_id} (read_spill("{spill_id}"))', text))
    if memory is not None:
        keys = memory.keys()
        for key in keys:
            text = out.read(memory.recall, key)
            if text is not None:
                out.texts.append(OutsideText(f"memory {key}", f'memory {key} (recall("{key}"))', text))
    return out
