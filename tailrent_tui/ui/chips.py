"""Paste chips: the `[pasted N lines]` labels that stand for a big paste in the input and in a message
on its way, and how two sets of them merge without one paste's text taking another's place."""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field


def paste_lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def chip_label(lines: int, taken: Container[str]) -> str:
    """`[pasted N lines]`, numbered (`#2`, `#3`...) past the labels already `taken`."""
    label = f"[pasted {lines:,} lines]"
    n = 2
    while label in taken:
        label = f"[pasted {lines:,} lines #{n}]"
        n += 1
    return label


def merge_chips(text: str, pastes: Mapping[str, str], into: dict[str, str]) -> str:
    """Add the chips of `text` (`pastes`) to `into`; a label `into` holds for another paste is
    renamed in `text` (two pastes of the same size carry the same label), so that no paste's
    text is lost. Returns `text` with its labels as they are now in `into`."""
    for label, body in pastes.items():
        if into.get(label, body) != body:
            new = chip_label(paste_lines(body), {*into, *pastes})
            text = text.replace(label, new)
            label = new
        into[label] = body
    return text


@dataclass
class Outgoing:
    """A message on its way to the agent, with what goes beside it (paste chips, @files)."""

    text: str
    pastes: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def join(self, other: Outgoing) -> Outgoing:
        files = self.files + [f for f in other.files if f not in self.files]
        pastes = dict(self.pastes)
        text = merge_chips(other.text, other.pastes, pastes)  # two chips may carry one label
        return Outgoing(f"{self.text}\n\n{text}", pastes, files)
