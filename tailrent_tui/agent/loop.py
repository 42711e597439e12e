"""The Agent the app, `tailrent ask`, the demo and the bench share: one facade over its rooms.

- the turn loop (turn.py): asks the model, streams the reply, runs the calls;
- tool execution and approvals (tool_runner.py);
- the ladder driver (ladder_driver.py): every fold, spill and pin the policy plans;
- the session stores (stores.py): decisions, instructions, exports, sub-session transcripts;
- the model's start and switch (startup.py), the rent and usage (meter.py).

They share one `AgentState` (state.py). The Agent offers what the app and the commands
call (the `SessionAgent` Protocol of ui/protocol.py, the turn, the close); the bench, the
demo's feeder and the tests reach a room's own calls through it (`agent.ladder.add_message`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailrent_tui.agent.closing import Closing, close_parts
from tailrent_tui.agent.events import (
    Approval,
    ApprovalRequest,
    RequestStarted,
    SummaryEnded,
    SummaryProgress,
    SummaryStarted,
    TurnCallbacks,
    TurnResult,
)
from tailrent_tui.agent.fold_requests import PreparedFold
from tailrent_tui.agent.kv_slots import SlotKeeper
from tailrent_tui.agent.ladder_driver import OVERFLOW_SHRINK, LadderDriver
from tailrent_tui.agent.meter import UsageMeter
from tailrent_tui.agent.placement import PlacementKeeper
from tailrent_tui.agent.startup import ModelLink
from tailrent_tui.agent.state import AgentState
from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.agent.tool_runner import ToolRunner, cap_to_tokens
from tailrent_tui.agent.tools.base import ToolOutcome, error
from tailrent_tui.agent.tools.caps import ToolCaps
from tailrent_tui.agent.turn import MAX_STEPS, TurnLoop
from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.keepwarm import KeepWarm
from tailrent_tui.core.messages import (
    Folded,
    FoldRecord,
    FoldSkipped,
    Kind,
    Message,
    Pinned,
    Spilled,
    StatementChanged,
    Unfolded,
    Unpinned,
    UsageRecorded,
    WatchAdded,
    new_id,
)
from tailrent_tui.core.policies import PolicySettings
from tailrent_tui.core.probe import ProbeReport
from tailrent_tui.core.rungs.fold import FoldArchive, MemoryFoldArchive
from tailrent_tui.core.rungs.spill import MemorySpillStore, SpillStore, spill_message
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer, Review, Summarizer, Verdict
from tailrent_tui.models.base import ChatModel
from tailrent_tui.settings import Settings
from tailrent_tui.store.journal import Writer
from tailrent_tui.store.sessions import OpenedSession

if TYPE_CHECKING:
    from tailrent_tui.agent.mcp.hub import McpHub

__all__ = [
    "MAX_STEPS",
    "OVERFLOW_SHRINK",
    "Agent",
    "Approval",
    "ApprovalRequest",
    "RequestStarted",
    "SummaryEnded",
    "SummaryProgress",
    "SummaryStarted",
    "TurnCallbacks",
    "TurnResult",
    "cap_to_tokens",
    "wire_messages",
]


#: a delegate's final answer is capped to this many tokens before it enters the parent
DELEGATE_ANSWER_CAP = 1500


def _shared(name: str, doc: str = "") -> Any:
    """An attribute of the shared state, read and set under its old name on the Agent."""
    return property(lambda self: getattr(self.state, name), lambda self, value: setattr(self.state, name, value), doc=doc)


class Agent:
    """The session, the model, the stores and the policy, behind one set of actions."""

    session: Session = _shared("session")
    model: ChatModel = _shared("model")
    settings: Settings = _shared("settings")
    workspace: Path = _shared("workspace")
    spill_store: SpillStore = _shared("spill_store")
    archive: FoldArchive = _shared("archive")
    memory: Any = _shared("memory")
    journal: Writer | None = _shared("journal")
    session_dir: Any = _shared("session_dir")
    opened: OpenedSession | None = _shared("opened", "the session as open_session gave it, closed at exit")
    summarizer: Any = _shared("summarizer")
    rent: Any = _shared("rent")
    is_sub: bool = _shared("is_sub")
    notice: str | None = _shared("notice")
    #: told when a fold's summary is asked for and when it is in
    on_summary: Callable[[SummaryProgress], None] | None = _shared("on_summary")
    #: told when the next fold's summary is written ahead, used or dropped
    on_prepared: Callable[[PreparedFold | None], None] | None = _shared("on_prepared")
    #: shows a fold before it applies (the app's fold preview)
    on_review: Callable[[Review], Awaitable[Verdict]] | None = _shared("on_review")
    slots: SlotKeeper | None = _shared("slots", "saves and restores llama.cpp's KV slot (agent/kv_slots.py)")
    placement: PlacementKeeper | None = _shared("placement", "where folds put their summary, and why (agent/placement.py)")
    cold_resume: bool = _shared("cold_resume")
    resumed: bool = _shared("resumed")
    resume_price: Any = _shared("resume_price")
    resume_lines: list[tuple[str, str]] = _shared("resume_lines")
    start_lines: list[tuple[str, str]] = _shared("start_lines")
    preload_seconds: float | None = _shared("preload_seconds")

    def __init__(
        self,
        *,
        session: Session,
        model: ChatModel,
        settings: Settings,
        workspace: Path,
        spill_store: SpillStore | None = None,
        archive: FoldArchive | None = None,
        memory: Any = None,
        journal: Any = None,
        session_dir: Any = None,
        opened: OpenedSession | None = None,
        summarizer: Summarizer | None = None,
        notice: str | None = None,
        rent: Any = None,
        is_sub: bool = False,
        policy_settings: PolicySettings | None = None,
        instructions: bool = False,
        caps: ToolCaps | None = None,
    ) -> None:
        session.pin_share = settings.fold.pin_share
        self.state = AgentState(
            session=session,
            model=model,
            settings=settings,
            caps=caps or ToolCaps(shell_timeout=settings.tools.shell_timeout),
            workspace=workspace,
            spill_store=spill_store or MemorySpillStore(),
            archive=archive if archive is not None else MemoryFoldArchive(),
            summarizer=summarizer or LossySummarizer(),
            memory=memory,
            journal=journal,
            session_dir=session_dir,
            opened=opened,
            rent=rent,
            is_sub=is_sub,
            policy_settings=policy_settings,
            notice=notice,
        )
        self.sub_tokens = 0
        self.sub_sessions: list[str] = []
        #: the session's MCP servers (agent/mcp): build_agent sets it when any is configured
        self.mcp: McpHub | None = None
        #: notes written while the session was built, before the app listened to it (build_agent sets them)
        self.startup_notes: list[Any] = []
        #: what SIGTERM or SIGHUP calls while the session is open (the app's exit); None: the block is cancelled
        self.on_signal: Callable[[str], None] | None = None
        #: what the close did (agent/closing.py), once `aclose` has run
        self.closing: Closing | None = None
        #: False when the model is the caller's (the bench's engine): `aclose` leaves it open
        self.owns_model = True
        self.meter = UsageMeter(session, rent, lambda: self.model.name)
        state = self.state
        self.stores = SessionStores(
            session=session,
            session_dir=session_dir,
            workspace=workspace,
            spill_store=state.spill_store,
            archive=state.archive,
            memory=memory,
            decisions_file=settings.decisions_file,
            data_dir=settings.data_dir,
            instructions=instructions and not is_sub,
        )
        self.ladder = LadderDriver(self.state, self.meter, self.stores)
        if self.meter.keep_warm is not None:
            # what an expiry costs is the policy's to say: the ladder folds at a cold resume
            ladder = self.ladder
            self.meter.keep_warm.rewrite_tokens = lambda: ladder.policy.cold_resume_tokens(self.session, ladder.policy_context())
        self.tools = ToolRunner(self.state, self.ladder)
        self.tools.bind_session(self.delegate)
        # a summary request sends what a turn's request sends: its tools and options
        self.ladder.offered_tools = self.tools.offered_tools
        self.ladder.request_options = lambda: self.request_options()
        self.link = ModelLink(self.state, self.ladder)
        if not is_sub:
            self.state.placement = PlacementKeeper(self.state)
        # through a lambda: a test may replace `request_options` on one agent
        self.turns = TurnLoop(
            self.state,
            ladder=self.ladder,
            tools=self.tools,
            meter=self.meter,
            stores=self.stores,
            start=self.link.start,
            options=lambda: self.request_options(),
        )

    # -- what the app reads of the rooms ----------------------------------------------

    @property
    def keep_warm(self) -> KeepWarm | None:
        return self.meter.keep_warm

    # -- closing -------------------------------------------------------------------------

    async def aclose(self, reason: str = "quit") -> Closing:
        """Close the session (agent/closing.py), once: the slot saved, the journal closed, the lock
        released, the model stopped. `open_agent` calls it on every exit path."""
        if self.closing is None:
            self.closing = await close_parts(
                reason=reason,
                mcp=self.mcp,
                slots=self.slots,
                opened=self.opened,
                counter=self.session.counter,
                model=self.model if self.owns_model else None,
            )
        return self.closing

    # -- the model -------------------------------------------------------------------

    def will_preload(self) -> bool:
        return self.link.will_preload()

    async def start(self) -> None:
        await self.link.start()

    async def switch_model(self, spec: str) -> str:
        return await self.link.switch_model(spec)

    def request_options(self) -> dict[str, Any]:
        return {"num_ctx": self.session.window, "temperature": 0, "max_tokens": self.ladder.reply_cap()}

    # -- the turn ----------------------------------------------------------------------

    async def turn(self, text: str | None, cb: TurnCallbacks | None = None) -> TurnResult:
        """One user turn (turn.py). `text=None` retries from the transcript as it is."""
        if self.mcp is not None:
            # the first frame never waits for an MCP server; the first request does (bounded), saying so
            await self.mcp.settle(cb.on_notice if cb is not None else None)
        return await self.turns.turn(text, cb)

    async def ping(self, now: float | None = None) -> bool:
        return await self.turns.ping(now)

    async def shell(self, command: str) -> Message:
        return await self.tools.shell(command)

    async def attach_paste(self, label: str, text: str) -> Message:
        return await self.tools.attach_paste(label, text)

    async def attach_file(self, path: str) -> Message:
        return await self.tools.attach_file(path)

    # -- the ladder (ladder_driver.py) -----------------------------------------------------

    def pin(self, message_id: str) -> Pinned | None:
        ev = self.session.pin(message_id)
        self.stores.write_decisions(self.tools.ctx)
        return ev

    def unpin(self, message_id: str) -> Unpinned | None:
        ev = self.session.unpin(message_id)
        self.stores.write_decisions(self.tools.ctx)
        return ev

    def accept_statement(self, statement_id: str) -> StatementChanged | None:
        return self.session.accept(statement_id)

    def supersede_statement(self, statement_id: str) -> StatementChanged | None:
        ev = self.session.supersede(statement_id)
        self.stores.write_decisions(self.tools.ctx)  # its message may be unpinned
        return ev

    def pin_statement(self, statement_id: str, pinned: bool = True) -> StatementChanged | None:
        return self.session.pin_statement(statement_id, pinned)

    def edit_statement(self, statement_id: str, text: str) -> StatementChanged | None:
        ev = self.session.edit_statement(statement_id, text)
        self.stores.write_decisions(self.tools.ctx)
        return ev

    def spill(self, message_id: str) -> Spilled:
        return spill_message(self.session, message_id, self.spill_store)

    def watch(self, word: str) -> WatchAdded | None:
        return self.session.add_watch(word)

    async def fold(self, span_ids: list[str] | None = None, *, trigger: str = "manual") -> Folded | FoldSkipped | None:
        return await self.ladder.fold(span_ids, trigger=trigger)

    def unfold(self, fold_no: int) -> Unfolded:
        return self.ladder.unfold(fold_no)

    def unfold_cost(self, fold_no: int) -> tuple[int, float | None, bool]:
        return self.ladder.unfold_cost(fold_no)

    async def prepare_fold(self) -> PreparedFold | None:
        """Write the next fold's summary while the user reads (ladder_driver.py); None when none is due."""
        return await self.ladder.prepare_fold()

    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]:
        return self.ladder.reread_after(record)

    # -- the stores (stores.py) ----------------------------------------------------------------

    async def fold_originals(self, fold_no: int) -> list[Message]:
        return await self.stores.fold_originals_async(fold_no)

    async def spill_text(self, spill_id: str) -> str:
        return await self.stores.spill_text(spill_id)

    def recall(self, question: str, expect: list[str]) -> tuple[ProbeReport, list[str]]:
        return self.stores.recall(question, expect)

    def export(self, fmt: str = "md", path: Path | None = None) -> Path:
        return self.stores.export(fmt, path)

    # -- rung 3 ------------------------------------------------------------------------------------

    async def delegate(self, task: str) -> ToolOutcome:
        """Run `task` in a sub-session with a fresh context; only its capped answer returns."""
        if self.is_sub:
            return error("a sub-session cannot delegate further")
        sub_id = "sub-" + new_id()
        session = self.session
        sub_session = Session(
            counter=session.counter,
            system="You are a sub-agent with a fresh context. Do the task with the tools and end with a short final answer.",
            window=session.window,
            tool_schema_tokens=session.tool_schema_tokens,
            framing=session.framing,
            id=sub_id,
        )
        sub = Agent(
            session=sub_session,
            model=self.model,
            settings=self.settings,
            caps=self.state.caps,
            workspace=self.workspace,
            spill_store=self.spill_store,
            memory=self.memory,
            summarizer=self.summarizer,
            rent=None,
            is_sub=True,
        )
        parent_cb = self.tools.cb or TurnCallbacks()

        def journal_sub_usage(event: Any) -> None:
            # the sub-session's requests are journaled in the parent, tagged, so
            # its tokens survive a resume and the Tail panel can count them apart
            if isinstance(event, UsageRecorded):
                session.emit(event.model_copy(update={"sub_session": sub_id}))

        sub_session.listeners.append(journal_sub_usage)
        result = await sub.turn(task, TurnCallbacks(approve=parent_cb.approve, on_notice=parent_cb.on_notice))
        sub_tokens = sum(u.context_tokens + (u.output_tokens or 0) for u in sub_session.usage)
        self.sub_tokens += sub_tokens
        self.sub_sessions.append(sub_id)
        self.stores.archive_sub(sub_id, sub_session)
        if result.error is not None:
            return error(f"the delegate failed: {result.error.message}")
        answer = result.reply.content if result.reply is not None else ""
        cap = DELEGATE_ANSWER_CAP
        tokens = session.count(answer)
        if tokens > cap:
            # characters per token of this answer, to cut near the cap
            keep = max(1, int(len(answer) * cap / tokens))
            answer = answer[:keep] + f"\n[delegate answer capped at ~{cap:,} tokens of {tokens:,}]"
        body = f"[delegate {sub_id}: {len(sub_session.messages)} messages, {sub_tokens:,} tokens in its own context]\n{answer}"
        return ToolOutcome(content=body, meta={"kind": Kind.delegate_result.value, "sub_session": sub_id})
