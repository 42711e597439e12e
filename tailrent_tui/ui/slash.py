"""The one table of slash commands: `/help`, the palette and the input's completion all read it.

Each command names the kind of argument it takes, so completion can offer
message ids, fold numbers, theme names... without a second list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ArgKind = Literal["none", "message", "messages", "fold", "text", "model", "format", "theme"]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str  # "/pin [ID]"
    help: str  # what it does
    arg: ArgKind = "none"
    needs_arg: bool = False  # the palette fills the input instead of running it

    @property
    def help_line(self) -> str:
        return f"{self.usage}: {self.help}"


SLASH_COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("pin", "/pin [ID]", "pin the focused (or given, or last) message", "message"),
    SlashCommand("unpin", "/unpin [ID]", "unpin it", "message"),
    SlashCommand("spill", "/spill [ID]", "move its content to a spill file, leave a pointer", "message"),
    SlashCommand("fold", "/fold [ID ...]",
                 "fold these messages, or the marked span, or the oldest unpinned down to the target", "messages"),
    SlashCommand("inspect", "/inspect [N]", "open the fold inspector on fold N (default: the focused or last fold)", "fold"),
    SlashCommand("unfold", "/unfold N",
                 "undo fold N: its originals back in place of its summary (if they fit under the fold trigger)",
                 "fold", needs_arg=True),
    SlashCommand("watch", "/watch WORD", "count WORD as a fact in every fold", "text", needs_arg=True),
    SlashCommand("recall", "/recall QUESTION [--expect W ...]", "probe what the context still holds", "text", needs_arg=True),
    SlashCommand("model", "/model SPEC", "switch the model (mock, ollama:NAME, openai:URL#MODEL)", "model", needs_arg=True),
    SlashCommand("export", "/export [md|json] [PATH]", "write the session to a file (in its session directory unless PATH)", "format"),
    SlashCommand("copy", "/copy", "copy the last reply to the clipboard (OSC 52)"),
    SlashCommand("theme", "/theme NAME", "switch the theme", "theme", needs_arg=True),
    SlashCommand("history", "/history", "search what you typed before (also ctrl+s)"),
    SlashCommand("retry", "/retry", "send the last turn again after a model error"),
    SlashCommand("help", "/help", "keys and commands"),
)

SLASH_BY_NAME = {c.name: c for c in SLASH_COMMANDS}
