"""The reply being streamed: Markdown fed through a MarkdownStream, then one full update.

While the model streams, deltas go through `Markdown.get_stream` (which
batches them when they arrive faster than they render). When the agent adds
the finished message to the session, `finish` stops the stream and updates
the Markdown once with the whole text, so code fences and tables come out
right, and the widget becomes an ordinary MessageView of that message.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tailrent_tui.core.messages import Message, ToolCall
from tailrent_tui.ui.widgets.message import MessageView, header_content, kind_classes, shown_body


class ReplyView(MessageView):
    """An assistant reply in flight; `message` is None until it is finished."""

    DEFAULT_CSS = """
    ReplyView > .calls { color: $text-muted; height: auto; }
    ReplyView.-streaming > .head { color: $accent; }
    """

    def __init__(self) -> None:
        super().__init__(None)
        self.add_class("-streaming")
        self.text = ""
        self._thinking = ""
        self._calls: list[str] = []
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Static("assistant · streaming… (escape cancels)", classes="head")
        yield Static("", classes="thinking")
        yield Markdown("", classes="body")
        yield Static("", classes="calls")

    async def write(self, delta: str) -> None:
        self.text += delta
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(".body", Markdown))
        await self._stream.write(delta)

    def thinking(self, delta: str) -> None:
        self._thinking += delta
        # only the last lines: reasoning can be long and is not part of the context
        tail = "\n".join(self._thinking.splitlines()[-3:])
        self.query_one(".thinking", Static).update(Content("thinking: " + tail))

    def tool_call(self, call: ToolCall) -> None:
        self._calls.append(f"→ {call.name} …")
        self.query_one(".calls", Static).update(Content("\n".join(self._calls)))

    async def finish(self, message: Message) -> None:
        """The session now holds this reply: render it whole, once."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.remove_class("-streaming")
        self.message = message
        self.add_class(*kind_classes(message).split())
        self.query_one(".head", Static).update(header_content(message))
        self.query_one(".calls", Static).update("")
        self.query_one(".thinking", Static).display = bool(self._thinking)
        await self.query_one(".body", Markdown).update(shown_body(message))

    async def abandon(self) -> None:
        """The turn ended without a message for this reply (an error before any text)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None

