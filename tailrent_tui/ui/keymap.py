"""Checks of config.toml's `keymap`: ids that name no binding, keys that another binding holds.

Textual's `set_keymap` ignores an unknown id and lets two bindings share a key
without a word; here both are said once at start (the app's notices, `tailrent config`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from textual.binding import Binding

#: keys Textual itself holds in every app
RESERVED = {"ctrl+p": "the command palette", "ctrl+q": "quit"}


def app_bindings() -> list[Binding]:
    """Every binding with an id the keymap can rebind: the session's (ui/actions.py), the input's, a message's."""
    from tailrent_tui.ui.actions import BINDINGS
    from tailrent_tui.ui.widgets.input import PromptInput
    from tailrent_tui.ui.widgets.message import MessageView

    return [b for b in [*BINDINGS, *PromptInput.BINDINGS, *MessageView.BINDINGS] if isinstance(b, Binding) and b.id]


def _keys(spec: str) -> list[str]:
    return [k.strip() for k in spec.split(",") if k.strip()]


def keymap_warnings(keymap: Mapping[str, str], bindings: Iterable[Binding] | None = None) -> list[str]:
    """One line per unknown binding id (with a close id, if any) and per key a rebinding takes from another."""
    bindings = list(app_bindings() if bindings is None else bindings)
    ids = {b.id: b for b in bindings if b.id}
    out = []
    for bid in keymap:
        if bid not in ids:
            close = difflib.get_close_matches(bid, list(ids), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the ids are: {', '.join(sorted(ids))}"
            out.append(f"keymap: unknown binding id {bid!r}{hint}")
    holders: dict[str, list[str]] = {}
    for bid, b in ids.items():
        for key in _keys(keymap.get(bid, b.key)):
            holders.setdefault(key, []).append(bid)
    for bid, spec in keymap.items():
        if bid not in ids:
            continue
        for key in _keys(spec):
            if key in RESERVED:
                out.append(f'keymap: {bid} = "{spec}" takes {key} from {RESERVED[key]}')
            for other in holders.get(key, []):
                if other != bid:
                    out.append(f'keymap: {bid} = "{spec}" takes {key} from {other} ({ids[other].description or other})')
    return out
