"""The ledger as the user reads it: numbered rows, where each statement is held, how to name one.

One reading for every place that shows the ledger: the app's Ledger panel and
`/ledger` (ui/), `tailrent inspect` (commands/) and the export (store/export.py).
A statement is named by its number in the list (1, 2, ... in the order it was
found; numbers never change, since statements are never removed) or by a
unique prefix of its id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tailrent_tui.core.ledger import STATEMENT_KINDS, Statement
from tailrent_tui.core.messages import Kind
from tailrent_tui.core.session import Session


class StatementLookupError(ValueError):
    """A statement reference that names none, or more than one."""


@dataclass(frozen=True)
class LedgerRow:
    """One statement, numbered, with where the context holds its text now."""

    no: int
    statement: Statement
    held: str  # in words: "pinned in its message 1a2b…", "the ledger of fold #2", "not in the context"
    holder: str | None  # the message id that holds it in the context, if any
    successor: int | None  # the number of the statement that superseded it
    predecessor: int | None

    @property
    def id(self) -> str:
        return self.statement.id

    def to_json(self) -> dict[str, Any]:
        st = self.statement
        return {
            "no": self.no,
            "id": st.id,
            "kind": st.kind,
            "status": st.status,
            "text": st.text,
            "role": st.role,
            "label": st.label,
            "message_id": st.message_id,
            "held": self.held,
            "holder": self.holder,
            "supersedes": st.supersedes,
            "superseded_by": st.superseded_by,
            "edited": st.edited,
            "original": st.original,
        }


def _held(session: Session, st: Statement) -> tuple[str, str | None]:
    holder_id = session.carrier.get(st.id)
    if holder_id is None or holder_id not in session:
        uncarried = [f.fold_no for f in session.folds if st.id in f.uncarried]
        if uncarried:
            return f"not in the context: fold #{uncarried[-1]} had no room to carry it", None
        return "not in the context", None
    m = session.get(holder_id)
    if m.kind is Kind.ledger:
        fold = next((f.fold_no for f in session.folds if f.ledger is not None and f.ledger.id == m.id), None)
        if fold is not None:
            where = f"the ledger of fold #{fold}"
        else:
            # a line of its own: the user's wording, or the ledger's amendment after a correction
            where = "a ledger line (amended by a correction)" if st.amended_by else "a ledger line (your wording)"
        return where, m.id
    where = "its message" if m.id == st.message_id else f"message {m.id}"
    return f"{'pinned in' if m.pinned else 'in'} {where}", m.id


def ledger_rows(session: Session) -> list[LedgerRow]:
    """Every statement of the session, in the order it was found."""
    numbers = {sid: i for i, sid in enumerate(session.statements, 1)}
    rows = []
    for sid, st in session.statements.items():
        held, holder = _held(session, st)
        rows.append(
            LedgerRow(
                no=numbers[sid],
                statement=st,
                held=held,
                holder=holder,
                successor=numbers.get(st.superseded_by or st.amended_by or ""),
                predecessor=numbers.get(st.supersedes or ""),
            )
        )
    return rows


def by_kind(rows: Sequence[LedgerRow]) -> list[tuple[str, list[LedgerRow]]]:
    """The rows grouped by kind, in the ledger's order of kinds; empty kinds left out."""
    return [(k, [r for r in rows if r.statement.kind == k]) for k in STATEMENT_KINDS if any(r.statement.kind == k for r in rows)]


def find_statement(session: Session, ref: str) -> Statement:
    """The statement `ref` names: its number in the list (`3`, `#3`) or a unique prefix of its id."""
    ref = ref.strip().lstrip("#")
    if not ref:
        raise StatementLookupError("name a statement: its number in /ledger, or its id")
    ids = list(session.statements)
    if not ids:
        raise StatementLookupError("the ledger is empty: nothing was stated yet")
    if ref.isdigit() and 1 <= int(ref) <= len(ids):
        return session.statements[ids[int(ref) - 1]]
    matches = [i for i in ids if i.startswith(ref)]
    if len(matches) == 1:
        return session.statements[matches[0]]
    if not matches:
        raise StatementLookupError(f"no statement {ref!r} in the ledger: /ledger lists them (1-{len(ids)})")
    numbers = ", ".join(f"#{ids.index(i) + 1}" for i in matches[:5])
    raise StatementLookupError(f"{ref!r} names {len(matches)} statements ({numbers}): give its number or more of its id")


