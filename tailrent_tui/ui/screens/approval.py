"""Approval of a tool call that changes things: allow once, allow this prefix for the session, deny.

The dialog says exactly what "allow for the session" covers and why (for
run_shell: a read-only program under its flag allowlist, or this exact command
line, agent/approval.py); any other command gets no such button, only "allow
once", and the dialog says why.

`edit_file` (and `write_file` when the agent can preview it) shows its diff,
added lines in the success color, removed ones in the error color.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tailrent_tui.text import json_visible, visible

Answer = Literal["once", "prefix", "deny"]


def diff_content(diff: str) -> Content:
    lines = []
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            lines.append(Content.styled(line, "$success"))
        elif line.startswith("-") and not line.startswith("---"):
            lines.append(Content.styled(line, "$error"))
        elif line.startswith("@@"):
            lines.append(Content.styled(line, "$accent"))
        else:
            lines.append(Content(line))
    return Content("\n").join(lines)


class ApprovalScreen(ModalScreen[Answer]):
    """Asks before run_shell, write_file or edit_file runs."""

    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    ApprovalScreen > #frame {
        width: 90; max-width: 96%; height: auto; max-height: 90%; background: $surface; border: thick $warning; padding: 0 1;
    }
    ApprovalScreen #question { text-style: bold; height: auto; }
    ApprovalScreen #command { height: auto; max-height: 8; background: $panel; padding: 0 1; }
    ApprovalScreen #arguments { height: auto; max-height: 8; color: $text-muted; }
    ApprovalScreen #allows { height: auto; margin: 1 0 0 0; color: $text-warning; }
    ApprovalScreen #diff { height: auto; max-height: 24; border: round $panel-lighten-2; }
    ApprovalScreen #buttons { height: auto; align-horizontal: center; margin: 1 0 0 0; }
    ApprovalScreen Button { margin: 0 1; }
    """

    BINDINGS = [
        Binding("a", "answer('once')", "Allow once", id="approval.once", tooltip="Run this call, ask again next time"),
        Binding("p", "answer('prefix')", "Allow prefix", id="approval.prefix",
                tooltip="Run it, and calls with the same command prefix, without asking for the rest of the session"),
        Binding("d,escape", "answer('deny')", "Deny", id="approval.deny", tooltip="The model gets a tool error"),
    ]

    def __init__(
        self,
        tool: str,
        arguments: dict[str, Any],
        command_prefix: str | None,
        diff: str | None,
        allows: str | None = None,
    ) -> None:
        super().__init__()
        self.tool = tool
        self.arguments = arguments
        self.command_prefix = command_prefix
        self.diff = diff
        self.allows = allows

    def compose(self) -> ComposeResult:
        with Vertical(id="frame"):
            yield Static(f"The model wants to run {self.tool}. Allow it?", id="question", markup=False)
            if self.tool == "run_shell" and isinstance(self.arguments.get("command"), str):
                # the command as the shell reads it: a newline shows as a new line, not as \n in JSON
                yield Static(visible(self.arguments["command"][:2000]), id="command", markup=False)
                shown = {k: v for k, v in self.arguments.items() if k != "command"}
            else:
                shown = {k: v for k, v in self.arguments.items() if not (self.diff and k in ("old", "new", "content"))}
            if shown:
                yield Static(json_visible(json.dumps(shown, indent=2, ensure_ascii=False)[:2000]), id="arguments", markup=False)
            if self.allows:
                yield Static(self.allows, id="allows", markup=False)
            if self.diff:
                with VerticalScroll(id="diff"):
                    yield Static(diff_content(visible(self.diff)))
            with Horizontal(id="buttons"):
                yield Button(Content("Allow once [a]"), id="once", variant="primary")  # Content: [a] is no markup
                if self.command_prefix is not None:
                    yield Button(Content(f"Allow {self.command_prefix} for the session [p]"), id="prefix")
                yield Button(Content("Deny [d]"), id="deny", variant="error")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # no session approval is offered for this call
        return not (action == "answer" and parameters == ("prefix",) and self.command_prefix is None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id)  # type: ignore[arg-type]

    def action_answer(self, answer: Answer) -> None:
        self.dismiss(answer)
