"""The Ledger panel: the statements kept verbatim, by kind, what they cost, and the other pins.

Current statements are listed by kind; a proposal (what the model said it
decided, not yet agreed) is marked `?`; a superseded one is dimmed with the
number of its successor (`→ #5`), so the chain reads down the list; one that no
message of the context holds any more (a fold had no room to carry it) is marked
`○`. Under the statements, the pinned messages that hold none (a message pinned
by hand, the project instructions). The first lines say what the ledger holds against the
pin budget (`pin_share`), in the warning color past it.

Rows are options whose id names what they are (`s:` a statement, `m:` a
message): the session screen's keys act on the highlighted one (p u a x e).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tailrent_tui.core.messages import Kind, Message
from tailrent_tui.core.session import Session
from tailrent_tui.store.ledger_report import by_kind, ledger_rows, ledger_tokens, plain_pins
from tailrent_tui.ui.events import MessageFocused

# characters of a row's text: the sidebar is 50 columns, less its border, padding and the row's marks
TEXT_WIDTH = 39
STATEMENT = "s:"
MESSAGE = "m:"


class LedgerList(OptionList):
    """The panel's rows; it takes the focus, so p u a x e act on the highlighted row."""


class LedgerPanel(Vertical):
    """Statements by kind (the supersession chain shown), tokens held against the pin budget, plain pins."""

    DEFAULT_CSS = """
    LedgerPanel { height: auto; }
    LedgerPanel > .cost { color: $text-muted; height: auto; }
    LedgerPanel.-over-budget > .cost { color: $warning; text-style: bold; }
    LedgerPanel > LedgerList { height: auto; max-height: 14; border: none; padding: 0; background: transparent; }
    LedgerPanel > LedgerList:focus { background: $primary 10%; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", classes="cost")
        yield LedgerList()

    _waiting: Session | None = None

    def on_mount(self) -> None:
        if self._waiting is not None:
            self.show(self._waiting)

    def show(self, session: Session) -> None:
        """Redraw from the session: its statements, its pins, the budget."""
        if not self.is_mounted or not self.query(".cost"):
            # asked before its children exist (the demo redraws from its first event): shown on mount
            self._waiting = session
            return
        led, pins, budget = ledger_tokens(session)
        over = led + pins > budget or session.auto_pin_stopped
        self.set_class(over, "-over-budget")
        rows = ledger_rows(session)
        current = sum(1 for r in rows if r.statement.status == "current")
        proposals = sum(1 for r in rows if r.statement.status == "proposal")
        counts = (
            f"{len(rows)} statement{'s' if len(rows) != 1 else ''}: {current} current"
            + (f" · {proposals} proposed" if proposals else "")
            if rows
            else "no statements yet"
        )
        if len(rows) > current + proposals:
            counts += f" · {len(rows) - current - proposals} superseded"
        # current, but no message of the context holds it: a fold had no room to carry it (○ on its row)
        out = sum(1 for r in rows if r.statement.status == "current" and r.holder is None)
        if out:
            counts += f" · {out} not in the context"
        n = len(session.pinned)
        markup = (
            "[$tail-pinned]$counts[/]\n$n · $held tok re-sent every turn\n[dim]ledger $led · other pins $pins · budget $budget[/]"
        )
        if over:
            markup += "\nat the $budget-token pin budget: auto-pin is off; supersede (x) or unpin (u) what no longer matters"
        self.query_one(".cost", Static).update(
            Content.from_markup(
                markup,
                counts=counts,
                n=f"{n} pin" + ("" if n == 1 else "s"),
                held=f"{led + pins:,}",
                budget=f"{budget:,}",
                led=f"{led:,}",
                pins=f"{pins:,}",
            )
        )
        options: list[Option | None] = []
        for kind, group in by_kind(rows):
            options.append(Option(Content.from_markup("[b $primary]$kind[/]", kind=kind), disabled=True))
            for r in group:
                st = r.statement
                full = " ".join(st.text.split())
                text = _cut(full, TEXT_WIDTH)
                if st.status == "superseded":
                    after = f" → #{r.successor}" if r.successor is not None else " ✗"
                    text = _cut(full, TEXT_WIDTH - len(after))
                    line = Content.from_markup("[dim] #$no [strike]$text[/strike]$after[/]", no=str(r.no), text=text, after=after)
                elif st.status == "proposal":
                    text = _cut(full, TEXT_WIDTH - 9)
                    line = Content.from_markup("[$warning]?[/]#$no $text [dim]proposal[/]", no=str(r.no), text=text)
                else:
                    mark = "○" if r.holder is None else "✎" if st.edited else " "
                    # part of it replaced by a later correction: the chain reads down the list as for a superseded one
                    after = f" ⇢ #{r.successor}" if st.amended_by and r.successor is not None else ""
                    text = _cut(full, TEXT_WIDTH - len(after))
                    line = Content.from_markup("$mark#$no $text[dim]$after[/]", mark=mark, no=str(r.no), text=text, after=after)
                options.append(Option(line, id=STATEMENT + st.id))
        plain = [session.get(i) for i in plain_pins(session)]
        if plain:
            options.append(Option(Content.from_markup("[b $primary]pinned messages[/]"), disabled=True))
            for m in plain:
                options.append(
                    Option(
                        Content.from_markup("$line [dim]$tok tok[/]", line=_first_line(m), tok=f"{m.tokens:,}"),
                        id=MESSAGE + m.id,
                    )
                )
        listing = self.query_one(LedgerList)
        highlighted = listing.highlighted_option.id if listing.highlighted_option is not None else None
        listing.set_options(options or [Option("nothing stated or pinned yet", disabled=True)])
        if highlighted is not None:
            try:
                listing.highlighted = listing.get_option_index(highlighted)
            except Exception:  # the row is gone (a pin undone): nothing highlighted
                listing.highlighted = None

    @property
    def highlighted(self) -> tuple[str, str] | None:
        """("statement", id) or ("message", id) of the highlighted row."""
        listing = self.query_one(LedgerList)
        option = listing.highlighted_option
        if option is None or not option.id:
            return None
        if option.id.startswith(STATEMENT):
            return "statement", option.id[len(STATEMENT) :]
        return "message", option.id[len(MESSAGE) :]

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on a row shows the message that holds it in the transcript."""
        event.stop()
        session = getattr(self.screen, "session", None)
        picked = self.highlighted
        if picked is None or session is None:
            return
        what, ident = picked
        target = ident if what == "message" else session.carrier.get(ident)
        if target is not None and target in session:
            self.post_message(MessageFocused(target))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _first_line(m: Message, width: int = 34) -> str:
    line = f"{m.meta.get('source', '')} · project instructions" if m.kind == Kind.instructions else m.first_line
    return _cut(line, width)
