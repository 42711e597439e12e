"""The transcript: one widget per message, anchored to the bottom, pruned past a watermark.

The session keeps every message; the screen keeps only about
`watermark` lines of widgets. Past that, the oldest widgets are removed
(only while the view follows the bottom, so nothing moves under a reader).
Scrolling to the top, moving focus above the first widget, or `home` loads
the earlier messages back from the session. Updates come from the session's
events (`apply_event`), never from polling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from textual import events
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from tailrent_tui.agent.events import RequestStarted, SummaryEnded, SummaryStarted
from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldRetired,
    FoldSkipped,
    InstructionsRead,
    Kind,
    Message,
    MessageAdded,
    Pinned,
    Spilled,
    StatementChanged,
    ToolCall,
    Unfolded,
    Unpinned,
)
from tailrent_tui.core.session import Session
from tailrent_tui.text import visible
from tailrent_tui.ui.widgets.message import MessageView, estimate_lines
from tailrent_tui.ui.widgets.reply import ReplyView, elapsed

# Messages brought back per load when the reader scrolls up.
LOAD_BATCH = 40
# Lines of widgets mounted when a session opens: a few screens, not the whole
# watermark, so a long session opens fast; scrolling up loads more.
OPEN_LINES = 100
#: the transcript keeps about this many lines of widgets; older ones load back on scroll
PRUNE_WATERMARK_LINES = 2000


class FoldStatus(Static):
    """The line a fold shows while its summary is written: a model may take minutes."""

    def __init__(self, started: SummaryStarted, clock: Callable[[], float]) -> None:
        super().__init__("", classes="fold-status", markup=False)
        self.started = started
        self.clock = clock
        self.since = clock()

    def on_mount(self) -> None:
        self.tick()
        self.set_interval(1.0, self.tick, name="fold timer")

    def tick(self) -> None:
        s = self.started
        self.update(
            f"folding {s.messages:,} messages ({s.tokens:,} tokens) — {elapsed(self.clock() - self.since)}, escape cancels"
        )


class Transcript(VerticalScroll, can_focus=False):
    """The conversation, one MessageView per message of the session."""

    DEFAULT_CSS = """
    Transcript { layout: stream; height: 1fr; padding: 0 1; background: $background; }
    Transcript > .earlier { color: $text-muted; height: 1; width: 1fr; text-align: center; }
    Transcript > .turn-error { color: $error; border-left: thick $error; padding: 0 1; margin: 0 0 1 0; height: auto; }
    Transcript > .turn-notice { color: $warning; padding: 0 1; margin: 0 0 1 0; height: auto; }
    Transcript > .listing {
        color: $text; border-left: outer $tail-pinned; background: $panel; padding: 0 1; margin: 0 0 1 0; height: auto;
    }
    Transcript > .fold-status { color: $tail-summary; text-style: bold; padding: 0 1; margin: 0 0 1 0; height: auto; }
    Transcript > .queued { color: $text-muted; border-left: outer $primary; padding: 0 1; margin: 0 0 1 0; height: auto; }
    """

    BINDINGS = [
        Binding(
            "up,k",
            "focus_neighbour(-1)",
            "Previous message",
            show=False,
            id="transcript.previous",
            tooltip="Focus the message above",
        ),
        Binding(
            "down,j", "focus_neighbour(1)", "Next message", show=False, id="transcript.next", tooltip="Focus the message below"
        ),
        Binding(
            "home",
            "load_earlier",
            "Earlier",
            show=False,
            id="transcript.earlier",
            tooltip="Load earlier messages back from the session",
        ),
    ]

    def __init__(
        self,
        session: Session,
        *,
        watermark: int = PRUNE_WATERMARK_LINES,
        clock: Callable[[], float] = time.time,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._recent_notices: list[str] = []
        self.session = session
        self.watermark = watermark
        self.clock = clock
        self.reply: ReplyView | None = None
        self.fold_status: FoldStatus | None = None
        self._queued: list[Static] = []
        self._views: dict[str, MessageView] = {}
        self._lines = 0
        self._first_index = len(session.messages)
        self._loading = False
        self._earlier = Static("", classes="earlier")
        self._fold_of_summary = {f.summary.id: f.fold_no for f in session.folds}

    # -- reading ------------------------------------------------------------

    @property
    def first_index(self) -> int:
        """Index in the session of the first message that has a widget."""
        return self._first_index

    @property
    def mounted_ids(self) -> list[str]:
        return [v.message_id for v in self._message_views() if v.message_id is not None]

    @property
    def selected_ids(self) -> list[str]:
        """Messages marked with space: the span that `f` folds."""
        return [v.message_id for v in self._message_views() if v.selected and v.message_id]

    def view_of(self, message_id: str) -> MessageView | None:
        return self._views.get(message_id)

    def _message_views(self) -> list[MessageView]:
        return [c for c in self.children if isinstance(c, MessageView)]

    # -- building -----------------------------------------------------------

    def _make_view(self, m: Message) -> MessageView:
        view = MessageView(m)
        if m.kind == Kind.fold_summary:
            view.fold_no = self._fold_of_summary.get(m.id)
        self._views[m.id] = view
        return view

    async def on_mount(self) -> None:
        await self.mount(self._earlier)
        await self.show_tail()
        self.anchor()

    async def show_tail(self) -> None:
        """Mount widgets for the newest messages, a few screens' worth (never past the watermark)."""
        msgs = self.session.messages
        budget = min(self.watermark, OPEN_LINES)
        lines = 0
        start = len(msgs)
        while start > 0:
            m = msgs[start - 1]
            cost = estimate_lines(m)
            if lines + cost > budget and start < len(msgs):
                break
            lines += cost
            start -= 1
        views = [self._make_view(m) for m in msgs[start:]]
        self._first_index = start
        self._lines = lines
        if views:
            bottom = self._bottom()
            await (self.mount_all(views, before=bottom) if bottom is not None else self.mount_all(views))
        self._update_earlier()

    def _update_earlier(self) -> None:
        n = self._first_index
        self._earlier.display = n > 0
        if n:
            self._earlier.update(f"▲ {n:,} earlier messages: scroll up or press home to load them")

    # -- events ---------------------------------------------------------------

    async def apply_event(self, event: Event) -> None:
        """Bring the widgets in line with one session event."""
        if isinstance(event, MessageAdded):
            await self._added(event.message.id)
        elif isinstance(event, (Pinned, Unpinned, Spilled)):
            self._changed(event.id)
        elif isinstance(event, Folded):
            await self._folded(event)
            record = event.fold
            if record.rejected:
                # the summary asked for could not be used (the server died, the text was cut...)
                await self.show_notice(f"fold #{record.fold_no}: {record.rejected}; {record.summarizer} wrote it instead")
        elif isinstance(event, StatementChanged):
            # a ledger message that holds it shows it as it is now
            holder = self.session.carrier.get(event.id)
            if holder is not None:
                self._changed(holder)
        elif isinstance(event, FoldRetired):
            if event.merged:
                await self._rebuilt()  # older pointers left the context
            else:
                retired = next((f for f in self.session.folds if f.fold_no == event.fold_no), None)
                if retired is not None:
                    self._changed(retired.summary.id)
        elif isinstance(event, (Unfolded, InstructionsRead)):
            await self._rebuilt()
        elif isinstance(event, FoldSkipped):
            # a fold by hand is answered where it was asked too (a toast), but its summary may have
            # taken a minute on a slow engine: the reason stays here, to read when the toast is gone
            await self.show_notice(f"fold skipped: {event.reason}")

    async def _added(self, message_id: str) -> None:
        # gone already (a later fold in the same batch), or shown already (loaded back from the session)
        if message_id not in self.session or message_id in self._views:
            return
        m = self.session.get(message_id)
        if self.reply is not None and m.role == "assistant":
            reply, self.reply = self.reply, None
            self._views[m.id] = reply
            await reply.finish(m)
        else:
            await self._finish_reply_if_empty()
            await self.mount(self._make_view(m), before=self._bottom())
        self._lines += estimate_lines(m)
        self._prune()

    def _changed(self, message_id: str) -> None:
        view = self._views.get(message_id)
        if view is not None and message_id in self.session:
            view.update_message(self.session.get(message_id))

    async def _folded(self, event: Folded) -> None:
        record = event.fold
        self._fold_of_summary[record.summary.id] = record.fold_no
        gone = [self._views.pop(i) for i in record.span_ids if i in self._views]
        for view in gone:
            self._lines -= view.estimated_lines
        if gone:
            await self.remove_children(gone)
        self._first_index = self._index_of_first_view()
        if record.summary.id not in self.session:
            # a later fold already took this summary (events are applied in batches)
            self._update_earlier()
            return
        summary = self.session.get(record.summary.id)
        position = self.session.index_of(summary.id)
        if not gone and position < self._first_index:
            self._update_earlier()
            return
        views = [self._make_view(summary)]
        if record.ledger is not None and record.ledger.id in self.session:
            # the statements the fold carried, verbatim, right after its summary
            views.append(self._make_view(self.session.get(record.ledger.id)))
            position = max(position, self.session.index_of(record.ledger.id))
        after = self.session.messages[position + 1] if position + 1 < len(self.session) else None
        anchor = self._views.get(after.id) if after is not None else None
        if anchor is not None:
            await self.mount_all(views, before=anchor)
        else:
            await self.mount_all(views, before=self._bottom())
        self._lines += sum(v.estimated_lines for v in views)
        self._first_index = self._index_of_first_view()
        self._update_earlier()

    async def _rebuilt(self) -> None:
        """A fold undone, or the project instructions read anew: messages changed in place.
        Rare, so the tail is simply built again from the session."""
        views = list(self._views.values())
        self._views.clear()
        if views:
            await self.remove_children(views)
        self._lines = 0
        await self.show_tail()

    def _index_of_first_view(self) -> int:
        if not self._views:
            return len(self.session)
        for i, m in enumerate(self.session.messages):
            if m.id in self._views:
                return i
        return len(self.session)

    # -- the reply in flight ------------------------------------------------

    async def begin_reply(self, started: RequestStarted | None = None) -> ReplyView:
        if self.reply is None:
            self.reply = ReplyView(started, self.clock)
            await self.mount(self.reply, before=self._first_queued())
        return self.reply

    async def reply_text(self, delta: str) -> None:
        reply = await self.begin_reply()
        await reply.write(visible(delta))

    async def reply_thinking(self, delta: str) -> None:
        (await self.begin_reply()).thinking(visible(delta))

    async def reply_tool_call(self, call: ToolCall) -> None:
        (await self.begin_reply()).tool_call(call)

    async def _finish_reply_if_empty(self) -> None:
        """A reply widget with no text yet is dropped when another message arrives first."""
        if self.reply is not None and not self.reply.text:
            reply, self.reply = self.reply, None
            await reply.abandon()
            await reply.remove()

    async def end_turn(self) -> None:
        """The turn is over: a reply the agent did not keep is removed from the screen."""
        if self.reply is not None:
            reply, self.reply = self.reply, None
            await reply.abandon()
            await reply.remove()

    # -- a fold in flight, and what waits for it ---------------------------------

    async def begin_fold(self, started: SummaryStarted) -> None:
        await self.end_fold(None)
        self.fold_status = FoldStatus(started, self.clock)
        await self.mount(self.fold_status, before=self._first_queued())

    async def end_fold(self, ended: SummaryEnded | None) -> None:
        if self.fold_status is not None:
            status, self.fold_status = self.fold_status, None
            await status.remove()
        if ended is not None and ended.outcome == "cancelled":
            await self.show_notice("fold cancelled: nothing was folded")

    async def show_queued(self, text: str, when: str) -> None:
        """A message sent while the agent is busy: shown below everything, until it is sent or given back."""
        line = Static(visible(f"queued, sent {when}: {text}"), classes="queued", markup=False)
        self._queued.append(line)
        await self.mount(line)

    def _first_queued(self) -> Static | None:
        """What new lines go above: the queued messages stay last until they are sent."""
        return self._queued[0] if self._queued else None

    def _bottom(self) -> Widget | None:
        """What new messages go above: the reply in flight, else the queued messages."""
        return self.reply if self.reply is not None else self._first_queued()

    async def drop_queued(self) -> None:
        lines, self._queued = self._queued, []
        if lines:
            await self.remove_children(lines)

    async def show_turn_error(self, text: str) -> None:
        await self.mount(Static(visible(text), classes="turn-error", markup=False), before=self._first_queued())

    async def show_listing(self, text: str) -> None:
        """A block the user asked for (`/ledger`): shown in the transcript, never sent to the model."""
        await self.mount(Static(text, classes="listing", markup=False), before=self._first_queued())
        self.scroll_end(animate=False)

    async def show_notice(self, text: str) -> bool:
        """A notice line in the transcript; False (nothing shown) when it was one of the last few shown.

        The agent reports some things twice, as a session note and as a turn notice.
        """
        if text in self._recent_notices:
            return False
        self._recent_notices = [*self._recent_notices[-2:], text]
        await self.mount(Static(visible(text), classes="turn-notice", markup=False), before=self._first_queued())
        return True

    # -- pruning and loading back ---------------------------------------------

    def _following(self) -> bool:
        return self.scroll_y >= self.max_scroll_y - 1

    def _prune(self) -> None:
        """Drop the oldest widgets past the watermark while the reader follows the bottom."""
        if self._lines <= self.watermark:
            return
        if not self._following() and self._lines <= 2 * self.watermark:
            return
        keep = int(self.watermark * 0.75)
        doomed: list[MessageView] = []
        for view in self._message_views():
            if self._lines <= keep or view is self.reply or view.has_focus:
                break
            doomed.append(view)
            self._lines -= view.estimated_lines
            if view.message_id is not None:
                self._views.pop(view.message_id, None)
        if doomed:
            self._first_index += len(doomed)
            self.remove_children(doomed)
            self._update_earlier()

    async def action_load_earlier(self) -> None:
        await self.load_earlier()

    async def load_earlier(self, count: int = LOAD_BATCH) -> Sequence[MessageView]:
        """Mount widgets for up to `count` messages before the first one shown."""
        if self._loading or self._first_index <= 0:
            return []
        self._loading = True
        try:
            start = max(0, self._first_index - count)
            msgs = [m for m in self.session.messages[start : self._first_index] if m.id not in self._views]
            views = [self._make_view(m) for m in msgs]
            if views:
                await self.mount_all(views, after=self._earlier)
            self._lines += sum(v.estimated_lines for v in views)
            self._first_index = start
            self._update_earlier()
            if views:
                self.call_after_refresh(self._keep_position, views)
            return views
        finally:
            self._loading = False

    def _keep_position(self, views: Sequence[MessageView]) -> None:
        added = sum(v.outer_size.height for v in views)
        if self.scroll_y < added:
            self.scroll_to(y=self.scroll_y + added, animate=False, immediate=True)

    async def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        # the reader scrolls up past the first widget: bring earlier messages back
        if self.scroll_y <= 0 and self._first_index > 0:
            await self.load_earlier()

    # Textual awaits an action that is a coroutine; its base declares this one plain
    async def action_scroll_home(self) -> None:  # type: ignore[override]
        await self.load_earlier()
        self.scroll_home(animate=False)

    async def action_focus_neighbour(self, step: int) -> None:
        views = self._message_views()
        if not views:
            return
        focused = self.screen.focused
        if focused not in views:
            views[-1].focus()
            return
        i = views.index(focused) + step
        if i < 0:
            loaded = await self.load_earlier()
            if loaded:
                loaded[-1].focus()
            return
        if i < len(views):
            views[i].focus()
            views[i].scroll_visible(animate=False)