def ledger_tokens(session: Session) -> tuple[int, int, int]:
    """(tokens of the pinned ledger messages, tokens of the other pinned messages, the pin budget),
    counted as sent (the chat template's framing in) as the Tail panel's pins are: the two add up
    to its figure."""
    held = [m for m in session.pinned if not m.cut_off]
    ledger = sum(session.sent_tokens(m) for m in held if m.kind is Kind.ledger)
    pins = sum(session.sent_tokens(m) for m in held if m.kind is not Kind.ledger)
    return ledger, pins, session.pin_budget


def plain_pins(session: Session) -> list[str]:
    """Ids of the pinned messages the ledger's statements do not stand for: pinned by hand, and the
    project instructions (pinned whole, whatever rules they state)."""
    return [
        m.id
        for m in session.pinned
        if m.kind is Kind.instructions or (m.kind is not Kind.ledger and not session.statements_held(m.id))
    ]


def status_word(row: LedgerRow) -> str:
    st = row.statement
    if st.status == "superseded":
        return f"superseded → #{row.successor}" if row.successor is not None else "superseded"
    word = st.status
    if st.amended_by and row.successor is not None:
        return f"{word}, part superseded → #{row.successor}"
    return f"{word}, edited" if st.edited else word


def ledger_lines(session: Session) -> list[str]:
    """The ledger in text, by kind: number, status, text, where it is held (for /ledger and `tailrent inspect`)."""
    rows = ledger_rows(session)
    if not rows:
        return ["the ledger is empty: no rule, limit, decision, preference, goal or identifier was stated yet"]
    current = sum(1 for r in rows if r.statement.status == "current")
    proposals = sum(1 for r in rows if r.statement.status == "proposal")
    led, pins, budget = ledger_tokens(session)
    out = [
        f"ledger: {len(rows)} statements ({current} current, {proposals} proposed, {len(rows) - current - proposals} superseded)",
        f"pins hold {led + pins:,} of the {budget:,}-token pin budget",
    ]
    for kind, group in by_kind(rows):
        out.append(f"{kind}:")
        for r in group:
            out.append(f"  #{r.no} {' '.join(r.statement.text.split())}")
            out.append(f"     {status_word(r)} · {r.held}")
    return out


def ledger_markdown(session: Session) -> list[str]:
    """The export's Ledger section: the current statements by kind, then the superseded with their successors."""
    rows = ledger_rows(session)
    out = ["## Ledger", ""]
    if not rows:
        return [*out, "No statements.", ""]
    live = [r for r in rows if r.statement.status != "superseded"]
    for kind, group in by_kind(live):
        out.append(f"**{kind}**")
        out.append("")
        for r in group:
            tag = " *(proposal: not yet accepted)*" if r.statement.status == "proposal" else ""
            edited = " *(edited)*" if r.statement.edited else ""
            out.append(f"- #{r.no} {' '.join(r.statement.text.split())}{tag}{edited}")
        out.append("")
    old = [r for r in rows if r.statement.status == "superseded"]
    if old:
        out += ["**superseded**", ""]
        by_no = {r.no: r for r in rows}
        for r in old:
            after = by_no.get(r.successor) if r.successor is not None else None
            succ = f" → #{after.no} {' '.join(after.statement.text.split())}" if after is not None else " (by hand)"
            out.append(f"- ~~#{r.no} {' '.join(r.statement.text.split())}~~{succ}")
        out.append("")
    return out
