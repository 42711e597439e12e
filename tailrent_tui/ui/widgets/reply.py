"""The reply being streamed: Markdown fed through a MarkdownStream, then one full update.

While the model streams, deltas go through `Markdown.get_stream` (which
batches them when they arrive faster than they render). When the agent adds
the finished message to the session, `finish` stops the stream and updates
the Markdown once with the whole text, so code fences and tables come out
right, and the widget becomes an ordinary MessageView of that message.

Until then its head line counts the seconds: a local engine may read the
prompt for a minute before the first token, and the head says how many tokens
it reads and, once the server has measured its prompt rate, about how long.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.content import Content
from textual.timer import Timer
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tailrent_tui.agent.events import RequestStarted
from tailrent_tui.core.messages import Message, ToolCall
from tailrent_tui.ui.widgets.message import MessageView, header_content, kind_classes, shown_body
from tailrent_tui.ui.widgets.tail_panel import duration


def elapsed(seconds: float) -> str:
    """A running timer as a clock shows it: 0:07, 1:52, 1:02:03."""
    minutes, s = divmod(max(0, int(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{s:02d}" if hours else f"{minutes}:{s:02d}"


def reading_line(started: RequestStarted | None) -> str:
    """What the server does before the first token: reads the prompt's tail (and for about how long)."""
    if started is None or started.to_read is None:
        return "waiting for the server"
    line = f"reading {started.to_read:,} prompt tokens"
    if started.read_seconds is not None:
        line += f" (~{duration(started.read_seconds)} at the measured rate)"
    return line


class ReplyView(MessageView):
    """An assistant reply in flight; `message` is None until it is finished."""

    DEFAULT_CSS = """
    ReplyView > .calls { color: $text-muted; height: auto; }
    ReplyView.-streaming > .head { color: $accent; }
    """

    def __init__(self, started: RequestStarted | None, clock: Callable[[], float]) -> None:
        super().__init__(None)
        self.add_class("-streaming")
        self.started = started
        self.clock = clock
        self.since = clock()
        self.text = ""
        self._thinking = ""
        self._calls: list[str] = []
        self._stream: MarkdownStream | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(self.status(), classes="head")
        yield Static("", classes="thinking")
        yield Markdown("", classes="body")
        yield Static("", classes="calls")

    def on_mount(self) -> None:
        self._timer = self.set_interval(1.0, self.show_status, name="reply timer")

    def status(self) -> str:
        """The head line while the reply runs: its time, and what the server is doing."""
        doing = "streaming…" if self.text or self._thinking or self._calls else reading_line(self.started)
        return f"assistant · {elapsed(self.clock() - self.since)} · {doing} · escape cancels"

    def show_status(self) -> None:
        # the timer may fire once more after the reply left the transcript (its head is gone then)
        for head in self.query(".head").results(Static):
            head.update(self.status())

    async def write(self, delta: str) -> None:
        first = not self.text
        self.text += delta
        if first:
            self.show_status()  # the prompt is read: said once, not on every delta
        if self._stream is None:
            body = next(iter(self.query(".body").results(Markdown)), None)
            if body is None:
                return  # the reply is leaving the screen (the app closes): the session keeps the text
            self._stream = Markdown.get_stream(body)
        await self._stream.write(delta)

    def thinking(self, delta: str) -> None:
        first = not self._thinking
        self._thinking += delta
        if first:
            self.show_status()
        # only the last lines: reasoning can be long and is not part of the context
        tail = "\n".join(self._thinking.splitlines()[-3:])
        self.query_one(".thinking", Static).update(Content("thinking: " + tail))

    def tool_call(self, call: ToolCall) -> None:
        self._calls.append(f"→ {call.name} …")
        self.query_one(".calls", Static).update(Content("\n".join(self._calls)))

    async def finish(self, message: Message) -> None:
        """The session now holds this reply: render it whole, once."""
        await self.abandon()
        self.remove_class("-streaming")
        self.message = message
        self.add_class(*kind_classes(message).split())
        self.query_one(".head", Static).update(header_content(message))
        self.query_one(".calls", Static).update("")
        self.query_one(".thinking", Static).display = bool(self._thinking)
        await self.query_one(".body", Markdown).update(shown_body(message))

    async def abandon(self) -> None:
        """The turn ended without a message for this reply (an error before any text)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
