"""The one table of the session's actions: keys, slash commands and palette entries all come from it.

Each row says what an action is called everywhere: its binding id (the name
config.toml's `keymap` rebinds), its default key and Footer label, its slash
command (usage, help, the kind of argument completion offers), its palette
title, the session screen's method that runs its key (`action_<action>`,
as Textual binds it) and the function that runs its slash command
(`ui/slash.py`). `BINDINGS`, `SLASH_COMMANDS` and
`PALETTE` below are derived from it: `/help`, the palette, the input's
completion and `ui/keymap.py` read those, never a second list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.binding import Binding

from tailrent_tui.ui import slash
from tailrent_tui.ui.slash import SlashRun

ArgKind = Literal["none", "message", "messages", "fold", "text", "model", "format", "theme"]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str  # "/pin [ID]"
    help: str  # what it does
    run: SlashRun  # the function that runs it (ui/slash.py)
    arg: ArgKind = "none"
    needs_arg: bool = False  # the palette fills the input instead of running it

    @property
    def help_line(self) -> str:
        return f"{self.usage}: {self.help}"


@dataclass(frozen=True)
class Action:
    """One thing the user can ask of the session, by key, by slash command or from the palette."""

    id: str  # the binding id (keymap); the slash command's name when there is one
    action: str | None = None  # the screen's `action_<action>`, for the key and the palette
    key: str | None = None  # the default key; None: no binding
    label: str = ""  # the Footer's word
    tooltip: str = ""
    palette: tuple[str, str] | None = None  # (title, help) in the command palette
    slash: SlashCommand | None = None
    show: bool = True  # in the Footer (f1's help lists every key either way)

    def binding(self) -> Binding:
        assert self.key is not None and self.action is not None
        return Binding(self.key, self.action, self.label, id=self.id, tooltip=self.tooltip, show=self.show)


def _slash(name: str, usage: str, help: str, arg: ArgKind = "none", *, run: SlashRun, needs_arg: bool = False) -> SlashCommand:
    return SlashCommand(name, usage, help, run, arg, needs_arg)


ACTIONS: tuple[Action, ...] = (
    Action(
        "pin",
        "pin",
        "p",
        "Pin",
        "Pin the focused message: no fold may touch it",
        ("Pin the focused message", "No fold may touch it"),
        _slash("pin", "/pin [ID]", "pin the focused (or given, or last) message", "message", run=slash.pin),
    ),
    Action(
        "unpin",
        "unpin",
        "u",
        "Unpin",
        "Unpin the focused message",
        ("Unpin the focused message", "Folds may take it again"),
        _slash("unpin", "/unpin [ID]", "unpin it", "message", run=slash.unpin),
    ),
    Action(
        "spill",
        "spill",
        "s",
        "Spill",
        "Spill the focused message to a file, leave a pointer",
        ("Spill the focused message", "Move its content to a spill file, leave a pointer"),
        _slash("spill", "/spill [ID]", "move its content to a spill file, leave a pointer", "message", run=slash.spill),
    ),
    Action(
        "fold",
        "fold",
        "f",
        "Fold",
        "Fold the marked span (space marks), or the oldest unpinned span down to the fold target",
        ("Fold", "The marked span, or the oldest unpinned span down to the fold target"),
        _slash(
            "fold",
            "/fold [ID ...]",
            "fold these messages, or the marked span, or the oldest unpinned down to the target",
            "messages",
            run=slash.fold,
        ),
    ),
    Action(
        "inspect",
        "inspect",
        "i",
        "Inspect",
        "Open the fold inspector on the focused or last fold",
        ("Inspect a fold", "Originals and summary side by side, lost facts highlighted"),
        _slash(
            "inspect",
            "/inspect [N]",
            "open the fold inspector on fold N (default: the focused or last fold)",
            "fold",
            run=slash.inspect,
        ),
    ),
    Action(
        "accept",
        "accept",
        "a",
        "Accept",
        "Accept the selected proposal (a statement of the model's): it becomes current, kept verbatim",
        ("Accept a proposal", "The model's statement becomes a current one of the ledger"),
        show=False,
    ),
    Action(
        "supersede",
        "supersede",
        "x",
        "Supersede",
        "Mark the selected statement superseded: it leaves the context at the next fold",
        ("Supersede a statement", "It no longer holds: it leaves the context at the next fold"),
        show=False,
    ),
    Action(
        "edit_statement",
        "edit_statement",
        "e",
        "Edit",
        "Edit the selected statement's text: the input opens with it, enter applies it",
        ("Edit a statement", "Your wording replaces it in the context at once"),
        show=False,
    ),
    Action(
        "ledger",
        "show_ledger",
        palette=("Show the ledger", "Every statement, its status and where it is held"),
        slash=_slash(
            "ledger",
            "/ledger [accept|supersede|edit N [TEXT]]",
            "list the ledger; accept, supersede or edit statement N (its number or id prefix)",
            "text",
            run=slash.ledger,
        ),
    ),
    Action(
        "unfold",
        slash=_slash(
            "unfold",
            "/unfold N",
            "undo fold N: its originals back in place of its summary (if they fit under the fold trigger)",
            "fold",
            needs_arg=True,
            run=slash.unfold,
        ),
    ),
    Action(
        "watch",
        slash=_slash("watch", "/watch WORD", "count WORD as a fact in every fold", "text", needs_arg=True, run=slash.watch),
    ),
    Action(
        "recall",
        slash=_slash(
            "recall",
            "/recall QUESTION [--expect W ...]",
            "probe what the context still holds",
            "text",
            needs_arg=True,
            run=slash.recall,
        ),
    ),
    Action(
        "model",
        slash=_slash(
            "model",
            "/model SPEC",
            "switch the model (mock, ollama:NAME, openai:URL#MODEL)",
            "model",
            needs_arg=True,
            run=slash.model,
        ),
    ),
    Action(
        "export",
        slash=_slash(
            "export",
            "/export [md|json] [PATH]",
            "write the session to a file (in its session directory unless PATH)",
            "format",
            run=slash.export,
        ),
    ),
    Action("copy", slash=_slash("copy", "/copy", "copy the last reply to the clipboard (OSC 52)", run=slash.copy)),
    Action("theme", slash=_slash("theme", "/theme NAME", "switch the theme", "theme", needs_arg=True, run=slash.theme)),
    Action(
        "mcp",
        slash=_slash(
            "mcp",
            "/mcp [disable|enable NAME]",
            "list the MCP servers and their tools; disable one for this session",
            "text",
            run=slash.mcp,
        ),
    ),
    Action("history", slash=_slash("history", "/history", "search what you typed before (also ctrl+s)", run=slash.history)),
    Action(
        "sidebar",
        "toggle_sidebar",
        "ctrl+b",
        "Sidebar",
        "Show or hide the Tail, Spills, Ledger, Folds panels",
        ("Toggle the sidebar", "The Tail, Spills, Ledger and Folds panels"),
    ),
    Action(
        "cancel",
        "cancel_reply",
        "escape",
        "Cancel",
        "Cancel the running reply (its partial text is kept) or fold (nothing is folded); "
        "with nothing running, back to the input",
        ("Cancel the reply", "Stop the running reply; its partial text is kept"),
    ),
    Action(
        "dismiss_notice",
        "dismiss_notice",
        "ctrl+n",
        "Dismiss",
        "Hide the notice bar under the header",
        ("Dismiss the notice", "Hide the bar under the header"),
    ),
    Action(
        "retry",
        "retry",
        "ctrl+r",
        "Retry",
        "Send the last turn again after a model error",
        ("Retry the last turn", "After a model error"),
        _slash("retry", "/retry", "send the last turn again after a model error", run=slash.retry),
    ),
    Action(
        "interrupt",
        "interrupt",
        "ctrl+c",
        "Interrupt",
        "Interrupt the running reply or fold; with nothing running, clear the input; a second ctrl+c quits",
        ("Interrupt", "Stop the running reply or fold; a second ctrl+c quits"),
        show=False,
    ),
    Action(
        "exit",
        slash=_slash("exit", "/exit", "quit: the session is saved, resume it with tailrent --continue", run=slash.exit_app),
    ),
    Action(
        "new",
        slash=_slash("new", "/new", "start a new session here (this one stays, tailrent --resume reopens it)", run=slash.new),
    ),
    Action(
        "clear",
        slash=_slash("clear", "/clear", "the same as /new: an empty context in a new session; this one stays", run=slash.new),
    ),
    Action(
        "help",
        "help",
        "f1",
        "Help",
        "Keys and slash commands",
        ("Help", "Keys and slash commands"),
        _slash("help", "/help", "keys and commands", run=slash.help_),
    ),
)

#: the session screen's bindings, with the ids the keymap rebinds
BINDINGS: list[Binding] = [a.binding() for a in ACTIONS if a.key is not None]

SLASH_COMMANDS: tuple[SlashCommand, ...] = tuple(a.slash for a in ACTIONS if a.slash is not None)
SLASH_BY_NAME = {c.name: c for c in SLASH_COMMANDS}
#: "/pin [ID]: pin the focused ..." for /help
SLASH_HELP = {c.name: c.help_line for c in SLASH_COMMANDS}

#: (title, help, action) of each palette entry that runs an action; the slash commands follow them there
PALETTE: tuple[tuple[str, str, str], ...] = tuple(
    (a.palette[0], a.palette[1], a.action) for a in ACTIONS if a.palette is not None and a.action is not None
)

#: the actions that act on the focused message: their keys type text in the input, so they fire only in navigation
NAVIGATION_ACTIONS = frozenset({"pin", "unpin", "spill", "fold", "inspect", "accept", "supersede", "edit_statement"})
